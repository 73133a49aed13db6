//! Who asks: the caller of an operation, the questions an operation asks
//! of the access rules, and how an operation refuses.

use berth_core::EventMeta;

/// The rules an operation asks (the edge maps each to its named rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    LeasesCreate,
    LeasesGet,
    LeasesList,
    LeasesGetAllProjects,
    LeasesUpdate,
    LeasesExtend,
    LeasesDelete,
    LeasesEnd,
    LeasesRecover,
    LeasesNameAnyInstance,
    LeasesShare,
    LeasesSplit,
    LeasesTransfer,
    LeasesTransferWithoutConsent,
    LeasesAcceptTransfer,
    LeasesWithdrawTransfer,
    HostsGet,
    HostsCreate,
    HostsUpdate,
    HostsDelete,
    HostsGetAllocations,
    HostsGetPrivateProperties,
    HostsUpdateProperty,
    HostsList,
    HostsGetProperties,
    MaintenanceCreate,
    MaintenanceList,
    LoansList,
    MaintenanceDelete,
    Availability,
    LeaseExtension,
    PluginsList,
    PluginsSchema,
    EventsList,
    EventsAllProjects,
    EventsRetry,
    EventsCancel,
    EventsFire,
    ManagerGet,
    ManagerUpdate,
    QuotasGet,
    QuotasSet,
    QuotasDelete,
    QuotasUsage,
    LogRead,
    CalendarGet,
    /// One of Placement's.
    Placement(PlacementRule),
}

/// Placement's rules, one per action (the edge maps each to its named rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementRule {
    ProvidersList,
    ProvidersCreate,
    ProvidersShow,
    ProvidersUpdate,
    ProvidersDelete,
    InventoriesList,
    InventoriesCreate,
    InventoriesShow,
    InventoriesUpdate,
    InventoriesDelete,
    ProviderUsages,
    ProviderAllocations,
    ProviderTraitsList,
    ProviderTraitsUpdate,
    ProviderTraitsDelete,
    AggregatesList,
    AggregatesUpdate,
    ClassesList,
    ClassesCreate,
    ClassesShow,
    ClassesUpdate,
    ClassesDelete,
    TraitsList,
    TraitsShow,
    TraitsUpdate,
    TraitsDelete,
    AllocationsList,
    AllocationsManage,
    AllocationsUpdate,
    AllocationsDelete,
    Usages,
    Reshape,
    AllocationCandidates,
}

/// Whose thing a rule is asked about.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// The caller's own (its project and user).
    Caller,
    /// A project's and a user's.
    Owned { project: &'a str, user: &'a str },
    /// The project and user a request names, either of them perhaps not.
    Asked { project: Option<&'a str>, user: Option<&'a str> },
    /// A project's (no user's).
    Project(&'a str),
}

/// The access rules as they apply to one caller: the edge knows the
/// caller's roles and the rule file, the operation only asks.
pub trait Gate: Send + Sync {
    /// Whether the caller may follow `rule` on `owner`'s thing.
    fn allows(&self, rule: Rule, owner: Owner<'_>) -> bool;
    /// Why not, as the caller is told ([`Error::Unauthenticated`] for an
    /// anonymous caller, [`Error::Forbidden`] otherwise).
    fn refusal(&self, rule: Rule) -> Error;
    /// The rule's name, as policy files say it (an operator's control is
    /// logged as caused by it).
    fn name(&self, rule: Rule) -> &'static str;
}

/// Who asks for an operation: the identity the edge authenticated, its
/// access rules, and the request's id (for the log).
pub struct Caller<'a> {
    pub user_id: &'a str,
    pub project_id: &'a str,
    pub request_id: String,
    pub gate: Box<dyn Gate + 'a>,
}

/// The caller may follow a rule: asked before the request is read (its
/// refusal comes before any complaint about the request), passed to the
/// operation that follows it.
#[derive(Debug, Clone, Copy)]
pub struct Allowed(pub(crate) Rule);

impl Caller<'_> {
    /// Whether the caller may follow `rule` on its own things at all.
    pub fn may(&self, rule: Rule) -> Result<Allowed, Error> {
        self.authorize(rule, Owner::Caller)?;
        Ok(Allowed(rule))
    }

    /// Ok when the caller may follow `rule` on `owner`'s thing.
    pub fn authorize(&self, rule: Rule, owner: Owner<'_>) -> Result<(), Error> {
        if self.gate.allows(rule, owner) {
            Ok(())
        } else {
            Err(self.gate.refusal(rule))
        }
    }

    /// Which project's things the caller sees: `None` for every project
    /// when it passes `all_projects`, else its own.
    pub fn visible_project(&self, all_projects: Rule) -> Option<&str> {
        (!self.gate.allows(all_projects, Owner::Caller)).then_some(self.project_id)
    }

    /// Who did it, for the log; `causation` names an operator's control.
    pub fn meta(&self, causation: Option<&str>) -> EventMeta {
        EventMeta {
            actor: Some(self.user_id.to_string()),
            project: Some(self.project_id.to_string()),
            request_id: Some(self.request_id.clone()),
            causation: causation.map(str::to_string),
        }
    }
}

/// How an operation refuses: a domain error, or the caller's access.
#[derive(Debug)]
pub enum Error {
    Domain(berth_core::Error),
    /// An anonymous caller the rule does not admit.
    Unauthenticated,
    /// The rules do not let the caller do this.
    Forbidden,
}

impl From<berth_core::Error> for Error {
    fn from(e: berth_core::Error) -> Error {
        Error::Domain(e)
    }
}
