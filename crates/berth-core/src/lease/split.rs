//! Splitting a lease: which slots of its reservations move into a new
//! lease, and the two leases that result. The new lease keeps the window,
//! the lease events' times and the reservations' parameters, with new ids;
//! its reservations ask exactly what moved (a host reservation's `min` and
//! `max`, an instance reservation's `amount`), and the original's shrink by
//! it (`min` and `max` floored at 1). A reservation keeps at least one slot:
//! a split never empties one, nor the lease (moving it all is a transfer).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::record::{LeaseEventRecord, LeaseEventStatus, LeaseRecord, LeaseStatus, ReservationRecord, Slot};
use crate::error::{Error, ErrorCode};

/// Most hosts one reservation of a split may name (more move with `count`).
pub const MAX_SPLIT_HOSTS: usize = 500;

/// What moves out of one reservation: these hosts (by provider uuid or
/// name), or any `count` slots.
#[derive(Debug, Clone, PartialEq)]
pub enum Take {
    Hosts(Vec<String>),
    Count(u32),
}

/// One reservation's part of a split.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitPart {
    pub reservation: Uuid,
    pub take: Take,
}

/// The new lease a split makes: its name, project and user.
#[derive(Debug, Clone)]
pub struct SplitInto<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub project_id: &'a str,
    pub user_id: &'a str,
}

/// A split as decided: the original as it is left, the new lease, and per
/// reservation of the original the slot consumers that moved.
#[derive(Debug, Clone)]
pub struct Split {
    pub kept: LeaseRecord,
    pub made: LeaseRecord,
    pub moved: BTreeMap<Uuid, Vec<Uuid>>,
}

fn refused(detail: String) -> Error {
    Error::conflict(ErrorCode::SplitRefused, detail)
}

/// The slots of `r` that `take` moves; `names`: its providers' names.
fn taken(r: &ReservationRecord, take: &Take, names: &HashMap<Uuid, String>) -> Result<Vec<Slot>, Error> {
    let n = match take {
        Take::Hosts(h) => h.len(),
        Take::Count(c) => usize::try_from(*c).unwrap_or(usize::MAX),
    };
    if n == 0 {
        return Err(Error::invalid(ErrorCode::InvalidLease, format!("reservation {}: move at least one slot", r.id)));
    }
    if n >= r.slots.len() {
        return Err(refused(format!(
            "reservation {} holds {} slots; a split must leave it at least one (moving everything is a transfer)",
            r.id,
            r.slots.len()
        )));
    }
    match take {
        // The last ones, in the order the lease lists them.
        Take::Count(_) => Ok(r.slots[r.slots.len().saturating_sub(n)..].to_vec()),
        Take::Hosts(hosts) => {
            let mut left = r.slots.clone();
            let mut out = Vec::new();
            for h in hosts {
                let matches = |s: &Slot| s.provider.to_string() == *h || names.get(&s.provider) == Some(h);
                let Some(i) = left.iter().position(matches) else {
                    return Err(refused(format!("reservation {} holds no host {h:?} (or names it twice)", r.id)));
                };
                out.push(left.remove(i));
            }
            Ok(out)
        }
    }
}

