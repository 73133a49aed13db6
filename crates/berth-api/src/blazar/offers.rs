//! Berth's offers (`POST /v1/offers`): windows in which a lease would fit,
//! at the longest duration and with the most hosts that fit, each with an
//! id that books exactly it (`POST /v1/leases` with `offer`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::{Extension, Json};
use berth_app::offers::{Offer, OfferList, OfferRequest};
use berth_app::Rule;
use berth_core::dates::format_date;
use serde_json::{json, Value};

use super::bodies::{self, OfferQuery};
use super::leases::reservations;
use super::read::{self, Body as _};
use crate::auth::Context;
use crate::config::ApiConfig;
use crate::error::ApiError;
use crate::gate::{app, caller};
use crate::tags;
use crate::AppState;

/// Body: `reservations` (as in a lease; a host count range is offered as a
/// range, and an instance `amount` may be `{"min", "max"}`), `duration` (a duration or `{"min", "max"}`), optional `from`
/// and `until` (the range of start times), `limit` (default 6, at most 100)
/// and `order` (`earliest`, `longest`, `capacity`). Books nothing.
#[utoipa::path(
    post,
    path = "/v1/offers",
    tag = tags::ADDITIONS,
    summary = "Offers: windows where a lease fits, longest and largest first found, each bookable by its id",
    request_body = bodies::OfferQuery,
    responses(
        (status = 200, description = "The offers, ranked", body = bodies::Offers),
    ),
)]
pub(super) async fn offer(
    State(state): State<AppState>,
    Extension(config): Extension<Arc<ApiConfig>>,
    ctx: Context,
    body: Bytes,
) -> Result<Json<bodies::Offers>, ApiError> {
    let (app, caller) = (app(&state), caller(&state, &ctx));
    let may = caller.may(Rule::Availability)?;
    let asked = OfferQuery::read(&read::object(&body, OfferQuery::WRAPPERS)?)?;
    let (shortest, longest) = asked.duration.read()?;
    let order = asked.order.map(|o| o.as_str().to_string());
    let ttl = chrono::Duration::seconds(i64::try_from(config.offer_ttl_s).unwrap_or(i64::MAX));
    let (from, until, limit) = (asked.from, asked.until, asked.limit);
    let reservations = reservations(asked.reservations);
    let asked = OfferRequest { reservations, shortest, longest, from, until, limit, order, ttl };
    Ok(Json(rendered(app.offers().offer(&caller, may, asked).await?)))
}

fn rendered(list: OfferList) -> bodies::Offers {
    bodies::Offers {
        offers: list.offers.into_iter().map(offer_json).collect(),
        from: format_date(list.from),
        until: format_date(list.until),
        order: list.order.as_str().to_string(),
    }
}

fn offer_json(o: Offer) -> bodies::Offer {
    let reservations = o
        .reservations
        .into_iter()
        .map(|r| {
            let mut shown = json!({ "resource_type": r.resource_type });
            if let (Value::Object(s), Value::Object(p)) = (&mut shown, r.params) {
                s.extend(p);
            }
            shown
        })
        .collect();
    bodies::Offer {
        id: o.id,
        start_date: format_date(o.start),
        end_date: format_date(o.end),
        duration: o.end.signed_duration_since(o.start).num_seconds(),
        reservations,
        expires_at: format_date(o.expires),
    }
}
