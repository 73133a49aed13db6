//! What a Placement command refused, as facts about its data: which
//! provider, generation, class, consumer. The store builds them; the API
//! words them (Placement's messages, which its clients and its own test
//! suite compare), so the store knows no API's wording.

use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    // Providers.
    NoProvider {
        provider: Uuid,
    },
    ProviderNameLength,
    ParentIsSelf,
    NoParent {
        parent: Uuid,
    },
    ProviderUuidTaken {
        provider: Uuid,
    },
    ProviderNameTaken {
        name: String,
    },
    /// A rename to a name another provider has.
    RenameTaken {
        name: String,
    },
    /// Re-parenting (or, with no new parent, un-parenting) before 1.37.
    Reparent {
        unparenting: bool,
    },
    ProviderLoop,
    ParentWithChildren {
        provider: Uuid,
    },
    ProviderHasAllocations {
        provider: Uuid,
    },
    /// A generation the client sent for a provider it changes.
    ProviderGeneration {
        provider: Uuid,
        expected: i64,
        actual: i64,
    },
    /// A generation the client sent for a provider it reshapes.
    ReshapeGeneration {
        provider: Uuid,
        expected: i64,
        actual: i64,
    },
    ReshapedProviderMissing {
        provider: Uuid,
    },

    // Inventories.
    InventoryExists {
        provider: Uuid,
        class: String,
    },
    NoInventory {
        class: String,
    },
    /// An inventory with nothing to allocate: reserved above total, or
    /// (`zero_allowed` false, before Placement 1.26) equal to it.
    InventoryCapacity {
        provider: Uuid,
        class: String,
        zero_allowed: bool,
    },
    /// Classes dropped from a provider's inventories that are still allocated.
    InventoryInUse {
        provider: Uuid,
        classes: Vec<String>,
    },

    // Resource classes and traits.
    NoResourceClass {
        class: String,
    },
    NotCustomClass {
        name: String,
    },
    NotCustomTrait {
        name: String,
    },
    ResourceClassExists {
        class: String,
    },
    /// A rename to a class that exists.
    RenameToExisting {
        class: String,
    },
    StandardClassUpdate {
        class: String,
    },
    StandardClassDelete {
        class: String,
    },
    ResourceClassInUse {
        class: String,
    },
    NoTraits {
        names: Vec<String>,
    },
    /// Traits set on a provider that do not exist.
    NoTraitsToSet {
        names: Vec<String>,
    },
    StandardTraitDelete {
        name: String,
    },
    TraitInUse {
        name: String,
    },

    // Allocations.
    /// The consumer's generation is `current` (none: a new consumer), the
    /// client sent `given`; `made`: it is the one after `given` and the
    /// consumer holds exactly what was asked, so an earlier attempt of this
    /// very request was made (its answer lost, `berth.outcome_unknown`).
    ConsumerGeneration {
        current: Option<i64>,
        given: Option<i64>,
        made: bool,
    },
    ConsumerTwice {
        consumer: Uuid,
    },
    AmountBelowOne {
        provider: Uuid,
        class: String,
        used: i64,
    },
    AllocationProviderMissing {
        provider: Uuid,
    },
    NoInventoryFor {
        provider: Uuid,
        class: String,
    },
    /// An amount outside the inventory's min, max or step.
    AmountOutsideInventory {
        provider: Uuid,
        class: String,
    },
    OverCapacity {
        provider: Uuid,
        class: String,
    },
    NoAllocations {
        consumer: Uuid,
    },
}
