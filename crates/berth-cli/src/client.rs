//! HTTP to berthd and printing what it answers as the openstack client
//! does: `-f table|json|yaml|value|csv`, `-c COLUMN` to pick columns.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use chrono_tz::Tz;
use reqwest::blocking::RequestBuilder;
use reqwest::Method;
use serde_json::Value;

use crate::Format;

/// The server could not be reached or answered 5xx: worth trying again.
#[derive(Debug)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

pub struct Client {
    base: String,
    token: String,
    project_id: Option<String>,
    pub format: Format,
    /// `-c`: the columns (or fields) to print, in this order; all when empty.
    columns: Vec<String>,
    /// `--tz`: the zone times are shown in (None: UTC, written `Z`).
    zone: Option<Tz>,
    http: reqwest::blocking::Client,
}

/// A failed request, and whether trying it again may help.
struct Failure {
    again: bool,
    error: anyhow::Error,
}

impl Client {
    pub fn new(
        base: &str,
        identity: crate::auth::Identity,
        format: Format,
        columns: Vec<String>,
        zone: Option<Tz>,
    ) -> Client {
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: identity.token,
            project_id: identity.project_id,
            format,
            columns,
            zone,
            http: reqwest::blocking::Client::new(),
        }
    }

    fn send(&self, req: RequestBuilder) -> Result<Value> {
        self.attempt(req).map_err(|f| f.error)
    }

    /// One request; a failure says whether trying again may help: the
    /// request may not have reached the server, or the server was
    /// momentarily unable to answer (502, 503, 504).
    fn attempt(&self, req: RequestBuilder) -> std::result::Result<Value, Failure> {
        let failed = |e: anyhow::Error| Failure { again: false, error: e };
        let resp = req
            .header("x-auth-token", &self.token)
            .header("accept", "application/json")
            .send()
            .map_err(|e| Failure { again: true, error: self.unreached(e) })?;
        let status = resp.status();
        let text = resp.text().map_err(|e| Failure { again: true, error: e.into() })?;
        let body: Value =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        if !status.is_success() {
            let message =
                body.get("error_message").and_then(Value::as_str).map(str::to_string).unwrap_or(body.to_string());
            let code = body.get("code").and_then(Value::as_str).unwrap_or("");
            let error = anyhow!("{} {message} [{code}]", status.as_u16());
            return Err(Failure { again: matches!(status.as_u16(), 502..=504), ..failed(error) });
        }
        Ok(body)
    }

    /// A request that got no answer; when nothing listened, what to check.
    fn unreached(&self, e: reqwest::Error) -> anyhow::Error {
        if e.is_connect() {
            anyhow!(
                "cannot reach berthd at {}: {e:#}. Is berthd running there? BERTH_URL (or --url) names the server.",
                self.base
            )
        } else {
            e.into()
        }
    }

    /// POSTs `body` under an idempotency key, trying again (with the same
    /// key, so the server makes nothing twice) when the request may not have
    /// arrived or the server was briefly unable to answer.
    pub fn post_keyed(&self, path: &str, body: &Value, key: &str) -> Result<Value> {
        use backon::{BlockingRetryable, ExponentialBuilder};
        let url = format!("{}{path}", self.base);
        let once = || self.attempt(self.http.post(&url).json(body).header("idempotency-key", key));
        let pauses = ExponentialBuilder::default().with_min_delay(Duration::from_millis(200)).with_max_times(4);
        once.retry(pauses)
            .when(|f: &Failure| f.again)
            .notify(|f: &Failure, pause| eprintln!("{}; trying again in {pause:?} with the same key", f.error))
            .call()
            .map_err(|f| f.error)
    }

    pub fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(b);
        }
        self.send(req)
    }

    /// The project the client acts in: the one a noauth token names
    /// (`user:project`, or `user` alone), or the Keystone token's.
    pub fn token_project(&self) -> String {
        self.project_id.clone().unwrap_or_default()
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        self.call(Method::GET, path, None)
    }

    /// Every item of the list `name` at `path`, following the `next` links
    /// (`<name>_links`) page after page, as the server pages it.
    pub fn get_all(&self, path: &str, name: &str) -> Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut next = Some(path.to_string());
        while let Some(p) = next.take() {
            let mut page = self.get(&p)?;
            items.extend(page[name].as_array_mut().map(std::mem::take).unwrap_or_default());
            let links = page[format!("{name}_links")].as_array().cloned().unwrap_or_default();
            next = links.iter().find(|l| l["rel"] == "next").and_then(|l| l["href"].as_str()).map(str::to_string);
        }
        Ok(items)
    }

    /// A long-lived GET (Server-Sent Events): no timeout; resumes after
    /// `last_event_id` when given.
    pub fn stream(&self, path: &str, last_event_id: Option<&str>) -> Result<reqwest::blocking::Response> {
        let http = reqwest::blocking::Client::builder().timeout(None).build()?;
        let mut req = http
            .get(format!("{}{path}", self.base))
            .header("x-auth-token", &self.token)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().map_err(|e| Unavailable(format!("{}: {e}", self.base)))?;
        if resp.status().is_server_error() {
            return Err(Unavailable(format!("{} answered {}", self.base, resp.status())).into());
        }
        if !resp.status().is_success() {
            let status = resp.status();
            let body: Value = serde_json::from_str(&resp.text()?).unwrap_or(Value::Null);
            let message = body.get("error_message").and_then(Value::as_str).unwrap_or("").to_string();
            return Err(anyhow!("{} {message}", status.as_u16()));
        }
        Ok(resp)
    }

    /// The columns to print: those `-c` named (each must be one of
    /// `available`), or `default`.
    fn pick(&self, default: &[String], available: &[String]) -> Result<Vec<String>> {
        if self.columns.is_empty() {
            return Ok(default.to_vec());
        }
        for c in &self.columns {
            if !available.contains(c) {
                bail!("no column {c:?}; the columns are: {}", available.join(", "));
            }
        }
        Ok(self.columns.clone())
    }

    /// A whole document in JSON or YAML.
    pub fn print_document(&self, v: &Value) -> Result<()> {
        match self.format {
            Format::Yaml => print!("{}", serde_norway::to_string(v)?),
            _ => println!("{}", serde_json::to_string_pretty(v)?),
        }
        Ok(())
    }

    /// One object: a two-column table of its fields, a document, its
    /// values one per line (`value`), or a header and a row (`csv`).
    pub fn print_object(&self, v: &Value) -> Result<()> {
        let Some(o) = v.as_object() else {
            return match self.format {
                Format::Json | Format::Yaml => self.print_document(v),
                _ => {
                    println!("{}", cell(v));
                    Ok(())
                }
            };
        };
        let keys: Vec<String> = o.keys().cloned().collect();
        let fields = self.pick(&keys, &keys)?;
        match self.format {
            Format::Json | Format::Yaml => self.print_document(&project(v, &fields, self.columns.is_empty())),
            Format::Table => {
                let rows: Vec<Vec<String>> =
                    fields.iter().map(|k| vec![k.clone(), field(k, &o[k], self.zone)]).collect();
                print_table(&["Field", "Value"], &rows);
                Ok(())
            }
            Format::Value => {
                for k in &fields {
                    println!("{}", field(k, &o[k], self.zone));
                }
                Ok(())
            }
            Format::Csv => {
                println!("{}", csv_row(&fields));
                println!("{}", csv_row(&fields.iter().map(|k| field(k, &o[k], self.zone)).collect::<Vec<_>>()));
                Ok(())
            }
        }
    }

    /// A list: one row per item with the columns named (or those `-c`
    /// picks among every item's fields), or the items as a document.
    pub fn print_list(&self, items: &[Value], columns: &[&str]) -> Result<()> {
        let default: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        let mut available = default.clone();
        for k in items.iter().filter_map(Value::as_object).flat_map(|o| o.keys()) {
            if !available.contains(k) {
                available.push(k.clone());
            }
        }
        let cols = self.pick(&default, &available)?;
        if matches!(self.format, Format::Json | Format::Yaml) {
            let items: Vec<Value> = items.iter().map(|i| project(i, &cols, self.columns.is_empty())).collect();
            return self.print_document(&Value::Array(items));
        }
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|i| cols.iter().map(|c| field(c, i.get(c).unwrap_or(&Value::Null), self.zone)).collect())
            .collect();
        let headers: Vec<&str> = cols.iter().map(String::as_str).collect();
        self.print_rows(&headers, &rows);
        Ok(())
    }

    /// Rows already made into cells: a table, the values of each row on a
    /// line (`value`), or CSV; `json` and `yaml` print the rows as objects.
    pub fn print_rows(&self, headers: &[&str], rows: &[Vec<String>]) {
        match self.format {
            Format::Table => print_table(headers, rows),
            Format::Value => {
                for r in rows {
                    println!("{}", r.join(" "));
                }
            }
            Format::Csv => {
                println!("{}", csv_row(headers));
                for r in rows {
                    println!("{}", csv_row(r));
                }
            }
            Format::Json | Format::Yaml => {
                let items: Vec<Value> = rows
                    .iter()
                    .map(|r| {
                        Value::Object(
                            headers
                                .iter()
                                .map(|h| h.to_string())
                                .zip(r.iter().map(|c| Value::String(c.clone())))
                                .collect(),
                        )
                    })
                    .collect();
                let _ = self.print_document(&Value::Array(items));
            }
        }
    }
}

