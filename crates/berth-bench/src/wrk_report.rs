//! wrk's `--latency` report, read into the figures the bench prints.

use anyhow::{bail, ensure, Context, Result};

/// What one wrk run measured.
pub struct WrkResult {
    pub requests_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub non_2xx: u64,
}

impl WrkResult {
    /// The figures of wrk's `--latency` report.
    pub fn parse(text: &str) -> Result<WrkResult> {
        let after = |key: &str| text.lines().find_map(|l| l.trim().strip_prefix(key).map(str::trim));
        let requests_per_s: f64 = after("Requests/sec:").context("no Requests/sec in wrk's report")?.parse()?;
        let non_2xx = after("Non-2xx or 3xx responses:").map_or(Ok(0), str::parse)?;
        let socket_errors = after("Socket errors:");
        if let Some(e) = socket_errors {
            ensure!(e.split(',').all(|part| part.trim().ends_with(" 0")), "wrk saw socket errors: {e}");
        }
        Ok(WrkResult {
            requests_per_s,
            p50_ms: duration_ms(after("50%").context("no p50 in wrk's report")?)?,
            p99_ms: duration_ms(after("99%").context("no p99 in wrk's report")?)?,
            non_2xx,
        })
    }
}

/// wrk's durations: `812.00us`, `3.42ms`, `1.02s`.
fn duration_ms(s: &str) -> Result<f64> {
    let (number, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        bail!("a duration wrk does not write: {s}")
    };
    Ok(number.parse::<f64>()? * scale)
}
