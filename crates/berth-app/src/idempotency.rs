//! Idempotency keys: a client that retries a create (a timeout, a dropped
//! connection) sends the same key and gets what its first request made
//! instead of a second one. The key is the caller's own (project and
//! user); the request is known again by a hash of its route and body, so
//! one key cannot stand for a lease and a host. What a key replays is the
//! store's (`Keyed`); a lease create whose leases have since been deleted
//! is refused ([`crate::leases`]).

use berth_store::commands::RequestKey;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The key `key` of `project`'s `user`, for a request to `route` with `body`.
pub fn request_key(project: &str, user: &str, key: &str, route: &str, body: &Map<String, Value>) -> RequestKey {
    RequestKey { caller: format!("{project}:{user}"), key: key.to_string(), fingerprint: fingerprint(route, body) }
}

/// A hash of the route and of the body as JSON with its object keys sorted
/// at every depth (serde_json's map keeps the request's order, so they are
/// sorted here): the same request however its keys were ordered, and one
/// key cannot stand for a lease and a host.
fn fingerprint(route: &str, body: &Map<String, Value>) -> String {
    let mut hash = Sha256::new();
    hash.update(route.as_bytes());
    hash.update([0]);
    hash.update(serde_json::to_vec(&Sorted(&Value::Object(body.clone()))).expect("a JSON value writes to memory"));
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A JSON value written with its objects' keys in sorted order.
struct Sorted<'a>(&'a Value);

impl serde::Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(o) => {
                let mut entries: Vec<(&String, &Value)> = o.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                s.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
            }
            Value::Array(a) => s.collect_seq(a.iter().map(Sorted)),
            v => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_body_in_another_key_order_has_the_same_fingerprint() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"name": "l", "end_date": "x", "n": [1, 2]}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"n": [1, 2], "end_date": "x", "name": "l"}"#).unwrap();
        let c: Map<String, Value> = serde_json::from_str(r#"{"n": [2, 1], "end_date": "x", "name": "l"}"#).unwrap();
        let d: Map<String, Value> = serde_json::from_str(r#"{"n": [{"b": 1, "a": 2}], "end_date": "x"}"#).unwrap();
        let e: Map<String, Value> = serde_json::from_str(r#"{"end_date": "x", "n": [{"a": 2, "b": 1}]}"#).unwrap();
        assert_eq!(fingerprint("leases", &d), fingerprint("leases", &e), "nested objects too");
        // The hash of the sorted text, as keys already recorded were made.
        let sorted = Sha256::new()
            .chain_update(b"leases\0")
            .chain_update(br#"{"end_date":"x","n":[{"a":2,"b":1}]}"#)
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        assert_eq!(fingerprint("leases", &d), sorted);
        assert_eq!(fingerprint("leases", &a), fingerprint("leases", &b));
        assert_ne!(fingerprint("leases", &a), fingerprint("leases", &c));
        assert_ne!(fingerprint("leases", &a), fingerprint("hosts", &a));
    }
}