/// `v` with only `fields` (in their order), or whole when `whole`.
fn project(v: &Value, fields: &[String], whole: bool) -> Value {
    match v.as_object() {
        Some(o) if !whole => {
            Value::Object(fields.iter().map(|f| (f.clone(), o.get(f).cloned().unwrap_or(Value::Null))).collect())
        }
        _ => v.clone(),
    }
}

/// One CSV line: a field with a comma, a quote or a line break is quoted.
fn csv_row<S: AsRef<str>>(fields: &[S]) -> String {
    fields
        .iter()
        .map(|f| {
            let f = f.as_ref();
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The cell of field `key`: a time (`*_date`, `*_at`) as the API writes it,
/// in UTC without a zone and to the microsecond (Blazar's form), is shown
/// in RFC 3339 to the second with its offset, in `zone` (`--tz`) or UTC,
/// `2030-01-03T09:00:00Z` or `2030-01-03T10:00:00+01:00`, which every date
/// option takes back; `-f json` keeps the API's form.
fn field(key: &str, v: &Value, zone: Option<Tz>) -> String {
    let time = key.ends_with("_date") || key.ends_with("_at");
    match v.as_str().filter(|_| time).and_then(|s| shown_time(s, zone)) {
        Some(t) => t,
        None => cell(v),
    }
}

fn shown_time(s: &str, zone: Option<Tz>) -> Option<String> {
    let t = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok()?.and_utc();
    Some(match zone {
        Some(zone) => t.with_timezone(&zone).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        None => t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            a.iter().map(cell).collect::<Vec<_>>().join(", ")
        }
        Value::Array(a) => a.iter().map(summary).collect::<Vec<_>>().join("\n"),
        Value::Object(_) => summary(v),
        other => other.to_string(),
    }
}

/// One line for a nested object: its short scalar fields as `key=value`,
/// leaving out bookkeeping a person does not read in a table (ids of the
/// parent, timestamps of the record itself). `-f json` shows everything.
fn summary(v: &Value) -> String {
    let Some(o) = v.as_object() else {
        return v.to_string();
    };
    o.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "created_at" | "updated_at" | "lease_id"))
        .filter_map(|(k, v)| match v {
            Value::Null => None,
            Value::String(s) => Some(format!("{k}={s}")),
            Value::Number(_) | Value::Bool(_) => Some(format!("{k}={v}")),
            Value::Array(a) => Some(format!("{k}=[{}]", a.len())),
            Value::Object(_) => Some(format!("{k}={v}")),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A table fitted to the terminal's width (or `COLUMNS`, when set);
/// cells may span lines.
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::ASCII_FULL_CONDENSED)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_header(headers.to_vec());
    if let Some(width) = std::env::var("COLUMNS").ok().and_then(|c| c.parse::<u16>().ok()) {
        table.set_width(width);
    }
    for r in rows {
        table.add_row(r.clone());
    }
    println!("{table}");
}

/// Splits `a=1,b=[x, y],c="p,q"` on the commas that are not inside
/// brackets or quotes, into key/value pairs.
pub fn key_values(s: &str) -> Result<Vec<(String, String)>> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut cur) = (0i32, None::<char>, String::new());
    for ch in s.chars() {
        match (ch, quote) {
            ('"' | '\'', None) => quote = Some(ch),
            (c, Some(q)) if c == q => quote = None,
            ('[' | '{', None) => depth += 1,
            (']' | '}', None) => depth -= 1,
            (',', None) if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    parts.push(cur);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').ok_or_else(|| anyhow!("{p:?} is not key=value"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// A lease id as given, or the id of the one lease named `given` (the
/// server finds by id only).
pub(crate) fn lease_id(client: &Client, given: &str) -> Result<String> {
    if uuid::Uuid::parse_str(given).is_ok() {
        return Ok(given.to_string());
    }
    let all = client.get_all("/v1/leases", "leases")?;
    let found: Vec<&Value> = all.iter().filter(|l| l["name"] == given).collect();
    match found.as_slice() {
        [one] => Ok(one["id"].as_str().unwrap_or_default().to_string()),
        [] => Err(anyhow!("no lease named {given:?}")),
        _ => Err(anyhow!("several leases are named {given:?}: use an id")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_keep_json_whole() {
        let kv =
            key_values("resource_type=physical:host,min=1,hypervisor_properties=[\">=\", \"$vcpus\", \"4\"]").unwrap();
        assert_eq!(kv.len(), 3);
        assert_eq!(kv[2], ("hypervisor_properties".into(), "[\">=\", \"$vcpus\", \"4\"]".into()));
        assert!(key_values("novalue").is_err());
    }

    #[test]
    fn times_are_shown_to_the_second_with_their_zone() {
        let v = |s: &str| Value::String(s.into());
        assert_eq!(field("start_date", &v("2031-03-10T09:00:00.000000"), None), "2031-03-10T09:00:00Z");
        assert_eq!(field("created_at", &v("2031-03-10T09:00:05.123456"), None), "2031-03-10T09:00:05Z");
        // Only times of time fields; anything else as it is.
        assert_eq!(field("name", &v("2031-03-10T09:00:00.000000"), None), "2031-03-10T09:00:00.000000");
        assert_eq!(field("end_date", &v("now"), None), "now");
        assert_eq!(field("updated_at", &Value::Null, None), "");
        // What is shown is what the date options take.
        let shown = field("start_date", &v("2031-03-10T09:00:00.000000"), None);
        let back = berth_core::dates::parse_date("start_date", &shown).unwrap();
        assert_eq!(back, berth_core::dates::parse_date("start_date", "2031-03-10 09:00").unwrap());
    }

    #[test]
    fn times_are_shown_in_the_zone_asked_with_its_offset() {
        let v = |s: &str| Value::String(s.into());
        let paris = Some(chrono_tz::Europe::Paris);
        assert_eq!(field("start_date", &v("2031-03-10T09:00:00.000000"), paris), "2031-03-10T10:00:00+01:00");
        assert_eq!(field("end_date", &v("2031-07-10T09:00:00.000000"), paris), "2031-07-10T11:00:00+02:00");
        let sydney = Some(chrono_tz::Australia::Sydney);
        assert_eq!(field("start_date", &v("2031-03-10T22:00:00.000000"), sydney), "2031-03-11T09:00:00+11:00");
        assert_eq!(field("start_date", &v("2031-03-10T09:00:00.000000"), Some(chrono_tz::UTC)), "2031-03-10T09:00:00Z");
        let shown = field("start_date", &v("2031-03-10T09:00:00.000000"), paris);
        let back = berth_core::dates::parse_date("start_date", &shown).unwrap();
        assert_eq!(back, berth_core::dates::parse_date("start_date", "2031-03-10 09:00").unwrap());
    }
}
