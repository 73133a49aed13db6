//! The claim statement appends its `LeaseEventClaimed` events itself, their
//! data built in SQL: it must be what serde writes for the same event,
//! timestamps to the byte, or the log would hold two spellings of one event.

use berth_core::dates::DateSpec;
use berth_core::lease::Demand;
use berth_core::{Event, EventMeta};
use chrono::{DateTime, Duration, Utc};

use super::claim::{claimed_type, rfc3339};
use crate::commands::{LeaseDates, NewLease, NewReservation};
use crate::log::Cursor;
use crate::testing::TestDatabase;

#[tokio::test]
async fn timestamps_are_written_as_serde_writes_them() {
    let db = TestDatabase::new().await;
    let store = db.store(2);
    let c = store.client().await.unwrap();
    let sql = format!("SELECT {} AS written", rfc3339("$1::timestamptz"));
    for t in [
        "2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05.120Z",
        "2026-12-31T23:59:59.123456Z",
        "2026-01-02T03:04:05.000100Z",
    ] {
        let t: DateTime<Utc> = t.parse().unwrap();
        let written: String = c.query_one(&sql, &[&t]).await.unwrap().get("written");
        assert_eq!(serde_json::Value::String(written), serde_json::to_value(t).unwrap());
    }
}

/// Claims (and a claim taken back after it expired) are in the log as the
/// events Rust would have appended, in the batch's order.
#[tokio::test]
async fn claims_are_logged_as_serde_writes_them() {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let meta = EventMeta { actor: Some("test".into()), ..Default::default() };
    let now = store.now().await.unwrap();
    for i in 0..3 {
        let new = NewLease {
            name: format!("l{i}"),
            project_id: "p1".into(),
            user_id: "alice".into(),
            dates: LeaseDates::One {
                start: DateSpec::At(now - Duration::seconds(i)),
                end: DateSpec::At(now + Duration::hours(1)),
                before_end: None,
            },
            reservations: vec![NewReservation {
                resource_type: "virtual:thing".into(),
                params: serde_json::json!({}),
                demand: Demand::Nothing,
            }],
        };
        store.create_lease(&meta, new).await.unwrap();
    }
    // No time to live: the claims expire at once and "other" takes them back.
    let first = store.claim_lease_events("dead", 10, Duration::zero()).await.unwrap();
    let again = store.claim_lease_events("other", 10, Duration::seconds(30)).await.unwrap();
    assert_eq!(first.len(), 3);
    assert_eq!(again.len(), 3);
    assert!(again.iter().all(|c| c.rescued_from.as_deref() == Some("dead") && c.attempt == 2), "{again:?}");
    // The log shows the claims once no older transaction (of any test on
    // the server) is still open.
    let mut logged = Vec::new();
    for _ in 0..200 {
        logged = store
            .read_log(Cursor::START, 1000)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.event_type == claimed_type())
            .collect();
        if logged.len() >= first.len() + again.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let expected: Vec<(Event, &str)> = first
        .iter()
        .map(|c| (c, "dead"))
        .chain(again.iter().map(|c| (c, "other")))
        .map(|(c, by)| {
            let event = Event::LeaseEventClaimed {
                lease: c.lease,
                event: c.event,
                event_type: c.event_type,
                attempt: c.attempt,
                claimed_by: by.to_string(),
                claim_expires_at: c.claim_expires_at,
                rescued_from: c.rescued_from.clone(),
                at: c.claimed_at,
            };
            (event, by)
        })
        .collect();
    assert_eq!(logged.len(), expected.len());
    for (got, (want, by)) in logged.iter().zip(&expected) {
        assert_eq!(got.data, want.to_parts().1, "the data as serde writes it");
        assert_eq!(&got.event().unwrap(), want);
        assert_eq!(got.meta["actor"], format!("manager:{by}"));
        assert_eq!(got.stream, want.stream());
    }
    assert!(store.replay_verify().await.unwrap().is_clean());
}
