//! Replay of staged allocation replacements (merged set-wise into the
//! scratch tables) against the live, event-by-event projections.

use super::*;

/// Holds for a replacement on some of `providers` in `classes`, at random:
/// none (the consumer emptied), or one to three holds, sizes and windows
/// (open-ended or bounded) at random.
fn some_holds(
    rng: &mut StdRng,
    providers: &[Uuid],
    classes: &[&str],
    now: DateTime<Utc>,
) -> Vec<berth_core::event::Allocation> {
    if rng.gen_bool(0.2) {
        return Vec::new();
    }
    let mut holds = BTreeMap::new();
    for _ in 0..rng.gen_range(1..4) {
        let (p, class) = (pick(rng, providers).unwrap(), classes[rng.gen_range(0..classes.len())]);
        let start = now + Duration::minutes(rng.gen_range(-60..60));
        let end = rng.gen_bool(0.3).then(|| start + Duration::minutes(rng.gen_range(1..120)));
        holds.insert((p, class), hold(p, class, rng.gen_range(1..50), Window::new(start, end).unwrap()));
    }
    holds.into_values().collect()
}

/// Commands of one or two of a few consumers each, so that the log names a
/// consumer again and again, within a page and across pages: moves,
/// resizes, empties and re-creations, projects, users and types changed;
/// between them, events of other kinds: inventories and traits replaced,
/// providers made and deleted, a consumer's allocations deleted, and a
/// custom class its allocations hold renamed (which reads and writes the
/// allocations replay has staged so far). Answers how many succeeded.
async fn repeated_replacements(store: &berth_store::Store, seed: u64, steps: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let m = meta();
    store.create_trait(&m, "CUSTOM_FAST").await.unwrap();
    let mut custom = "CUSTOM_ROUND_0".to_string();
    store.create_resource_class(&m, &custom, true).await.unwrap();
    let inventory = |custom: &str, extra: i64| -> BTreeMap<String, Inventory> {
        ["VCPU", "MEMORY_MB", custom]
            .iter()
            .map(|c| (c.to_string(), Inventory { total: 100_000 + extra, ..Default::default() }))
            .collect()
    };
    let mut providers = Vec::new();
    for i in 0..3 {
        let p = provider(store, &format!("again-{i}"), &[]).await;
        store.replace_inventories(&m, p, None, inventory(&custom, 0)).await.unwrap();
        providers.push(p);
    }
    let pool: Vec<Uuid> = (0..8).map(|_| Uuid::new_v4()).collect();
    let now = Utc::now();
    let mut ok = 0;
    for step in 0..steps {
        let result = match rng.gen_range(0..40) {
            0 => {
                let p = pick(&mut rng, &providers).unwrap();
                store.replace_inventories(&m, p, None, inventory(&custom, step as i64)).await.map(|_| ())
            }
            1 => {
                let p = provider(store, &format!("again-new-{step}"), &[]).await;
                providers.push(p);
                store.replace_inventories(&m, p, None, inventory(&custom, 0)).await.map(|_| ())
            }
            // Refused while it holds allocations: a fine outcome too.
            2 if providers.len() > 2 => {
                let p = pick(&mut rng, &providers).unwrap();
                let r = store.delete_provider(&m, p).await;
                if r.is_ok() {
                    providers.retain(|x| *x != p);
                }
                r
            }
            3 => {
                let p = pick(&mut rng, &providers).unwrap();
                store.replace_traits(&m, p, None, BTreeSet::from(["CUSTOM_FAST".to_string()])).await.map(|_| ())
            }
            4 => store.delete_allocations(&m, pick(&mut rng, &pool).unwrap()).await,
            5 => {
                let renamed = format!("CUSTOM_ROUND_{step}");
                let r = store.rename_resource_class(&m, &custom, &renamed).await;
                if r.is_ok() {
                    custom = renamed;
                }
                r
            }
            _ => {
                let mut batch = BTreeMap::new();
                for _ in 0..rng.gen_range(1..3) {
                    let id = pick(&mut rng, &pool).unwrap();
                    let holds = some_holds(&mut rng, &providers, &["VCPU", "MEMORY_MB", &custom], now);
                    let mut c = consumer(id, GenerationCheck::Any, holds);
                    c.project_id = format!("project-{}", rng.gen_range(0..2));
                    c.user_id = format!("user-{}", rng.gen_range(0..2));
                    c.consumer_type = rng.gen_bool(0.5).then(|| "INSTANCE".to_string());
                    batch.insert(id, c);
                }
                store.replace_allocations(&m, batch.into_values().collect()).await
            }
        };
        if result.is_ok() {
            ok += 1;
        }
    }
    ok
}

