//! Healing: the reservations holding hosts that became unusable move to
//! free hosts that match them, for the rest of their window (a future
//! reservation for all of it), in the transaction of the command that made
//! the hosts unusable, or of a later retry (`commands::heal`).
//!
//! Locks in the house's order: the leases concerned, the slots to move
//! (consumers), then the candidate providers with the unusable ones; on a
//! cloud past small, the unusable ones only, and each replacement host
//! when it is chosen, passed over if another command holds it
//! (`lock::CHOSEN_IF_FREE`). Two cases still lock out of order: a lease
//! that took one of these hosts between the first read and the provider
//! locks (it committed meanwhile) is locked late and healed too, and on a
//! large cloud a replacement the hosts near its window cannot vouch for is
//! decided on every candidate, locked as `plan` locks them. A deadlock
//! there only starts the transaction over.
//!
//! Placing reuses the leases' `plan` (`queries::fit`): each reservation
//! asks for as many hosts (or slots) as it lost, with its own properties,
//! over `[max(now, start), end)`. A moved slot keeps its consumer: its
//! allocations stay on the old host until now and hold on the new one from
//! then on, so no instant counts twice and no project's usage changes (no
//! quota check). A slot something draws from stays, marked.

use std::collections::{HashMap, HashSet};

use berth_core::event::{Allocation, SlotMove};
use berth_core::lease::heal::{replacement, wants_heal};
use berth_core::lease::{Demand, LeaseEventStatus, LeaseEventType, LeaseRecord, ReservationRecord, Slot};
use berth_core::{Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use super::plan::{plan, plan_near};
use super::slots::{draws_of, slot_replaced};
use crate::clock::now;
use crate::commands::record;
use crate::queries::fit::{candidate_ids_among, Item};
use crate::queries::leases::load_leases;
use crate::queries::timelines;
use crate::{lock, StoreError};

/// What each reservation to heal needs, as its plugin says (by reservation).
pub type Demands = HashMap<Uuid, Demand>;

/// How a heal places: the cleaning time kept after each lease (unless a
/// host names its own), and the hosts at most of a cloud read whole for
/// each replacement (`Store::with_small_cloud`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placing {
    pub cleaning: chrono::Duration,
    pub small: usize,
}

/// What a heal did to one reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct HealOutcome {
    pub lease: Uuid,
    pub reservation: Uuid,
    /// Slots moved to other hosts.
    pub moved: usize,
    /// Slots left on unusable hosts.
    pub missing: usize,
}

/// The leases (not ended at `at`) with a reservation on an unusable host or
/// one of `down`, or marked as missing resources.
/// The leases (not ended at `$2`) with a reservation on an unusable host or
/// one of `$1`, marked as missing resources, or under a maintenance window
/// (those scheduled, and one over hosts `$3` from `$4` to `$5`).
const AFFECTED: &str = "SELECT r.lease_id FROM reservations r JOIN leases l ON l.id = r.lease_id
     WHERE r.missing_resources AND l.end_at > $2
     UNION
     SELECT r.lease_id FROM reservation_slots s
     JOIN reservations r ON r.id = s.reservation_id JOIN leases l ON l.id = r.lease_id
     WHERE l.end_at > $2 AND s.provider_uuid IN (
         SELECT unnest($1::uuid[])
         UNION SELECT provider_uuid FROM hosts WHERE disabled
         UNION SELECT provider_uuid FROM provider_traits WHERE trait = 'COMPUTE_STATUS_DISABLED')
     UNION
     SELECT r.lease_id FROM reservation_slots s
     JOIN reservations r ON r.id = s.reservation_id JOIN leases l ON l.id = r.lease_id
     WHERE l.end_at > $2 AND s.provider_uuid = ANY($3)
       AND tstzrange(l.start_at, l.end_at) && tstzrange($4, $5, '[)')
     UNION
     SELECT r.lease_id FROM maintenance_windows m
     JOIN reservation_slots s ON s.provider_uuid = m.provider_uuid
     JOIN reservations r ON r.id = s.reservation_id JOIN leases l ON l.id = r.lease_id
     WHERE upper(m.during) > $2 AND l.end_at > $2 AND m.during && tstzrange(l.start_at, l.end_at)
     ORDER BY 1";

