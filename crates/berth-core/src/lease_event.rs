//! Firing lease events: what a hook may ask Berth to record, and how a lease
//! and its reservations follow the outcome of their lease events. Pure; the
//! manager decides with these rules and the store records the result.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, ErrorCode};
use crate::lease::{LeaseEventStatus, LeaseEventType, LeaseRecord, LeaseStatus, ReservationStatus};

/// What an operator does to one lease event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// ERROR → UNDONE, attempts reset, due now.
    Retry,
    /// UNDONE → CANCELLED: it never fires; the lease goes on.
    Cancel,
    /// UNDONE, due now.
    Fire,
}

impl Control {
    pub fn as_str(self) -> &'static str {
        match self {
            Control::Retry => "retry",
            Control::Cancel => "cancel",
            Control::Fire => "fire",
        }
    }

    /// Whether a lease event in `status` may take this control.
    pub fn check(self, event: Uuid, status: LeaseEventStatus) -> Result<(), Error> {
        match (self, status) {
            (Control::Retry, LeaseEventStatus::Error) => Ok(()),
            (Control::Retry, s) => Err(Error::conflict(
                ErrorCode::LeaseEventNotInError,
                format!("lease event {event} is {}: only an event in ERROR can be retried", s.as_str()),
            )),
            (Control::Cancel | Control::Fire, LeaseEventStatus::Undone) => Ok(()),
            (c, s) => Err(Error::conflict(
                ErrorCode::LeaseEventNotPending,
                format!("lease event {event} is {}: only an UNDONE event can be {}", s.as_str(), c.done()),
            )),
        }
    }

    fn done(self) -> &'static str {
        match self {
            Control::Retry => "retried",
            Control::Cancel => "cancelled",
            Control::Fire => "fired",
        }
    }
}

/// Where a lease in ERROR goes once an operator has fixed the world: as if
/// its events that ran had succeeded. Its end ran (done, failed or
/// cancelled): TERMINATED, reservations deleted; its start has not run:
/// PENDING; else ACTIVE. Never degraded. Refused while the lease is not in
/// ERROR or one of its events is running.
pub fn recovered(lease: &LeaseRecord) -> Result<(LeaseStatus, ReservationStatus), Error> {
    if lease.status != LeaseStatus::Error {
        return Err(Error::conflict(
            ErrorCode::LeaseNotInError,
            format!("lease {} is {}: only a lease in ERROR can be recovered", lease.id, lease.status.as_str()),
        ));
    }
    if lease.events.iter().any(|e| e.status == LeaseEventStatus::InProgress) {
        return Err(Error::conflict(
            ErrorCode::LeaseEventRunning,
            format!("an event of lease {} is running; recover it once the event has finished", lease.id),
        ));
    }
    let waiting = |t| lease.event(t).is_some_and(|e| e.status == LeaseEventStatus::Undone);
    Ok(if !waiting(LeaseEventType::EndLease) {
        (LeaseStatus::Terminated, ReservationStatus::Deleted)
    } else if waiting(LeaseEventType::StartLease) {
        (LeaseStatus::Pending, ReservationStatus::Pending)
    } else {
        (LeaseStatus::Active, ReservationStatus::Active)
    })
}

/// Hosts returned with the `shared` end policy wait here, not reservable,
/// until an admin returns them to the free pool.
pub const SHARED_POOL: Uuid = Uuid::from_u128(0x6265_7274_6873_6861_7265_6470_6f6f_0002);
/// Hosts returned with the `recycle` end policy wait here, not reservable,
/// until their other allocations are gone or their grace period has passed.
pub const RECYCLE_POOL: Uuid = Uuid::from_u128(0x6265_7274_6872_6563_7963_6c65_6f6f_0003);

