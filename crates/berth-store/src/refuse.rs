//! The refusals Placement's commands and queries share, each with its kind
//! and code; the facts go in a [`Refusal`] and the API words them.

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::names::in_standard_order;
use berth_core::Error;
use uuid::Uuid;

/// A request Placement refuses with its catch-all 400.
pub(crate) fn invalid(r: Refusal) -> Error {
    Error::refused(ErrorKind::Invalid, ErrorCode::Invalid, r)
}

/// A name or uuid another provider or class has.
pub(crate) fn duplicate(r: Refusal) -> Error {
    Error::refused(ErrorKind::Conflict, ErrorCode::DuplicateName, r)
}

/// A generation the client sent that moved.
pub(crate) fn generation(r: Refusal) -> Error {
    Error::refused(ErrorKind::Conflict, ErrorCode::ConcurrentUpdate, r)
}

/// No provider with that uuid.
pub(crate) fn no_provider(provider: Uuid) -> Error {
    Error::refused(ErrorKind::NotFound, ErrorCode::NotFound, Refusal::NoProvider { provider })
}

/// A request names a class that does not exist (400).
pub(crate) fn no_class(class: &str) -> Error {
    Error::refused(
        ErrorKind::Invalid,
        ErrorCode::ResourceClassNotFound,
        Refusal::NoResourceClass { class: class.to_string() },
    )
}

/// Classes still allocated on `provider` that a change would drop.
pub(crate) fn inventory_in_use(provider: Uuid, classes: impl IntoIterator<Item = String>) -> Error {
    let classes = in_standard_order(classes);
    Error::refused(ErrorKind::InUse, ErrorCode::InventoryInUse, Refusal::InventoryInUse { provider, classes })
}

/// An allocation the provider cannot take.
pub(crate) fn capacity(r: Refusal) -> Error {
    Error::refused(ErrorKind::Capacity, ErrorCode::Capacity, r)
}
