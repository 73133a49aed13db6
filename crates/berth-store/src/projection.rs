//! Applying an event to the projections. This is the only code that writes
//! projection tables, and it runs both inline (in the command's transaction,
//! right after the append) and in replay, so the two cannot disagree.
//!
//! Application never decides: the commands have checked everything before
//! appending. It only turns an event into rows, deterministically: the same
//! events in the same order give the same rows, byte for byte; but for how
//! the projects' open-ended sums are split into stripes (which lane wrote),
//! where only each sum's total is determined ([`Sum::totals`]).

use berth_core::Event;

use crate::client::GenericClient;
use crate::StoreError;

mod enrolments;
mod heal;
pub(crate) mod lease_events;
mod leases;
mod loans;
mod placement;
pub(crate) mod quotas;
mod request_keys;
mod shares;
pub(crate) mod staging;
mod transfers;

pub async fn apply(c: &impl GenericClient, event: &Event) -> Result<(), StoreError> {
    match event {
        e @ (Event::ResourceClassCreated { .. }
        | Event::ResourceClassDeleted { .. }
        | Event::ResourceClassRenamed { .. }
        | Event::TraitCreated { .. }
        | Event::TraitDeleted { .. }
        | Event::ProviderCreated { .. }
        | Event::ProviderUpdated { .. }
        | Event::ProviderDeleted { .. }
        | Event::InventoriesReplaced { .. }
        | Event::ProviderTraitsReplaced { .. }
        | Event::ProviderAggregatesReplaced { .. }
        | Event::AllocationsReplaced { .. }) => placement::apply(c, e).await?,
        e @ (Event::LeaseCreated { .. }
        | Event::LeaseUpdated { .. }
        | Event::LeaseDeleted { .. }
        | Event::LeaseStatusChanged { .. }
        | Event::ReservationStatusChanged { .. }
        | Event::LeaseEventChanged { .. }
        | Event::LeaseRecovered { .. }
        | Event::HostEnrolled { .. }
        | Event::HostUpdated { .. }
        | Event::HostRemoved { .. }
        | Event::HostPropertyChanged { .. }
        | Event::ReservationDrawn { .. }) => leases::apply(c, e).await?,
        e @ (Event::QuotaSet { .. } | Event::QuotaUnset { .. } | Event::QuotaOverLimit { .. }) => {
            quotas::apply(c, e).await?
        }
        e @ Event::RequestKeyed { .. } => request_keys::apply(c, e).await?,
        e @ (Event::CapacityLent { .. }
        | Event::LoanReturned { .. }
        | Event::LoanCut { .. }
        | Event::ReclaimClaimed { .. }
        | Event::ReclaimFinished { .. }) => loans::apply(c, e).await?,
        e @ (Event::LeaseShared { .. } | Event::UpdateHookFinished { .. }) => shares::apply(c, e).await?,
        e @ (Event::LeaseSplit { .. }
        | Event::LeaseTransferOffered { .. }
        | Event::LeaseTransferWithdrawn { .. }
        | Event::LeaseTransferred { .. }) => transfers::apply(c, e).await?,
        e @ (Event::HostDisabled { .. }
        | Event::ReservationHealed { .. }
        | Event::ReservationUnhealed { .. }
        | Event::HealHookFinished { .. }
        | Event::MaintenanceScheduled { .. }
        | Event::MaintenanceCancelled { .. }) => heal::apply(c, e).await?,
        e @ (Event::LeaseEventClaimed { .. }
        | Event::LeaseEventClaimRenewed { .. }
        | Event::LeaseEventRetrying { .. }
        | Event::LeaseEventFinished { .. }
        | Event::HostHeld { .. }
        | Event::HostHoldReleased { .. }
        | Event::LeaseEventRetried { .. }
        | Event::LeaseEventCancelled { .. }
        | Event::LeaseEventFired { .. }
        | Event::ManagerPaused { .. }
        | Event::ManagerResumed { .. }) => lease_events::apply(c, e).await?,
    }
    Ok(())
}