/// Replay stages allocation replacements in unindexed tables and merges
/// them set-wise (each consumer as its replacements since the last emptying
/// one leave it), before anything else reads them and at the end; the live
/// path applied them one command at a time. The tables agree row for row
/// (generations, creation instants, consumers deleted and made anew, the
/// classes renamed under staged allocations, the sums), and a row altered
/// behind the log's back is still found.
#[tokio::test]
async fn replaying_staged_replacements_gives_the_live_projections() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let ok = repeated_replacements(&store, 29, 600).await;
    assert!(ok > 400, "the workload mostly did something: {ok} of 600 succeeded");
    assert!(open_usage_matches_allocations(&db.url).await > 0, "the workload held something open-ended");
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    assert!(report.staged > 400, "{} replacements staged", report.staged);
    assert!(report.merges > 3, "merged before renames too: {} merges", report.merges);

    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let row = c
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE created_at <> updated_at), count(*) FILTER (WHERE generation > 1)
             FROM consumers",
            &[],
        )
        .await
        .unwrap();
    let (consumers, replaced, regenerated): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert!(consumers > 0 && replaced > 0 && regenerated > 0, "{consumers} consumers, {replaced} replaced");
    let renamed: i64 = c
        .query_one("SELECT count(*) FROM allocations WHERE resource_class LIKE 'CUSTOM_ROUND_%'", &[])
        .await
        .unwrap()
        .get(0);
    let one = "(SELECT uuid FROM consumers WHERE created_at <> updated_at ORDER BY uuid LIMIT 1)";
    c.batch_execute(&format!("UPDATE consumers SET created_at = updated_at WHERE uuid = {one}")).await.unwrap();
    assert_eq!(differing(&store.replay_verify().await.unwrap()), [("consumers", 1, 1)], "{renamed} renamed held");
}

/// With nothing but allocation replacements after the providers, replay
/// merges the staged rows once, at the end, into the unindexed tables: the
/// same rows, and a consumer whose generation drifted is found.
#[tokio::test]
async fn replaying_only_replacements_merges_once_at_the_end() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let claims = batched_claims(&store, 4, 300).await;
    let report = store.replay_verify().await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    assert_eq!((report.staged as usize, report.merges), (claims, 1));
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let one = "(SELECT uuid FROM consumers ORDER BY uuid LIMIT 1)";
    c.batch_execute(&format!("UPDATE consumers SET generation = generation + 1 WHERE uuid = {one}")).await.unwrap();
    assert_eq!(differing(&store.replay_verify().await.unwrap()), [("consumers", 1, 1)]);
}

