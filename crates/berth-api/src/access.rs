//! Who may do what: every action of the API has a named rule, with the
//! default Placement or Blazar gives it (Berth's additions in the same
//! spirit), and an operator may override any rule in a policy file
//! (oslo.policy's YAML). A handler asks one question,
//! `state.rules.authorize(&ctx, Action::X, &target)?`; none reads roles
//! itself (the [`Context`] does not even offer them).
//!
//! The rule language itself is berth-policy's; this module only names the
//! rules, because which actions exist is a property of this API.

use berth_policy::{Default, Policy};

use crate::auth::Context;
use crate::error::ApiError;

/// Rules the action rules are written with.
const BASE: &[Default] = &[
    Default { name: "admin", rule: "role:admin", description: "An administrator." },
    Default { name: "service", rule: "role:service", description: "Another OpenStack service (nova, ...)." },
    Default { name: "admin_or_service", rule: "rule:admin or rule:service", description: "Placement's writers." },
    Default {
        name: "project_reader",
        rule: "role:reader and project_id:%(project_id)s",
        description: "A reader (or more: member, admin imply reader) of the target's project.",
    },
    Default {
        name: "project_member",
        rule: "role:member and project_id:%(project_id)s",
        description: "A member of the target's project.",
    },
    Default {
        name: "admin_or_project_reader",
        rule: "rule:admin or rule:project_reader",
        description: "An administrator, or a reader of the target's project.",
    },
    Default {
        name: "admin_or_project_member",
        rule: "rule:admin or rule:project_member",
        description: "An administrator, or a member of the target's project.",
    },
];

macro_rules! actions {
    ($($variant:ident => $name:literal, $rule:literal, $description:literal;)*) => {
        /// An action of the API, named by its rule.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Action { $($variant,)* }

        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$variant,)*];

            /// The rule's name, as policy files and `berthd policy list` say it.
            pub fn name(self) -> &'static str {
                match self { $(Action::$variant => $name,)* }
            }
        }

        const ACTIONS: &[Default] = &[$(Default { name: $name, rule: $rule, description: $description },)*];
    };
}