/// Applies `events` in order, as [`apply`] one by one would; a run of
/// consecutive events of one kind that write distinct rows (lease event
/// outcomes, lease and reservation statuses, allocation replacements naming
/// their bumps) is written by one statement, and a run of lease creations
/// (their classes, the leases, their slots' allocations) by one round trip.
pub async fn apply_all(c: &impl GenericClient, events: &[&Event]) -> Result<(), StoreError> {
    let mut i = 0;
    while i < events.len() {
        if let Some(end) = creations(events, i) {
            apply_creations(c, &events[i..end]).await?;
            i = end;
            continue;
        }
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
                placement::write_allocations(c, &run).await?
            }
            Some((kind, _)) if kind >= ENROLMENT_RUNS => enrolments::apply_run(c, run).await?,
            _ => lease_events::apply_run(c, run).await?,
        }
        i = end;
    }
    Ok(())
}

/// The end of the run of lease creations' events that starts at `i`, if
/// one does and holds a lease: classes made, leases made, and allocation
/// replacements of distinct consumers naming their bumps, in any order
/// (`commands::leases::create` records each lease's classes, the lease,
/// then its slots'). They write distinct rows of tables that refer to none
/// of the others but leases, which are written first.
fn creations(events: &[&Event], i: usize) -> Option<usize> {
    if !matches!(events[i], Event::ResourceClassCreated { .. } | Event::LeaseCreated { .. }) {
        return None;
    }
    let (mut consumers, mut leases, mut end) = (std::collections::HashSet::new(), false, i);
    while let Some(e) = events.get(end) {
        match e {
            Event::ResourceClassCreated { .. } => {}
            Event::LeaseCreated { .. } => leases = true,
            Event::AllocationsReplaced { consumer, providers_bumped: Some(_), .. } if consumers.insert(*consumer) => {}
            _ => break,
        }
        end += 1;
    }
    leases.then_some(end)
}

/// Writes a run of [`creations`] in one round trip: the classes, the
/// leases with their reservations, slots and lease events, then the
/// allocations (`placement::WRITE_ALLOCATIONS`).
async fn apply_creations(c: &impl GenericClient, run: &[&Event]) -> Result<(), StoreError> {
    let write = CreationsWrite::new(run);
    let params = write.params();
    let statements: Vec<crate::sql::Statement<'_>> = params.iter().map(|(sql, p)| (*sql, &p[..])).collect();
    crate::sql::pipeline_all(c, &statements).await?;
    Ok(())
}

/// A run of [`creations`] as the statements that write it, in the order
/// they run: for [`apply_all`], or for a command to send with its append
/// and its commit ([`creations_only`]).
pub(crate) struct CreationsWrite<'a> {
    rows: leases::Created<'a>,
    allocations: Option<placement::AllocationsWrite<'a>>,
}

/// The statements' parameters, each with its statement.
pub(crate) type Params<'a> = Vec<(&'static str, Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)>)>;

impl<'a> CreationsWrite<'a> {
    fn new(run: &[&'a Event]) -> CreationsWrite<'a> {
        let mut rows = leases::Created::default();
        let mut allocations = Vec::new();
        for e in run {
            match e {
                Event::ResourceClassCreated { name } => rows.class(name),
                Event::LeaseCreated { lease, at } => rows.lease(lease, *at),
                Event::AllocationsReplaced { providers_bumped: Some(bumped), .. } => {
                    allocations.push((*e, bumped.as_slice()))
                }
                _ => unreachable!("not a lease creation's event: {e:?}"),
            }
        }
        let allocations = (!allocations.is_empty()).then(|| placement::AllocationsWrite::new(&allocations));
        CreationsWrite { rows, allocations }
    }

    pub(crate) fn params(&self) -> Params<'_> {
        let mut out: Params<'_> = self.rows.params().into_iter().collect();
        if let Some(write) = &self.allocations {
            let (sql, params) = write.statement();
            out.push((sql, params.to_vec()));
        }
        out
    }
}

/// The statements that apply `events`, as [`apply_all`] would, when they
/// are one run of lease creations and nothing else (a lease's creation).
pub(crate) fn creations_only<'a>(events: &[&'a Event]) -> Option<CreationsWrite<'a>> {
    (!events.is_empty() && creations(events, 0) == Some(events.len())).then(|| CreationsWrite::new(events))
}

