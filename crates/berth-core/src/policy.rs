//! Lease policy beside quotas, as Blazar's enforcement filters have it: a
//! maximum lease duration, an extension window (a lease may be extended
//! past the maximum only within that long before its end, and then by at
//! most the maximum from its current end), and projects exempt from both.
//! The optional external policy service is called by the API; its answer
//! becomes [`denied`].

use std::collections::BTreeSet;

use chrono::{DateTime, Duration, Utc};

use crate::error::{Error, ErrorCode, ErrorKind};
use crate::time::DateMath;

/// The built-in rules. Empty: everything is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeasePolicy {
    pub max_duration: Option<Duration>,
    pub extension_window: Option<Duration>,
    pub exempt_projects: BTreeSet<String>,
}

fn seconds(d: Duration) -> i64 {
    d.num_seconds()
}

impl LeasePolicy {
    pub fn is_exempt(&self, project: &str) -> bool {
        self.exempt_projects.contains(project)
    }

    fn check_duration(&self, start: DateTime<Utc>, end: DateTime<Utc>, what: &str) -> Result<(), Error> {
        match self.max_duration {
            Some(max) if end - start > max => Err(Error::new(
                ErrorKind::Forbidden,
                ErrorCode::MaxLeaseDuration,
                format!(
                    "{what} of {} s is longer than the maximum lease duration of {} s",
                    seconds(end - start),
                    seconds(max)
                ),
            )),
            _ => Ok(()),
        }
    }

    /// A new lease (or one occurrence of a recurring one).
    pub fn check_create(&self, project: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> Result<(), Error> {
        if self.is_exempt(project) {
            return Ok(());
        }
        self.check_duration(start, end, "a lease")
    }

    /// A lease's window moving from `current` to `new`. Shortening (or
    /// leaving it be) is always allowed. Without an extension window the
    /// whole new window must fit the maximum; with one, an extension is
    /// allowed only within the window before the current end, and then
    /// the maximum counts from the current end.
    pub fn check_update(
        &self,
        project: &str,
        current: (DateTime<Utc>, DateTime<Utc>),
        new: (DateTime<Utc>, DateTime<Utc>),
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        if self.is_exempt(project) || (new.1 <= current.1 && new.0 >= current.0) {
            return Ok(());
        }
        match self.extension_window {
            Some(window) => {
                let opens = current.1.saturating_minus(window);
                if now < opens {
                    return Err(Error::new(
                        ErrorKind::Forbidden,
                        ErrorCode::ExtensionWindow,
                        format!(
                            "a lease may be extended only within {} s before its end ({}); try again from {}",
                            seconds(window),
                            current.1.format("%Y-%m-%d %H:%M:%S"),
                            opens.format("%Y-%m-%d %H:%M:%S")
                        ),
                    ));
                }
                self.check_duration(current.1.min(new.1).max(new.0), new.1, "an extension")
            }
            None => self.check_duration(new.0, new.1, "the lease"),
        }
    }
}

/// The external policy service refused, with its message.
pub fn denied(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Forbidden, ErrorCode::PolicyDenied, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap().plus("t", Duration::hours(h)).unwrap()
    }

    fn policy() -> LeasePolicy {
        LeasePolicy {
            max_duration: Some(Duration::hours(24)),
            extension_window: None,
            exempt_projects: BTreeSet::from(["ops".to_string()]),
        }
    }

    #[test]
    fn the_maximum_duration_bounds_new_leases_except_for_exempt_projects() {
        let p = policy();
        assert!(p.check_create("a", t(0), t(24)).is_ok());
        let e = p.check_create("a", t(0), t(25)).unwrap_err();
        assert_eq!((e.kind, e.code), (ErrorKind::Forbidden, ErrorCode::MaxLeaseDuration));
        assert!(p.check_create("ops", t(0), t(100)).is_ok());
        assert!(LeasePolicy::default().check_create("a", t(0), t(1000)).is_ok());
    }

    #[test]
    fn without_a_window_the_whole_lease_counts_and_shortening_is_free() {
        let p = policy();
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(24)), t(1)).is_ok());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(30)), t(1)).is_err());
        assert!(p.check_update("a", (t(0), t(48)), (t(0), t(30)), t(1)).is_ok());
    }

    #[test]
    fn with_a_window_extensions_wait_for_it_then_count_from_the_end() {
        let p = LeasePolicy { extension_window: Some(Duration::hours(2)), ..policy() };
        // Too early: the window opens at 18.
        let e = p.check_update("a", (t(0), t(20)), (t(0), t(30)), t(17)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ExtensionWindow);
        // Within it: up to 24 h more from the current end.
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(44)), t(19)).is_ok());
        assert_eq!(
            p.check_update("a", (t(0), t(20)), (t(0), t(45)), t(19)).unwrap_err().code,
            ErrorCode::MaxLeaseDuration
        );
        assert!(p.check_update("ops", (t(0), t(20)), (t(0), t(90)), t(1)).is_ok());
    }
}