actions! {
    // Placement: rule for rule Placement's secure-RBAC defaults: admin or
    // service everywhere, a project's usages also to its readers, the
    // reshaper to the service alone.
    ResourceProvidersList => "placement:resource_providers:list", "rule:admin_or_service", "GET /placement/resource_providers";
    ResourceProvidersCreate => "placement:resource_providers:create", "rule:admin_or_service", "POST /placement/resource_providers";
    ResourceProvidersShow => "placement:resource_providers:show", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}";
    ResourceProvidersUpdate => "placement:resource_providers:update", "rule:admin_or_service", "PUT /placement/resource_providers/{uuid}";
    ResourceProvidersDelete => "placement:resource_providers:delete", "rule:admin_or_service", "DELETE /placement/resource_providers/{uuid}";
    InventoriesList => "placement:resource_providers:inventories:list", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/inventories";
    InventoriesCreate => "placement:resource_providers:inventories:create", "rule:admin_or_service", "POST /placement/resource_providers/{uuid}/inventories";
    InventoriesShow => "placement:resource_providers:inventories:show", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/inventories/{resource_class}";
    InventoriesUpdate => "placement:resource_providers:inventories:update", "rule:admin_or_service", "PUT /placement/resource_providers/{uuid}/inventories[/{resource_class}]";
    InventoriesDelete => "placement:resource_providers:inventories:delete", "rule:admin_or_service", "DELETE /placement/resource_providers/{uuid}/inventories[/{resource_class}]";
    ProviderUsages => "placement:resource_providers:usages", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/usages";
    ProviderAllocations => "placement:resource_providers:allocations:list", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/allocations";
    ProviderTraitsList => "placement:resource_providers:traits:list", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/traits";
    ProviderTraitsUpdate => "placement:resource_providers:traits:update", "rule:admin_or_service", "PUT /placement/resource_providers/{uuid}/traits";
    ProviderTraitsDelete => "placement:resource_providers:traits:delete", "rule:admin_or_service", "DELETE /placement/resource_providers/{uuid}/traits";
    AggregatesList => "placement:resource_providers:aggregates:list", "rule:admin_or_service", "GET /placement/resource_providers/{uuid}/aggregates";
    AggregatesUpdate => "placement:resource_providers:aggregates:update", "rule:admin_or_service", "PUT /placement/resource_providers/{uuid}/aggregates";
    ResourceClassesList => "placement:resource_classes:list", "rule:admin_or_service", "GET /placement/resource_classes";
    ResourceClassesCreate => "placement:resource_classes:create", "rule:admin_or_service", "POST /placement/resource_classes";
    ResourceClassesShow => "placement:resource_classes:show", "rule:admin_or_service", "GET /placement/resource_classes/{name}";
    ResourceClassesUpdate => "placement:resource_classes:update", "rule:admin_or_service", "PUT /placement/resource_classes/{name}";
    ResourceClassesDelete => "placement:resource_classes:delete", "rule:admin_or_service", "DELETE /placement/resource_classes/{name}";
    TraitsList => "placement:traits:list", "rule:admin_or_service", "GET /placement/traits";
    TraitsShow => "placement:traits:show", "rule:admin_or_service", "GET /placement/traits/{name}";
    TraitsUpdate => "placement:traits:update", "rule:admin_or_service", "PUT /placement/traits/{name}";
    TraitsDelete => "placement:traits:delete", "rule:admin_or_service", "DELETE /placement/traits/{name}";
    AllocationsList => "placement:allocations:list", "rule:admin_or_service", "GET /placement/allocations/{consumer_uuid}";
    AllocationsManage => "placement:allocations:manage", "rule:admin_or_service", "POST /placement/allocations";
    AllocationsUpdate => "placement:allocations:update", "rule:admin_or_service", "PUT /placement/allocations/{consumer_uuid}";
    AllocationsDelete => "placement:allocations:delete", "rule:admin_or_service", "DELETE /placement/allocations/{consumer_uuid}";
    Usages => "placement:usages", "rule:admin_or_service or rule:project_reader", "GET /placement/usages (target: the project asked about)";
    // Only a compute service reshapes its own tree (Placement's default).
    Reshape => "placement:reshaper:reshape", "rule:service", "POST /placement/reshaper";
    AllocationCandidates => "placement:allocation_candidates:list", "rule:admin_or_service", "GET /placement/allocation_candidates";
    // Blazar: leases are their project's (readers read, members write);
    // hosts are the administrator's.
    LeasesList => "blazar:leases:list", "rule:admin_or_project_reader", "GET /v1/leases (target: the caller's project)";
    LeasesGet => "blazar:leases:get", "rule:admin_or_project_reader", "GET /v1/leases/{id} (target: the lease's project and user)";
    LeasesGetAllProjects => "blazar:leases:get_all_projects", "rule:admin", "See the leases (and their events and host allocations) of every project, not only one's own";
    LeasesCreate => "blazar:leases:create", "rule:admin_or_project_member", "POST /v1/leases (target: the caller's project)";
    LeasesUpdate => "blazar:leases:update", "rule:admin_or_project_member", "PUT /v1/leases/{id}";
    LeasesExtend => "blazar:leases:extend", "rule:blazar:leases:update", "PUT /v1/leases/{id} that moves the end later (checked beside blazar:leases:update)";
    LeasesDelete => "blazar:leases:delete", "rule:admin_or_project_member", "DELETE /v1/leases/{id}";
    LeasesNameAnyInstance => "blazar:leases:name_any_instance", "rule:admin", "Name in a reservation (virtual:instance) instances of any project, not only Placement consumers of one's own";
    HostsList => "blazar:os-hosts:list", "rule:admin", "GET /v1/os-hosts";
    HostsGet => "blazar:os-hosts:get", "rule:admin", "GET /v1/os-hosts/{id}";
    HostsCreate => "blazar:os-hosts:create", "rule:admin", "POST /v1/os-hosts";
    HostsUpdate => "blazar:os-hosts:update", "rule:admin", "PUT /v1/os-hosts/{id}";
    HostsDelete => "blazar:os-hosts:delete", "rule:admin", "DELETE /v1/os-hosts/{id}";
    HostsGetAllocations => "blazar:os-hosts:get_allocations", "rule:admin", "GET /v1/os-hosts/allocations and /v1/os-hosts/{id}/allocation";
    HostsGetProperties => "blazar:os-hosts:get_resource_properties", "rule:admin", "GET /v1/os-hosts/properties";
    HostsGetPrivateProperties => "blazar:os-hosts:get_private_resource_properties", "rule:admin", "GET /v1/os-hosts/properties?all=true: private properties too";
    HostsUpdateProperty => "blazar:os-hosts:update_resource_properties", "rule:admin", "PATCH /v1/os-hosts/properties/{name}";
    // Berth's additions.
    Availability => "berth:availability:advise", "rule:admin_or_project_reader", "POST /v1/availability and POST /v1/offers (target: the caller's project)";
    LeaseExtension => "berth:leases:extension", "rule:blazar:leases:get", "GET /v1/leases/{id}/extension";
    EventsList => "berth:events:list", "rule:admin_or_project_reader", "GET /v1/events and /v1/leases/{id}/events";
    EventsAllProjects => "berth:events:get_all_projects", "rule:admin", "GET /v1/events of every project (project_id of another, or none)";
    EventsRetry => "berth:events:retry", "rule:admin", "POST /v1/events/{id}/retry: an ERROR lease event runs again (target: its lease's project)";
    EventsCancel => "berth:events:cancel", "rule:admin", "POST /v1/events/{id}/cancel: a waiting lease event never fires";
    EventsFire => "berth:events:fire", "rule:admin", "POST /v1/events/{id}/fire: a waiting lease event falls due now";
    LeasesEnd => "berth:leases:end", "rule:admin", "POST /v1/leases/{id}/end: the lease ends now, through its plugins";
    LeasesShare => "berth:leases:share", "rule:admin_or_project_member", "PUT /v1/leases/{id}/shared_with: the projects that may draw from the lease (target: the lease's project and user)";
    LeasesRecover => "berth:leases:recover", "rule:admin", "POST /v1/leases/{id}/recover: a lease out of ERROR";
    LeasesSplit => "berth:leases:split", "rule:admin_or_project_member", "POST /v1/leases/{id}/split: part of a lease not started moves into a new lease";
    LeasesTransfer => "berth:leases:transfer", "rule:admin_or_project_member", "POST /v1/leases/{id}/transfer: the lease offered (or, with berth:leases:transfer_without_consent, moved) to another project";
    LeasesTransferWithoutConsent => "berth:leases:transfer_without_consent", "rule:admin", "Move a lease (or a split's new lease) to another project at once, without its acceptance (checked beside berth:leases:transfer and berth:leases:split)";
    LeasesAcceptTransfer => "berth:leases:accept_transfer", "rule:admin_or_project_member", "POST /v1/leases/{id}/transfer/accept (target: the caller's project, which the offer must name)";
    LeasesWithdrawTransfer => "berth:leases:withdraw_transfer", "rule:admin_or_project_member", "DELETE /v1/leases/{id}/transfer: the offer withdrawn";
    ManagerGet => "berth:manager:get", "rule:admin", "GET /v1/manager";
    ManagerUpdate => "berth:manager:update", "rule:admin", "PUT /v1/manager: pause or resume every manager";
    MaintenanceList => "berth:maintenance:list", "rule:admin", "GET /v1/maintenance";
    LoansList => "berth:loans:list", "rule:admin", "GET /v1/loans: capacity lent to preemptible consumers, and its reclaims";
    MaintenanceCreate => "berth:maintenance:create", "rule:admin", "POST /v1/maintenance: hosts reserved for maintenance over a window; the leases hit are flagged, and moved with heal";
    MaintenanceDelete => "berth:maintenance:delete", "rule:admin", "DELETE /v1/maintenance/{id}";
    LogRead => "berth:log:read", "rule:admin", "GET /v1/log and /v1/log/stream";
    QuotasGet => "berth:quotas:get", "rule:admin_or_project_reader", "GET /v1/quotas/... (target: the project in the path; the defaults: the caller's)";
    QuotasSet => "berth:quotas:set", "rule:admin", "PUT /v1/quotas/...";
    QuotasDelete => "berth:quotas:delete", "rule:admin", "DELETE /v1/quotas/...";
    QuotasUsage => "berth:quotas:usage", "rule:admin_or_project_reader", "GET /v1/quotas/projects/{project_id}[/users/{user_id}]/usage";
    PluginsList => "blazar:plugins:get", "rule:admin_or_project_reader", "GET /v1/plugins";
    PluginsSchema => "berth:plugins:schema", "@", "GET /v1/plugins/schema (any authenticated caller: the protocol is public)";
    MetricsRead => "berth:metrics:read", "rule:admin", "GET /metrics (unless the configuration makes it anonymous)";
    // The console: its files are public, what it shows is each route's rule.
    ConsoleAssets => "berth:console:assets", "@", "GET /ui and its files (the console; every answer it shows has its own rule)";
    Login => "berth:login", "@", "GET and POST /v1/login (a Keystone login on a user's behalf)";
    Whoami => "berth:whoami", "@", "GET /v1/whoami (who the token is, and what the console may show)";
    CalendarGet => "berth:calendar:get", "rule:admin_or_project_reader", "GET /v1/calendar (target: the caller's project; others' bars say only reserved unless blazar:leases:get_all_projects)";
}