/// The one statement that applies `events`, as [`apply_all`] would, when
/// one does: a run of allocation replacements of distinct consumers naming
/// their bumps (a batch of claims). For a command to send with its commit.
pub(crate) fn one_statement<'a>(events: &[&'a Event]) -> Option<placement::AllocationsWrite<'a>> {
    let mut consumers = std::collections::HashSet::new();
    let mut run = Vec::with_capacity(events.len());
    for e in events {
        let (Some((ALLOCATIONS_RUN, consumer)), Event::AllocationsReplaced { providers_bumped: Some(bumped), .. }) =
            (run_key(e), e)
        else {
            return None;
        };
        if !consumers.insert(consumer) {
            return None;
        }
        run.push((*e, bumped.as_slice()));
    }
    (!run.is_empty()).then(|| placement::AllocationsWrite::new(&run))
}

/// The kind of run of [`run_key`] that allocation replacements make.
const ALLOCATIONS_RUN: u8 = u8::MAX;

/// The first kind of run of [`run_key`] that enrolments' events make
/// (`enrolments::runs`): one per event type, below [`ALLOCATIONS_RUN`].
const ENROLMENT_RUNS: u8 = 200;

/// For an event that may be applied in a run: its kind of run and the row
/// it writes (a run never writes one row twice).
fn run_key(event: &Event) -> Option<(u8, uuid::Uuid)> {
    match event {
        Event::AllocationsReplaced { consumer, providers_bumped: Some(_), .. } => Some((ALLOCATIONS_RUN, *consumer)),
        e => match enrolments::runs(e) {
            Some((kind, provider)) => Some((ENROLMENT_RUNS + kind, provider)),
            None => lease_events::batch_key(e),
        },
    }
}

tokio::task_local! {
    /// The stripe of the projects' open-ended sums (`project_open_usage`)
    /// that this task's allocation writes add to: a claim lane's number
    /// (commands/claims.rs), so that two lanes deciding claims of one
    /// project never wait on each other's sum rows; 0 outside the lanes.
    pub(crate) static STRIPE: i16;
}

/// A table that sums the open-ended allocations by `keys` into `used`: kept
/// by every write, but not during replay, which sets `berth.replaying` and
/// rebuilds it once at the end from the replayed allocations (one
/// transaction updating a hot row thousands of times walks ever longer
/// version chains). Its [`Sum::totals`] are exactly [`Sum::query`].
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

    /// The sum as the table in `schema` holds it, without the rows at zero:
    /// a key's rows added up (the stripes of a project's sum), so it
    /// compares with [`Sum::query`] and with a rebuild that keeps one row
    /// per key.
    pub fn totals(&self, schema: &str) -> String {
        let (table, keys) = (self.table, self.keys);
        format!("SELECT {keys}, sum(used)::int8 FROM {schema}.{table} GROUP BY {keys} HAVING sum(used) <> 0")
    }
}

/// Every sum of [`SUMS`] rebuilt into the empty tables of the search path
/// from its `allocations`, in one scan: the open-ended allocations summed
/// by every key column of any sum, and each sum from those.
pub(crate) fn rebuild_sums() -> String {
    let mut keys: Vec<&str> = Vec::new();
    for k in SUMS.iter().flat_map(|s| s.keys.split(", ")) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let keys = keys.join(", ");
    let mut sql =
        format!("WITH a AS MATERIALIZED (SELECT {keys}, sum(used) AS used FROM allocations WHERE upper_inf(during) GROUP BY {keys})");
    for (i, s) in SUMS.iter().enumerate() {
        let (table, keys) = (s.table, s.keys);
        sql += &format!(
            ", s{i} AS (INSERT INTO {table} ({keys}, used) SELECT {keys}, sum(used)::int8 FROM a GROUP BY {keys})"
        );
    }
    sql + " SELECT 1"
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
    "request_keys",
    "leases",
    "reservations",
    "reservation_slots",
    "lease_events",
    "lease_transfers",
    "reservation_draws",
    "quota_limits",
    "host_holds",
    "manager_state",
    "heal_hooks",
    "maintenance_windows",
    "loans",
    "loan_allocations",
    "lease_shares",
    "update_hooks",
];
