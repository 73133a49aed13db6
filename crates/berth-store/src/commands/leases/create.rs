//! Creating a lease, or a recurring lease's occurrences, all or nothing.

use std::collections::{BTreeSet, HashMap};

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::lease::{
    self, Demand, LeaseRecord, LeaseStatus, ReservationRecord, ReservationStatus, Slot, MAX_RESERVATIONS,
};
use berth_core::schedule::Placed;
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::plan::{idle, plan_new, reads_near, span_of, unfit_error};
use super::slots::{slot_events, Past};
use super::small::{self, SmallCloud};
use super::{name_free, LeaseDates, NewLease, NAME_TAKEN};
use crate::clock::NOW;
use crate::commands::record_and_commit;
use crate::commands::request_keys::{self, Keyed, RequestKey};
use crate::lock::{self, Sorted};
use crate::queries::fit::{self, Item};
use crate::queries::leases::{self as read, Lease};
use crate::queries::timelines;
use crate::sql::{self, Statement};
use crate::tx::Pipelined;
use crate::{quota, Store, StoreError};

/// The windows a new lease asks for, checked against `at`; the before-end
/// time of a single lease (a recurring one's follows each occurrence); and
/// whether it recurs.
type Windows = (Vec<(DateTime<Utc>, DateTime<Utc>)>, Option<DateTime<Utc>>, bool);

fn windows_of(dates: &LeaseDates, at: DateTime<Utc>) -> Result<Windows, Error> {
    match dates {
        LeaseDates::One { start, end, before_end } => {
            let s = start.resolve(at);
            let e = end.resolve(at);
            lease::check_new_window(s, *start == DateSpec::Now, e, at)?;
            let be = lease::before_end_time(s, e, *before_end)?;
            Ok((vec![(s, e)], Some(be), false))
        }
        LeaseDates::Recurring(occ) => {
            for (s, e) in occ {
                lease::check_new_window(*s, false, *e, at)?;
            }
            Ok((occ.clone(), None, true))
        }
    }
}

/// The windows a new lease asks for when they do not hang on the database's
/// time (none starts now) and each is well formed (starts before it ends; a
/// badly formed one is refused once the time is read): the candidates can be
/// read before the time is.
fn fixed_windows(dates: &LeaseDates) -> Option<Vec<Window>> {
    let windows: Vec<Window> = match dates {
        LeaseDates::One { start: DateSpec::At(s), end: DateSpec::At(e), .. } => {
            vec![Window { start: *s, end: Some(*e) }]
        }
        LeaseDates::One { .. } => return None,
        LeaseDates::Recurring(occ) => occ.iter().map(|(s, e)| Window { start: *s, end: Some(*e) }).collect(),
    };
    let formed = !windows.is_empty() && windows.iter().all(|w| w.end.is_some_and(|e| w.start < e));
    formed.then_some(windows)
}

/// A lease's reservations as placed: each slot a new consumer.
fn reservation_records(new: &NewLease, per_item: Vec<Vec<Placed>>, at: DateTime<Utc>) -> Vec<ReservationRecord> {
    new.reservations
        .iter()
        .zip(per_item)
        .map(|(r, slots)| {
            let id = Uuid::new_v4();
            ReservationRecord {
                id,
                resource_type: r.resource_type.clone(),
                resource_id: if matches!(r.demand, Demand::Hosts { .. }) { Uuid::new_v4() } else { id },
                status: ReservationStatus::Pending,
                params: r.params.clone(),
                slots: slots
                    .into_iter()
                    .map(|p| Slot { consumer: Uuid::new_v4(), provider: p.provider, resources: p.resources })
                    .collect(),
                created_at: at,
                missing_resources: false,
                resources_changed: false,
            }
        })
        .collect()
}

/// The events that make `record`: the class Placement requests name to
/// draw from each reservation, the lease, and its slots' allocations.
fn created_events(record: LeaseRecord, at: DateTime<Utc>, events: &mut Vec<Event>) {
    let slots = slot_events(&record, &HashMap::new(), &Past::new(), record.start, at);
    events.extend(
        record.reservations.iter().map(|r| Event::ResourceClassCreated { name: lease::reservation_class(r.id) }),
    );
    events.push(Event::LeaseCreated { lease: record, at });
    events.extend(slots.into_iter().map(bumps_named));
}

/// A new slot held nothing before, so the providers whose generation its
/// allocations bump are those it holds: named in the event, applying it
/// needs no read of what the consumer held, and a lease's slots are
/// written by one statement.
fn bumps_named(mut e: Event) -> Event {
    if let Event::AllocationsReplaced { allocations, providers_bumped, .. } = &mut e {
        let held: BTreeSet<Uuid> = allocations.iter().map(|a| a.provider).collect();
        *providers_bumped = Some(held.into_iter().collect());
    }
    e
}

