//! `berth offers`: windows in which a lease would fit, each with the id
//! that books it (`berth lease create NAME --offer ID`).

use anyhow::Result;
use clap::Args;
use reqwest::Method;
use serde_json::{json, Value};

use crate::client::Client;
use crate::leases::{duration, reservations};
use crate::Format;

#[derive(Args)]
pub struct OffersArgs {
    /// A reservation, as for `lease create`; repeatable. A host
    /// reservation's min..max is the range of counts offered.
    #[arg(long = "reservation", required = true)]
    pub reservations: Vec<String>,
    /// How long the lease would last, e.g. `2h`; with --max-duration, the
    /// shortest acceptable.
    #[arg(long, value_parser = duration)]
    pub duration: String,
    /// The longest duration wanted: the longest that fits is offered.
    #[arg(long, value_parser = duration)]
    pub max_duration: Option<String>,
    /// The earliest start (default now), as `lease create --start`.
    #[arg(long)]
    pub from: Option<String>,
    /// The latest start (default 30 days after --from).
    #[arg(long)]
    pub until: Option<String>,
    /// At most this many offers (default 6).
    #[arg(long)]
    pub limit: Option<u32>,
    /// earliest (default), longest or capacity.
    #[arg(long)]
    pub order: Option<String>,
}

/// The request body the arguments make.
fn body(a: &OffersArgs) -> Result<Value> {
    let duration = match &a.max_duration {
        Some(max) => json!({"min": a.duration, "max": max}),
        None => json!(a.duration),
    };
    let mut body = json!({"reservations": reservations(&a.reservations)?, "duration": duration});
    for (k, v) in [("from", &a.from), ("until", &a.until), ("order", &a.order)] {
        if let Some(v) = v {
            body[k] = json!(v);
        }
    }
    if let Some(l) = a.limit {
        body["limit"] = json!(l);
    }
    Ok(body)
}

/// An offer's counts, one per reservation: hosts, or instances.
fn counts(offer: &Value) -> String {
    let each = offer["reservations"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let shown: Vec<String> = each
        .iter()
        .map(|r| match (&r["max"], &r["amount"]) {
            (Value::Number(n), _) => format!("{n} hosts"),
            (_, Value::Number(n)) => format!("{n} instances"),
            _ => r["resource_type"].as_str().unwrap_or("?").to_string(),
        })
        .collect();
    shown.join(", ")
}

pub fn offers(client: &Client, a: OffersArgs) -> Result<()> {
    let out = client.call(Method::POST, "/v1/offers", Some(&body(&a)?))?;
    let offers = out["offers"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if client.format != Format::Table {
        let columns = ["start_date", "end_date", "duration", "reservations", "expires_at", "id"];
        return client.print_list(offers, &columns);
    }
    // An id is long: a table would fold it. Each is printed whole on a
    // line of its own under the table, to copy.
    let rows: Vec<Vec<String>> = offers
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let cell = |k: &str| o[k].as_str().unwrap_or_default().to_string();
            let hours = o["duration"].as_i64().unwrap_or(0) as f64 / 3600.0;
            vec![
                format!("{}", i.saturating_add(1)),
                cell("start_date"),
                cell("end_date"),
                format!("{hours:.2}h"),
                counts(o),
                cell("expires_at"),
            ]
        })
        .collect();
    client.print_rows(&["#", "start_date", "end_date", "duration", "reserves", "expires_at"], &rows);
    for (i, o) in offers.iter().enumerate() {
        println!("#{} {}", i.saturating_add(1), o["id"].as_str().unwrap_or_default());
    }
    Ok(())
}
