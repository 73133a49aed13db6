//! The operations' questions of the access rules, answered for one caller:
//! each [`berth_app::Rule`] is one named [`Action`], and a refusal is said
//! as [`Rules::authorize`] says it.

use berth_app::placement::Rule as PlacementRule;
use berth_app::{Caller, Gate, Owner, Rule};

use crate::access::{Action, Rules, Target};
use crate::auth::Context;
use crate::error::{current_request_id, ApiError};
use crate::AppState;

/// The caller of an operation: who `ctx` is, under `state`'s rules.
pub(crate) fn caller<'a>(state: &'a AppState, ctx: &'a Context) -> Caller<'a> {
    caller_under(&state.rules, ctx)
}

/// The caller of an operation: who `ctx` is, under `rules`.
pub(crate) fn caller_under<'a>(rules: &'a Rules, ctx: &'a Context) -> Caller<'a> {
    Caller {
        user_id: &ctx.user_id,
        project_id: &ctx.project_id,
        request_id: current_request_id(),
        gate: Box::new(Asking { rules, ctx }),
    }
}

/// The operations over `state`'s store, plugins and policy.
pub(crate) fn app(state: &AppState) -> berth_app::App {
    state.app.clone()
}

struct Asking<'a> {
    rules: &'a Rules,
    ctx: &'a Context,
}

fn action(rule: Rule) -> Action {
    match rule {
        Rule::LeasesCreate => Action::LeasesCreate,
        Rule::LeasesGet => Action::LeasesGet,
        Rule::LeasesList => Action::LeasesList,
        Rule::LeasesGetAllProjects => Action::LeasesGetAllProjects,
        Rule::LeasesUpdate => Action::LeasesUpdate,
        Rule::LeasesExtend => Action::LeasesExtend,
        Rule::LeasesDelete => Action::LeasesDelete,
        Rule::LeasesShare => Action::LeasesShare,
        Rule::LeasesEnd => Action::LeasesEnd,
        Rule::LeasesRecover => Action::LeasesRecover,
        Rule::LeasesNameAnyInstance => Action::LeasesNameAnyInstance,
        Rule::LeasesSplit => Action::LeasesSplit,
        Rule::LeasesTransfer => Action::LeasesTransfer,
        Rule::LeasesTransferWithoutConsent => Action::LeasesTransferWithoutConsent,
        Rule::LeasesAcceptTransfer => Action::LeasesAcceptTransfer,
        Rule::LeasesWithdrawTransfer => Action::LeasesWithdrawTransfer,
        Rule::HostsGet => Action::HostsGet,
        Rule::HostsCreate => Action::HostsCreate,
        Rule::HostsUpdate => Action::HostsUpdate,
        Rule::HostsDelete => Action::HostsDelete,
        Rule::HostsGetAllocations => Action::HostsGetAllocations,
        Rule::HostsGetPrivateProperties => Action::HostsGetPrivateProperties,
        Rule::HostsUpdateProperty => Action::HostsUpdateProperty,
        Rule::HostsList => Action::HostsList,
        Rule::HostsGetProperties => Action::HostsGetProperties,
        Rule::MaintenanceCreate => Action::MaintenanceCreate,
        Rule::MaintenanceList => Action::MaintenanceList,
        Rule::LoansList => Action::LoansList,
        Rule::MaintenanceDelete => Action::MaintenanceDelete,
        Rule::Availability => Action::Availability,
        Rule::LeaseExtension => Action::LeaseExtension,
        Rule::PluginsList => Action::PluginsList,
        Rule::PluginsSchema => Action::PluginsSchema,
        Rule::EventsList => Action::EventsList,
        Rule::EventsAllProjects => Action::EventsAllProjects,
        Rule::EventsRetry => Action::EventsRetry,
        Rule::EventsCancel => Action::EventsCancel,
        Rule::EventsFire => Action::EventsFire,
        Rule::ManagerGet => Action::ManagerGet,
        Rule::ManagerUpdate => Action::ManagerUpdate,
        Rule::QuotasGet => Action::QuotasGet,
        Rule::QuotasSet => Action::QuotasSet,
        Rule::QuotasDelete => Action::QuotasDelete,
        Rule::QuotasUsage => Action::QuotasUsage,
        Rule::LogRead => Action::LogRead,
        Rule::CalendarGet => Action::CalendarGet,
        Rule::Placement(rule) => placement_action(rule),
    }
}