/// What a hook asks Berth to record beside its lease event's outcome. The
/// plugin decides; the manager records these through store commands (a
/// plugin never touches the database).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    /// Hosts leave every pool in `leave` and join `join` (pools are
    /// Placement aggregates).
    MoveHosts { hosts: Vec<Uuid>, leave: Vec<Uuid>, join: Option<Uuid> },
    /// These consumers are gone (instances deleted on released hosts): every
    /// allocation they hold is deleted.
    DeleteConsumers { consumers: Vec<Uuid> },
    /// Hosts become reservable again, or not.
    SetReservable { hosts: Vec<Uuid>, reservable: bool },
    /// Hosts held back at a lease's end in `pool` (not reservable), until
    /// `until`, or for `for_s` seconds after the outcome is recorded (on the
    /// database's clock, so a plugin needs no clock of its own), or, with
    /// neither, until an admin returns them.
    HoldHosts {
        hosts: Vec<Uuid>,
        pool: Uuid,
        until: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        for_s: Option<u64>,
    },
    /// Hosts no longer held back.
    ReleaseHolds { hosts: Vec<Uuid> },
    /// The plugin found these hosts failed: they become unusable (as an
    /// admin's disable) and the manager heals what they hold.
    FailHosts { hosts: Vec<Uuid>, reason: String },
}

/// The hosts a hook's answer reports failed: `"failed_hosts"`, a list of
/// host ids or of `{"uuid", "reason"}`; any hook of any plugin may carry it.
pub fn reported_failures(answer: &serde_json::Value) -> Option<Effect> {
    let list = answer.get("failed_hosts")?.as_array()?;
    let mut hosts = Vec::new();
    let mut reasons = Vec::new();
    for h in list {
        let (id, reason) = match h {
            serde_json::Value::String(s) => (s.as_str(), None),
            o => (o.get("uuid").and_then(serde_json::Value::as_str).unwrap_or_default(), o.get("reason")),
        };
        if let Ok(id) = Uuid::parse_str(id) {
            hosts.push(id);
            reasons.extend(reason.and_then(serde_json::Value::as_str).map(String::from));
        }
    }
    let reason = if reasons.is_empty() { "failed".to_string() } else { reasons.join("; ") };
    (!hosts.is_empty()).then_some(Effect::FailHosts { hosts, reason: format!("plugin: {reason}") })
}

/// One reservation's hook in one attempt, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookResult {
    pub reservation: Uuid,
    pub resource_type: String,
    pub ok: bool,
    /// The hook's answer when it succeeded, its error message when not.
    pub detail: serde_json::Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<Effect>,
}

/// Which lease events run first among those due at once: a lease's end
/// (and before-end) frees hosts that another lease's start takes.
pub fn priority(t: LeaseEventType) -> i32 {
    match t {
        LeaseEventType::EndLease => 0,
        LeaseEventType::BeforeEndLease => 1,
        LeaseEventType::StartLease => 2,
    }
}

