//! Leases: create, update and delete, each one transaction that places every
//! reservation over the lease's window or changes nothing.
//!
//! Placing ([`plan`]): the enrolled hosts that match a reservation are its
//! candidates. Their provider rows are locked in uuid order, then only the
//! allocations overlapping the window are read (the `allocations_timeline`
//! GiST index), plus the nearest hold before and after it for best fit.
//! A new lease reads the same without locks first and locks only the hosts
//! it chose, checking them again under the lock (`plan::plan_new`), so
//! creations on different hosts do not queue behind each other.
//! berth-core's scheduler chooses; each slot (a whole host, or one instance
//! slot) becomes a consumer whose allocations hold over the window
//! ([`slots`]), written with `AllocationsReplaced` beside the lease's own
//! event.
//!
//! Healing ([`heal`]) re-places reservations off unusable hosts with the
//! same `plan`. A lease not started may be split ([`split`]) or handed to
//! another project ([`transfer`]); its slots keep their holds.

mod control;
mod create;
mod delete;
pub(crate) mod heal;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod heal_many_tests;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod heal_tests;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod near_tests;
mod plan;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod plan_cache_tests;
mod share;
mod slots;
pub(crate) mod small;
#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)] // the tests' own sums, of small known times
mod spans_tests;
mod split;
mod transfer;
mod update;

pub(crate) use small::SmallCloud;
pub use split::SplitAsk;
pub use transfer::Handover;

use berth_core::dates::DateSpec;
use berth_core::error::ErrorCode;
use berth_core::lease::Demand;
use berth_core::Error;
use chrono::{DateTime, Utc};
use deadpool_postgres::Transaction;
use serde_json::Value;
use uuid::Uuid;

use crate::queries::leases::{load_leases, visible, Lease};
use crate::{lock, StoreError};

/// The consumer type of a reservation's slots.
pub const SLOT_CONSUMER_TYPE: &str = "RESERVATION";

/// A reservation as the plugin resolved it.
#[derive(Debug, Clone)]
pub struct NewReservation {
    pub resource_type: String,
    /// The parameters as the client gave them (shown back as they are).
    pub params: Value,
    pub demand: Demand,
}

/// What advice needs of a reservation (`Store::availability`).
impl AsRef<Demand> for NewReservation {
    fn as_ref(&self) -> &Demand {
        &self.demand
    }
}

#[derive(Debug, Clone)]
pub enum LeaseDates {
    One {
        start: DateSpec,
        end: DateSpec,
        before_end: Option<DateTime<Utc>>,
    },
    /// A recurring lease: one lease per occurrence, booked all or nothing;
    /// the IANA zone its schedule was read in, kept on each lease (None:
    /// UTC, as none was named).
    Recurring {
        occurrences: Vec<(DateTime<Utc>, DateTime<Utc>)>,
        time_zone: Option<String>,
    },
}

impl LeaseDates {
    /// The zone a recurrence's schedule was read in, where it named one.
    pub fn time_zone(&self) -> Option<&str> {
        match self {
            LeaseDates::Recurring { time_zone, .. } => time_zone.as_deref(),
            LeaseDates::One { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewLease {
    pub name: String,
    pub project_id: String,
    pub user_id: String,
    pub dates: LeaseDates,
    pub reservations: Vec<NewReservation>,
}

/// A reservation's new parameters in an update.
#[derive(Debug, Clone)]
pub struct ReservationUpdate {
    pub id: Uuid,
    pub params: Value,
    pub demand: Demand,
}

#[derive(Debug, Clone, Default)]
pub struct LeaseUpdate {
    pub name: Option<String>,
    pub start: Option<DateSpec>,
    pub end: Option<DateSpec>,
    pub before_end: Option<DateTime<Utc>>,
    pub reservations: Vec<ReservationUpdate>,
}

/// The first of `$2`, names, that a lease of project `$1` (other than `$3`)
/// has.
const NAME_TAKEN: &str =
    "SELECT name FROM leases WHERE project_id = $1 AND name = ANY($2) AND ($3::uuid IS NULL OR id <> $3) LIMIT 1";

/// Refuses `names` when a lease of `project` (other than `except`) has one.
async fn check_name_free(
    tx: &Transaction<'_>,
    project: &str,
    names: &[String],
    except: Option<Uuid>,
) -> Result<(), StoreError> {
    let taken = crate::sql::query(tx, NAME_TAKEN, &[&project, &names, &except]).await?;
    Ok(name_free(taken.first())?)
}

/// Refuses the name [`NAME_TAKEN`] found, if any.
fn name_free(taken: Option<&tokio_postgres::Row>) -> Result<(), Error> {
    if let Some(r) = taken {
        let name: String = r.get("name");
        return Err(Error::conflict(ErrorCode::DuplicateLeaseName, format!("a lease named {name:?} already exists")));
    }
    Ok(())
}

/// Locks the lease's row (first in `crate::lock`'s order) and reads it
/// whole: not found unless `project` (None: admin) may see it.
async fn lock_lease(tx: &Transaction<'_>, id: Uuid, project: Option<&str>) -> Result<Lease, StoreError> {
    lock::lease(tx, id).await?;
    let mut found = load_leases(tx, &[id]).await?;
    Ok(visible(found.pop(), id, project)?)
}