/// Hosts reserved for maintenance over `window`, by a command that has not
/// recorded it yet; `heal`: whether the leases it hits move.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Maintenance<'a> {
    pub hosts: &'a [Uuid],
    pub window: Window,
    pub heal: bool,
}

/// The parameters of [`AFFECTED`] after `$2`.
fn maintenance_params(m: Option<Maintenance<'_>>) -> (Vec<Uuid>, Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    match m {
        Some(m) => (m.hosts.to_vec(), Some(m.window.start), m.window.end),
        None => (Vec::new(), None, None),
    }
}

/// The maintenance windows on `providers` not over at `at`: (host,
/// window, heal).
async fn windows_on(
    tx: &Transaction<'_>,
    providers: &[Uuid],
    at: DateTime<Utc>,
) -> Result<Vec<(Uuid, Window, bool)>, StoreError> {
    let rows = tx
        .query(
            "SELECT provider_uuid, lower(during) AS start_at, upper(during) AS end_at, heal FROM maintenance_windows
             WHERE provider_uuid = ANY($1) AND upper(during) > $2",
            &[&providers, &at],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("provider_uuid"), Window { start: r.get("start_at"), end: r.get("end_at") }, r.get("heal")))
        .collect())
}

/// Of `providers`, those unusable now: disabled, or with Nova's trait.
async fn unusable(tx: &Transaction<'_>, providers: &[Uuid]) -> Result<HashSet<Uuid>, StoreError> {
    let rows = tx
        .query(
            "SELECT h.provider_uuid FROM hosts h WHERE h.provider_uuid = ANY($1) AND (h.disabled OR EXISTS (
                 SELECT 1 FROM provider_traits t
                 WHERE t.provider_uuid = h.provider_uuid AND t.trait = 'COMPUTE_STATUS_DISABLED'))",
            &[&providers],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get("provider_uuid")).collect())
}

/// The leases to heal, locked, with what is unusable under them.
pub(crate) struct Locked {
    /// The instant the heal decides at, read once every lock was held: a
    /// command that moved these slots while this one waited committed
    /// before it, so its cut is never after this one's. An instant read
    /// before the wait could cut a slot's old hold before the newer hold
    /// another heal gave it began, and the slot would hold in two places.
    at: DateTime<Utc>,
    leases: Vec<LeaseRecord>,
    down: HashSet<Uuid>,
    /// Maintenance windows on the hosts they hold: (host, window, heal).
    windows: Vec<(Uuid, Window, bool)>,
    /// Slot consumers something draws from.
    drawn: HashSet<Uuid>,
    /// The cleaning time replacements keep from other leases (`cleaning_time`).
    cleaning: chrono::Duration,
    /// Whether replacements are decided on the hosts near their window
    /// (`plan::plan_near`): on a cloud past small (`Store::with_small_cloud`), where
    /// reading every host per lease costs more than the near read.
    near: bool,
}

impl Locked {
    /// Whether `slot` of `lease` must move (or be marked): its host is
    /// unusable, or under maintenance during the lease; and whether a
    /// maintenance window there says not to move it.
    fn hit(&self, lease: &LeaseRecord, slot: &Slot) -> Option<bool> {
        if self.down.contains(&slot.provider) {
            return Some(true);
        }
        let span = Window { start: lease.start, end: Some(lease.end) };
        let over: Vec<bool> =
            self.windows.iter().filter(|(h, w, _)| *h == slot.provider && w.overlaps(&span)).map(|w| w.2).collect();
        (!over.is_empty()).then(|| over.iter().all(|heal| *heal))
    }
}

/// The hosts a command changes: made unusable (`down`) or usable again
/// (`up`), by events it has not recorded yet.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Changed<'a> {
    pub down: &'a [Uuid],
    pub up: &'a [Uuid],
    pub maintenance: Option<Maintenance<'a>>,
}

