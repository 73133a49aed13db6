//! The notifier's metrics (exported by berthd's `/metrics`).

pub const DELIVERED: &str = "berth_notifications_delivered_total";
pub const FAILED: &str = "berth_notifications_failed_total";
pub const DROPPED: &str = "berth_notifications_dropped_total";

/// Describes every series and creates it at zero for each sink kind.
pub fn describe() {
    metrics::describe_counter!(DELIVERED, "Lease notifications a sink took, by sink");
    metrics::describe_counter!(FAILED, "Failed attempts to deliver a lease notification, by sink");
    metrics::describe_counter!(DROPPED, "Lease notifications a sink kept refusing, given up, by sink");
    for name in [DELIVERED, FAILED, DROPPED] {
        for sink in ["log", "webhook"] {
            let _ = metrics::counter!(name, "sink" => sink);
        }
    }
}

pub(crate) fn count(name: &'static str, sink: &'static str) {
    metrics::counter!(name, "sink" => sink).increment(1);
}
