//! Runs of the events that put providers and hosts in place, each written
//! set-wise in one round trip: providers made (roots only), inventories
//! replaced, aggregates replaced, hosts enrolled. A bulk enrolment records
//! its events grouped by kind (`commands::hosts`), so ten thousand hosts
//! take four round trips here rather than ninety thousand statements; a
//! replay gets the same runs wherever the log has them.
//!
//! Each run writes distinct providers (`projection::run_key`), so the rows
//! are those that applying its events one by one writes.

use berth_core::Event;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::client::GenericClient;
use crate::{sql, StoreError};

/// New root providers, each its own root.
const PROVIDERS: &str = "INSERT INTO providers (uuid, name, generation, parent_uuid, root_uuid, created_at, updated_at)
     SELECT u, n, 0, NULL, u, a, a FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS t(u, n, a)";

/// The providers' inventories gone (then written anew).
const INVENTORIES_GONE: &str = "DELETE FROM inventories WHERE provider_uuid = ANY($1)";

const INVENTORIES: &str =
    "INSERT INTO inventories (provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio)
     SELECT * FROM unnest($1::uuid[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::float8[])";

const AGGREGATES_GONE: &str = "DELETE FROM provider_aggregates WHERE provider_uuid = ANY($1)";

const AGGREGATES: &str =
    "INSERT INTO provider_aggregates (provider_uuid, aggregate) SELECT * FROM unnest($1::uuid[], $2::uuid[])";

/// A new generation for each provider, at its own event's time.
const BUMPS: &str = "UPDATE providers p SET generation = p.generation + 1, updated_at = greatest(p.updated_at, b.at)
     FROM unnest($1::uuid[], $2::timestamptz[]) AS b(uuid, at) WHERE p.uuid = b.uuid";

const HOSTS: &str = "INSERT INTO hosts (provider_uuid, reservable, capabilities, created_at, updated_at)
     SELECT u, r, c, a, a FROM unnest($1::uuid[], $2::bool[], $3::jsonb[], $4::timestamptz[]) AS t(u, r, c, a)";

/// The capability names the hosts carry, each known from the first event
/// naming it, as one host's enrolment after another notes them.
const PROPERTIES: &str = "INSERT INTO host_properties (name, private, updated_at)
     SELECT DISTINCT ON (n) n, false, a FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS t(n, a, i)
     ORDER BY n, i
     ON CONFLICT (name) DO NOTHING";

/// For an event of the kinds written here as a run (a root provider made,
/// inventories or aggregates replaced, a host enrolled): its kind of run
/// (0 to 3) and the provider it writes.
pub(super) fn runs(event: &Event) -> Option<(u8, Uuid)> {
    match event {
        Event::ProviderCreated { uuid, parent: None, .. } => Some((0, *uuid)),
        Event::InventoriesReplaced { provider, .. } => Some((1, *provider)),
        Event::ProviderAggregatesReplaced { provider, .. } => Some((2, *provider)),
        Event::HostEnrolled { provider, .. } => Some((3, *provider)),
        _ => None,
    }
}

/// Writes a run of events of one kind of [`runs`], on distinct providers.
pub(super) async fn apply_run(c: &impl GenericClient, run: &[&Event]) -> Result<(), StoreError> {
    let mut w = Columns::default();
    for e in run {
        w.push(e);
    }
    let ids = &w.ids;
    let params: super::Params<'_> = match run[0] {
        Event::ProviderCreated { .. } => vec![(PROVIDERS, vec![ids, &w.names, &w.ats])],
        Event::InventoriesReplaced { .. } => {
            let i = &w.inv;
            vec![
                (INVENTORIES_GONE, vec![ids]),
                (
                    INVENTORIES,
                    vec![
                        &i.provider,
                        &i.class,
                        &i.total,
                        &i.reserved,
                        &i.min_unit,
                        &i.max_unit,
                        &i.step_size,
                        &i.ratio,
                    ],
                ),
                (BUMPS, vec![&w.bumped, &w.bumped_at]),
            ]
        }
        Event::ProviderAggregatesReplaced { .. } => vec![
            (AGGREGATES_GONE, vec![ids]),
            (AGGREGATES, vec![&w.members, &w.aggregates]),
            (BUMPS, vec![&w.bumped, &w.bumped_at]),
        ],
        Event::HostEnrolled { .. } => {
            vec![(HOSTS, vec![ids, &w.reservable, &w.capabilities, &w.ats]), (PROPERTIES, vec![&w.names, &w.name_ats])]
        }
        e => unreachable!("not an enrolment's event: {e:?}"),
    };
    let statements: Vec<sql::Statement<'_>> = params.iter().map(|(sql, p)| (*sql, &p[..])).collect();
    sql::pipeline_all(c, &statements).await?;
    Ok(())
}

/// A run's values, column by column (each kind fills the columns it uses).
#[derive(Default)]
struct Columns {
    ids: Vec<Uuid>,
    ats: Vec<DateTime<Utc>>,
    /// Providers' names, or the capability names of hosts.
    names: Vec<String>,
    name_ats: Vec<DateTime<Utc>>,
    inv: InventoryColumns,
    members: Vec<Uuid>,
    aggregates: Vec<Uuid>,
    bumped: Vec<Uuid>,
    bumped_at: Vec<DateTime<Utc>>,
    reservable: Vec<bool>,
    capabilities: Vec<serde_json::Value>,
}

impl Columns {
    fn push(&mut self, event: &Event) {
        match event {
            Event::ProviderCreated { uuid, name, at, .. } => {
                self.ids.push(*uuid);
                self.names.push(name.clone());
                self.ats.push(*at);
            }
            Event::InventoriesReplaced { provider, inventories, at } => {
                self.ids.push(*provider);
                for (class, i) in inventories {
                    let inv = &mut self.inv;
                    inv.provider.push(*provider);
                    inv.class.push(class.clone());
                    inv.total.push(i.total);
                    inv.reserved.push(i.reserved);
                    inv.min_unit.push(i.min_unit);
                    inv.max_unit.push(i.max_unit);
                    inv.step_size.push(i.step_size);
                    inv.ratio.push(i.allocation_ratio);
                }
                self.bumped.push(*provider);
                self.bumped_at.push(*at);
            }
            Event::ProviderAggregatesReplaced { provider, aggregates, bump, at } => {
                self.ids.push(*provider);
                for a in aggregates {
                    self.members.push(*provider);
                    self.aggregates.push(*a);
                }
                if *bump {
                    self.bumped.push(*provider);
                    self.bumped_at.push(*at);
                }
            }
            Event::HostEnrolled { provider, reservable, capabilities, at } => {
                self.ids.push(*provider);
                self.reservable.push(*reservable);
                self.capabilities.push(serde_json::to_value(capabilities).expect("json"));
                self.ats.push(*at);
                for name in capabilities.keys() {
                    self.names.push(name.clone());
                    self.name_ats.push(*at);
                }
            }
            e => unreachable!("not an enrolment's event: {e:?}"),
        }
    }
}

/// Inventory rows, column by column, as [`INVENTORIES`] takes them.
#[derive(Default)]
struct InventoryColumns {
    provider: Vec<Uuid>,
    class: Vec<String>,
    total: Vec<i64>,
    reserved: Vec<i64>,
    min_unit: Vec<i64>,
    max_unit: Vec<i64>,
    step_size: Vec<i64>,
    ratio: Vec<f64>,
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the test's own sums, of small known times
#[path = "enrolments_tests.rs"]
mod tests;
