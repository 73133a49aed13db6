//! Applying Placement's events: resource classes, traits, providers and
//! what hangs off them, and allocations.

use berth_core::Event;

use crate::client::GenericClient;
use crate::{sql, StoreError};

/// Applies one of Placement's events.
pub(super) async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
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
            rename_class(c, from, to).await?;
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
            update_provider(c, uuid, name, parent, at).await?;
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
            replace_inventories(c, provider, inventories, at).await?;
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
            replace_allocations(c, event, consumer, allocations, providers_bumped).await?;
        }
        _ => unreachable!("not one of Placement's events: {event:?}"),
    }
    Ok(())
}

/// Writes allocation replacements of distinct consumers, each with the
/// providers it gives a new generation, in one statement
/// ([`WRITE_ALLOCATIONS`]).
pub(super) async fn write_allocations(
    c: &impl GenericClient,
    events: &[(&Event, &[uuid::Uuid])],
) -> Result<(), StoreError> {
    write_allocations_after(c, &[], events).await
}

/// As [`write_allocations`], after the statements `before`, all in one
/// round trip (none but `before` when there are no events).
pub(super) async fn write_allocations_after(
    c: &impl GenericClient,
    before: &[sql::Statement<'_>],
    events: &[(&Event, &[uuid::Uuid])],
) -> Result<(), StoreError> {
    if events.is_empty() {
        sql::pipeline_all(c, before).await?;
        return Ok(());
    }
    let write = AllocationsWrite::new(events);
    let (sql, params) = write.statement();
    let mut statements = before.to_vec();
    statements.push((sql, &params[..]));
    sql::pipeline_all(c, &statements).await?;
    Ok(())
}

/// Allocation replacements of distinct consumers, each with the providers
/// it gives a new generation, as the one statement that writes them
/// ([`WRITE_ALLOCATIONS`]): run by [`write_allocations`], or sent by a
/// command with its commit (`projection::one_statement`).
pub(crate) struct AllocationsWrite<'a> {
    cols: AllocationColumns<'a>,
    bumped: Vec<uuid::Uuid>,
    counts: Vec<i64>,
    bumped_at: Vec<At>,
    stripe: i16,
}

impl<'a> AllocationsWrite<'a> {
    pub(super) fn new(events: &[(&'a Event, &[uuid::Uuid])]) -> AllocationsWrite<'a> {
        let mut cols = AllocationColumns::default();
        for (e, bumped) in events {
            cols.push(e, bumped);
        }
        let (bumped, counts, bumped_at) = cols.bumps.columns();
        AllocationsWrite { bumped, counts, bumped_at, stripe: super::STRIPE.try_with(|s| *s).unwrap_or(0), cols }
    }

    pub(crate) fn statement(&self) -> (&'static str, [&(dyn tokio_postgres::types::ToSql + Sync); 17]) {
        let cols = &self.cols;
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 17] = [
            &cols.consumers,
            &cols.projects,
            &cols.users,
            &cols.types,
            &cols.ats,
            &cols.emptied,
            &cols.a_consumer,
            &cols.a_provider,
            &cols.a_class,
            &cols.a_used,
            &cols.a_start,
            &cols.a_end,
            &self.bumped,
            &self.counts,
            &self.bumped_at,
            &self.stripe,
            &cols.a_ordinal,
        ];
        (WRITE_ALLOCATIONS, params)
    }
}

type At = chrono::DateTime<chrono::Utc>;

/// Allocation replacements as the columns of [`WRITE_ALLOCATIONS`]: per
/// consumer, per allocation, and per provider bumped.
#[derive(Default)]
struct AllocationColumns<'a> {
    consumers: Vec<uuid::Uuid>,
    projects: Vec<&'a str>,
    users: Vec<&'a str>,
    types: Vec<Option<&'a str>>,
    ats: Vec<At>,
    emptied: Vec<bool>,
    /// Per allocation, the consumer it belongs to.
    a_consumer: Vec<uuid::Uuid>,
    a_provider: Vec<uuid::Uuid>,
    a_class: Vec<&'a str>,
    a_used: Vec<i64>,
    a_start: Vec<At>,
    a_end: Vec<Option<At>>,
    /// Per allocation, its place in its replacement's list.
    a_ordinal: Vec<i32>,
    bumps: Bumps,
}

impl<'a> AllocationColumns<'a> {
    /// Adds the replacement `e`, which gives `bumped` a new generation.
    fn push(&mut self, e: &'a Event, bumped: &[uuid::Uuid]) {
        let Event::AllocationsReplaced { consumer, project_id, user_id, consumer_type, allocations, at, .. } = e else {
            unreachable!("only allocation replacements");
        };
        self.consumers.push(*consumer);
        self.projects.push(project_id.as_str());
        self.users.push(user_id.as_str());
        self.types.push(consumer_type.as_deref());
        self.ats.push(*at);
        self.emptied.push(allocations.is_empty());
        for (ordinal, a) in allocations.iter().enumerate() {
            self.a_ordinal.push(i32::try_from(ordinal).unwrap_or(i32::MAX));
            self.a_consumer.push(*consumer);
            self.a_provider.push(a.provider);
            self.a_class.push(a.resource_class.as_str());
            self.a_used.push(a.used);
            self.a_start.push(a.window.start);
            self.a_end.push(a.window.end);
        }
        self.bumps.add(bumped, *at);
    }
}

/// Providers given new generations by allocation replacements: per
/// provider, how many, and the latest of their instants.
#[derive(Default)]
pub(super) struct Bumps(std::collections::BTreeMap<uuid::Uuid, (i64, At)>);

impl Bumps {
    /// A replacement at `at` bumps `providers`.
    pub(super) fn add(&mut self, providers: &[uuid::Uuid], at: At) {
        for p in providers {
            let b = self.0.entry(*p).or_insert((0, at));
            *b = (b.0 + 1, b.1.max(at));
        }
    }