/// Locks the leases concerned, their slots on unusable hosts and the
/// providers they may move to (with the changed hosts). `seen_at`, the
/// command's instant read before it waited, picks the leases not ended;
/// the heal decides at the instant read after the locks ([`Locked::at`]).
pub(crate) async fn lock_all(
    tx: &Transaction<'_>,
    changed: Changed<'_>,
    demands: &Demands,
    seen_at: DateTime<Utc>,
    placing: Placing,
) -> Result<Locked, StoreError> {
    let down = changed.down;
    let mut out = Locked {
        at: seen_at,
        leases: Vec::new(),
        down: down.iter().copied().collect(),
        windows: Vec::new(),
        drawn: HashSet::new(),
        cleaning: placing.cleaning,
        near: false,
    };
    let (m_hosts, m_start, m_end) = maintenance_params(changed.maintenance);
    if let Some(m) = changed.maintenance {
        out.windows.extend(m.hosts.iter().map(|h| (*h, m.window, m.heal)));
    }
    let mut seen: HashSet<Uuid> = HashSet::new();
    // Twice at most in practice: a lease that took one of these hosts
    // between the read and the provider locks is seen on the second pass.
    loop {
        let ids: Vec<Uuid> = tx
            .query(AFFECTED, &[&down, &seen_at, &m_hosts, &m_start, &m_end])
            .await?
            .iter()
            .map(|r| r.get("lease_id"))
            .collect();
        let new: Vec<Uuid> = ids.into_iter().filter(|id| seen.insert(*id)).collect();
        if new.is_empty() {
            out.at = now(tx).await?;
            // Picked at the earlier instant: one may have ended since.
            out.leases.retain(|l| l.end > out.at);
            return Ok(out);
        }
        lock::leases(tx, &new).await?;
        let leases: Vec<LeaseRecord> = load_leases(tx, &new).await?.into_iter().map(|l| l.record).collect();
        let held: Vec<Uuid> = leases
            .iter()
            .flat_map(|l| l.reservations.iter().flat_map(|r| r.slots.iter().map(|s| s.provider)))
            .collect();
        out.down.extend(unusable(tx, &held).await?);
        out.down.retain(|h| !changed.up.contains(h));
        out.windows.extend(windows_on(tx, &held, seen_at).await?);
        let bad: Vec<Uuid> = leases
            .iter()
            .flat_map(|l| l.reservations.iter().flat_map(move |r| r.slots.iter().map(move |s| (l, s))))
            .filter(|(l, s)| out.hit(l, s).is_some())
            .map(|(_, s)| s.consumer)
            .collect();
        lock::consumers(tx, &bad).await?;
        out.drawn.extend(draws_of(tx, &bad).await?.iter().map(|d| d.0));
        let mut providers: Vec<Uuid> = out.down.iter().chain(changed.up).chain(&m_hosts).copied().collect();
        // The hosts read once for every lease, not once per lease: a host
        // failing under a thousand leases would read the cloud a thousand times.
        let wanted_of = |l: &LeaseRecord| -> Vec<Demand> {
            l.reservations.iter().filter_map(|r| demands.get(&r.id).map(|d| replacement(d, 1, r.slots.len()))).collect()
        };
        let any_wanted = leases.iter().any(|l| !wanted_of(l).is_empty());
        if any_wanted && !out.near {
            out.near = super::small::past(tx, placing.small).await?;
        }
        // On a cloud past small, each replacement host is locked as it is
        // chosen (`plan::plan_near`): locking every candidate here would
        // read and lock the whole cloud for one failed host.
        if any_wanted && !out.near {
            let hosts = timelines::hosts(tx, &[], true).await?;
            for l in &leases {
                let wanted = wanted_of(l);
                let items: Vec<Item> = wanted.iter().map(|d| Item::Place(d, Vec::new())).collect();
                providers.extend(candidate_ids_among(&hosts, &l.project_id, &items));
            }
        }
        lock::providers(tx, &providers).await?;
        out.leases.extend(leases);
    }
}

/// Heals every reservation on an unusable host (or marked missing), after
/// recording `first` (the events that change hosts, e.g. `HostDisabled`,
/// as `changed` says) once every lock is held. `seen_at`: as [`lock_all`].
pub(crate) async fn heal_locked(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    first: Vec<Event>,
    changed: Changed<'_>,
    demands: &Demands,
    seen_at: DateTime<Utc>,
    placing: Placing,
) -> Result<Vec<HealOutcome>, StoreError> {
    let locked = lock_all(tx, changed, demands, seen_at, placing).await?;
    if !first.is_empty() {
        record(tx, meta, &first).await?;
    }
    heal_in(tx, meta, &locked, demands).await
}

