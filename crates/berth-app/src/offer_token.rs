//! An offer's id (`offers` makes it, `leases` books it): what the offer
//! would book, sealed with a MAC, so that any berthd sharing the database
//! (which holds the key) can book it and nothing is kept per offer.
//! `base64url(payload) "." base64url(mac)`, the MAC HMAC-SHA256 over the
//! payload's bytes, checked in constant time before anything of the
//! payload is read.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The longest id read: larger ones are refused unread (an offer's own
/// stays well within it; the offer refuses to make one beyond).
pub const MAX_TOKEN: usize = 16 * 1024;

/// The version of the payload's shape.
const VERSION: u8 = 1;

/// A reservation as the offer would book it, its counts fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Booked {
    pub resource_type: String,
    pub params: Value,
}

/// What an offer promises to try: the lease's id, whose it is, its window,
/// its reservations, until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    pub v: u8,
    pub id: Uuid,
    pub project: String,
    pub user: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub reservations: Vec<Booked>,
    pub expires: DateTime<Utc>,
}

impl Payload {
    pub fn new(
        project: &str,
        user: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        reservations: Vec<Booked>,
        expires: DateTime<Utc>,
    ) -> Payload {
        let (project, user) = (project.to_string(), user.to_string());
        Payload { v: VERSION, id: Uuid::new_v4(), project, user, start, end, reservations, expires }
    }
}

fn mac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// The id of `payload` under `key`; `None` when it would be longer than
/// [`MAX_TOKEN`].
pub fn seal(key: &[u8], payload: &Payload) -> Option<String> {
    let body = serde_json::to_vec(payload).expect("a payload serializes");
    let mut m = mac(key);
    m.update(&body);
    let tag = m.finalize().into_bytes();
    let token = format!("{}.{}", URL_SAFE_NO_PAD.encode(&body), URL_SAFE_NO_PAD.encode(tag));
    (token.len() <= MAX_TOKEN).then_some(token)
}

/// The payload `token` carries, if `key` sealed it; `None` for anything
/// else (too long, garbled, forged, or of another shape), alike.
pub fn open(key: &[u8], token: &str) -> Option<Payload> {
    if token.len() > MAX_TOKEN {
        return None;
    }
    let (body, tag) = token.split_once('.')?;
    let body = URL_SAFE_NO_PAD.decode(body).ok()?;
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    let mut m = mac(key);
    m.update(&body);
    m.verify_slice(&tag).ok()?;
    let payload: Payload = serde_json::from_slice(&body).ok()?;
    (payload.v == VERSION).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Payload {
        let t = DateTime::<Utc>::UNIX_EPOCH;
        let r = Booked { resource_type: "physical:host".into(), params: serde_json::json!({"min": 2, "max": 2}) };
        Payload::new("p", "u", t, t, vec![r], t)
    }

    #[test]
    fn a_sealed_payload_opens_with_its_key_only() {
        let p = payload();
        let token = seal(b"0123456789abcdef", &p).unwrap();
        assert_eq!(open(b"0123456789abcdef", &token), Some(p));
        assert_eq!(open(b"another key 0123", &token), None);
    }

    #[test]
    fn a_changed_token_opens_to_nothing() {
        let key = b"0123456789abcdef";
        let token = seal(key, &payload()).unwrap();
        let (body, tag) = token.split_once('.').unwrap();
        let mut json = URL_SAFE_NO_PAD.decode(body).unwrap();
        let at = json.iter().position(|b| *b == b'2').unwrap();
        json[at] = b'9';
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(json));
        assert_eq!(open(key, &forged), None);
        for bad in ["", ".", "x.y", &token[1..], &format!("{token}x"), &"a".repeat(MAX_TOKEN + 1)] {
            assert_eq!(open(key, bad), None, "{bad:.40}");
        }
    }
}
