//! berth-bench's integration tests, one binary: what it reads of the tools
//! it runs.

use berth_bench::wrk_report::WrkResult;

#[test]
fn reads_wrks_report() {
    let text = "Running 2s test @ http://127.0.0.1:1\n  Latency Distribution\n     50%    3.42ms\n     75%    \
                5.00ms\n     90%  812.00us\n     99%    1.02s\n  4000 requests in 2.00s\n  Non-2xx or 3xx \
                responses: 3\nRequests/sec:   2000.50\n";
    let r = WrkResult::parse(text).unwrap();
    assert_eq!(r.requests_per_s, 2000.5);
    assert_eq!(r.p50_ms, 3.42);
    assert_eq!(r.p99_ms, 1020.0);
    assert_eq!(r.non_2xx, 3);
    assert!(WrkResult::parse("Socket errors: connect 0, read 2, write 0, timeout 0\nRequests/sec: 1\n").is_err());
}
