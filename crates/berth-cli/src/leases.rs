//! `berth lease ...` and `berth availability`.

use anyhow::{anyhow, Result};

pub(crate) use crate::client::lease_id;
use berth_core::dates::parse_duration;
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::client::{key_values, Client};

#[derive(Subcommand)]
pub enum LeaseCommand {
    /// Create a lease.
    Create(CreateArgs),
    /// List leases.
    List {
        /// Only leases in this status (PENDING, ACTIVE, TERMINATED, ERROR, ...).
        #[arg(long)]
        status: Option<String>,
        /// Another project's (admins).
        #[arg(long)]
        project: Option<String>,
        /// At most this many leases.
        #[arg(long)]
        limit: Option<u32>,
        /// Leases after this one (an id), for paging.
        #[arg(long)]
        marker: Option<String>,
        /// The leases other projects shared with yours instead.
        #[arg(long, conflicts_with_all = ["status", "project"])]
        shared: bool,
    },
    /// Show a lease (by id or name).
    Show {
        /// The lease's id or name.
        lease: String,
    },
    /// Change a lease: name, dates, reservations.
    Update(UpdateArgs),
    /// Delete a lease.
    Delete {
        /// The lease's id or name.
        lease: String,
    },
    /// How far a lease could be extended where it is.
    Extension {
        /// The lease's id or name.
        lease: String,
    },
    /// End a started lease now; its end runs through the plugins (admin).
    End {
        /// The lease's id or name.
        lease: String,
    },
    /// Take a lease out of ERROR once the world is fixed (admin).
    Recover {
        /// The lease's id or name.
        lease: String,
    },
    /// Share a lease with other projects (the whole list): they may draw
    /// from its reservations.
    Share {
        /// The lease's id or name.
        lease: String,
        /// The projects' ids.
        #[arg(required_unless_present = "none")]
        projects: Vec<String>,
        /// Share it with no project.
        #[arg(long, conflicts_with = "projects")]
        none: bool,
    },
    /// Move some hosts or slots of a lease not started into a new lease.
    Split(crate::transfers::SplitArgs),
    /// Hand a lease not started to another project (or --withdraw the offer).
    Transfer(crate::transfers::TransferArgs),
    /// Accept a lease offered to your project (by id).
    Accept {
        /// The lease's id.
        lease: String,
    },
}