impl Store {
    /// As [`Store::create_lease`], under an idempotency key: the first
    /// request with `key` creates; the same request again within a day gets
    /// the leases it made, as they are now (those since deleted are missing);
    /// another request with the key is refused (409).
    pub async fn create_lease_keyed(
        &self,
        meta: &EventMeta,
        new: NewLease,
        key: &RequestKey,
    ) -> Result<Keyed<Vec<Lease>>, Error> {
        check_new(&new)?;
        crate::tx::pipelined!(self, |tx| {
            let c = tx.client().await?;
            if let Some(ids) = request_keys::earlier(c, key).await? {
                return Ok(Keyed::Earlier(read::load_leases(c, &ids).await?));
            }
            let (made, mut events, at) =
                create_in(tx, &new, None, self.cleaning_time(), self.drawn_ties, &self.small_cloud).await?;
            events.push(request_keys::made(key, made.iter().map(|l| l.record.id).collect(), at));
            record_and_commit(tx, meta, &events).await?;
            Ok(Keyed::Made(made))
        })
    }

    /// Creates a lease (or, when recurring, one lease per occurrence), all or
    /// nothing. Returns the leases made, in order, as a read would show them.
    /// Three round trips when the lease fits where first chosen and no quota
    /// limit bears on it: `BEGIN` with the guard, the clock, the names and
    /// the limits; the chosen hosts' lock with their read; the log's append
    /// with the rows and `COMMIT` (`tx::Pipelined`).
    pub async fn create_lease(&self, meta: &EventMeta, new: NewLease) -> Result<Vec<Lease>, Error> {
        check_new(&new)?;
        crate::tx::pipelined!(self, |tx| {
            let (made, events, _) =
                create_in(tx, &new, None, self.cleaning_time(), self.drawn_ties, &self.small_cloud).await?;
            record_and_commit(tx, meta, &events).await?;
            Ok(made)
        })
    }

    /// Books an offer: creates the single lease `new` with the offer's id
    /// `id`, as [`Store::create_lease`] (or, with `key`,
    /// [`Store::create_lease_keyed`]) does, unless a lease with that id was
    /// ever made: the log keeps its stream after the lease is deleted, so
    /// an offer books once (409 `berth.offer.taken`). Two at once: the
    /// second's insert waits on the first's, fails on its unique key and
    /// starts over, then finds the stream.
    pub async fn create_offered_lease(
        &self,
        meta: &EventMeta,
        new: NewLease,
        id: Uuid,
        key: Option<&RequestKey>,
    ) -> Result<Keyed<Vec<Lease>>, Error> {
        check_new(&new)?;
        crate::tx::pipelined!(self, |tx| {
            let c = tx.client().await?;
            if let Some(key) = key {
                if let Some(ids) = request_keys::earlier(c, key).await? {
                    return Ok(Keyed::Earlier(read::load_leases(c, &ids).await?));
                }
            }
            let stream = format!("lease:{id}");
            let taken =
                || Error::conflict(ErrorCode::OfferTaken, format!("the offer was booked already, as lease {id}"));
            if !sql::query(c, STREAM_EXISTS, &[&stream]).await?.is_empty() {
                return Err(taken().into());
            }
            let created = create_in(tx, &new, Some(id), self.cleaning_time(), self.drawn_ties, &self.small_cloud).await;
            let (made, mut events, at) = match created {
                // A booking of the same offer that committed while this
                // one waited on the project's guard took what it needed.
                Err(StoreError::Domain(e)) => {
                    let c = tx.client().await?;
                    return Err(match sql::query(c, STREAM_EXISTS, &[&stream]).await?.is_empty() {
                        true => e.into(),
                        false => taken().into(),
                    });
                }
                other => other?,
            };
            if let Some(key) = key {
                events.push(request_keys::made(key, made.iter().map(|l| l.record.id).collect(), at));
            }
            record_and_commit(tx, meta, &events).await?;
            Ok(Keyed::Made(made))
        })
    }
}

/// Whether the log has a stream `$1`: a lease's, once made, stays there
/// after the lease is deleted.
const STREAM_EXISTS: &str = "SELECT 1 AS found FROM log_events WHERE stream = $1 LIMIT 1";

/// What can be refused before a transaction starts.
fn check_new(new: &NewLease) -> Result<(), Error> {
    lease::check_name(&new.name)?;
    if new.reservations.len() > MAX_RESERVATIONS {
        return Err(Error::invalid(
            ErrorCode::InvalidLease,
            format!("a lease carries at most {MAX_RESERVATIONS} reservations"),
        ));
    }
    Ok(())
}

/// The names of the leases `new` makes: one per occurrence of a recurrence.
fn names_of(new: &NewLease) -> Vec<String> {
    match &new.dates {
        LeaseDates::Recurring(occ) => (1..=occ.len()).map(|k| format!("{}-{k}", new.name)).collect(),
        LeaseDates::One { .. } => vec![new.name.clone()],
    }
}

