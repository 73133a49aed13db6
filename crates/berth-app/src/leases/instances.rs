//! The instance check: the consumers a reservation names for its hooks
//! must be the caller's project's.

use berth_core::error::{Error, ErrorCode, ErrorKind};
use berth_store::commands::NewReservation;
use uuid::Uuid;

use crate::{App, Caller, Owner, Rule};

/// The consumers the reservations name for their hooks (instances to wake
/// up and delete) must be the caller's project's in Placement, unless the
/// rules let the caller name any (admins): a hook must never act on what
/// another project owns.
pub(super) async fn check(app: &App, caller: &Caller<'_>, list: &[NewReservation]) -> Result<(), Error> {
    if caller.gate.allows(Rule::LeasesNameAnyInstance, Owner::Caller) {
        return Ok(());
    }
    let mut named = Vec::new();
    for r in list {
        for id in app.plugins.get(&r.resource_type)?.named_consumers(&r.params) {
            let uuid = Uuid::parse_str(&id).map_err(|_| unknown_consumer(&id))?;
            named.push((id, uuid));
        }
    }
    if named.is_empty() {
        return Ok(());
    }
    let uuids: Vec<Uuid> = named.iter().map(|(_, u)| *u).collect();
    let projects = app.store.consumer_projects(&uuids).await?;
    for (id, uuid) in &named {
        match projects.get(uuid) {
            None => return Err(unknown_consumer(id)),
            Some(p) if *p != caller.project_id => {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    ErrorCode::ForeignInstance,
                    format!("instance {id} belongs to another project"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn unknown_consumer(id: &str) -> Error {
    Error::invalid(
        ErrorCode::UnknownInstance,
        format!("instance {id:?} is not a consumer of your project in /placement"),
    )
}
