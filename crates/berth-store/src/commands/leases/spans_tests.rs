//! A whole-host lease decided on the hosts nearest its window by their
//! free spans (`queries::spans`) takes a host as tight as best fit takes
//! over every candidate, on the same cloud as the near read's tests:
//! property queries, cleaning times, hosts that may not be placed on,
//! demands only berth-core decides, window after window, each then booked.
//! In the store's tests the spans read ranks a host more than the lease
//! takes and walks four times that (`spans::ranked`), so the walk and the
//! ranking are cut and the bound must vouch for the choice.

use super::near_tests::{probe_against_every_host, Read, PROBES};

#[tokio::test]
async fn hosts_nearest_by_their_free_spans_pack_the_calendar_as_every_host_does() {
    let (used, same_host) = probe_against_every_host(32, Read::Spans).await;
    assert!(used >= PROBES / 2, "decided on the nearest spans {used} times of {PROBES}");
    assert!(same_host >= used * 9 / 10, "the same hosts {same_host} times of {used}");
}
