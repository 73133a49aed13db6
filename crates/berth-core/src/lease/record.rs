//! A lease as the log carries it: the lease, its reservations and their
//! slots, its three lease events, and the statuses each of them goes
//! through (written as Blazar writes them).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::query::Query;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LeaseStatus {
    Pending,
    Starting,
    Active,
    Updating,
    Terminating,
    Terminated,
    Deleting,
    Error,
}

impl LeaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseStatus::Pending => "PENDING",
            LeaseStatus::Starting => "STARTING",
            LeaseStatus::Active => "ACTIVE",
            LeaseStatus::Updating => "UPDATING",
            LeaseStatus::Terminating => "TERMINATING",
            LeaseStatus::Terminated => "TERMINATED",
            LeaseStatus::Deleting => "DELETING",
            LeaseStatus::Error => "ERROR",
        }
    }

    pub fn parse(s: &str) -> Option<LeaseStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_uppercase())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseEventType {
    StartLease,
    BeforeEndLease,
    EndLease,
}

impl LeaseEventType {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseEventType::StartLease => "start_lease",
            LeaseEventType::BeforeEndLease => "before_end_lease",
            LeaseEventType::EndLease => "end_lease",
        }
    }
    pub fn parse(s: &str) -> Option<LeaseEventType> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LeaseEventStatus {
    Undone,
    InProgress,
    Done,
    Error,
    /// An operator cancelled it before it ran: it never fires.
    Cancelled,
}

impl LeaseEventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseEventStatus::Undone => "UNDONE",
            LeaseEventStatus::InProgress => "IN_PROGRESS",
            LeaseEventStatus::Done => "DONE",
            LeaseEventStatus::Error => "ERROR",
            LeaseEventStatus::Cancelled => "CANCELLED",
        }
    }
    pub fn parse(s: &str) -> Option<LeaseEventStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReservationStatus {
    Pending,
    Active,
    Deleted,
    Error,
}

impl ReservationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationStatus::Pending => "pending",
            ReservationStatus::Active => "active",
            ReservationStatus::Deleted => "deleted",
            ReservationStatus::Error => "error",
        }
    }
    pub fn parse(s: &str) -> Option<ReservationStatus> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

/// One placed unit of a reservation: a consumer that holds `resources` on
/// `provider` over the lease's window (a whole host, or one instance slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub consumer: Uuid,
    pub provider: Uuid,
    pub resources: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationRecord {
    pub id: Uuid,
    pub resource_type: String,
    /// The pool (a Placement aggregate) for host reservations; the
    /// reservation's own id otherwise.
    pub resource_id: Uuid,
    pub status: ReservationStatus,
    /// The reservation's parameters as the client gave them.
    pub params: serde_json::Value,
    pub slots: Vec<Slot>,
    pub created_at: DateTime<Utc>,
    /// Blazar's flag: some of its slots are on hosts that became unusable
    /// and could not be (or, with `"heal": false`, were not) moved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing_resources: bool,
    /// Blazar's flag: a slot was moved to another host after the lease
    /// started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources_changed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseEventRecord {
    pub id: Uuid,
    pub event_type: LeaseEventType,
    pub time: DateTime<Utc>,
    pub status: LeaseEventStatus,
}

/// A lease as its log events carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub id: Uuid,
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub status: LeaseStatus,
    pub degraded: bool,
    /// Leases booked together by one recurring request share this id.
    pub recurrence_id: Option<Uuid>,
    /// The IANA zone its recurrence's schedule was read in; None where the
    /// request named none (UTC), and for a lease that does not recur. Logs
    /// written before zones lack it: UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    pub reservations: Vec<ReservationRecord>,
    pub events: Vec<LeaseEventRecord>,
}

/// What a reservation needs, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Demand {
    /// Between `min` and `max` whole hosts free over the whole window.
    Hosts { min: u32, max: u32, hypervisor_properties: Option<Query>, resource_properties: Option<Query> },
    /// `amount` slots of `resources`; `affinity` true: one host, false:
    /// distinct hosts, None: any; on hosts whose traits match `traits`
    /// (a flavor's; empty for `virtual:instance`).
    Slots {
        amount: u32,
        resources: BTreeMap<String, i64>,
        affinity: Option<bool>,
        resource_properties: Option<Query>,
        traits: crate::flavor::Traits,
    },
    /// Nothing held in Berth's inventory.
    Nothing,
}

impl Demand {
    /// The same demand asking exactly `n` hosts (or slots); `Nothing` as it is.
    pub fn exactly(&self, n: u32) -> Demand {
        match self {
            Demand::Hosts { hypervisor_properties, resource_properties, .. } => Demand::Hosts {
                min: n,
                max: n,
                hypervisor_properties: hypervisor_properties.clone(),
                resource_properties: resource_properties.clone(),
            },
            Demand::Slots { resources, affinity, resource_properties, traits, .. } => Demand::Slots {
                amount: n,
                resources: resources.clone(),
                affinity: *affinity,
                resource_properties: resource_properties.clone(),
                traits: traits.clone(),
            },
            Demand::Nothing => Demand::Nothing,
        }
    }
}

impl AsRef<Demand> for Demand {
    fn as_ref(&self) -> &Demand {
        self
    }
}

/// The three lease events of a new lease.
pub fn new_events(start: DateTime<Utc>, before_end: DateTime<Utc>, end: DateTime<Utc>) -> Vec<LeaseEventRecord> {
    [(LeaseEventType::StartLease, start), (LeaseEventType::BeforeEndLease, before_end), (LeaseEventType::EndLease, end)]
        .into_iter()
        .map(|(event_type, time)| LeaseEventRecord {
            id: Uuid::new_v4(),
            event_type,
            time,
            status: LeaseEventStatus::Undone,
        })
        .collect()
}

impl LeaseRecord {
    pub fn event(&self, t: LeaseEventType) -> Option<&LeaseEventRecord> {
        self.events.iter().find(|e| e.event_type == t)
    }

    /// Started: its start event left UNDONE, its status left PENDING, or
    /// its start time has come.
    pub fn has_started(&self, now: DateTime<Utc>) -> bool {
        self.status != LeaseStatus::Pending
            || self.event(LeaseEventType::StartLease).is_some_and(|e| e.status != LeaseEventStatus::Undone)
            || self.start <= now
    }

    /// Ended: terminated, its end event done, or its end has passed.
    pub fn has_ended(&self, now: DateTime<Utc>) -> bool {
        matches!(self.status, LeaseStatus::Terminated | LeaseStatus::Terminating)
            || self.event(LeaseEventType::EndLease).is_some_and(|e| e.status == LeaseEventStatus::Done)
            || self.end <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_read_and_write_as_blazar_does() {
        assert_eq!(serde_json::to_value(LeaseStatus::Pending).unwrap(), "PENDING");
        assert_eq!(LeaseStatus::parse("active"), Some(LeaseStatus::Active));
        assert_eq!(serde_json::to_value(LeaseEventStatus::InProgress).unwrap(), "IN_PROGRESS");
        assert_eq!(LeaseEventStatus::parse("CANCELLED"), Some(LeaseEventStatus::Cancelled));
        assert_eq!(serde_json::to_value(LeaseEventType::BeforeEndLease).unwrap(), "before_end_lease");
        assert_eq!(ReservationStatus::parse("pending"), Some(ReservationStatus::Pending));
    }
}
