//! Applying an event to the projections. This is the only code that writes
//! projection tables, and it runs both inline (in the command's transaction,
//! right after the append) and in replay, so the two cannot disagree.
//!
//! Application never decides: the commands have checked everything before
//! appending. It only turns an event into rows, deterministically: the same
//! events in the same order give the same rows, byte for byte.

use berth_core::Event;
use deadpool_postgres::GenericClient;

use crate::{sql, StoreError};

pub(crate) mod lease_events;
mod leases;
pub(crate) mod quotas;

pub async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        Event::ResourceClassCreated { name } => {
            c.execute("INSERT INTO resource_classes (name, standard) VALUES ($1, false)", &[name]).await?;
        }
        Event::ResourceClassDeleted { name } => {
            c.execute("DELETE FROM provider_open_usage WHERE resource_class = $1", &[name]).await?;
            c.execute("DELETE FROM project_open_usage WHERE resource_class = $1", &[name]).await?;
            c.execute("DELETE FROM resource_classes WHERE name = $1", &[name]).await?;
        }
        Event::ResourceClassRenamed { from, to } => {
            // Without relying on ON UPDATE CASCADE (replay's scratch tables
            // carry no foreign keys): add the new name, move the rows, drop the old.
            c.execute("INSERT INTO resource_classes (name, standard) VALUES ($1, false)", &[to]).await?;
            c.execute("UPDATE inventories SET resource_class = $2 WHERE resource_class = $1", &[from, to]).await?;
            for table in ["allocations", "provider_open_usage", "project_open_usage"] {
                c.execute(&format!("UPDATE {table} SET resource_class = $2 WHERE resource_class = $1"), &[from, to])
                    .await?;
            }
            c.execute("DELETE FROM resource_classes WHERE name = $1", &[from]).await?;
        }
        Event::TraitCreated { name } => {
            c.execute("INSERT INTO traits (name, standard) VALUES ($1, false)", &[name]).await?;
        }
        Event::TraitDeleted { name } => {
            c.execute("DELETE FROM traits WHERE name = $1", &[name]).await?;
        }
        Event::ProviderCreated { uuid, name, parent, at } => {
            c.execute(
                "INSERT INTO providers (uuid, name, generation, parent_uuid, root_uuid, created_at, updated_at)
                 VALUES ($1, $2, 0, $3, coalesce((SELECT root_uuid FROM providers WHERE uuid = $3), $1), $4, $4)",
                &[uuid, name, parent, at],
            )
            .await?;
        }
        Event::ProviderUpdated { uuid, name, parent, at } => {
            c.execute(
                // Placement does not bump the generation on rename or re-parent.
                "UPDATE providers SET name = $2, parent_uuid = $3, updated_at = $4 WHERE uuid = $1",
                &[uuid, name, parent, at],
            )
            .await?;
            // The subtree follows its new root.
            c.execute(
                "WITH RECURSIVE subtree(uuid) AS (
                     SELECT $1::uuid
                     UNION ALL
                     SELECT p.uuid FROM providers p JOIN subtree s ON p.parent_uuid = s.uuid
                 )
                 UPDATE providers SET root_uuid = coalesce((SELECT root_uuid FROM providers WHERE uuid = $2), $1)
                 WHERE uuid IN (SELECT uuid FROM subtree)",
                &[uuid, parent],
            )
            .await?;
        }
        Event::ProviderDeleted { uuid } => {
            // Explicit rather than by ON DELETE CASCADE: replay's scratch
            // tables carry no foreign keys, and both paths must agree.
            for table in ["inventories", "provider_traits", "provider_aggregates", "provider_open_usage"] {
                c.execute(&format!("DELETE FROM {table} WHERE provider_uuid = $1"), &[uuid]).await?;
            }
            c.execute("DELETE FROM providers WHERE uuid = $1", &[uuid]).await?;
        }
        Event::InventoriesReplaced { provider, inventories, at } => {
            c.execute("DELETE FROM inventories WHERE provider_uuid = $1", &[provider]).await?;
            let classes: Vec<&str> = inventories.keys().map(String::as_str).collect();
            let v = |f: fn(&berth_core::Inventory) -> i64| inventories.values().map(f).collect::<Vec<i64>>();
            let ratios: Vec<f64> = inventories.values().map(|i| i.allocation_ratio).collect();
            c.execute(
                "INSERT INTO inventories (provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio)
                 SELECT $1, * FROM unnest($2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::float8[])",
                &[
                    provider,
                    &classes,
                    &v(|i| i.total),
                    &v(|i| i.reserved),
                    &v(|i| i.min_unit),
                    &v(|i| i.max_unit),
                    &v(|i| i.step_size),
                    &ratios,
                ],
            )
            .await?;
            bump_providers(c, &[*provider], at).await?;
        }
        Event::ProviderTraitsReplaced { provider, traits, at } => {
            c.execute("DELETE FROM provider_traits WHERE provider_uuid = $1", &[provider]).await?;
            let traits: Vec<&str> = traits.iter().map(String::as_str).collect();
            c.execute(
                "INSERT INTO provider_traits (provider_uuid, trait) SELECT $1, unnest($2::text[])",
                &[provider, &traits],
            )
            .await?;
            bump_providers(c, &[*provider], at).await?;
        }
        Event::ProviderAggregatesReplaced { provider, aggregates, bump, at } => {
            c.execute("DELETE FROM provider_aggregates WHERE provider_uuid = $1", &[provider]).await?;
            let aggregates: Vec<uuid::Uuid> = aggregates.iter().copied().collect();
            c.execute(
                "INSERT INTO provider_aggregates (provider_uuid, aggregate) SELECT $1, unnest($2::uuid[])",
                &[provider, &aggregates],
            )
            .await?;
            if *bump {
                bump_providers(c, &[*provider], at).await?;
            }
        }
        Event::AllocationsReplaced { consumer, allocations, providers_bumped, .. } => {
            // Which providers get a new generation: the ones named, or (when
            // the event names none, as the lease commands' do) every one held
            // before or now.
            let bumped: Vec<uuid::Uuid> = match providers_bumped {
                Some(named) => named.clone(),
                None => {
                    let mut held: std::collections::BTreeSet<uuid::Uuid> =
                        sql::query(c, "SELECT provider_uuid FROM allocations WHERE consumer_uuid = $1", &[consumer])
                            .await?
                            .iter()
                            .map(|r| r.get(0))
                            .collect();
                    held.extend(allocations.iter().map(|a| a.provider));
                    held.into_iter().collect()
                }
            };
            write_allocations(c, &[(event, &bumped)]).await?;
        }
        e @ (Event::LeaseCreated { .. }
        | Event::LeaseUpdated { .. }
        | Event::LeaseDeleted { .. }
        | Event::LeaseStatusChanged { .. }
        | Event::ReservationStatusChanged { .. }
        | Event::LeaseEventChanged { .. }
        | Event::HostEnrolled { .. }
        | Event::HostUpdated { .. }
        | Event::HostRemoved { .. }
        | Event::HostPropertyChanged { .. }
        | Event::ReservationDrawn { .. }) => leases::apply(c, e).await?,
        e @ (Event::QuotaSet { .. } | Event::QuotaUnset { .. } | Event::QuotaOverLimit { .. }) => {
            quotas::apply(c, e).await?
        }
        e @ (Event::LeaseEventClaimed { .. }
        | Event::LeaseEventClaimRenewed { .. }
        | Event::LeaseEventRetrying { .. }
        | Event::LeaseEventFinished { .. }
        | Event::HostHeld { .. }
        | Event::HostHoldReleased { .. }) => lease_events::apply(c, e).await?,
    }
    Ok(())
}

