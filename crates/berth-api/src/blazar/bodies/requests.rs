//! The request bodies of the Blazar routes: each read by serde
//! ([`crate::blazar::read`]) and described in the OpenAPI document by the
//! same type, which words the refusal of a field it cannot read as Blazar
//! always has ([`Body::refusal`]).

use berth_core::dates;
use berth_core::error::ErrorCode;
use berth_core::inventory::MAX_AMOUNT;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use crate::blazar::read::{absent, refused, shown, At, Body};
use crate::error::ApiError;

/// A reservation to make: its type and its plugin's parameters beside it
/// (`physical:host`: `min`, `max`, `hypervisor_properties`,
/// `resource_properties`; `virtual:instance`: `amount`, `vcpus`,
/// `memory_mb`, `disk_gb`, ...).
#[derive(Deserialize, ToSchema)]
pub struct NewReservation {
    pub resource_type: String,
    /// Its plugin's parameters (an `id` among them is dropped).
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

/// A duration: seconds, or a number with a unit (`90m`, `2h`, `1d`),
/// which [`dates::duration_from_json`] reads.
pub struct Duration(pub Value);

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            v @ (Value::Number(_) | Value::String(_)) => Ok(Duration(v)),
            _ => Err(D::Error::custom("a duration is seconds or a string like \"2h\"")),
        }
    }
}

impl PartialSchema for Duration {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
            .item(ObjectBuilder::new().schema_type(Type::String).examples(["2h"]))
            .description(Some("Seconds, or a number with a unit (`90m`, `2h`, `1d`)"))
            .into()
    }
}

impl ToSchema for Duration {}

impl Duration {
    /// The duration, or the refusal [`dates::duration_from_json`] words.
    pub fn read(&self, field: &str) -> Result<chrono::Duration, ApiError> {
        Ok(dates::duration_from_json(field, &self.0)?)
    }
}

/// The refusal of a duration that is neither seconds nor a string, in
/// [`dates::duration_from_json`]'s words.
pub(super) fn not_a_duration(field: &str) -> ApiError {
    match dates::duration_from_json(field, &Value::Null) {
        Err(e) => e.into(),
        Ok(_) => ApiError::bad_request(ErrorCode::Invalid, format!("{field} must be a duration")),
    }
}

/// A recurring lease: a five-field crontab schedule, read at local
/// wall-clock times in `time_zone`; a duration each, in absolute time; and
/// a last start. Berth's own object: a key it does not know is refused.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Recurrence {
    #[schema(examples("0 9 * * 1"))]
    pub cron: String,
    pub duration: Duration,
    /// A date; without an offset or a zone of its own, read in `time_zone`.
    pub until: String,
    /// An IANA time zone (`Europe/Paris`); default UTC. A local time the
    /// zone skips (spring forward) is read with the offset before the skip
    /// (02:30 becomes 03:30); one it repeats (fall back) is the first of
    /// the two instants, and fires once.
    #[schema(nullable = false, max_length = 64, examples("Europe/Paris"))]
    pub time_zone: Option<String>,
}

/// `POST /v1/leases` (also wrapped as `{"lease": {...}}`). Dates are
/// `YYYY-MM-DD HH:MM` in UTC, or `now` for the start.
#[derive(Deserialize, ToSchema)]
pub struct NewLease {
    pub name: String,
    #[schema(nullable = false)]
    pub start_date: Option<String>,
    /// Required unless recurring.
    #[schema(nullable = false)]
    pub end_date: Option<String>,
    pub before_end_date: Option<String>,
    pub reservations: Option<Vec<NewReservation>>,
    pub recurrence: Option<Recurrence>,
    /// Book nothing; answer the occurrences and whether each fits.
    pub dry_run: Option<bool>,
    /// Book this offer (an id `POST /v1/offers` answered): its window and
    /// reservations, the lease's id its own; only `name` beside it.
    #[schema(nullable = false)]
    pub offer: Option<String>,
}

fn lease_refusal(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidLease, m)
}

