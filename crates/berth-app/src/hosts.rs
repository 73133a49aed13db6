//! The host use cases: enrol, show, change (disabling or enabling a host
//! heals the reservations on it, their demands asked of their plugins
//! first), remove, which reservations hold one, and a capability made
//! private or public.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::ErrorCode;
use berth_core::lease::heal::wants_heal;
use berth_core::EventMeta;
pub use berth_store::commands::HealOutcome;
use berth_store::commands::ToHeal;
use berth_store::commands::{Demands, HostChange, Keyed, NewHost, RequestKey, HOST_FIELDS};
use berth_store::queries::hosts::AllocationFilter;
pub use berth_store::queries::hosts::{Host, HostAllocation, HostProperty};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::{App, Caller, Error, Owner, Rule};

/// The host use cases, over one [`App`].
pub struct Hosts<'a> {
    pub(crate) app: &'a App,
}

pub use crate::Allowed;

/// A host to enrol: an existing provider by name, or a new one with all
/// its sizes.
pub struct Enrol {
    pub name: String,
    pub vcpus: Option<i64>,
    pub memory_mb: Option<i64>,
    pub local_gb: Option<i64>,
    pub reservable: Option<bool>,
    pub capabilities: Map<String, Value>,
    /// The caller's key for this enrolment, if it sent one.
    pub key: Option<RequestKey>,
}

/// A change of a host: reservable, disabled, extra capabilities (`null`
/// removes one).
pub struct Change {
    pub reservable: Option<bool>,
    pub disabled: Option<bool>,
    pub capabilities: Map<String, Value>,
}

fn bad(m: impl Into<String>) -> Error {
    Error::Domain(berth_core::Error::invalid(ErrorCode::HostInvalid, m))
}

impl Hosts<'_> {
    /// Whether the caller may follow `rule` (a host rule) at all.
    pub fn may(&self, caller: &Caller<'_>, rule: Rule) -> Result<Allowed, Error> {
        caller.may(rule)
    }

    /// The capabilities the caller may not see: the private ones, unless
    /// its rules let it (admins, as Blazar hides them from everyone else).
    pub async fn hidden(&self, caller: &Caller<'_>) -> Result<BTreeSet<String>, Error> {
        if caller.gate.allows(Rule::HostsGetPrivateProperties, Owner::Caller) {
            return Ok(BTreeSet::new());
        }
        Ok(self.app.store.private_host_properties().await?)
    }

    /// The host `id`, and the capabilities the caller may not see.
    pub async fn show(&self, caller: &Caller<'_>, a: Allowed, id: Uuid) -> Result<(Host, BTreeSet<String>), Error> {
        debug_assert_eq!(a.0, Rule::HostsGet);
        let hidden = self.hidden(caller).await?;
        Ok((self.app.store.host(id).await?, hidden))
    }

    /// Enrols a host; the host, and whether an earlier request with the
    /// same key enrolled it.
    pub async fn enrol(&self, caller: &Caller<'_>, a: Allowed, asked: Enrol) -> Result<(Host, bool), Error> {
        debug_assert_eq!(a.0, Rule::HostsCreate);
        let resources = match (asked.vcpus, asked.memory_mb, asked.local_gb) {
            (Some(v), Some(m), Some(d)) => Some((v, m, d)),
            (None, None, None) => None,
            _ => return Err(bad("give all of vcpus, memory_mb and local_gb, or none")),
        };
        let capabilities: BTreeMap<String, Value> =
            asked.capabilities.into_iter().filter(|(k, _)| !HOST_FIELDS.contains(&k.as_str())).collect();
        let reservable = asked.reservable.unwrap_or(true);
        let new = NewHost { name: asked.name, resources, reservable, capabilities };
        let meta = caller.meta(None);
        let (id, replayed) = match asked.key {
            None => (self.app.store.enrol_host(&meta, new).await?, false),
            Some(key) => match self.app.store.enrol_host_keyed(&meta, new, &key).await? {
                Keyed::Made(id) => (id, false),
                Keyed::Earlier(id) => (id, true),
            },
        };
        Ok((self.app.store.host(id).await?, replayed))
    }

    /// Changes the host `id`; disabling (or enabling) it heals in the same
    /// transaction. The host after, and what the heal did.
    pub async fn change(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        id: Uuid,
        asked: Change,
    ) -> Result<(Host, Vec<HealOutcome>), Error> {
        debug_assert_eq!(a.0, Rule::HostsUpdate);
        let mut change = HostChange { reservable: asked.reservable, capabilities: BTreeMap::new() };
        for (k, v) in asked.capabilities {
            if HOST_FIELDS.contains(&k.as_str()) {
                return Err(bad(format!("{k} cannot be changed here")));
            }
            change.capabilities.insert(k, v);
        }
        if change.reservable.is_none() && change.capabilities.is_empty() && asked.disabled.is_none() {
            return Err(bad("nothing to update"));
        }
        let meta = caller.meta(None);
        if change.reservable.is_some() || !change.capabilities.is_empty() {
            self.app.store.update_host(&meta, id, change).await?;
        }
        let mut healed = Vec::new();
        if let Some(disabled) = asked.disabled {
            let demands = self.app.heal_demands(&[id]).await?;
            let reason = Some("admin".to_string());
            healed = self.app.store.set_host_disabled(&meta, id, disabled, reason, &demands).await?;
        }
        Ok((self.app.store.host(id).await?, healed))
    }

    /// Removes a host no current or future lease holds.
    pub async fn remove(&self, caller: &Caller<'_>, a: Allowed, id: Uuid) -> Result<(), Error> {
        debug_assert_eq!(a.0, Rule::HostsDelete);
        Ok(self.app.store.remove_host(&caller.meta(None), id).await?)
    }

    /// Which reservations the caller sees hold the host `id` (optionally
    /// one lease's, or one reservation).
    pub async fn allocation(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        id: Uuid,
        (lease, reservation): (Option<Uuid>, Option<Uuid>),
    ) -> Result<HostAllocation, Error> {
        debug_assert_eq!(a.0, Rule::HostsGetAllocations);
        let project = caller.visible_project(Rule::LeasesGetAllProjects);
        Ok(self.app.store.host_allocation(id, AllocationFilter { lease, reservation, project }).await?)
    }

    /// Makes the capability `name` private or public; the values hosts give it.
    pub async fn set_property(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        name: &str,
        private: bool,
    ) -> Result<Vec<Value>, Error> {
        debug_assert_eq!(a.0, Rule::HostsUpdateProperty);
        self.app.store.set_host_property(&caller.meta(None), name, private).await?;
        let found = self.app.store.host_properties(true).await?.into_iter().find(|p| p.name == name);
        Ok(found.map(|p| p.values).unwrap_or_default())
    }
}

