//! The body of `POST /v1/offers`: all Berth's own, so a key it does not
//! know is refused by name (but a reservation's plugin parameters, read as
//! a lease's are).

use berth_core::error::ErrorCode;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use super::requests::{not_a_duration, reservations_refusal, Duration, NewReservation};
use crate::blazar::read::{self, absent, refused, shown, At, Body};
use crate::error::ApiError;

/// The keys of an offer request.
const KEYS: &[&str] = &["reservations", "duration", "from", "until", "limit", "order"];
/// The keys of a duration range.
const RANGE_KEYS: &[&str] = &["min", "max"];

/// A duration, or a range of them (`{"min": "1h", "max": "8h"}`).
pub enum Durations {
    One(Duration),
    Range { min: Duration, max: Duration },
}

impl<'de> Deserialize<'de> for Durations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            v @ (Value::Number(_) | Value::String(_)) => Ok(Durations::One(Duration(v))),
            Value::Object(mut o) if o.keys().all(|k| RANGE_KEYS.contains(&k.as_str())) => {
                let mut take = |k: &str| match o.remove(k) {
                    Some(v @ (Value::Number(_) | Value::String(_))) => Ok(Duration(v)),
                    _ => Err(D::Error::custom(format!("duration.{k} is required"))),
                };
                Ok(Durations::Range { min: take("min")?, max: take("max")? })
            }
            _ => Err(D::Error::custom("not a duration")),
        }
    }
}

impl PartialSchema for Durations {
    fn schema() -> RefOr<Schema> {
        let range = ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("min", Duration::schema())
            .property("max", Duration::schema())
            .required("min")
            .required("max")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        OneOfBuilder::new()
            .item(Duration::schema())
            .item(range)
            .description(Some("A duration, or a range of them: the longest that fits is offered"))
            .into()
    }
}

impl ToSchema for Durations {}

impl Durations {
    /// The shortest and longest, or the refusals `dates` words.
    pub fn read(&self) -> Result<(chrono::Duration, chrono::Duration), ApiError> {
        match self {
            Durations::One(d) => {
                let d = d.read("duration")?;
                Ok((d, d))
            }
            Durations::Range { min, max } => Ok((min.read("duration.min")?, max.read("duration.max")?)),
        }
    }
}

/// How offers are ranked: `earliest` (earliest start, then longest, then
/// most capacity), `longest` (then earliest, then most capacity),
/// `capacity` (most, hosts and instances counted together, then earliest,
/// then longest).
#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OfferOrder {
    Earliest,
    Longest,
    Capacity,
}

impl PartialSchema for OfferOrder {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["earliest", "longest", "capacity"]))
            .pattern(Some("^(earliest|longest|capacity)$"))
            .description(Some("earliest (default), longest or capacity"))
            .into()
    }
}

impl ToSchema for OfferOrder {}

impl OfferOrder {
    pub fn as_str(&self) -> &'static str {
        match self {
            OfferOrder::Earliest => "earliest",
            OfferOrder::Longest => "longest",
            OfferOrder::Capacity => "capacity",
        }
    }
}

/// `POST /v1/offers` (also wrapped as `{"offers": {...}}`).
#[derive(Deserialize, ToSchema)]
pub struct OfferQuery {
    /// As in a lease; a `physical:host` reservation's `min`..`max` is the
    /// range of host counts offered, and an instance reservation's `amount`
    /// may be a range `{"min": 1, "max": 8}`.
    pub reservations: Option<Vec<NewReservation>>,
    pub duration: Durations,
    /// The earliest start (default now).
    pub from: Option<String>,
    /// The latest start (default 30 days after `from`).
    pub until: Option<String>,
    /// Default 6.
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<u64>,
    /// Default `earliest`.
    pub order: Option<OfferOrder>,
}

fn offer_refusal(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::OfferInvalid, m)
}

/// The key of `v` (an object) that is none of `known`, if any.
fn unknown<'v>(v: Option<&'v Value>, known: &[&str]) -> Option<&'v str> {
    v?.as_object()?.keys().map(String::as_str).find(|k| !known.contains(k))
}

impl Body for OfferQuery {
    const WRAPPERS: &'static [&'static str] = &["offers"];

    fn refusal(at: &[At<'_>], given: Option<&Value>) -> ApiError {
        match at {
            [At::Key("reservations"), rest @ ..] => reservations_refusal(rest, given),
            [At::Key("duration")] if absent(given) => offer_refusal("duration is required"),
            [At::Key("duration")] => match unknown(given, RANGE_KEYS) {
                Some(k) => offer_refusal(format!("duration: unknown key {k:?} (a range has min and max)")),
                None if given.is_some_and(Value::is_object) => offer_refusal("duration: min and max are both required"),
                None => not_a_duration("duration"),
            },
            [At::Key("limit")] => offer_refusal("limit must be 1 to 100"),
            [At::Key("order")] => {
                offer_refusal(format!("order must be earliest, longest or capacity, not {}", shown(given)))
            }
            _ => refused(ErrorCode::OfferInvalid, at, given),
        }
    }
}

impl OfferQuery {
    /// The body read, refusing first any key not among [`KEYS`].
    pub fn read(obj: &Map<String, Value>) -> Result<OfferQuery, ApiError> {
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            let known = KEYS.join(", ");
            return Err(offer_refusal(format!("unknown key {k:?} (an offer request has {known})")));
        }
        read::typed(obj)
    }
}
