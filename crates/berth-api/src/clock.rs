//! Watching this process's clock against the database's.
//!
//! Nothing decides on the local clock (every time-based decision reads the
//! database's, see `berth_store::clock`), so a berthd whose clock is off
//! stays correct. The offset is still worth knowing: it is measured at
//! start and every minute, exported as `berth_clock_offset_seconds`, logged
//! as a warning past a threshold and shown by `/readyz`, so that the
//! operator fixes NTP.

use std::time::Duration;

use berth_app::health::ClockOffset;
use berth_app::App;

/// Local clock minus the database's, in seconds.
pub const OFFSET: &str = "berth_clock_offset_seconds";
/// How often the offset is measured.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// The default warning threshold, in seconds.
pub const DEFAULT_WARN_S: f64 = 1.0;

/// The threshold past which an offset is warned about. Cheap to clone.
#[derive(Clone)]
pub struct ClockWatch {
    warn_past_s: f64,
}

impl Default for ClockWatch {
    fn default() -> Self {
        ClockWatch::new(DEFAULT_WARN_S)
    }
}

impl ClockWatch {
    pub fn new(warn_past_s: f64) -> ClockWatch {
        ClockWatch { warn_past_s }
    }

    /// Describes the metric (for the exporter's HELP line).
    pub fn describe() {
        metrics::describe_gauge!(
            OFFSET,
            metrics::Unit::Seconds,
            "This berthd's clock minus the database's (decisions use the database's)"
        );
        metrics::gauge!(OFFSET).set(0.0);
    }

    pub fn warn_past_s(&self) -> f64 {
        self.warn_past_s
    }

    /// Whether `offset` is past the warning threshold.
    pub fn skewed(&self, offset: &ClockOffset) -> bool {
        offset.seconds.abs() > self.warn_past_s
    }

    /// Measures the offset now and exports it.
    pub async fn measure(&self, app: &App) -> Result<ClockOffset, berth_core::Error> {
        let offset = app.health().clock_offset().await?;
        metrics::gauge!(OFFSET).set(offset.seconds);
        Ok(offset)
    }

    /// Measures at start and every [`INTERVAL`] for as long as it runs,
    /// warning each time the offset is past the threshold.
    pub async fn run(self, app: App) {
        loop {
            match self.measure(&app).await {
                Ok(offset) if self.skewed(&offset) => tracing::warn!(
                    offset_s = offset.seconds,
                    threshold_s = self.warn_past_s,
                    "this host's clock is off from the database's: nothing decides on it, but fix its time sync"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "measuring the clock offset"),
            }
            tokio::time::sleep(INTERVAL).await;
        }
    }
}
