//! The bodies of `POST /v1/leases/{id}/split` and `POST
//! /v1/leases/{id}/transfer`, and what they answer: all Berth's own, so a
//! key they do not know is refused by name.

use berth_core::error::ErrorCode;
use berth_core::lease::MAX_RESERVATIONS;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use crate::blazar::read::{absent, refused, shown, At, Body};
use crate::error::ApiError;

/// `POST /v1/leases/{id}/split` (also wrapped as `{"split": {...}}`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitLease {
    /// The new lease's name (free in its project).
    pub name: String,
    /// What moves, per reservation of the lease.
    #[schema(min_items = 1, max_items = 32)]
    pub reservations: Vec<SplitReservation>,
    /// The new lease's project (default: the lease's). An admin's split
    /// puts it there at once; a member's offers it there.
    #[schema(nullable = false, max_length = 255)]
    pub project_id: Option<String>,
}

/// One reservation's part of a split: `hosts` (host ids or names; a host
/// reservation's) or `count` slots (any), not both.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitReservation {
    pub id: Uuid,
    #[schema(nullable = false, min_items = 1, max_items = 500)]
    pub hosts: Option<Vec<String>>,
    #[schema(nullable = false, minimum = 1, maximum = 10000)]
    pub count: Option<u32>,
}

fn invalid(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

impl Body for SplitLease {
    const WRAPPERS: &'static [&'static str] = &["split"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("reservations")] if absent(given) => invalid("reservations is required"),
            [At::Key("reservations")] => invalid("reservations must be a list of {id, hosts | count}"),
            [At::Key("reservations"), At::Index(i), At::Key("id")] => {
                invalid(format!("reservations[{i}].id must be a reservation id, not {}", shown(given)))
            }
            [At::Key("reservations"), At::Index(i), At::Key("count")] => {
                invalid(format!("reservations[{i}].count must be a whole number of 1 or more, not {}", shown(given)))
            }
            [At::Key("reservations"), At::Index(i), ..] => {
                invalid(format!("reservations[{i}] must be {{id, hosts | count}}, hosts a list of host ids or names"))
            }
            _ => refused(ErrorCode::InvalidLease, at, given),
        }
    }
}

impl SplitLease {
    /// The checks serde does not make: the lists' bounds, hosts or count.
    pub fn check(&self) -> Result<(), ApiError> {
        let n = self.reservations.len();
        if n == 0 || n > MAX_RESERVATIONS {
            return Err(invalid(format!("reservations names 1 to {MAX_RESERVATIONS} reservations")));
        }
        for (i, r) in self.reservations.iter().enumerate() {
            match (&r.hosts, r.count) {
                (Some(_), Some(_)) | (None, None) => {
                    return Err(invalid(format!("reservations[{i}] names hosts or a count, one of them")))
                }
                (Some(h), None) if h.is_empty() || h.len() > berth_core::lease::split::MAX_SPLIT_HOSTS => {
                    let max = berth_core::lease::split::MAX_SPLIT_HOSTS;
                    return Err(invalid(format!("reservations[{i}].hosts names 1 to {max} hosts (or use count)")));
                }
                (None, Some(0)) => return Err(invalid(format!("reservations[{i}].count must be 1 or more"))),
                _ => {}
            }
        }
        Ok(())
    }
}

/// How a transfer is made: `immediate` (admin) or `offer`.
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransferConsent {
    Immediate,
    Offer,
}

impl PartialSchema for TransferConsent {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["immediate", "offer"]))
            .pattern(Some("^(immediate|offer)$"))
            .description(Some("immediate (needs berth:leases:transfer_without_consent) or offer; default: immediate for those who may, else offer"))
            .into()
    }
}

impl ToSchema for TransferConsent {}

/// `POST /v1/leases/{id}/transfer` (also wrapped as `{"transfer": {...}}`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferLease {
    /// The project the lease goes to.
    #[schema(max_length = 255)]
    pub project_id: String,
    /// The lease's user once moved at once (default: its own).
    #[schema(nullable = false, max_length = 255)]
    pub user_id: Option<String>,
    #[schema(nullable = false)]
    pub consent: Option<TransferConsent>,
}

impl Body for TransferLease {
    const WRAPPERS: &'static [&'static str] = &["transfer"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("project_id")] if absent(given) => invalid("project_id is required"),
            [At::Key("consent")] => invalid(format!("consent must be immediate or offer, not {}", shown(given))),
            _ => refused(ErrorCode::InvalidLease, at, given),
        }
    }
}

/// A transfer offered: to whom, by whom, when.
#[derive(Serialize, ToSchema)]
pub struct TransferShown {
    pub to_project: String,
    pub offered_by: String,
    pub offered_at: String,
}

/// The answer of a transfer offered (202).
#[derive(Serialize, ToSchema)]
pub struct TransferOffered {
    pub lease_id: Uuid,
    pub transfer: TransferShown,
}
