//! Offers against a brute force: seeded calendars of three hosts and
//! hour-long leases; for the start times offers try (`from`, and each end
//! of a lease within the range of starts), a minute-stepped scan of the
//! calendar finds the longest fitting duration and the most hosts, ranked
//! as documented; the offers must be its first `limit`.

use std::collections::BTreeSet;

use berth_testkit::{Server, ALICE, BOB};
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use reqwest::StatusCode;
use serde_json::json;

use super::{at, base, enrol, hosts, lease, offers, parsed};

const HOSTS: usize = 3;
const CASES: u32 = 30;
/// Hours between two cases' calendars: further than any reaches.
const APART: i64 = 72;

/// A calendar and a question about it, in hours after the case's base.
#[derive(Debug, Clone)]
struct Case {
    leases: Vec<(usize, i64, i64)>,
    min: u32,
    max: u32,
    shortest: i64,
    longest: i64,
    from: i64,
    until: i64,
    limit: usize,
    order: &'static str,
}

fn cases() -> impl Strategy<Value = Case> {
    let leases = prop::collection::vec((0..HOSTS, 0i64..20, 1i64..6), 0..9);
    let counts = (1u32..=2).prop_flat_map(|min| (Just(min), min..=3));
    let durations = (1i64..=3).prop_flat_map(|s| (Just(s), s..=s + 5));
    let starts = (0i64..4).prop_flat_map(|f| (Just(f), f..=f + 12));
    let order = prop::sample::select(vec!["earliest", "longest", "capacity"]);
    (leases, counts, durations, starts, 1usize..=6, order).prop_map(
        |(leases, (min, max), (shortest, longest), (from, until), limit, order)| Case {
            leases: leases.into_iter().map(|(h, s, n)| (h, s, s + n)).collect(),
            min,
            max,
            shortest,
            longest,
            from,
            until,
            limit,
            order,
        },
    )
}

/// What the brute force finds: (start, duration, hosts).
type Expected = (DateTime<Utc>, Duration, u64);

/// The hosts free over `[s, e)` in the calendar `booked` (host, start, end).
fn free(booked: &[(usize, DateTime<Utc>, DateTime<Utc>)], s: DateTime<Utc>, e: DateTime<Utc>) -> u64 {
    (0..HOSTS).filter(|h| !booked.iter().any(|(bh, bs, be)| bh == h && *bs < e && s < *be)).count() as u64
}

fn brute_force(c: &Case, b: DateTime<Utc>, booked: &[(usize, DateTime<Utc>, DateTime<Utc>)]) -> Vec<Expected> {
    let (from, until) = (b + Duration::hours(c.from), b + Duration::hours(c.until));
    let mut starts: BTreeSet<DateTime<Utc>> = BTreeSet::from([from]);
    starts.extend(booked.iter().map(|l| l.2).filter(|e| *e > from && *e <= until));
    let mut found = Vec::new();
    for s in starts {
        let (shortest, longest) = (Duration::hours(c.shortest), Duration::hours(c.longest));
        let mut d = longest;
        while d >= shortest {
            let n = free(booked, s, s + d);
            if n >= u64::from(c.min) {
                found.push((s, d, n.min(u64::from(c.max))));
                break;
            }
            d -= Duration::minutes(1);
        }
    }
    match c.order {
        "earliest" => found.sort_by_key(|(s, d, n)| (*s, -*d, std::cmp::Reverse(*n))),
        "longest" => found.sort_by_key(|(s, d, n)| (-*d, *s, std::cmp::Reverse(*n))),
        _ => found.sort_by_key(|(s, d, n)| (std::cmp::Reverse(*n), *s, -*d)),
    }
    found.truncate(c.limit);
    found
}

#[tokio::test]
async fn offers_are_the_brute_forces_best_under_each_order() {
    let s = Server::start().await;
    for h in 0..HOSTS {
        enrol(&s, &format!("h{h}")).await;
    }
    let mut runner = TestRunner::new(Config { cases: CASES, failure_persistence: None, ..Config::default() });
    let strategy = cases();
    let start = base();
    for k in 0..CASES {
        let c = strategy.new_tree(&mut runner).expect("a case").current();
        let b = start + Duration::hours(APART * i64::from(k));
        let mut booked = Vec::new();
        for (i, (h, from, to)) in c.leases.iter().enumerate() {
            let body = lease(&format!("c{k}-{i}"), b, *from, *to, 1, Some(&format!("h{h}")));
            let (st, e) = s.post("/v1/leases", BOB, body).await;
            match st {
                StatusCode::CREATED => booked.push((*h, b + Duration::hours(*from), b + Duration::hours(*to))),
                StatusCode::CONFLICT => {}
                _ => panic!("{st} {e}"),
            }
        }
        let body = json!({
            "reservations": [{"resource_type": "physical:host", "min": c.min, "max": c.max}],
            "duration": {"min": format!("{}h", c.shortest), "max": format!("{}h", c.longest)},
            "from": at(b, c.from), "until": at(b, c.until), "limit": c.limit, "order": c.order,
        });
        let got: Vec<Expected> = offers(&s, ALICE, body)
            .await
            .iter()
            .map(|o| {
                let (st, en) = (parsed(&o["start_date"]), parsed(&o["end_date"]));
                assert_eq!(o["duration"].as_i64(), Some((en - st).num_seconds()), "{o}");
                (st, en - st, hosts(o))
            })
            .collect();
        for (st, d, n) in &got {
            assert!(free(&booked, *st, *st + *d) >= *n, "case {k} {c:?}: an offer that does not fit");
        }
        assert_eq!(got, brute_force(&c, b, &booked), "case {k}: {c:?}\nbooked {booked:?}");
    }
    s.assert_no_panic();
}