    /// The providers, their counts and instants, as statement parameters.
    pub(super) fn columns(&self) -> (Vec<uuid::Uuid>, Vec<i64>, Vec<At>) {
        let providers = self.0.keys().copied().collect();
        let counts = self.0.values().map(|b| b.0).collect();
        let ats = self.0.values().map(|b| b.1).collect();
        (providers, counts, ats)
    }
}

/// The allocations, the consumers (made, updated, or gone with their last
/// allocation), the open-ended sums (the project's in stripe `$16`) and the
/// provider generations, for allocation replacements of distinct consumers.
const WRITE_ALLOCATIONS: &str =
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
                                       $12::timestamptz[], $17::int4[]) AS a(c, p, rc, u, s, e, o)),
              added AS (
                  INSERT INTO allocations (consumer_uuid, provider_uuid, resource_class, used, during, project_id, user_id,
                                           ordinal)
                  SELECT a.c, a.p, a.rc, a.u, tstzrange(a.s, a.e, '[)'), c.p, c.u, a.o FROM a JOIN c ON c.uuid = a.c),
              counted AS (
                  INSERT INTO provider_open_usage AS o (provider_uuid, resource_class, used)
                  SELECT p, rc, sum(d)::int8 FROM (
                      SELECT provider_uuid, resource_class, -used FROM gone WHERE upper_inf(during)
                      UNION ALL
                      SELECT p, rc, u FROM a WHERE e IS NULL) AS x(p, rc, d)
                  GROUP BY p, rc HAVING sum(d) <> 0 AND current_setting('berth.replaying', true) IS DISTINCT FROM 'on' ORDER BY p, rc
                  ON CONFLICT (provider_uuid, resource_class) DO UPDATE SET used = o.used + excluded.used),
              project_counted AS (
                  INSERT INTO project_open_usage AS o (project_id, user_id, resource_class, stripe, used)
                  SELECT pr, us, rc, $16::int2, sum(d)::int8 FROM (
                      SELECT project_id, user_id, resource_class, -used FROM gone WHERE upper_inf(during)
                      UNION ALL
                      SELECT c.p, c.u, a.rc, a.u FROM a JOIN c ON c.uuid = a.c WHERE a.e IS NULL) AS x(pr, us, rc, d)
                  GROUP BY pr, us, rc HAVING sum(d) <> 0 AND current_setting('berth.replaying', true) IS DISTINCT FROM 'on' ORDER BY pr, rc, us
                  ON CONFLICT (project_id, resource_class, user_id, stripe) DO UPDATE SET used = o.used + excluded.used),
              b AS MATERIALIZED (SELECT * FROM unnest($13::uuid[], $14::int8[], $15::timestamptz[]) AS b(uuid, n, at))
         UPDATE providers p SET generation = p.generation + b.n, updated_at = greatest(p.updated_at, b.at)
         FROM b WHERE p.uuid = ANY($13) AND p.uuid = b.uuid";

async fn bump_providers(
    c: &impl GenericClient,
    providers: &[uuid::Uuid],
    at: &chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    if !providers.is_empty() {
        c.execute(
            "UPDATE providers SET generation = generation + 1, updated_at = greatest(updated_at, $2) WHERE uuid = ANY($1)",
            &[&providers, at],
        )
        .await?;
    }
    Ok(())
}

/// Renames a resource class: the new name, the rows moved, the old name gone.
async fn rename_class(c: &impl GenericClient, from: &String, to: &String) -> Result<(), StoreError> {
    // Without relying on ON UPDATE CASCADE (replay's scratch tables
    // carry no foreign keys): add the new name, move the rows, drop the old.
    c.execute("INSERT INTO resource_classes (name, standard) VALUES ($1, false)", &[to]).await?;
    c.execute("UPDATE inventories SET resource_class = $2 WHERE resource_class = $1", &[from, to]).await?;
    for table in ["allocations", "provider_open_usage", "project_open_usage"] {
        c.execute(&format!("UPDATE {table} SET resource_class = $2 WHERE resource_class = $1"), &[from, to]).await?;
    }
    c.execute("DELETE FROM resource_classes WHERE name = $1", &[from]).await?;
    Ok(())
}

/// Renames and re-parents a provider; its subtree follows its new root.
async fn update_provider(
    c: &impl GenericClient,
    uuid: &uuid::Uuid,
    name: &String,
    parent: &Option<uuid::Uuid>,
    at: &chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
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
    Ok(())
}

/// Replaces a provider's inventories and bumps its generation.
async fn replace_inventories(
    c: &impl GenericClient,
    provider: &uuid::Uuid,
    inventories: &std::collections::BTreeMap<String, berth_core::Inventory>,
    at: &chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
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
    Ok(())
}

/// Replaces a consumer's allocations alone.
async fn replace_allocations(
    c: &impl GenericClient,
    event: &Event,
    consumer: &uuid::Uuid,
    allocations: &[berth_core::event::Allocation],
    providers_bumped: &Option<Vec<uuid::Uuid>>,
) -> Result<(), StoreError> {
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
                    .map(|r| r.get("provider_uuid"))
                    .collect();
            held.extend(allocations.iter().map(|a| a.provider));
            held.into_iter().collect()
        }
    };
    write_allocations(c, &[(event, &bumped)]).await?;
    Ok(())
}
