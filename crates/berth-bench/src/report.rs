//! What `make bench` prints.

use std::time::Duration;

pub struct Report {
    lines: Vec<String>,
    pgbench_tps: f64,
    /// The cores this machine gives the run (database, Berth and load
    /// generator share them): every ratio is printed with it, as ratios
    /// move with the machine.
    cores: usize,
}

impl Default for Report {
    fn default() -> Report {
        Report {
            lines: Vec::new(),
            pgbench_tps: 0.0,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

impl Report {
    pub fn cores(&self) -> usize {
        self.cores
    }

    pub fn set_baseline(&mut self, tps: f64) {
        self.pgbench_tps = tps;
    }

    pub fn line(&mut self, s: String) {
        println!("{s}");
        self.lines.push(s);
    }

    /// A rate, with its ratio to pgbench's TPS.
    pub fn rate(&mut self, what: &str, per_second: f64) {
        let ratio = if self.pgbench_tps > 0.0 { per_second / self.pgbench_tps } else { f64::NAN };
        self.line(format!("{what}: {per_second:.0}/s, ratio to pgbench TPS {ratio:.2} on {} cores", self.cores));
    }

    /// A rate, with its ratio to pgbench's TPS and the ratio the issue
    /// asks for beside it.
    pub fn rate_against(&mut self, what: &str, per_second: f64, target_ratio: f64) {
        let ratio = if self.pgbench_tps > 0.0 { per_second / self.pgbench_tps } else { f64::NAN };
        self.line(format!(
            "{what}: {per_second:.0}/s, ratio to pgbench TPS {ratio:.2} on {} cores (target {target_ratio:.2})",
            self.cores
        ));
    }

    /// A process's resident memory `(now, peak)` in MB, with the bound the
    /// issue sets where it sets one.
    pub fn memory(&mut self, whose: &str, when: &str, (now, peak): (f64, f64), bound_mb: Option<f64>) {
        let bound = bound_mb.map(|b| format!(" (target at most {b:.0} MB)")).unwrap_or_default();
        self.line(format!("{whose} resident memory {when}: {now:.0} MB, peak {peak:.0} MB{bound}"));
    }

    pub fn print(&self) {
        println!("\n== summary ==");
        for l in &self.lines {
            println!("{l}");
        }
    }
}

/// p-th percentile (0..=100) of latencies.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
