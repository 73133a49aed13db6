//! What must hold after the upgrade.

use std::time::{Duration, Instant};

use berth_store::queries::lease_events::LeaseEventRow;
use chrono::{DateTime, Utc};

pub(crate) use crate::ha::checks::every_lease_event_done_once;
use crate::ha::load::{Op, Outcome};

/// How long after the new berthd is ready a 503 is still the migration's.
const SETTLED: Duration = Duration::from_secs(5);

/// Every request answered, none with an error: 409 only for a claim the
/// provider has no room for (the load asks for more than it holds), 404
/// only for a delete of a claim without a clear answer. A 503 (with
/// `Retry-After` and the code: a statement that waited out its timeout)
/// is let pass only while the new berthd migrates; there has been none so far.
pub fn every_answer_clean(outcomes: &[Outcome], joining: Instant, joined: Instant) {
    let mut unavailable = 0;
    for o in outcomes {
        let status = o.status.unwrap_or_else(|| panic!("no answer: {o:?}"));
        match (o.op, status) {
            (_, 200 | 201 | 204) | (Op::Claim, 409) | (Op::Delete, 404) => {}
            (_, 503) => {
                unavailable += 1;
                assert!(o.retry_after, "503 without Retry-After: {o:?}");
                let code = o.body["code"].as_str().or(o.body["errors"][0]["code"].as_str());
                assert_eq!(code, Some("berth.unavailable"), "{o:?}");
                assert!(o.finished >= joining && o.finished <= joined + SETTLED, "503 outside the migration: {o:?}");
            }
            _ => panic!("an error: {o:?}"),
        }
    }
    let served = |op| outcomes.iter().filter(|o| o.op == op && o.ok()).count();
    println!(
        "{} requests: {} claims, {} deletes, {} leases made; {unavailable} answered 503",
        outcomes.len(),
        served(Op::Claim),
        served(Op::Delete),
        served(Op::Lease)
    );
    for op in [Op::Claim, Op::Delete, Op::Lease] {
        assert!(served(op) > 0, "no {op:?} served");
    }
}

/// The old berthd fired lease events before the new one joined, and the
/// new one fired every event due after the old one stopped.
pub fn both_fired(rows: &[LeaseEventRow], old: u32, new: u32, joining: DateTime<Utc>, stopped: DateTime<Utc>) {
    // A manager's name is `<host>-<pid>-<suffix>`.
    let by = |e: &LeaseEventRow, pid: u32| e.claimed_by.as_deref().is_some_and(|c| c.contains(&format!("-{pid}-")));
    let old_before = rows.iter().filter(|e| e.time < joining && by(e, old)).count();
    let after: Vec<_> = rows.iter().filter(|e| e.time > stopped).collect();
    let overlap = |pid| rows.iter().filter(|e| e.time >= joining && e.time <= stopped && by(e, pid)).count();
    println!(
        "lease events fired: {old_before} by the old berthd before the new joined; while both ran, {} by the old and \
         {} by the new; {} after the old stopped",
        overlap(old),
        overlap(new),
        after.len()
    );
    assert!(old_before > 0, "the old berthd fired nothing before the new one joined");
    assert!(!after.is_empty(), "no lease event fell due after the old berthd stopped");
    for e in after {
        assert!(by(e, new), "an event due after the old berthd stopped, not fired by the new one: {e:?}");
    }
}
