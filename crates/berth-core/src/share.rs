//! Sharing a lease's reserved capacity with other projects: which lists
//! of projects a lease may be shared with, and which leases may be shared.
//! The lease stays its owner's; a project it is shared with may draw from
//! its reservations and sees only what it needs to (`GET /v1/leases/shared`).

use crate::error::ErrorCode;
use crate::lease::LeaseStatus;
use crate::Error;

/// The most projects one lease is shared with (Compute Engine's limit).
pub const MAX_PROJECTS: usize = 100;

/// The longest project id accepted (Keystone's are 32 hex digits).
pub const MAX_PROJECT_ID: usize = 64;

fn invalid(detail: impl Into<String>) -> Error {
    Error::invalid(ErrorCode::ShareInvalid, detail)
}

/// Checks a sharing list for a lease of `owner`: at most [`MAX_PROJECTS`],
/// each a project id of 1 to [`MAX_PROJECT_ID`] characters of
/// `[A-Za-z0-9_-]`, none twice (as given: ids are not normalised), none
/// the owner's own.
pub fn check_projects(owner: &str, projects: &[String]) -> Result<(), Error> {
    if projects.len() > MAX_PROJECTS {
        return Err(invalid(format!("a lease is shared with at most {MAX_PROJECTS} projects, not {}", projects.len())));
    }
    for (i, p) in projects.iter().enumerate() {
        let shape = !p.is_empty()
            && p.len() <= MAX_PROJECT_ID
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !shape {
            let shown: String = p.chars().take(MAX_PROJECT_ID).collect();
            return Err(invalid(format!(
                "projects[{i}] {shown:?} is not a project id (1 to {MAX_PROJECT_ID} of A-Z, a-z, 0-9, _ and -)"
            )));
        }
        if projects[..i].contains(p) {
            return Err(invalid(format!("projects[{i}] {p:?} is named twice")));
        }
        if p == owner {
            return Err(invalid(format!("projects[{i}] {p:?} is the lease's own project")));
        }
    }
    Ok(())
}

/// Refuses to share a lease that is over: ended, ending, failed or being
/// deleted.
pub fn check_shareable(id: uuid::Uuid, status: LeaseStatus) -> Result<(), Error> {
    match status {
        LeaseStatus::Terminating | LeaseStatus::Terminated | LeaseStatus::Error | LeaseStatus::Deleting => {
            Err(Error::conflict(
                ErrorCode::ShareLeaseOver,
                format!("lease {id} is {}: only a lease that has not ended may be shared", status.as_str()),
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_list_is_bounded_well_formed_without_repeats_or_the_owner() {
        assert!(check_projects("a", &ids(&["b", "0123456789abcdef0123456789abcdef", "x_y-z"])).is_ok());
        assert!(check_projects("a", &[]).is_ok());
        let many: Vec<String> = (0..=MAX_PROJECTS).map(|i| format!("p{i}")).collect();
        assert!(check_projects("a", &many[..MAX_PROJECTS]).is_ok());
        let long = "x".repeat(MAX_PROJECT_ID + 1);
        for bad in [many, ids(&["b", "b"]), ids(&["a"]), ids(&[""]), ids(&["p 1"]), ids(&["é"]), vec![long]] {
            let e = check_projects("a", &bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::ShareInvalid, "{bad:?}");
        }
    }
}