/// Applies `events` in order, as [`apply`] one by one would; a run of
/// consecutive events of one kind that write distinct rows (lease event
/// outcomes, lease and reservation statuses, allocation replacements naming
/// their bumps) is written by one statement.
pub async fn apply_all(c: &impl GenericClient, events: &[&Event]) -> Result<(), StoreError> {
    let mut i = 0;
    while i < events.len() {
        let mut end = i + 1;
        if let Some((kind, key)) = run_key(events[i]) {
            let mut rows = std::collections::HashSet::from([key]);
            while let Some((k, r)) = events.get(end).and_then(|e| run_key(e)) {
                if k != kind || !rows.insert(r) {
                    break;
                }
                end += 1;
            }
        }
        let run = &events[i..end];
        match run_key(events[i]) {
            _ if run.len() == 1 => apply(c, events[i]).await?,
            Some((ALLOCATIONS_RUN, _)) => {
                let run: Vec<(&Event, &[uuid::Uuid])> = run
                    .iter()
                    .map(|e| match e {
                        Event::AllocationsReplaced { providers_bumped: Some(bumped), .. } => (*e, bumped.as_slice()),
                        _ => unreachable!("a run of allocation replacements naming their bumps"),
                    })
                    .collect();
                write_allocations(c, &run).await?
            }
            _ => lease_events::apply_run(c, run).await?,
        }
        i = end;
    }
    Ok(())
}