/// Where a lease and its reservations stand after one of its lease events
/// finished. `ok` per reservation (in the lease's order); `done`: the event
/// as a whole succeeded. Returns the lease's status and degraded flag, and
/// each reservation's status.
pub fn after_event(
    status: LeaseStatus,
    degraded: bool,
    event: LeaseEventType,
    done: bool,
    ok: &[bool],
) -> (LeaseStatus, bool, Vec<Option<ReservationStatus>>) {
    let some_failed = ok.iter().any(|o| !o);
    let some_stand = ok.iter().any(|o| *o);
    match event {
        LeaseEventType::StartLease => {
            let reservations = ok
                .iter()
                .map(|o| Some(if *o { ReservationStatus::Active } else { ReservationStatus::Error }))
                .collect();
            if done {
                (LeaseStatus::Active, degraded, reservations)
            } else if some_stand {
                // Part of the lease stands: it runs, degraded.
                (LeaseStatus::Active, true, reservations)
            } else {
                (LeaseStatus::Error, degraded, reservations)
            }
        }
        // A failed warning leaves the lease standing.
        LeaseEventType::BeforeEndLease => (status, degraded || !done, ok.iter().map(|_| None).collect()),
        LeaseEventType::EndLease => {
            let reservations = ok
                .iter()
                .map(|o| Some(if *o { ReservationStatus::Deleted } else { ReservationStatus::Error }))
                .collect();
            if done {
                (LeaseStatus::Terminated, degraded, reservations)
            } else {
                (LeaseStatus::Error, degraded || some_failed, reservations)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_follows_its_events() {
        let (s, d, r) = after_event(LeaseStatus::Pending, false, LeaseEventType::StartLease, true, &[true, true]);
        assert_eq!((s, d), (LeaseStatus::Active, false));
        assert_eq!(r, vec![Some(ReservationStatus::Active); 2]);
        let (s, d, r) = after_event(LeaseStatus::Pending, false, LeaseEventType::StartLease, false, &[true, false]);
        assert_eq!((s, d), (LeaseStatus::Active, true));
        assert_eq!(r[1], Some(ReservationStatus::Error));
        let (s, _, _) = after_event(LeaseStatus::Pending, false, LeaseEventType::StartLease, false, &[false]);
        assert_eq!(s, LeaseStatus::Error);
        let (s, d, r) = after_event(LeaseStatus::Active, false, LeaseEventType::BeforeEndLease, false, &[false]);
        assert_eq!((s, d, r), (LeaseStatus::Active, true, vec![None]));
        let (s, _, r) = after_event(LeaseStatus::Active, false, LeaseEventType::EndLease, true, &[true]);
        assert_eq!((s, r), (LeaseStatus::Terminated, vec![Some(ReservationStatus::Deleted)]));
        let (s, _, _) = after_event(LeaseStatus::Active, false, LeaseEventType::EndLease, false, &[false]);
        assert_eq!(s, LeaseStatus::Error);
        // A lease with no reservations starts and ends like any other.
        assert_eq!(
            after_event(LeaseStatus::Pending, false, LeaseEventType::StartLease, true, &[]).0,
            LeaseStatus::Active
        );
    }

    #[test]
    fn controls_take_only_the_states_they_are_for() {
        let id = Uuid::nil();
        assert!(Control::Retry.check(id, LeaseEventStatus::Error).is_ok());
        assert_eq!(Control::Retry.check(id, LeaseEventStatus::Done).unwrap_err().code, ErrorCode::LeaseEventNotInError);
        for c in [Control::Cancel, Control::Fire] {
            assert!(c.check(id, LeaseEventStatus::Undone).is_ok());
            for s in [LeaseEventStatus::InProgress, LeaseEventStatus::Done, LeaseEventStatus::Cancelled] {
                assert_eq!(c.check(id, s).unwrap_err().code, ErrorCode::LeaseEventNotPending);
            }
        }
    }

    #[test]
    fn a_recovered_lease_goes_where_its_events_say() {
        let t = chrono::DateTime::<Utc>::UNIX_EPOCH;
        let mut lease = LeaseRecord {
            id: Uuid::nil(),
            name: "l".into(),
            project_id: "p".into(),
            user_id: "u".into(),
            start: t,
            end: t,
            status: LeaseStatus::Active,
            degraded: false,
            recurrence_id: None,
            time_zone: None,
            reservations: vec![],
            events: crate::lease::new_events(t, t, t),
        };
        assert_eq!(recovered(&lease).unwrap_err().code, ErrorCode::LeaseNotInError);
        lease.status = LeaseStatus::Error;
        assert_eq!(recovered(&lease).unwrap(), (LeaseStatus::Pending, ReservationStatus::Pending));
        lease.events[0].status = LeaseEventStatus::Error;
        assert_eq!(recovered(&lease).unwrap(), (LeaseStatus::Active, ReservationStatus::Active));
        lease.events[2].status = LeaseEventStatus::InProgress;
        assert_eq!(recovered(&lease).unwrap_err().code, ErrorCode::LeaseEventRunning);
        lease.events[2].status = LeaseEventStatus::Error;
        assert_eq!(recovered(&lease).unwrap(), (LeaseStatus::Terminated, ReservationStatus::Deleted));
    }

    #[test]
    fn ends_come_before_starts() {
        let mut v = [LeaseEventType::StartLease, LeaseEventType::EndLease, LeaseEventType::BeforeEndLease];
        v.sort_by_key(|t| priority(*t));
        assert_eq!(v, [LeaseEventType::EndLease, LeaseEventType::BeforeEndLease, LeaseEventType::StartLease]);
    }

    #[test]
    fn effects_read_and_write_as_tagged_objects() {
        let e = Effect::HoldHosts { hosts: vec![Uuid::nil()], pool: SHARED_POOL, until: None, for_s: Some(60) };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["effect"], "hold_hosts");
        assert_eq!(serde_json::from_value::<Effect>(v).unwrap(), e);
    }
}