/// However few consumers replay folds in memory before it merges (one, a
/// handful, or every one), it gives the same tables: a consumer folded,
/// merged, then replaced, emptied or made anew in a later merge keeps its
/// generations and its creation instant; and a drift is still found.
#[tokio::test]
async fn replaying_with_few_consumers_held_merges_often_and_agrees() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let ok = repeated_replacements(&store, 31, 400).await;
    assert!(ok > 250, "the workload mostly did something: {ok} of 400 succeeded");
    batched_claims(&store, 2, 100).await;
    let mut merges = Vec::new();
    for held in [1, 3, 50, usize::MAX] {
        let report = store.replay_verify_holding(held).await.unwrap();
        assert!(report.is_clean(), "holding {held}: {:?}", report.differences);
        merges.push(report.merges);
    }
    assert!(merges[0] > merges[1] && merges[1] > merges[3], "fewer held, more merges: {merges:?}");

    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let one = "(SELECT uuid FROM consumers WHERE generation > 1 ORDER BY uuid LIMIT 1)";
    c.batch_execute(&format!("UPDATE consumers SET generation = generation - 1 WHERE uuid = {one}")).await.unwrap();
    assert_eq!(differing(&store.replay_verify_holding(3).await.unwrap()), [("consumers", 1, 1)]);
}

/// Replacements alone, of a few consumers in many commands: replaced,
/// moved, resized, emptied and made anew, in two projects and two users,
/// open-ended and bounded. Answers how many commands there were.
async fn replacements_only(store: &berth_store::Store, seed: u64, commands: usize) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let m = meta();
    let mut providers = Vec::new();
    for i in 0..3 {
        providers.push(provider(store, &format!("only-{i}"), &[("VCPU", 100_000), ("MEMORY_MB", 100_000)]).await);
    }
    let pool: Vec<Uuid> = (0..12).map(|_| Uuid::new_v4()).collect();
    let now = Utc::now();
    for _ in 0..commands {
        let mut batch = BTreeMap::new();
        for _ in 0..rng.gen_range(1..4) {
            let id = pick(&mut rng, &pool).unwrap();
            let mut c =
                consumer(id, GenerationCheck::Any, some_holds(&mut rng, &providers, &["VCPU", "MEMORY_MB"], now));
            c.project_id = format!("project-{}", rng.gen_range(0..2));
            c.user_id = format!("user-{}", rng.gen_range(0..2));
            batch.insert(id, c);
        }
        store.replace_allocations(&m, batch.into_values().collect()).await.unwrap();
    }
    commands
}

/// While replay's merges alone write the allocations, it keeps their
/// open-ended sums in memory as it writes and deletes them (consumers
/// merged, then replaced or emptied in a later merge, in other projects):
/// however often it merges, the sums agree with the live ones, and a sum
/// drifted behind the log's back is found. A class renamed (which writes
/// allocations besides the merges) makes it sum them by a scan instead.
#[tokio::test]
async fn replaying_replacements_alone_keeps_the_sums_in_memory_and_agrees() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    replacements_only(&store, 37, 300).await;
    assert!(open_usage_matches_allocations(&db.url).await > 0, "the workload held something open-ended");
    for held in [1, 3, 50, usize::MAX] {
        let report = store.replay_verify_holding(held).await.unwrap();
        assert!(report.is_clean(), "holding {held}: {:?}", report.differences);
        assert!(report.sums_kept, "holding {held}: the sums were kept in memory");
    }
    let (c, conn) = tokio_postgres::connect(&db.url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let one = "(SELECT provider_uuid FROM provider_open_usage WHERE used > 0 ORDER BY provider_uuid LIMIT 1)";
    c.batch_execute(&format!("UPDATE provider_open_usage SET used = used + 1 WHERE provider_uuid = {one}"))
        .await
        .unwrap();
    let drifted = store.replay_verify_holding(3).await.unwrap();
    assert_eq!(drifted.differences[0].table, "provider_open_usage", "{:?}", drifted.differences);

    let db = TestDatabase::new().await;
    let store = db.store(4);
    let ok = repeated_replacements(&store, 41, 300).await;
    assert!(ok > 200, "{ok} of 300 succeeded");
    let report = store.replay_verify_holding(3).await.unwrap();
    assert!(report.is_clean(), "{:?}", report.differences);
    assert!(!report.sums_kept, "a rename wrote the allocations: the sums were scanned");
}