/// The kind of run of [`run_key`] that allocation replacements make.
const ALLOCATIONS_RUN: u8 = u8::MAX;

/// For an event that may be applied in a run: its kind of run and the row
/// it writes (a run never writes one row twice).
fn run_key(event: &Event) -> Option<(u8, uuid::Uuid)> {
    match event {
        Event::AllocationsReplaced { consumer, providers_bumped: Some(_), .. } => Some((ALLOCATIONS_RUN, *consumer)),
        e => lease_events::batch_key(e),
    }
}

/// Writes allocation replacements of distinct consumers, each with the
/// providers it gives a new generation, in one statement: the allocations,
/// the consumers (made, updated, or gone with their last allocation), the
/// open-ended sums, the provider generations.
async fn write_allocations(c: &impl GenericClient, events: &[(&Event, &[uuid::Uuid])]) -> Result<(), StoreError> {
    use std::collections::BTreeMap;
    type At = chrono::DateTime<chrono::Utc>;
    let (mut consumers, mut projects, mut users, mut types, mut ats, mut emptied) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut a_consumer, mut a_provider, mut a_class, mut a_used, mut a_start, mut a_end) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::<At>::new(), Vec::<Option<At>>::new());
    // Per provider: how many bumps, and the instant of the last one.
    let mut bumps: BTreeMap<uuid::Uuid, (i64, At)> = BTreeMap::new();
    for (e, bumped) in events {
        let Event::AllocationsReplaced { consumer, project_id, user_id, consumer_type, allocations, at, .. } = e else {
            unreachable!("only allocation replacements");
        };
        consumers.push(*consumer);
        projects.push(project_id.as_str());
        users.push(user_id.as_str());
        types.push(consumer_type.as_deref());
        ats.push(*at);
        emptied.push(allocations.is_empty());
        for a in allocations {
            a_consumer.push(*consumer);
            a_provider.push(a.provider);
            a_class.push(a.resource_class.as_str());
            a_used.push(a.used);
            a_start.push(a.window.start);
            a_end.push(a.window.end);
        }
        for p in bumped.iter() {
            let b = bumps.entry(*p).or_insert((0, *at));
            *b = (b.0 + 1, *at);
        }
    }
    let bumped: Vec<uuid::Uuid> = bumps.keys().copied().collect();
    let counts: Vec<i64> = bumps.values().map(|b| b.0).collect();
    let bumped_at: Vec<At> = bumps.values().map(|b| b.1).collect();
    sql::execute(
        c,
        "WITH gone AS (DELETE FROM allocations WHERE consumer_uuid = ANY($1)
                       RETURNING provider_uuid, resource_class, used, during, project_id, user_id),
              c AS MATERIALIZED (
                  SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bool[])
                      AS c(uuid, p, u, t, at, emptied)),
              dropped AS (DELETE FROM consumers WHERE uuid = ANY(ARRAY(SELECT uuid FROM c WHERE emptied))),
              upserted AS (
                  INSERT INTO consumers (uuid, project_id, user_id, consumer_type, generation, created_at, updated_at)
                  SELECT uuid, p, u, t, 1, at, at FROM c WHERE NOT emptied
                  ON CONFLICT (uuid) DO UPDATE SET project_id = excluded.project_id, user_id = excluded.user_id,
                      consumer_type = excluded.consumer_type, generation = consumers.generation + 1,
                      updated_at = excluded.updated_at),
              a AS MATERIALIZED (
                  SELECT * FROM unnest($7::uuid[], $8::uuid[], $9::text[], $10::int8[], $11::timestamptz[],
                                       $12::timestamptz[]) AS a(c, p, rc, u, s, e)),
              added AS (
                  INSERT INTO allocations (consumer_uuid, provider_uuid, resource_class, used, during, project_id, user_id)
                  SELECT a.c, a.p, a.rc, a.u, tstzrange(a.s, a.e, '[)'), c.p, c.u FROM a JOIN c ON c.uuid = a.c),
              counted AS (
                  INSERT INTO provider_open_usage AS o (provider_uuid, resource_class, used)
                  SELECT p, rc, sum(d)::int8 FROM (
                      SELECT provider_uuid, resource_class, -used FROM gone WHERE upper_inf(during)
                      UNION ALL
                      SELECT p, rc, u FROM a WHERE e IS NULL) AS x(p, rc, d)
                  GROUP BY p, rc HAVING sum(d) <> 0 AND current_setting('berth.replaying', true) IS DISTINCT FROM 'on' ORDER BY p, rc
                  ON CONFLICT (provider_uuid, resource_class) DO UPDATE SET used = o.used + excluded.used),
              project_counted AS (
                  INSERT INTO project_open_usage AS o (project_id, user_id, resource_class, used)
                  SELECT pr, us, rc, sum(d)::int8 FROM (
                      SELECT project_id, user_id, resource_class, -used FROM gone WHERE upper_inf(during)
                      UNION ALL
                      SELECT c.p, c.u, a.rc, a.u FROM a JOIN c ON c.uuid = a.c WHERE a.e IS NULL) AS x(pr, us, rc, d)
                  GROUP BY pr, us, rc HAVING sum(d) <> 0 AND current_setting('berth.replaying', true) IS DISTINCT FROM 'on' ORDER BY pr, rc, us
                  ON CONFLICT (project_id, resource_class, user_id) DO UPDATE SET used = o.used + excluded.used),
              b AS MATERIALIZED (SELECT * FROM unnest($13::uuid[], $14::int8[], $15::timestamptz[]) AS b(uuid, n, at))
         UPDATE providers p SET generation = p.generation + b.n, updated_at = b.at
         FROM b WHERE p.uuid = ANY($13) AND p.uuid = b.uuid",
        &[
            &consumers,
            &projects,
            &users,
            &types,
            &ats,
            &emptied,
            &a_consumer,
            &a_provider,
            &a_class,
            &a_used,
            &a_start,
            &a_end,
            &bumped,
            &counts,
            &bumped_at,
        ],
    )
    .await?;
    Ok(())
}