/// Every rule with its default: the base rules, then one per action.
pub fn defaults() -> impl Iterator<Item = &'static Default> {
    BASE.iter().chain(ACTIONS)
}

/// What an action is done to, as rules see it (`%(project_id)s`, `%(user_id)s`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    pub project_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// Something of `project`.
    pub fn project(project: &'a str) -> Self {
        Target { project_id: Some(project), user_id: None }
    }
    /// Something of `project` and `user` (a lease, a user's quota).
    pub fn owned(project: &'a str, user: &'a str) -> Self {
        Target { project_id: Some(project), user_id: Some(user) }
    }
    /// Something of the caller's own project, as Placement and Blazar
    /// check actions that name no project.
    pub fn own(ctx: &'a Context) -> Self {
        Target::owned(&ctx.project_id, &ctx.user_id)
    }
}

impl berth_policy::Target for Target<'_> {
    fn attribute(&self, name: &str) -> Option<&str> {
        match name {
            "project_id" => self.project_id,
            "user_id" => self.user_id,
            _ => None,
        }
    }
}

/// The rules in force: the defaults with the operator's overrides.
#[derive(Debug, Clone)]
pub struct Rules {
    policy: Policy,
}

impl Rules {
    pub fn defaults() -> Rules {
        let all: Vec<Default> = defaults().copied().collect();
        Rules { policy: Policy::new(&all).expect("the default rules parse and refer to rules that exist") }
    }