/// Which hosts' allocations a list shows: one lease's or one
/// reservation's, and only the caller's project's unless it sees every
/// project's leases (decided by [`Hosts::allocations_of`]).
#[derive(Debug, Clone)]
pub struct AllocationsOf {
    pub lease: Option<Uuid>,
    pub reservation: Option<Uuid>,
    project: Option<String>,
}

/// Which capabilities a list shows: private ones too only when asked by a
/// caller whose rules let it see them (decided by [`Hosts::properties_of`]).
#[derive(Debug, Clone, Copy)]
pub struct PropertiesOf {
    all: bool,
    /// With whether each is private and its values.
    pub detail: bool,
}

/// The host lists, a page at a time (after a host's or a capability's name).
impl Hosts<'_> {
    /// The name of the host `id`, where a list goes on after it; `None`
    /// when there is no such host.
    pub async fn name_of(&self, id: Uuid) -> Result<Option<String>, Error> {
        Ok(self.app.store.host_name(id).await?)
    }

    /// The hosts by name, after `after`.
    pub async fn page(&self, a: Allowed, after: Option<&str>, limit: i64) -> Result<Vec<Host>, berth_core::Error> {
        debug_assert_eq!(a.0, Rule::HostsList);
        self.app.store.hosts(after, limit).await
    }

    /// The allocations a list asks for (`lease`, `reservation`), as the caller sees them.
    pub fn allocations_of(
        &self,
        caller: &Caller<'_>,
        a: Allowed,
        (lease, reservation): (Option<Uuid>, Option<Uuid>),
    ) -> AllocationsOf {
        debug_assert_eq!(a.0, Rule::HostsGetAllocations);
        let project = caller.visible_project(Rule::LeasesGetAllProjects).map(str::to_string);
        AllocationsOf { lease, reservation, project }
    }

    /// The hosts by name with the reservations `of` selects, after `after`.
    pub async fn allocations_page(
        &self,
        of: &AllocationsOf,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<HostAllocation>, berth_core::Error> {
        let filter = AllocationFilter { lease: of.lease, reservation: of.reservation, project: of.project.as_deref() };
        self.app.store.host_allocations(after, limit, filter).await
    }

    /// The capabilities a list shows: private ones too when `all` is asked
    /// and the caller may see them.
    pub fn properties_of(&self, caller: &Caller<'_>, a: Allowed, all: bool, detail: bool) -> PropertiesOf {
        debug_assert_eq!(a.0, Rule::HostsGetProperties);
        let all = all && caller.gate.allows(Rule::HostsGetPrivateProperties, Owner::Caller);
        PropertiesOf { all, detail }
    }

    /// Whether the capability `name` is in the list `of` (a marker names it).
    pub async fn property_listed(&self, of: PropertiesOf, name: &str) -> Result<bool, Error> {
        Ok(self.app.store.host_property_listed(name, of.all).await?)
    }

    /// The capabilities by name, after `after`.
    pub async fn properties_page(
        &self,
        of: PropertiesOf,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<HostProperty>, berth_core::Error> {
        self.app.store.host_properties_after(after, limit, of.all, of.detail).await
    }
}

impl App {
    /// The host use cases.
    pub fn hosts(&self) -> Hosts<'_> {
        Hosts { app: self }
    }

    /// The demands of every reservation a heal over the hosts `down` would
    /// look at, asked of their plugins before the command that heals (a
    /// plugin may be outside, over its driver).
    pub async fn heal_demands(&self, down: &[Uuid]) -> Result<Demands, berth_core::Error> {
        Ok(self.demands_of(&self.store.reservations_to_heal(down).await?).await)
    }

    /// Heals again what is still on unusable hosts or missing resources,
    /// when some such reservation may be healed (the manager's sweep):
    /// what it did, `None` when nothing may be healed.
    pub async fn heal_waiting(&self, meta: &EventMeta) -> Result<Option<Vec<HealOutcome>>, berth_core::Error> {
        let waiting = self.store.reservations_to_heal(&[]).await?;
        if !waiting.iter().any(|r| wants_heal(&r.params)) {
            return Ok(None);
        }
        let demands = self.demands_of(&waiting).await;
        Ok(Some(self.store.heal(meta, &demands).await?))
    }

    /// What each of `reservations` needs, asked of its plugin.
    pub(crate) async fn demands_of(&self, reservations: &[ToHeal]) -> Demands {
        let mut out = Demands::new();
        for r in reservations {
            if let Some(d) = self.plugins.demand_of(&r.resource_type, &r.params).await {
                out.insert(r.reservation, d);
            }
        }
        out
    }
}