/// A list of reservations to make, as a lease and advice give it.
pub(super) fn reservations_refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
    match at {
        [] => lease_refusal("reservations must be a list"),
        [At::Index(i)] => lease_refusal(format!("reservation {i} is not an object")),
        [At::Index(i), At::Key("resource_type")] if absent(given) => {
            lease_refusal(format!("reservation {i} needs a resource_type"))
        }
        _ => refused(ErrorCode::InvalidLease, at, given),
    }
}

impl Body for NewLease {
    const WRAPPERS: &'static [&'static str] = &["lease"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("name")] if absent(given) => lease_refusal("name is required"),
            [At::Key("dry_run")] => lease_refusal(format!("dry_run must be true or false, not {}", shown(given))),
            [At::Key("reservations"), rest @ ..] => reservations_refusal(rest, given),
            [At::Key("recurrence")] => {
                lease_refusal("recurrence: must be an object with cron, duration, until and optionally time_zone")
            }
            [At::Key("recurrence"), At::Key("cron")] if absent(given) => lease_refusal("recurrence: cron is required"),
            [At::Key("recurrence"), At::Key("duration")] => not_a_duration("recurrence.duration"),
            [At::Key("recurrence"), At::Key("until")] if absent(given) => {
                lease_refusal("recurrence: until (a date) is required")
            }
            _ => refused(ErrorCode::InvalidLease, at, given),
        }
    }
}

/// A change to one of the lease's reservations: its id and the
/// parameters to change beside it.
#[derive(Deserialize, ToSchema)]
pub struct ReservationChange {
    pub id: Uuid,
    /// The parameters to change.
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

/// `PUT /v1/leases/{id}` (also wrapped as `{"lease": {...}}`): at least
/// one change. A date, or a relative move of it (a duration), not both.
#[derive(Deserialize, ToSchema)]
pub struct LeaseChange {
    pub name: Option<String>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub before_end_date: Option<String>,
    pub prolong_for: Option<Duration>,
    pub reduce_by: Option<Duration>,
    pub defer_by: Option<Duration>,
    pub advance_by: Option<Duration>,
    pub reservations: Option<Vec<ReservationChange>>,
}

impl Body for LeaseChange {
    const WRAPPERS: &'static [&'static str] = &["lease"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key(k @ ("prolong_for" | "reduce_by" | "defer_by" | "advance_by"))] => not_a_duration(k),
            [At::Key("reservations")] => lease_refusal("reservations must be a list"),
            [At::Key("reservations"), At::Index(i)] => lease_refusal(format!("reservation {i} is not an object")),
            [At::Key("reservations"), At::Index(i), At::Key("id")]
                if absent(given) || given.is_some_and(Value::is_string) =>
            {
                lease_refusal(format!("reservation {i} needs the id of one of the lease's reservations"))
            }
            _ => refused(ErrorCode::InvalidLease, at, given),
        }
    }
}

/// `POST /v1/availability` (also wrapped as `{"availability": {...}}`).
/// Berth's own body: a key it does not know is refused.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AvailabilityQuery {
    pub reservations: Option<Vec<NewReservation>>,
    pub duration: Duration,
    /// Default now.
    pub from: Option<String>,
    /// Default 30 days after `from`.
    pub until: Option<String>,
    /// Default 5.
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<u64>,
}

impl Body for AvailabilityQuery {
    const WRAPPERS: &'static [&'static str] = &["availability"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("reservations"), rest @ ..] => reservations_refusal(rest, given),
            [At::Key("duration")] => not_a_duration("duration"),
            [At::Key("limit")] => lease_refusal("limit must be 1 to 100"),
            _ => refused(ErrorCode::InvalidLease, at, given),
        }
    }
}

/// A whole number, as a number or as a string of one (`"8"`), as Blazar's
/// clients send a host's sizes.
pub struct Whole(pub i64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n.as_i64().map(Whole).ok_or_else(|| D::Error::custom("not a whole number")),
            Value::String(s) => s.trim().parse().map(Whole).map_err(|_| D::Error::custom("not a whole number")),
            _ => Err(D::Error::custom("not a whole number")),
        }
    }
}

impl PartialSchema for Whole {
    fn schema() -> RefOr<Schema> {
        i64::schema()
    }
}

impl ToSchema for Whole {}