    /// The defaults with a policy file's rules in their place.
    pub fn with_file(yaml: &str) -> Result<Rules, berth_policy::FileError> {
        let all: Vec<Default> = defaults().copied().collect();
        Ok(Rules { policy: Policy::with_overrides(&all, yaml)? })
    }

    /// The rule names a policy file replaced.
    pub fn overridden(&self) -> &[String] {
        self.policy.overridden()
    }

    /// Whether `ctx` may do `action` to `target`. Every rule is
    /// project-scoped: a system-scoped caller is refused before any.
    pub fn allows(&self, ctx: &Context, action: Action, target: &Target<'_>) -> bool {
        !ctx.is_system_scoped() && self.policy.check(action.name(), ctx, target)
    }

    /// 403 unless `ctx` may do `action` to `target` (Blazar's error
    /// document; Placement's handlers ask through their request type).
    /// An anonymous caller the rule does not admit gets 401, not 403.
    pub fn authorize(&self, ctx: &Context, action: Action, target: &Target<'_>) -> Result<(), ApiError> {
        if self.allows(ctx, action, target) {
            Ok(())
        } else if ctx.is_anonymous() {
            Err(ApiError::unauthenticated())
        } else {
            tracing::debug!(rule = action.name(), user = %ctx.user_id, project = %ctx.project_id, "policy denies");
            Err(ApiError::forbidden())
        }
    }

    /// Which project's things `ctx` sees: `None` for every project when it
    /// passes `all_projects`, else its own.
    pub fn visible_project<'c>(&self, ctx: &'c Context, all_projects: Action) -> Option<&'c str> {
        (!self.allows(ctx, all_projects, &Target::own(ctx))).then_some(ctx.project_id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_has_a_distinct_rule_and_the_defaults_parse() {
        let rules = Rules::defaults();
        let mut names: Vec<&str> = defaults().map(|d| d.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a rule name is used twice");
        let admin = Context::new("root", "p1", vec!["admin".into(), "member".into(), "reader".into()]);
        let service = Context::new("nova", "service", vec!["service".into()]);
        for a in Action::ALL {
            // The admin passes every default rule but the service's own: none
            // refers to a missing rule or says "!".
            let service_only = [Action::Reshape].contains(a);
            assert_eq!(rules.allows(&admin, *a, &Target::project("p2")), !service_only, "{}", a.name());
            if service_only {
                assert!(rules.allows(&service, *a, &Target::project("p2")), "{}", a.name());
            }
        }
    }
}