#[derive(Args)]
pub struct CreateArgs {
    /// The lease's name.
    pub name: String,
    /// `now`, `YYYY-MM-DD HH:MM` (UTC) or RFC 3339.
    #[arg(long, alias = "start-date", default_value = "now")]
    pub start: String,
    /// When it ends, as --start; required unless --cron.
    #[arg(long, alias = "end-date")]
    pub end: Option<String>,
    /// When the before-end event fires, as --start.
    #[arg(long, alias = "before-end-date")]
    pub before_end: Option<String>,
    /// A reservation, as `resource_type=TYPE,KEY=VALUE,...`; repeatable.
    /// The keys of each type:
    /// `physical:host`: min, max, hypervisor_properties, resource_properties,
    /// before_end, end_policy, heal, lend_idle;
    /// `virtual:instance`: amount, vcpus, memory_mb, disk_gb, affinity,
    /// resource_properties, instance_id, instance_ids, heal, lend_idle;
    /// `flavor:instance`: flavor_id, amount, affinity, resource_properties,
    /// instance_id, instance_ids, heal, lend_idle.
    /// E.g. `resource_type=physical:host,min=1,max=2`.
    #[arg(long = "reservation", verbatim_doc_comment)]
    pub reservations: Vec<String>,
    /// A host reservation as python-blazarclient takes it: `min=1,max=2,...`
    /// (`resource_type=physical:host` implied); repeatable.
    #[arg(long = "physical-reservation")]
    pub physical_reservations: Vec<String>,
    /// A lease with no reservation, meant so: it reserves nothing, yet
    /// counts against the `leases` quota.
    #[arg(long, conflicts_with_all = ["reservations", "physical_reservations"])]
    pub empty: bool,
    /// Book this offer (an id `berth offers` printed): its window and
    /// reservations; nothing else but the name may be given.
    #[arg(long, conflicts_with_all = ["reservations", "physical_reservations", "empty", "end", "before_end", "cron", "dry_run"])]
    pub offer: Option<String>,
    /// Recurring: a cron schedule (5 fields); with --duration and --until.
    #[arg(long)]
    pub cron: Option<String>,
    /// With --cron: how long each occurrence lasts, e.g. `2h`.
    #[arg(long, value_parser = duration)]
    pub duration: Option<String>,
    /// With --cron: no occurrence starts after this, as --start (without
    /// an offset or zone of its own, read in --time-zone).
    #[arg(long)]
    pub until: Option<String>,
    /// With --cron: the IANA zone (`Europe/Paris`) whose wall-clock times
    /// the schedule names; UTC when absent.
    #[arg(long, requires = "cron", value_parser = crate::zone)]
    pub time_zone: Option<chrono_tz::Tz>,
    /// Book nothing: list the occurrences and whether each fits.
    #[arg(long)]
    pub dry_run: bool,
    /// The request's idempotency key (default: a new one for each command).
    /// The command tries again with it when the request may not have
    /// arrived; the same key with the same request within a day answers the
    /// lease first made and creates nothing.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

impl CreateArgs {
    /// Why these arguments cannot be what was meant: a lease without a
    /// reservation is Blazar's, but one made by leaving the option out
    /// would only hold a place in the quota.
    pub fn usage_error(&self) -> Option<String> {
        let reserves = !self.reservations.is_empty() || !self.physical_reservations.is_empty();
        (!reserves && !self.empty && self.offer.is_none()).then(|| {
            "a lease needs what it reserves: give --reservation resource_type=TYPE,KEY=VALUE,... \
             (e.g. resource_type=physical:host,min=1,max=2; `berth lease create --help` lists each type's keys) \
             or --physical-reservation min=1,max=2, or --empty for a lease that reserves nothing"
                .to_string()
        })
    }
}

#[derive(Args)]
pub struct UpdateArgs {
    /// The lease's id or name.
    pub lease: String,
    /// A new name.
    #[arg(long)]
    pub name: Option<String>,
    /// A new start: `now`, `YYYY-MM-DD HH:MM` (UTC) or RFC 3339.
    #[arg(long, alias = "start-date")]
    pub start: Option<String>,
    /// A new end, as --start.
    #[arg(long, alias = "end-date")]
    pub end: Option<String>,
    /// A new before-end time, as --start.
    #[arg(long, alias = "before-end-date")]
    pub before_end: Option<String>,
    /// e.g. `2h`, `30m`, `1d`.
    #[arg(long, value_parser = duration)]
    pub prolong_for: Option<String>,
    /// End earlier by this much.
    #[arg(long, value_parser = duration)]
    pub reduce_by: Option<String>,
    /// Move start and end later by this much.
    #[arg(long, value_parser = duration)]
    pub defer_by: Option<String>,
    /// Move start and end earlier by this much.
    #[arg(long, value_parser = duration)]
    pub advance_by: Option<String>,
    /// `id=<reservation id>,min=2,max=3,...`; repeatable.
    #[arg(long = "reservation")]
    pub reservations: Vec<String>,
}

#[derive(Args)]
pub struct AvailabilityArgs {
    /// A reservation, as for `lease create`; repeatable.
    #[arg(long = "reservation", required = true)]
    pub reservations: Vec<String>,
    /// How long the lease would last, e.g. `2h`.
    #[arg(long, value_parser = duration)]
    pub duration: String,
    /// Look from this time (default now), as `lease create --start`.
    #[arg(long)]
    pub from: Option<String>,
    /// Look no further than this time.
    #[arg(long)]
    pub until: Option<String>,
    /// At most this many windows.
    #[arg(long)]
    pub limit: Option<u32>,
}

const LIST_COLUMNS: &[&str] = &["id", "name", "start_date", "end_date", "status", "project_id"];

/// `key=value,...` as a reservation object, each value typed: whole
/// numbers as numbers, `true` and `false` as booleans, a JSON list as a
/// list, anything else as text.
fn reservation(s: &str) -> Result<Value> {
    let mut o = Map::new();
    for (k, v) in key_values(s)? {
        o.insert(k, typed(&v));
    }
    Ok(Value::Object(o))
}

fn typed(v: &str) -> Value {
    if let Ok(n) = v.trim().parse::<i64>() {
        return Value::from(n);
    }
    match v.trim() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    match serde_json::from_str::<Value>(v) {
        Ok(list @ Value::Array(_)) => list,
        _ => Value::String(v.to_string()),
    }
}

/// A duration as the API reads it, with its unit: a bare number is
/// refused here rather than read as seconds. The rule and its message are
/// berth-core's, the server's own, so the two never disagree.
pub(crate) fn duration(s: &str) -> std::result::Result<String, String> {
    let t = s.trim();
    parse_duration("duration", t).map(|_| t.to_string()).map_err(|e| e.detail)
}

pub(crate) fn reservations(list: &[String]) -> Result<Vec<Value>> {
    list.iter().map(|s| reservation(s)).collect()
}

/// A new lease's reservations: the host ones first, as python-blazarclient
/// orders them, then the others.
fn create_reservations(a: &CreateArgs) -> Result<Vec<Value>> {
    let mut all = Vec::new();
    for s in &a.physical_reservations {
        let mut r = reservation(s)?;
        if let Some(o) = r.as_object_mut() {
            o.entry("resource_type").or_insert_with(|| json!("physical:host"));
        }
        all.push(r);
    }
    all.extend(reservations(&a.reservations)?);
    Ok(all)
}

/// The lease; in a table its reservations and events take a line each.
fn show_lease(client: &Client, lease: &Value) -> Result<()> {
    client.print_object(lease)
}

pub fn run(client: &Client, cmd: LeaseCommand) -> Result<()> {
    match cmd {
        LeaseCommand::Create(a) => create(client, a),
        LeaseCommand::List { shared: true, limit, marker, .. } => crate::sharing::list(client, limit, marker),
        LeaseCommand::List { status, project, limit, marker, .. } => list(client, status, project, limit, marker),
        LeaseCommand::Share { lease, projects, .. } => {
            crate::sharing::share(client, &lease_id(client, &lease)?, projects)
        }
        LeaseCommand::Show { lease } => {
            let out = client.get(&format!("/v1/leases/{}", lease_id(client, &lease)?))?;
            show_lease(client, &out["lease"])?;
            Ok(())
        }
        LeaseCommand::Update(a) => update(client, a),
        LeaseCommand::Delete { lease } => {
            let id = lease_id(client, &lease)?;
            client.call(Method::DELETE, &format!("/v1/leases/{id}"), None)?;
            if client.format == crate::Format::Table {
                println!("Deleted lease {id}");
            }
            Ok(())
        }
        LeaseCommand::End { lease } => control(client, &lease, "end"),
        LeaseCommand::Recover { lease } => control(client, &lease, "recover"),
        LeaseCommand::Split(a) => crate::transfers::split(client, a),
        LeaseCommand::Transfer(a) => crate::transfers::transfer(client, a),
        LeaseCommand::Accept { lease } => crate::transfers::accept(client, &lease),
        LeaseCommand::Extension { lease } => {
            let out = client.get(&format!("/v1/leases/{}/extension", lease_id(client, &lease)?))?;
            client.print_object(&out["extension"])?;
            Ok(())
        }
    }
}

/// `berth lease end|recover`: the control, then the lease as it stands.
fn control(client: &Client, lease: &str, action: &str) -> Result<()> {
    let id = lease_id(client, lease)?;
    let out = client.call(Method::POST, &format!("/v1/leases/{id}/{action}"), Some(&json!({})))?;
    if action == "end" {
        // The lease stays ACTIVE until a manager has run its end through
        // the plugins: say so, or the status shown reads as a refusal.
        let name = out["lease"]["name"].as_str().unwrap_or(lease);
        eprintln!(
            "{name} ends now: a manager runs its end through the plugins, then it is TERMINATED \
             (berth events list --lease {name})"
        );
    }
    show_lease(client, &out["lease"])
}

/// `berth lease create`: one lease, a recurring series, or (dry run) the
/// occurrences a series would book and whether each fits.
fn create(client: &Client, a: CreateArgs) -> Result<()> {
    if let Some(offer) = a.offer {
        let key = a.idempotency_key.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let out = client.post_keyed("/v1/leases", &json!({"name": a.name, "offer": offer}), &key)?;
        return show_lease(client, &out["lease"]);
    }
    let reservations = create_reservations(&a)?;
    let mut body = json!({"name": a.name, "start_date": a.start, "reservations": reservations, "events": []});
    if let Some(e) = a.end {
        body["end_date"] = json!(e);
    }
    if let Some(b) = a.before_end {
        body["before_end_date"] = json!(b);
    }
    if let Some(cron) = a.cron {
        let (Some(d), Some(u)) = (a.duration, a.until) else {
            return Err(anyhow!("--cron needs --duration and --until"));
        };
        body["recurrence"] = json!({"cron": cron, "duration": d, "until": u});
        if let Some(zone) = a.time_zone {
            body["recurrence"]["time_zone"] = json!(zone.name());
        }
    }
    if a.dry_run {
        body["dry_run"] = json!(true);
        let out = client.call(Method::POST, "/v1/leases", Some(&body))?;
        let occurrences = out["occurrences"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        client.print_list(occurrences, &["start_date", "end_date", "fits"])?;
        return Ok(());
    }
    let key = a.idempotency_key.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let out = client.post_keyed("/v1/leases", &body, &key)?;
    show_lease(client, &out["lease"])?;
    Ok(())
}

/// `berth lease list`, filtered as asked.
fn list(
    client: &Client,
    status: Option<String>,
    project: Option<String>,
    limit: Option<u32>,
    marker: Option<String>,
) -> Result<()> {
    let mut q = Vec::new();
    if let Some(s) = status {
        q.push(format!("status={s}"));
    }
    if let Some(p) = project {
        q.push(format!("project_id={p}"));
    }
    // A page when asked for one, else every page.
    let one_page = limit.is_some() || marker.is_some();
    if let Some(l) = limit {
        q.push(format!("limit={l}"));
    }
    if let Some(m) = marker {
        q.push(format!("marker={m}"));
    }
    let path = if q.is_empty() { "/v1/leases".to_string() } else { format!("/v1/leases?{}", q.join("&")) };
    let leases = if one_page {
        client.get(&path)?["leases"].as_array().cloned().unwrap_or_default()
    } else {
        client.get_all(&path, "leases")?
    };
    client.print_list(&leases, LIST_COLUMNS)?;
    Ok(())
}

/// `berth lease update`: sends only what was given.
fn update(client: &Client, a: UpdateArgs) -> Result<()> {
    let id = lease_id(client, &a.lease)?;
    let mut body = Map::new();
    let pairs = [
        ("name", a.name),
        ("start_date", a.start),
        ("end_date", a.end),
        ("before_end_date", a.before_end),
        ("prolong_for", a.prolong_for),
        ("reduce_by", a.reduce_by),
        ("defer_by", a.defer_by),
        ("advance_by", a.advance_by),
    ];
    for (k, v) in pairs {
        if let Some(v) = v {
            body.insert(k.into(), json!(v));
        }
    }
    if !a.reservations.is_empty() {
        body.insert("reservations".into(), json!(reservations(&a.reservations)?));
    }
    if body.is_empty() {
        return Err(anyhow!("nothing to update: give --name, a date or --reservation"));
    }
    let out = client.call(Method::PUT, &format!("/v1/leases/{id}"), Some(&Value::Object(body)))?;
    show_lease(client, &out["lease"])?;
    Ok(())
}

pub fn availability(client: &Client, a: AvailabilityArgs) -> Result<()> {
    let mut body = json!({"reservations": reservations(&a.reservations)?, "duration": a.duration});
    if let Some(f) = a.from {
        body["from"] = json!(f);
    }
    if let Some(u) = a.until {
        body["until"] = json!(u);
    }
    if let Some(l) = a.limit {
        body["limit"] = json!(l);
    }
    let out = client.call(Method::POST, "/v1/availability", Some(&body))?;
    client.print_list(out["availability"].as_array().map(Vec::as_slice).unwrap_or(&[]), &["start_date", "end_date"])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_sent_typed_and_durations_need_a_unit() {
        let r =
            reservation("resource_type=virtual:instance,amount=2,affinity=false,instance_ids=[\"a\"],x=2h").unwrap();
        assert_eq!(
            r,
            json!({"resource_type": "virtual:instance", "amount": 2, "affinity": false, "instance_ids": ["a"], "x": "2h"})
        );
        assert_eq!(duration("1").unwrap_err(), "duration \"1\": give a unit: 1m, 1h, 1d");
        assert_eq!(duration("90m").unwrap(), "90m");
        assert!(duration("soon").is_err());
    }
}
