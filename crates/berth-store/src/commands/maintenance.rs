//! Maintenance windows (Slurm's MAINT): an admin reserves hosts for a
//! window even where leases hold them. Over it the hosts are placed nowhere
//! (`queries::fit` counts a window as more than any host has); the leases
//! it hits are listed, flagged (missing resources, degraded) and, with
//! `heal`, moved to other hosts at once for the rest of their window, in
//! the same transaction (`commands::leases::heal`).

use berth_core::error::ErrorCode;
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::heal::{Demands, HealOutcome, ToHeal};
use super::leases::heal::{heal_locked, to_heal, Changed, Maintenance};
use super::now;
use crate::{Store, StoreError};

/// A maintenance window to schedule.
#[derive(Debug, Clone)]
pub struct NewMaintenance {
    pub hosts: Vec<Uuid>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub heal: bool,
    pub reason: Option<String>,
}

/// A maintenance window as scheduled.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceWindow {
    pub id: Uuid,
    pub hosts: Vec<Uuid>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub heal: bool,
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl NewMaintenance {
    /// Refuses a window without hosts or that ends by its start, before
    /// anything reads it (a range cannot end before it starts).
    fn check(&self) -> Result<(), Error> {
        if self.hosts.is_empty() || self.end <= self.start {
            return Err(Error::invalid(
                ErrorCode::MaintenanceInvalid,
                "a maintenance window needs hosts and start < end",
            ));
        }
        Ok(())
    }

    fn window(&self) -> Window {
        Window { start: self.start, end: Some(self.end) }
    }

    fn changed(&self) -> Changed<'_> {
        let m = Maintenance { hosts: &self.hosts, window: self.window(), heal: self.heal };
        Changed { maintenance: Some(m), ..Default::default() }
    }
}

impl Store {
    /// The reservations a maintenance window would hit (and those waiting
    /// to heal), for their plugins to say what they need.
    pub async fn reservations_hit(&self, new: &NewMaintenance) -> Result<Vec<ToHeal>, Error> {
        new.check()?;
        let c = self.client().await?;
        let at = now(&c).await?;
        Ok(to_heal(&c, new.changed(), at)
            .await?
            .into_iter()
            .map(|(reservation, resource_type, params)| ToHeal { reservation, resource_type, params })
            .collect())
    }

    /// Schedules a maintenance window; what it did to the leases it hit.
    pub async fn schedule_maintenance(
        &self,
        meta: &EventMeta,
        new: &NewMaintenance,
        demands: &Demands,
    ) -> Result<(Uuid, Vec<HealOutcome>), Error> {
        new.check()?;
        crate::tx::command!(self, |tx| {
            let at = now(tx).await?;
            if new.end <= at {
                return Err(Error::invalid(
                    ErrorCode::MaintenanceInvalid,
                    "a maintenance window must end in the future",
                )
                .into());
            }
            let known: i64 = tx
                .query_one("SELECT count(*) AS n FROM hosts WHERE provider_uuid = ANY($1)", &[&new.hosts])
                .await?
                .get("n");
            let mut hosts = new.hosts.clone();
            hosts.sort();
            hosts.dedup();
            if known != hosts.len() as i64 {
                return Err(Error::not_found(ErrorCode::HostNotFound, "a host named is not enrolled").into());
            }
            let id = Uuid::new_v4();
            let first = vec![Event::MaintenanceScheduled {
                id,
                hosts,
                window: new.window(),
                heal: new.heal,
                reason: new.reason.clone(),
                at,
            }];
            Ok((id, heal_locked(tx, meta, first, new.changed(), demands, at, self.placing()).await?))
        })
    }

    /// Maintenance windows not over yet, by start.
    pub async fn maintenance_windows(&self) -> Result<Vec<MaintenanceWindow>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, array_agg(provider_uuid ORDER BY provider_uuid) AS hosts, lower(during) AS start_at,
                        upper(during) AS end_at, heal, reason, created_at
                 FROM maintenance_windows WHERE upper(during) > now()
                 GROUP BY id, during, heal, reason, created_at ORDER BY lower(during), id",
                &[],
            )
            .await
            .map_err(StoreError::from)?;
        Ok(rows
            .iter()
            .map(|r| MaintenanceWindow {
                id: r.get("id"),
                hosts: r.get("hosts"),
                start: r.get("start_at"),
                end: r.get("end_at"),
                heal: r.get("heal"),
                reason: r.get("reason"),
                created_at: r.get("created_at"),
            })
            .collect())
    }

    /// Cancels a maintenance window: its hosts are placed again; what it
    /// flagged heals at the manager's next sweep.
    pub async fn cancel_maintenance(&self, meta: &EventMeta, id: Uuid) -> Result<(), Error> {
        crate::tx::command!(self, |tx| {
            if tx.query_opt("SELECT 1 FROM maintenance_windows WHERE id = $1 LIMIT 1", &[&id]).await?.is_none() {
                return Err(
                    Error::not_found(ErrorCode::MaintenanceNotFound, format!("no maintenance window {id}")).into()
                );
            }
            super::record(tx, meta, &[Event::MaintenanceCancelled { id, at: now(tx).await? }]).await?;
            Ok(())
        })
    }
}