/// Heals the leases [`lock_all`] locked, once the events that changed the
/// hosts are recorded, at the instant read under the locks.
pub(crate) async fn heal_in(
    tx: &Transaction<'_>,
    meta: &EventMeta,
    locked: &Locked,
    demands: &Demands,
) -> Result<Vec<HealOutcome>, StoreError> {
    let at = locked.at;
    let mut out = Vec::new();
    for lease in &locked.leases {
        let mut events = Vec::new();
        for r in &lease.reservations {
            if let Some(o) = heal_reservation(tx, lease, r, locked, demands, at, &mut events).await? {
                out.push(o);
            }
        }
        let flagged = out.iter().any(|o| o.lease == lease.id && (o.moved > 0 || o.missing > 0));
        if flagged && !lease.degraded {
            events.push(Event::LeaseStatusChanged { id: lease.id, status: lease.status, degraded: true, at });
        }
        if !events.is_empty() {
            // Recorded lease by lease: the next lease's plan sees these holds.
            record(tx, meta, &events).await?;
        }
    }
    Ok(out)
}

/// Heals one reservation, pushing its events; what it did, if anything.
async fn heal_reservation(
    tx: &Transaction<'_>,
    lease: &LeaseRecord,
    r: &ReservationRecord,
    locked: &Locked,
    demands: &Demands,
    at: DateTime<Utc>,
    events: &mut Vec<Event>,
) -> Result<Option<HealOutcome>, StoreError> {
    let hits: Vec<(&Slot, bool)> = r.slots.iter().filter_map(|s| locked.hit(lease, s).map(|heal| (s, heal))).collect();
    let bad: Vec<&Slot> = hits.iter().map(|h| h.0).collect();
    let outcome = |moved, missing| HealOutcome { lease: lease.id, reservation: r.id, moved, missing };
    if bad.is_empty() {
        if r.missing_resources {
            // Its hosts are usable again (re-enabled): nothing is missing.
            events.push(healed(lease, r, Vec::new(), false, at));
            return Ok(Some(outcome(0, 0)));
        }
        return Ok(None);
    }
    let hosts: Vec<Uuid> = bad.iter().map(|s| s.provider).collect();
    let why = if !wants_heal(&r.params) {
        Some("the reservation says heal: false".to_string())
    } else if hits.iter().any(|h| !h.1) {
        Some("its host is reserved for maintenance, without heal".to_string())
    } else if bad.iter().any(|s| locked.drawn.contains(&s.consumer)) {
        Some("a consumer draws from a slot on it".to_string())
    } else {
        match demands.get(&r.id) {
            None => Some("its plugin did not say what it needs".to_string()),
            Some(d) => match place(tx, lease, r, d, &bad, at, locked).await? {
                Ok(moves) => {
                    events.extend(move_events(tx, lease, &moves, at).await?);
                    let n = moves.len();
                    events.push(healed(lease, r, moves, started(lease), at));
                    return Ok(Some(outcome(n, 0)));
                }
                Err(why) => Some(why),
            },
        }
    };
    let reason = why.unwrap_or_default();
    if !r.missing_resources {
        events.push(Event::ReservationUnhealed { lease: lease.id, reservation: r.id, hosts, reason, at });
    }
    Ok(Some(outcome(0, bad.len())))
}

/// Whether the lease's start has been taken up by a manager: its hosts may
/// be in its pool, so a move is owed an `on_heal` call, and is a change of
/// resources as Blazar counts it.
fn started(lease: &LeaseRecord) -> bool {
    lease.event(LeaseEventType::StartLease).is_some_and(|e| e.status != LeaseEventStatus::Undone)
}

fn healed(lease: &LeaseRecord, r: &ReservationRecord, moves: Vec<SlotMove>, changed: bool, at: DateTime<Utc>) -> Event {
    let hook = (changed && !moves.is_empty()).then(Uuid::new_v4);
    Event::ReservationHealed {
        lease: lease.id,
        reservation: r.id,
        moves,
        missing_resources: false,
        resources_changed: r.resources_changed || changed,
        hook,
        at,
    }
}

