//! Readiness for a systemd `Type=notify` unit (the packaged one): READY=1
//! once the schema is migrated and the listener bound, STOPPING=1 when a
//! shutdown begins. Without `NOTIFY_SOCKET` (a shell, a container) nothing
//! is sent.

use sd_notify::NotifyState;

/// Migrated and listening: systemd may start what comes after berthd.
pub fn ready(listen: &str) {
    let status = format!("serving on {listen}");
    send(&[NotifyState::Ready, NotifyState::Status(&status)]);
}

/// Finishing what is in flight before exiting.
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

fn send(states: &[NotifyState]) {
    // A service manager that cannot be told only loses the news; serving goes on.
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "telling the service manager (NOTIFY_SOCKET)");
    }
}