/// The named rule of each of Placement's.
fn placement_action(rule: PlacementRule) -> Action {
    match rule {
        PlacementRule::ProvidersList => Action::ResourceProvidersList,
        PlacementRule::ProvidersCreate => Action::ResourceProvidersCreate,
        PlacementRule::ProvidersShow => Action::ResourceProvidersShow,
        PlacementRule::ProvidersUpdate => Action::ResourceProvidersUpdate,
        PlacementRule::ProvidersDelete => Action::ResourceProvidersDelete,
        PlacementRule::InventoriesList => Action::InventoriesList,
        PlacementRule::InventoriesCreate => Action::InventoriesCreate,
        PlacementRule::InventoriesShow => Action::InventoriesShow,
        PlacementRule::InventoriesUpdate => Action::InventoriesUpdate,
        PlacementRule::InventoriesDelete => Action::InventoriesDelete,
        PlacementRule::ProviderUsages => Action::ProviderUsages,
        PlacementRule::ProviderAllocations => Action::ProviderAllocations,
        PlacementRule::ProviderTraitsList => Action::ProviderTraitsList,
        PlacementRule::ProviderTraitsUpdate => Action::ProviderTraitsUpdate,
        PlacementRule::ProviderTraitsDelete => Action::ProviderTraitsDelete,
        PlacementRule::AggregatesList => Action::AggregatesList,
        PlacementRule::AggregatesUpdate => Action::AggregatesUpdate,
        PlacementRule::ClassesList => Action::ResourceClassesList,
        PlacementRule::ClassesCreate => Action::ResourceClassesCreate,
        PlacementRule::ClassesShow => Action::ResourceClassesShow,
        PlacementRule::ClassesUpdate => Action::ResourceClassesUpdate,
        PlacementRule::ClassesDelete => Action::ResourceClassesDelete,
        PlacementRule::TraitsList => Action::TraitsList,
        PlacementRule::TraitsShow => Action::TraitsShow,
        PlacementRule::TraitsUpdate => Action::TraitsUpdate,
        PlacementRule::TraitsDelete => Action::TraitsDelete,
        PlacementRule::AllocationsList => Action::AllocationsList,
        PlacementRule::AllocationsManage => Action::AllocationsManage,
        PlacementRule::AllocationsUpdate => Action::AllocationsUpdate,
        PlacementRule::AllocationsDelete => Action::AllocationsDelete,
        PlacementRule::Usages => Action::Usages,
        PlacementRule::Reshape => Action::Reshape,
        PlacementRule::AllocationCandidates => Action::AllocationCandidates,
    }
}

impl Asking<'_> {
    fn target<'t>(&'t self, owner: Owner<'t>) -> Target<'t> {
        match owner {
            Owner::Caller => Target::own(self.ctx),
            Owner::Owned { project, user } => Target::owned(project, user),
            Owner::Asked { project, user } => Target { project_id: project, user_id: user },
            Owner::Project(project) => Target::project(project),
        }
    }
}

impl Gate for Asking<'_> {
    fn allows(&self, rule: Rule, owner: Owner<'_>) -> bool {
        self.rules.allows(self.ctx, action(rule), &self.target(owner))
    }

    fn refusal(&self, rule: Rule) -> berth_app::Error {
        let ctx = self.ctx;
        if ctx.is_anonymous() {
            berth_app::Error::Unauthenticated
        } else {
            let name = action(rule).name();
            tracing::debug!(rule = name, user = %ctx.user_id, project = %ctx.project_id, "policy denies");
            berth_app::Error::Forbidden
        }
    }

    fn name(&self, rule: Rule) -> &'static str {
        action(rule).name()
    }
}

/// An operation's refusal in the route's document.
impl From<berth_app::Error> for ApiError {
    fn from(e: berth_app::Error) -> ApiError {
        match e {
            berth_app::Error::Domain(e) => e.into(),
            berth_app::Error::Unauthenticated => ApiError::unauthenticated(),
            berth_app::Error::Forbidden => ApiError::forbidden(),
        }
    }
}
