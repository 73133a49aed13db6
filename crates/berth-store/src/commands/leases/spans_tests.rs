//! A whole-host lease decided on the hosts nearest its window by their
//! free spans (`queries::spans`) takes a host as tight as best fit takes
//! over every candidate, on the same cloud as the near read's tests:
//! property queries, cleaning times, hosts that may not be placed on,
//! demands only berth-core decides, window after window, each then booked.

use chrono::{Duration, DurationRound};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::near_tests::{
    big_demand, book, cloud, gaps, hosts_demand, one, try_create, window, zone_demand, BOOKED, HOSTS, PROBES,
};
use super::plan::read_spans;
use crate::queries::fit::{decide, gather_candidates, Item};
use crate::testing::TestDatabase;

#[tokio::test]
async fn hosts_nearest_by_their_free_spans_pack_the_calendar_as_every_host_does() {
    let db = TestDatabase::new().await;
    let cleaning = Duration::minutes(30);
    let store = db.store(4).with_cleaning_time(cleaning.to_std().unwrap());
    let ids = cloud(&store).await;
    let base = (store.now().await.unwrap() + Duration::days(1)).duration_trunc(Duration::hours(1)).unwrap();
    let mut rng = StdRng::seed_from_u64(32);
    for k in 0..BOOKED {
        let on = ids[rng.gen_range(10..HOSTS)];
        let w = window(&mut rng, base);
        let _ = try_create(&store, &format!("b{k}"), w, one(None), Some(on)).await;
    }
    let (mut used, mut same_host) = (0, 0);
    for k in 0..PROBES {
        let w = window(&mut rng, base);
        let rack = rng.gen_bool(0.3).then(|| rng.gen_range(0..4));
        let max = if rng.gen_bool(0.2) { 3 } else { 1 };
        let demand = match rng.gen_range(0..10) {
            0..3 => zone_demand(max),
            3..5 => big_demand(max),
            _ => hosts_demand(rack, max),
        };
        let items = [Item::Place(&demand, Vec::new())];
        let draw = rng.gen_bool(0.5).then(|| rng.gen());
        let c = store.client().await.unwrap();
        let nearest = read_spans(&c, "p1", &items, &[w], cleaning, draw).await.unwrap();
        let mut full = gather_candidates(&c, "p1", &items, w, w, cleaning).await.unwrap();
        full.draw = draw;
        drop(c);
        let by_all = decide(&mut full.clone(), "p1", &items, &[w]);
        if let Some(g) = nearest {
            used += 1;
            let by_spans = decide(&mut g.clone(), "p1", &items, &[w]);
            match (&by_spans, &by_all) {
                (Ok(n), Ok(a)) => {
                    assert_eq!(gaps(&g, n, &w), gaps(&full, a, &w), "probe {k} over {w:?}: as tight as every host");
                    for p in &n[0][0] {
                        assert!(![ids[7], ids[8], ids[9]].contains(&p.provider), "probe {k}: a host it may not use");
                    }
                    same_host += usize::from(n == a);
                }
                (Err(_), Err(_)) => {}
                _ => panic!("probe {k} over {w:?}: spans {:?}, every host {:?}", by_spans.is_ok(), by_all.is_ok()),
            }
        }
        book(&store, format!("l{k}"), w, demand).await;
    }
    assert!(used >= PROBES / 2, "decided on the nearest spans {used} times of {PROBES}");
    assert!(same_host >= used * 9 / 10, "the same hosts {same_host} times of {used}");
}