async fn bump_providers(
    c: &impl GenericClient,
    providers: &[uuid::Uuid],
    at: &chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    if !providers.is_empty() {
        c.execute(
            "UPDATE providers SET generation = generation + 1, updated_at = $2 WHERE uuid = ANY($1)",
            &[&providers, at],
        )
        .await?;
    }
    Ok(())
}

/// A table that sums the open-ended allocations by `keys` into `used`: kept
/// by every write, but not during replay, which sets `berth.replaying` and
/// rebuilds it once at the end from the replayed allocations (one
/// transaction updating a hot row thousands of times walks ever longer
/// version chains). Its rows with `used` not zero are exactly [`Sum::query`].
pub struct Sum {
    pub table: &'static str,
    pub keys: &'static str,
}

impl Sum {
    /// The sum as the allocations in `schema` give it.
    pub fn query(&self, schema: &str) -> String {
        let keys = self.keys;
        format!("SELECT {keys}, sum(used)::int8 FROM {schema}.allocations WHERE upper_inf(during) GROUP BY {keys}")
    }
}

pub const SUMS: &[Sum] = &[
    Sum { table: "provider_open_usage", keys: "provider_uuid, resource_class" },
    Sum { table: "project_open_usage", keys: "project_id, user_id, resource_class" },
];

/// The projection tables, in an order that respects their foreign keys.
pub const TABLES: &[&str] = &[
    "resource_classes",
    "traits",
    "providers",
    "inventories",
    "provider_traits",
    "provider_aggregates",
    "consumers",
    "allocations",
    "provider_open_usage",
    "project_open_usage",
    "hosts",
    "host_properties",
    "leases",
    "reservations",
    "reservation_slots",
    "lease_events",
    "reservation_draws",
    "quota_limits",
    "host_holds",
];