/// Plans `new` in `tx` and checks its quota; the leases it makes (a single
/// one with `id`, when given), the events that make them (not yet
/// recorded), and the database's time.
async fn create_in(
    tx: &Pipelined<'_>,
    new: &NewLease,
    id: Option<Uuid>,
    cleaning: chrono::Duration,
    drawn_ties: bool,
    small: &SmallCloud,
) -> Result<(Vec<Lease>, Vec<Event>, DateTime<Utc>), crate::StoreError> {
    let names = names_of(new);
    let items: Vec<Item> = new.reservations.iter().map(|r| Item::Place(&r.demand, Vec::new())).collect();
    // The transaction's statements run on their generic plans
    // (`sql::GENERIC_PLANS`; the near reads set their own): planned anew on
    // each run, the reads of a small cloud cost more to plan than to run.
    // Then quota: the project's guard first; then the database's time, the
    // names' check and the limits bearing on the lease; then, unless the
    // windows hang on the database's time, the candidates read without
    // locks (`plan_new`); all in one round trip, which begins the
    // transaction.
    let projects: Sorted<String> = std::iter::once(new.project_id.clone()).collect();
    let guard = [projects.param()];
    let except: Option<Uuid> = None;
    let name_check = [&new.project_id as &(dyn ToSql + Sync), &names, &except];
    let scopes = quota::Check::lease_scopes(&new.project_id, &new.user_id);
    let limits = [&scopes[0] as &(dyn ToSql + Sync), &scopes[1]];
    let up_to = small.count_to();
    let count_to = [&up_to as &(dyn ToSql + Sync)];
    let (demands, named) = fit::demands_and_named(&items);
    // A lease decided on the hosts near its window reads them itself,
    // unless the cloud is small (`small`); either way it counts the hosts
    // for the next one.
    let fixed = fixed_windows(&new.dates);
    let near = fixed.as_ref().is_some_and(|w| !idle(&items) && reads_near(&items, w));
    let early = fixed.filter(|w| !idle(&items) && (!reads_near(&items, w) || small.is_small()));
    let over = early.as_ref().map(|w| fit::candidates_over(&demands, &named, span_of(w), w[0], cleaning));
    let reads = over.as_ref().map(timelines::Reads::new);
    let read_params = reads.as_ref().map(|r| r.params());
    let mut statements: Vec<Statement<'_>> = vec![
        (sql::GENERIC_PLANS, &[]),
        (lock::GUARD_INSERT, &guard[..]),
        (lock::GUARD_LOCK, &guard[..]),
        (NOW, &[]),
        (NAME_TAKEN, &name_check[..]),
        (quota::LIMITS, &limits[..]),
    ];
    statements.extend(read_params.iter().flat_map(|p| p.statements()));
    if near {
        statements.push((small::HOSTS_UP_TO, &count_to[..]));
    }
    let mut rows = tx.pipeline_all(&statements).await?.into_iter();
    let mut next = move || rows.next().expect("one result per statement");
    let (_, _, quota_guards, at, taken, limit_rows) = (next(), next(), next(), next(), next(), next());
    let read = reads.map(|r| {
        let timelines = r.timelines([next(), next(), next(), next()], Vec::new());
        fit::candidates_of(timelines, &new.project_id, &demands, &named)
    });
    if near {
        small.saw(&next());
        if read.is_some() {
            metrics::counter!("berth_lease_placement_full_reads").increment(1);
        }
    }
    let tx = tx.client().await?;
    let at: DateTime<Utc> = at[0].get("now");
    let (windows, before_end, recurring) = windows_of(&new.dates, at)?;
    name_free(taken.first())?;
    let wins: Vec<Window> = windows.iter().map(|(s, e)| Window { start: *s, end: Some(*e) }).collect();
    debug_assert!(early.as_ref().is_none_or(|w| *w == wins), "the windows read early are the lease's");
    let types: Vec<&str> = new.reservations.iter().map(|r| r.resource_type.as_str()).collect();
    let draw = drawn_ties.then(|| Uuid::new_v4().as_u64_pair().0);
    let placed = plan_new(tx, &new.project_id, &items, &wins, cleaning, draw, read)
        .await?
        .map_err(|u| unfit_error(u, &types, recurring))?;
    let recurrence_id = recurring.then(Uuid::new_v4);
    let mut events = Vec::new();
    let mut made = Vec::new();
    for (((start, end), per_item), name) in windows.iter().zip(placed).zip(names) {
        let be = before_end.map(Ok).unwrap_or_else(|| lease::before_end_time(*start, *end, None))?;
        let record = LeaseRecord {
            id: id.unwrap_or_else(Uuid::new_v4),
            name,
            project_id: new.project_id.clone(),
            user_id: new.user_id.clone(),
            start: *start,
            end: *end,
            status: LeaseStatus::Pending,
            degraded: false,
            recurrence_id,
            reservations: reservation_records(new, per_item, at),
            events: lease::new_events(*start, be, *end),
        };
        made.push(read::as_created(record.clone(), at));
        created_events(record, at, &mut events);
    }
    // Quota: every slot of every lease made, and the leases themselves.
    quota::Check::for_events(at, &events).run_on_limits(tx, &quota_guards, &scopes, &limit_rows).await?;
    Ok((made, events, at))
}
