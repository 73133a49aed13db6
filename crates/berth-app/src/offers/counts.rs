//! The range of counts each reservation of an offer request is offered
//! in: a host reservation's `min`..`max`, or an instance reservation's
//! `amount` given as a range (`{"min": 1, "max": 8}`, offers only), which
//! its plugin checks at both ends.

use berth_core::lease::Demand;
use berth_store::commands::NewReservation;
use serde_json::{Map, Value};

use super::invalid;
use crate::leases::NewReservation as Asked;
use crate::{App, Error};

/// An amount range, taken out of `params` (its least left as the amount).
fn amount_range(i: usize, params: &mut Map<String, Value>) -> Result<Option<(u32, u32)>, Error> {
    let Some(Value::Object(range)) = params.get("amount") else {
        return Ok(None);
    };
    if let Some(k) = range.keys().find(|k| !matches!(k.as_str(), "min" | "max")) {
        return Err(invalid(format!("reservation {i}: amount: unknown key {k:?} (a range has min and max)")));
    }
    let end = |k: &str| range.get(k).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
    let (Some(min), Some(max)) = (end("min"), end("max")) else {
        return Err(invalid(format!("reservation {i}: amount: min and max are whole numbers from 1")));
    };
    if min > max {
        return Err(invalid(format!("reservation {i}: amount: min is above max")));
    }
    params.insert("amount".into(), min.into());
    Ok(Some((min, max)))
}

/// The reservations asked, each checked by its plugin at its least count,
/// and the range of counts each may be offered with.
pub(super) async fn ranges(app: &App, asked: Vec<Asked>) -> Result<(Vec<NewReservation>, Vec<(u32, u32)>), Error> {
    let (mut least, mut amounts, mut most) = (Vec::new(), Vec::new(), Vec::new());
    for (i, mut r) in asked.into_iter().enumerate() {
        let range = amount_range(i, &mut r.params)?;
        if let Some((_, max)) = range {
            // The plugin bounds the amount: checked at the most too.
            let mut params = r.params.clone();
            params.insert("amount".into(), max.into());
            most.push(Asked { resource_type: r.resource_type.clone(), params });
        }
        amounts.push(range);
        least.push(r);
    }
    app.leases().resolve(most).await?;
    let resolved = app.leases().resolve(least).await?;
    let counts = resolved
        .iter()
        .zip(amounts)
        .map(|(r, range)| match (&r.demand, range) {
            (Demand::Hosts { min, max, .. }, _) => (*min, *max),
            (Demand::Slots { .. }, Some(range)) => range,
            (Demand::Slots { amount, .. }, None) => (*amount, *amount),
            (Demand::Nothing, _) => (0, 0),
        })
        .collect();
    Ok((resolved, counts))
}