/// true or false, also as a string (`"True"`), as Blazar's clients send a
/// host's flags.
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Flag(b)),
            Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Flag(true)),
            Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Flag(false)),
            _ => Err(D::Error::custom("not true or false")),
        }
    }
}

impl PartialSchema for Flag {
    fn schema() -> RefOr<Schema> {
        bool::schema()
    }
}

impl ToSchema for Flag {}

fn host_refusal(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::HostInvalid, m)
}

/// A host's size or flag that is none.
fn host_field_refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
    match (at, shown(given)) {
        ([At::Key(k @ ("reservable" | "disabled"))], v) => host_refusal(format!("{k} must be true or false, not {v}")),
        ([At::Key(k)], v) => host_refusal(format!("{k} must be a whole number from 0 to {MAX_AMOUNT}, not {v}")),
        _ => refused(ErrorCode::HostInvalid, at, given),
    }
}

/// `POST /v1/os-hosts` (also wrapped as `{"host": {...}}`): a provider's
/// name, its sizes (all or none: none enrols an existing provider), and
/// extra capabilities beside these fields.
#[derive(Deserialize, ToSchema)]
pub struct NewHost {
    pub name: String,
    pub vcpus: Option<Whole>,
    pub memory_mb: Option<Whole>,
    pub local_gb: Option<Whole>,
    pub reservable: Option<Flag>,
    /// Extra capabilities (strings, numbers or flags).
    #[serde(flatten)]
    pub capabilities: Map<String, Value>,
}

impl Body for NewHost {
    const WRAPPERS: &'static [&'static str] = &["host"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("name")] if absent(given) => host_refusal("name (the provider's name) is required"),
            [At::Key("vcpus" | "memory_mb" | "local_gb" | "reservable")] => host_field_refusal(at, given),
            _ => refused(ErrorCode::HostInvalid, at, given),
        }
    }
}

/// `PUT /v1/os-hosts/{id}` (also wrapped as `{"host": {...}}` or
/// `{"values": {...}}`): extra capabilities to set, `reservable`, and
/// `disabled` (true: the host is unusable and the reservations holding it
/// move to other hosts in the same transaction; false: usable again).
#[derive(Deserialize, ToSchema)]
pub struct HostChange {
    pub reservable: Option<Flag>,
    pub disabled: Option<Flag>,
    /// Extra capabilities to set (null removes one).
    #[serde(flatten)]
    pub capabilities: Map<String, Value>,
}

impl Body for HostChange {
    const WRAPPERS: &'static [&'static str] = &["host", "values"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        host_field_refusal(at, given)
    }
}

/// `PATCH /v1/os-hosts/properties/{name}` (also wrapped as
/// `{"resource_property": {...}}`).
#[derive(Deserialize, ToSchema)]
pub struct PropertyChange {
    pub private: bool,
}

impl Body for PropertyChange {
    const WRAPPERS: &'static [&'static str] = &["resource_property"];

    fn refusal(_: &[At<'_>], _: Option<&Value>) -> ApiError {
        host_refusal("private (true or false) is required")
    }
}

/// `POST /v1/maintenance` (also wrapped as `{"maintenance": {...}}`).
/// Berth's own body: a key it does not know is refused.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewMaintenance {
    /// Host ids.
    #[schema(min_items = 1)]
    pub hosts: Vec<Uuid>,
    pub start_date: String,
    pub end_date: String,
    /// Move the leases hit to other hosts at once (default false: only flag them).
    pub heal: Option<bool>,
    pub reason: Option<String>,
}

impl Body for NewMaintenance {
    const WRAPPERS: &'static [&'static str] = &["maintenance"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        let bad = |m: String| ApiError::bad_request(ErrorCode::MaintenanceInvalid, m);
        match at {
            [At::Key("hosts")] => bad("hosts (a list of host ids) is required".into()),
            [At::Key("hosts"), At::Index(_)] => bad(format!("{} is not a host id", shown(given))),
            [At::Key(k @ ("start_date" | "end_date"))] if absent(given) => bad(format!("{k} is required")),
            [At::Key("heal")] => bad(format!("heal must be true or false, not {}", shown(given))),
            _ => refused(ErrorCode::MaintenanceInvalid, at, given),
        }
    }
}
