//! The store's refusals in Placement's words: its clients and its own test
//! suite compare these messages, so each is Placement's to the letter.

use berth_core::error::Refusal;

/// A generation as Placement prints one: `null` for a consumer that is new.
fn generation(g: Option<i64>) -> String {
    g.map_or_else(|| "null".into(), |g| g.to_string())
}

/// What the client is told of `r`.
pub fn of(r: &Refusal) -> String {
    use Refusal as R;
    match r {
        R::NoProvider { provider } => format!("No resource provider with uuid {provider} found"),
        R::ProviderNameLength => "provider name must be 1 to 200 characters".into(),
        R::ParentIsSelf => "parent provider UUID cannot be same as UUID. \
                            Please set parent provider UUID to None if there is no parent."
            .into(),
        R::NoParent { .. } => "parent provider UUID does not exist.".into(),
        R::ProviderUuidTaken { provider } => format!("Conflicting resource provider uuid: {provider} already exists."),
        R::ProviderNameTaken { name } => format!("Conflicting resource provider name: {name} already exists."),
        R::RenameTaken { name } => format!("Conflicting resource provider {name} already exists."),
        R::Reparent { unparenting: true } => "un-parenting a provider is not currently allowed.".into(),
        R::Reparent { unparenting: false } => "re-parenting a provider is not currently allowed.".into(),
        R::ProviderLoop => "creating loop in the provider tree is not allowed.".into(),
        R::ParentWithChildren { provider } => {
            format!("Unable to delete parent resource provider {provider}: It has child resource providers.")
        }
        R::ProviderHasAllocations { provider } => {
            format!("Unable to delete resource provider {provider}: Resource provider has allocations.")
        }
        R::ProviderGeneration { provider, expected, actual } => {
            format!("resource provider generation conflict: {provider} is at generation {actual}, not {expected}")
        }
        R::ReshapeGeneration { provider, expected, actual } => {
            format!(
                "resource provider generation conflict for provider {provider}: actual: {actual}, given: {expected}"
            )
        }
        R::ReshapedProviderMissing { provider } => format!("Resource provider {provider} in inventories not found"),
        R::InventoryExists { provider, class } => {
            format!("resource provider {provider} already has inventory of {class}")
        }
        R::NoInventory { class } => format!("No inventory of class {class} found."),
        R::InventoryCapacity { provider, class, zero_allowed } => format!(
            "Invalid inventory for '{class}' on resource provider '{provider}'. The reserved value is greater than {}total.",
            if *zero_allowed { "" } else { "or equal to " }
        ),
        R::InventoryInUse { provider, classes } => {
            format!("Inventory for '{}' on resource provider '{provider}' in use.", classes.join(", "))
        }
        R::NoResourceClass { class } => format!("No such resource class {class}."),
        R::NotCustomClass { name } => {
            format!("resource class {name:?} must be CUSTOM_ and upper-case letters, digits or _")
        }
        R::NotCustomTrait { name } => format!("trait {name:?} must be CUSTOM_ and upper-case letters, digits or _"),
        R::ResourceClassExists { class } => format!("Conflicting resource class already exists: {class}"),
        R::RenameToExisting { class } => format!("Resource class already exists: {class}"),
        R::StandardClassUpdate { class } => format!("Cannot update standard resource class {class}"),
        R::StandardClassDelete { class } => format!("Cannot delete standard resource class {class}."),
        R::ResourceClassInUse { class } => {
            format!("Cannot delete resource class {class}. Class is in use in inventory.")
        }
        R::NoTraits { names } => format!("No such trait(s): {}.", names.join(", ")),
        R::NoTraitsToSet { names } => format!("No such trait {}", names.join(", ")),
        R::StandardTraitDelete { name } => format!("Cannot delete standard trait {name}."),
        R::TraitInUse { name } => format!("The trait {name} is in use by a resource provider."),
        R::ConsumerGeneration { current, given, made } => consumer_generation(*current, *given, *made),
        R::ConsumerTwice { consumer } => format!("consumer {consumer} appears twice"),
        R::AmountBelowOne { provider, class, used } => {
            format!("allocation of {class} on {provider} must be at least 1, got {used}")
        }
        R::AllocationProviderMissing { provider } => {
            format!("Allocation for resource provider '{provider}' that does not exist.")
        }
        R::NoInventoryFor { provider, class } => {
            format!("Inventory for '{class}' on resource provider '{provider}' invalid.")
        }
        R::AmountOutsideInventory { provider, class } => format!(
            "Unable to create allocation for '{class}' on resource provider '{provider}'. \
             The requested amount would violate inventory constraints."
        ),
        R::OverCapacity { provider, class } => format!(
            "Unable to create allocation for '{class}' on resource provider '{provider}'. \
             The requested amount would exceed the capacity."
        ),
        R::NoAllocations { consumer } => format!("No allocations for consumer '{consumer}'"),
    }
}

/// Placement's words for a stale consumer generation; `made`: Berth's note
/// that the consumer is as this very request leaves it.
fn consumer_generation(current: Option<i64>, given: Option<i64>, made: bool) -> String {
    let (current, given) = (generation(current), generation(given));
    let made = if made {
        "; the consumer holds exactly these allocations at the generation after the one given: an earlier \
         attempt of this request was made"
    } else {
        ""
    };
    format!("consumer generation conflict - expected {current} but got {given}{made}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_consumer_has_the_generation_null() {
        let r = Refusal::ConsumerGeneration { current: None, given: Some(3), made: false };
        assert_eq!(of(&r), "consumer generation conflict - expected null but got 3");
    }

    #[test]
    fn classes_in_use_are_listed_in_the_order_given() {
        let provider = uuid::Uuid::nil();
        let r = Refusal::InventoryInUse { provider, classes: vec!["VCPU".into(), "DISK_GB".into()] };
        assert_eq!(
            of(&r),
            "Inventory for 'VCPU, DISK_GB' on resource provider '00000000-0000-0000-0000-000000000000' in use."
        );
    }

    #[test]
    fn an_inventory_with_nothing_to_allocate_is_worded_by_version() {
        let refusal = |zero_allowed| Refusal::InventoryCapacity {
            provider: uuid::Uuid::nil(),
            class: "VCPU".into(),
            zero_allowed,
        };
        let start = "Invalid inventory for 'VCPU' on resource provider '00000000-0000-0000-0000-000000000000'. ";
        assert_eq!(of(&refusal(true)), format!("{start}The reserved value is greater than total."));
        assert_eq!(of(&refusal(false)), format!("{start}The reserved value is greater than or equal to total."));
    }
}
