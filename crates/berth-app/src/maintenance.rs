//! Maintenance windows (Slurm's MAINT): hosts an admin reserves over a
//! window even where leases hold them. Scheduling one asks the plugins
//! what each reservation it hits needs, then flags those (and with `heal`
//! moves them) in the command that schedules it.

use berth_core::dates::parse_date;
use berth_core::error::ErrorCode;
use berth_store::commands::NewMaintenance;
pub use berth_store::commands::{HealOutcome, MaintenanceWindow};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Allowed, App, Caller, Error, Rule};

/// The maintenance use cases, over one [`App`].
pub struct Maintenance<'a> {
    app: &'a App,
}

/// A window to schedule, its dates as the caller wrote them.
pub struct Schedule {
    pub hosts: Vec<Uuid>,
    pub start_date: String,
    pub end_date: String,
    /// Move the leases hit to other hosts at once (default: only flag them).
    pub heal: Option<bool>,
    pub reason: Option<String>,
}

/// A window scheduled: its id, the window as listed (`None` if it is
/// already over), and what it did to each reservation it hit.
pub struct Scheduled {
    pub id: Uuid,
    pub window: Option<MaintenanceWindow>,
    pub hit: Vec<HealOutcome>,
}

fn bad(m: impl Into<String>) -> Error {
    Error::Domain(berth_core::Error::invalid(ErrorCode::MaintenanceInvalid, m))
}

/// `asked` as a window, `now` the database's time.
fn window(asked: Schedule, now: DateTime<Utc>) -> Result<NewMaintenance, Error> {
    if asked.hosts.is_empty() {
        return Err(bad("hosts (a list of host ids) is required"));
    }
    let date = |key: &str, s: &str| -> Result<DateTime<Utc>, Error> { Ok(parse_date(key, s)?.resolve(now)) };
    Ok(NewMaintenance {
        hosts: asked.hosts,
        start: date("start_date", &asked.start_date)?,
        end: date("end_date", &asked.end_date)?,
        heal: asked.heal.unwrap_or(false),
        reason: asked.reason,
    })
}

impl Maintenance<'_> {
    /// Schedules a window: the reservations it hits are flagged, and moved
    /// with `heal`, in the same transaction.
    pub async fn schedule(&self, caller: &Caller<'_>, a: Allowed, asked: Schedule) -> Result<Scheduled, Error> {
        debug_assert_eq!(a.0, Rule::MaintenanceCreate);
        let store = &self.app.store;
        let new = window(asked, store.now().await?)?;
        let demands = self.app.demands_of(&store.reservations_hit(&new).await?).await;
        let (id, hit) = store.schedule_maintenance(&caller.meta(None), &new, &demands).await?;
        let window = store.maintenance_windows().await?.into_iter().find(|w| w.id == id);
        Ok(Scheduled { id, window, hit })
    }

    /// The windows not over yet, by start.
    pub async fn list(&self, caller: &Caller<'_>) -> Result<Vec<MaintenanceWindow>, Error> {
        caller.authorize(Rule::MaintenanceList, crate::Owner::Caller)?;
        Ok(self.app.store.maintenance_windows().await?)
    }

    /// Cancels the window `id`; what it flagged heals at the manager's next sweep.
    pub async fn cancel(&self, caller: &Caller<'_>, a: Allowed, id: Uuid) -> Result<(), Error> {
        debug_assert_eq!(a.0, Rule::MaintenanceDelete);
        Ok(self.app.store.cancel_maintenance(&caller.meta(None), id).await?)
    }
}

impl App {
    /// The maintenance use cases.
    pub fn maintenance(&self) -> Maintenance<'_> {
        Maintenance { app: self }
    }
}
