//! HTTP to berthd and printing what it answers, as a table or as JSON.

use anyhow::{anyhow, Result};
use reqwest::blocking::RequestBuilder;
use reqwest::Method;
use serde_json::Value;

use crate::Format;

pub struct Client {
    base: String,
    token: String,
    project_id: Option<String>,
    pub format: Format,
    http: reqwest::blocking::Client,
}

impl Client {
    pub fn new(base: &str, identity: crate::auth::Identity, format: Format) -> Client {
        Client {
            base: base.trim_end_matches('/').to_string(),
            token: identity.token,
            project_id: identity.project_id,
            format,
            http: reqwest::blocking::Client::new(),
        }
    }

    fn send(&self, req: RequestBuilder) -> Result<Value> {
        let resp = req.header("x-auth-token", &self.token).header("accept", "application/json").send()?;
        let status = resp.status();
        let text = resp.text()?;
        let body: Value =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        if !status.is_success() {
            let message =
                body.get("error_message").and_then(Value::as_str).map(str::to_string).unwrap_or(body.to_string());
            let code = body.get("code").and_then(Value::as_str).unwrap_or("");
            return Err(anyhow!("{} {message} [{code}]", status.as_u16()));
        }
        Ok(body)
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
        let resp = req.send()?;
        if !resp.status().is_success() {
            let status = resp.status();
            let body: Value = serde_json::from_str(&resp.text()?).unwrap_or(Value::Null);
            let message = body.get("error_message").and_then(Value::as_str).unwrap_or("").to_string();
            return Err(anyhow!("{} {message}", status.as_u16()));
        }
        Ok(resp)
    }

    /// One object: a two-column table of its fields, or JSON.
    pub fn print_object(&self, v: &Value) {
        if self.format == Format::Json {
            println!("{}", serde_json::to_string_pretty(v).expect("json"));
            return;
        }
        let rows: Vec<Vec<String>> = match v.as_object() {
            Some(o) => o.iter().map(|(k, v)| vec![k.clone(), cell(v)]).collect(),
            None => vec![vec!["value".into(), cell(v)]],
        };
        print_table(&["Field", "Value"], &rows);
    }

    /// A list: one row per item with the columns named, or JSON.
    pub fn print_list(&self, items: &[Value], columns: &[&str]) {
        if self.format == Format::Json {
            println!("{}", serde_json::to_string_pretty(items).expect("json"));
            return;
        }
        let rows: Vec<Vec<String>> =
            items.iter().map(|i| columns.iter().map(|c| cell(i.get(*c).unwrap_or(&Value::Null))).collect()).collect();
        print_table(columns, &rows);
    }
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

/// A table; cells may span lines.
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::ASCII_FULL_CONDENSED).set_header(headers.to_vec());
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
}