/// A count parameter as the client gave it (a number or a numeric string).
fn count_of(params: &Value, key: &str) -> Option<i64> {
    match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The parameters of the new reservation (`moved` slots) and of the
/// original (what it keeps), from the original's.
pub fn split_params(resource_type: &str, params: &Value, moved: usize) -> (Value, Value) {
    let (mut made, mut kept) = (params.clone(), params.clone());
    let moved = i64::try_from(moved).unwrap_or(i64::MAX);
    let shrink = |v: Option<i64>| v.map_or(1, |v| v.saturating_sub(moved).max(1));
    if resource_type == "physical:host" {
        let min = count_of(params, "min");
        let max = count_of(params, "max").or(min);
        made["min"] = json!(moved);
        made["max"] = json!(moved);
        kept["min"] = json!(shrink(min));
        kept["max"] = json!(shrink(max));
    } else if let Some(amount) = count_of(params, "amount") {
        made["amount"] = json!(moved);
        kept["amount"] = json!(shrink(Some(amount)));
    }
    (made, kept)
}

/// Splits `lease` as `parts` say, into `into`, at `at`. `names`: the
/// names of the providers its slots hold.
pub fn split(
    lease: &LeaseRecord,
    parts: &[SplitPart],
    names: &HashMap<Uuid, String>,
    into: &SplitInto<'_>,
    at: DateTime<Utc>,
) -> Result<Split, Error> {
    if parts.is_empty() {
        return Err(Error::invalid(ErrorCode::InvalidLease, "a split names at least one reservation"));
    }
    let mut kept = lease.clone();
    let mut reservations = Vec::new();
    let mut moved = BTreeMap::new();
    for part in parts {
        let Some(r) = kept.reservations.iter_mut().find(|r| r.id == part.reservation) else {
            let detail = format!("lease {} has no reservation {}", lease.id, part.reservation);
            return Err(Error::invalid(ErrorCode::InvalidLease, detail));
        };
        if moved.contains_key(&r.id) {
            return Err(Error::invalid(ErrorCode::InvalidLease, format!("reservation {} is named twice", r.id)));
        }
        let slots = taken(r, &part.take, names)?;
        r.slots.retain(|s| !slots.iter().any(|t| t.consumer == s.consumer));
        let (made_params, kept_params) = split_params(&r.resource_type, &r.params, slots.len());
        r.params = kept_params;
        let id = Uuid::new_v4();
        moved.insert(r.id, slots.iter().map(|s| s.consumer).collect());
        reservations.push(ReservationRecord {
            id,
            resource_type: r.resource_type.clone(),
            // A host reservation's pool is its own; others' resource is themselves.
            resource_id: if r.resource_id == r.id { id } else { Uuid::new_v4() },
            status: r.status,
            params: made_params,
            slots,
            created_at: at,
            missing_resources: r.missing_resources,
            resources_changed: r.resources_changed,
        });
    }
    let events = lease
        .events
        .iter()
        .map(|e| LeaseEventRecord {
            id: Uuid::new_v4(),
            event_type: e.event_type,
            time: e.time,
            status: LeaseEventStatus::Undone,
        })
        .collect();
    let made = LeaseRecord {
        id: into.id,
        name: into.name.to_string(),
        project_id: into.project_id.to_string(),
        user_id: into.user_id.to_string(),
        start: lease.start,
        end: lease.end,
        status: LeaseStatus::Pending,
        degraded: lease.degraded,
        recurrence_id: None,
        time_zone: lease.time_zone.clone(),
        reservations,
        events,
    };
    Ok(Split { kept, made, moved })
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // a fixed time and its sum
mod tests {
    use super::*;
    use crate::lease::{new_events, ReservationStatus};
    use chrono::TimeZone;

    fn lease(hosts: usize) -> LeaseRecord {
        let id = Uuid::new_v4();
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let end = now + chrono::Duration::hours(2);
        LeaseRecord {
            id,
            name: "a".into(),
            project_id: "p1".into(),
            user_id: "u".into(),
            start: now,
            end,
            status: LeaseStatus::Pending,
            degraded: false,
            recurrence_id: None,
            time_zone: None,
            reservations: vec![ReservationRecord {
                id: Uuid::new_v4(),
                resource_type: "physical:host".into(),
                resource_id: Uuid::new_v4(),
                status: ReservationStatus::Pending,
                params: json!({"min": 3, "max": "5"}),
                slots: (0..hosts)
                    .map(|_| Slot { consumer: Uuid::new_v4(), provider: Uuid::new_v4(), resources: BTreeMap::new() })
                    .collect(),
                created_at: now,
                missing_resources: false,
                resources_changed: false,
            }],
            events: new_events(now, end, end),
        }
    }

    #[test]
    fn two_hosts_of_five_move_and_the_rest_stay() {
        let l = lease(5);
        let r = &l.reservations[0];
        let names: HashMap<Uuid, String> = HashMap::from([(r.slots[1].provider, "h1".to_string())]);
        let take = Take::Hosts(vec!["h1".into(), r.slots[3].provider.to_string()]);
        let into = SplitInto { id: Uuid::new_v4(), name: "b", project_id: "p1", user_id: "u" };
        let s = split(&l, &[SplitPart { reservation: r.id, take }], &names, &into, l.start).unwrap();
        assert_eq!(s.kept.reservations[0].slots.len(), 3);
        assert_eq!(s.made.reservations[0].slots.len(), 2);
        assert_eq!(s.made.reservations[0].params, json!({"min": 2, "max": 2}));
        assert_eq!(s.kept.reservations[0].params, json!({"min": 1, "max": 3}));
        assert_eq!(s.moved[&r.id], vec![r.slots[1].consumer, r.slots[3].consumer]);
        assert_eq!((s.made.start, s.made.end), (l.start, l.end));
        assert!(s.made.events.iter().zip(&l.events).all(|(a, b)| a.time == b.time && a.id != b.id));
    }

    #[test]
    fn a_split_leaves_each_reservation_a_slot_and_moves_only_its_own_hosts() {
        let l = lease(3);
        let r = l.reservations[0].id;
        let into = SplitInto { id: Uuid::new_v4(), name: "b", project_id: "p1", user_id: "u" };
        let none = HashMap::new();
        for take in [Take::Count(3), Take::Hosts(vec!["nope".into()]), Take::Count(u32::MAX)] {
            let e = split(&l, &[SplitPart { reservation: r, take }], &none, &into, l.start).unwrap_err();
            assert_eq!(e.code, ErrorCode::SplitRefused, "{e}");
        }
        let twice = Take::Hosts(vec![l.reservations[0].slots[0].provider.to_string(); 2]);
        let e = split(&l, &[SplitPart { reservation: r, take: twice }], &none, &into, l.start).unwrap_err();
        assert_eq!(e.code, ErrorCode::SplitRefused);
        let e = split(&l, &[SplitPart { reservation: Uuid::nil(), take: Take::Count(1) }], &none, &into, l.start);
        assert_eq!(e.unwrap_err().code, ErrorCode::InvalidLease);
    }

    #[test]
    fn instance_amounts_split() {
        let (made, kept) = split_params("virtual:instance", &json!({"amount": 4, "vcpus": 2}), 1);
        assert_eq!((made, kept), (json!({"amount": 1, "vcpus": 2}), json!({"amount": 3, "vcpus": 2})));
    }
}