/// Places replacements for `bad` over the rest of the lease's window: the
/// moves, or why they do not fit.
async fn place(
    tx: &Transaction<'_>,
    lease: &LeaseRecord,
    r: &ReservationRecord,
    demand: &Demand,
    bad: &[&Slot],
    at: DateTime<Utc>,
    locked: &Locked,
) -> Result<Result<Vec<SlotMove>, String>, StoreError> {
    let cleaning = locked.cleaning;
    let wanted = replacement(demand, bad.len(), r.slots.len());
    let window = Window { start: at.max(lease.start), end: Some(lease.end) };
    let items = [Item::Place(&wanted, Vec::new())];
    let near = if locked.near { plan_near(tx, &lease.project_id, &items, &[window], cleaning).await? } else { None };
    let decided = match near {
        Some(p) => Ok(p),
        None => plan(tx, &lease.project_id, &items, &[window], &[], cleaning).await?,
    };
    let placed = match decided {
        Ok(mut p) => p.pop().and_then(|mut w| w.pop()).unwrap_or_default(),
        Err(u) => return Ok(Err(format!("no other host fits it: {}", u.why))),
    };
    if placed.len() != bad.len() {
        return Ok(Err(format!("only {} of {} hosts fit", placed.len(), bad.len())));
    }
    // Distinct hosts stay distinct from the slots that do not move.
    let stays: HashSet<Uuid> = r.slots.iter().filter(|s| !bad.contains(s)).map(|s| s.provider).collect();
    if matches!(demand, Demand::Slots { affinity: Some(false), .. })
        && placed.iter().any(|p| stays.contains(&p.provider))
    {
        return Ok(Err("no other host fits it apart from its other slots".to_string()));
    }
    Ok(Ok(bad
        .iter()
        .zip(placed)
        .map(|(s, p)| SlotMove { consumer: s.consumer, from: s.provider, to: p.provider, resources: p.resources })
        .collect()))
}

/// Each moved slot's allocations: what it held on the old host until the
/// cut (now, or the lease's start), and its hold on the new host after.
async fn move_events(
    tx: &Transaction<'_>,
    lease: &LeaseRecord,
    moves: &[SlotMove],
    at: DateTime<Utc>,
) -> Result<Vec<Event>, StoreError> {
    let cut = at.max(lease.start);
    let mut out = Vec::new();
    for m in moves {
        let rows = tx
            .query(
                "SELECT provider_uuid, resource_class, used, lower(during) AS start_at, upper(during) AS end_at
                 FROM allocations WHERE consumer_uuid = $1 ORDER BY provider_uuid, resource_class, lower(during)",
                &[&m.consumer],
            )
            .await?;
        let mut allocations: Vec<Allocation> = rows
            .iter()
            .filter_map(|row| {
                let (provider, start): (Uuid, DateTime<Utc>) = (row.get("provider_uuid"), row.get("start_at"));
                let mut end: Option<DateTime<Utc>> = row.get("end_at");
                if provider == m.from {
                    end = Some(end.map_or(cut, |e| e.min(cut)));
                }
                (end.is_none_or(|e| e > start)).then(|| Allocation {
                    provider,
                    resource_class: row.get("resource_class"),
                    used: row.get("used"),
                    window: Window { start, end },
                })
            })
            .collect();
        let window = Window { start: cut, end: Some(lease.end) };
        allocations.extend(m.resources.iter().filter(|(_, used)| **used > 0).map(|(class, used)| Allocation {
            provider: m.to,
            resource_class: class.clone(),
            used: *used,
            window,
        }));
        out.push(slot_replaced(m.consumer, lease, allocations, at));
    }
    Ok(out)
}

/// The reservations a heal would look at (of leases not ended at `at`):
/// (reservation, resource type, parameters), for the caller to ask their
/// plugins what they need.
pub(crate) async fn to_heal(
    c: &impl crate::client::GenericClient,
    changed: Changed<'_>,
    at: DateTime<Utc>,
) -> Result<Vec<(Uuid, String, serde_json::Value)>, StoreError> {
    let (m_hosts, m_start, m_end) = maintenance_params(changed.maintenance);
    let ids: Vec<Uuid> = c
        .query(AFFECTED, &[&changed.down, &at, &m_hosts, &m_start, &m_end])
        .await?
        .iter()
        .map(|r| r.get("lease_id"))
        .collect();
    let rows = c
        .query("SELECT id, resource_type, params FROM reservations WHERE lease_id = ANY($1) ORDER BY id", &[&ids])
        .await?;
    Ok(rows.iter().map(|r| (r.get("id"), r.get("resource_type"), r.get("params"))).collect())
}
