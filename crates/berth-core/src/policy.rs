//! Lease policy beside quotas, as Blazar's enforcement filters have it: a
//! maximum lease duration, an extension window (a lease may be extended
//! past the maximum only within that long before its end, and then by at
//! most the maximum from its current end), and projects exempt from all
//! of these. As the clouds that sell reserved capacity have it, an
//! extension cut-off (no extension asked later than that long before the
//! end) and a minimum extension.
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
    /// No extension asked later than this long before the current end.
    pub extension_cutoff: Option<Duration>,
    /// An extension moves the end by at least this much.
    pub min_extension: Option<Duration>,
    pub exempt_projects: BTreeSet<String>,
}

/// When and by how much a lease ending at `end` may be extended, as the
/// built-in rules say; every bound `None` for an exempt project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionTerms {
    /// The extension window opens: no extension asked before it.
    pub opens: Option<DateTime<Utc>>,
    /// The cut-off: no extension asked after it.
    pub closes: Option<DateTime<Utc>>,
    /// The shortest extension.
    pub minimum: Option<Duration>,
    /// The latest end an extension may reach (the maximum duration).
    pub latest_end: Option<DateTime<Utc>>,
}

/// `t` as the policy's errors write it.
fn shown(t: DateTime<Utc>) -> impl std::fmt::Display {
    t.format("%Y-%m-%d %H:%M:%S")
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

    /// What [`Self::check_update`] would allow of an extension of a lease
    /// of `project` from `start`..`end`.
    pub fn extension_terms(&self, project: &str, start: DateTime<Utc>, end: DateTime<Utc>) -> ExtensionTerms {
        if self.is_exempt(project) {
            return ExtensionTerms { opens: None, closes: None, minimum: None, latest_end: None };
        }
        let latest_end = self.max_duration.map(|max| match self.extension_window {
            Some(_) => end.saturating_plus(max),
            None => start.saturating_plus(max),
        });
        ExtensionTerms {
            opens: self.extension_window.map(|w| end.saturating_minus(w)),
            closes: self.extension_cutoff.map(|c| end.saturating_minus(c)),
            minimum: self.min_extension,
            latest_end,
        }
    }

    /// A lease's window moving from `current` to `new`. Shortening (or
    /// leaving it be) is always allowed. An end moved later is an
    /// extension: refused after the cut-off or by less than the minimum.
    /// Without an extension window the whole new window must fit the
    /// maximum; with one, an extension is allowed only within the window
    /// before the current end, and then the maximum counts from the
    /// current end.
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
        if new.1 > current.1 {
            self.check_extension(current.1, new.1, now)?;
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
                            shown(current.1),
                            shown(opens)
                        ),
                    ));
                }
                self.check_duration(current.1.min(new.1).max(new.0), new.1, "an extension")
            }
            None => self.check_duration(new.0, new.1, "the lease"),
        }
    }

    /// The end moving from `end` to the later `new_end`, asked at `now`.
    fn check_extension(&self, end: DateTime<Utc>, new_end: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), Error> {
        if let Some(cutoff) = self.extension_cutoff {
            let closes = end.saturating_minus(cutoff);
            if now > closes {
                return Err(Error::new(
                    ErrorKind::Forbidden,
                    ErrorCode::ExtensionCutoff,
                    format!(
                        "extensions close {} s before a lease's end: this one ends at {}, so they closed at {}",
                        seconds(cutoff),
                        shown(end),
                        shown(closes)
                    ),
                ));
            }
        }
        match self.min_extension {
            Some(min) if new_end - end < min => Err(Error::new(
                ErrorKind::Forbidden,
                ErrorCode::ExtensionTooShort,
                format!(
                    "an extension of {} s is shorter than the minimum of {} s; extend to {} or later",
                    seconds(new_end - end),
                    seconds(min),
                    shown(end.saturating_plus(min))
                ),
            )),
            _ => Ok(()),
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
            extension_cutoff: None,
            min_extension: None,
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

    #[test]
    fn extensions_close_at_the_cutoff_and_move_the_end_by_the_minimum() {
        let p = LeasePolicy {
            max_duration: None,
            extension_cutoff: Some(Duration::hours(1)),
            min_extension: Some(Duration::hours(2)),
            ..policy()
        };
        // Up to an hour before the end of 20: allowed, by two hours or more.
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(22)), t(19)).is_ok());
        let e = p.check_update("a", (t(0), t(20)), (t(0), t(22)), t(19) + Duration::seconds(1)).unwrap_err();
        assert_eq!((e.kind, e.code), (ErrorKind::Forbidden, ErrorCode::ExtensionCutoff), "{}", e.detail);
        assert!(e.detail.contains("closed at 2030-01-01 19:00:00"), "{}", e.detail);
        let e = p.check_update("a", (t(0), t(20)), (t(0), t(21)), t(1)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ExtensionTooShort, "{}", e.detail);
        assert!(e.detail.contains("extend to 2030-01-01 22:00:00 or later"), "{}", e.detail);
        // Shortening, or moving only the start, is no extension; exempt projects pass.
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(19)), t(30)).is_ok());
        assert!(p.check_update("a", (t(2), t(20)), (t(1), t(20)), t(30)).is_ok());
        assert!(p.check_update("ops", (t(0), t(20)), (t(0), t(21)), t(30)).is_ok());
    }

    #[test]
    fn the_terms_say_what_check_update_allows() {
        let p = LeasePolicy {
            extension_window: Some(Duration::hours(4)),
            extension_cutoff: Some(Duration::hours(1)),
            min_extension: Some(Duration::hours(2)),
            ..policy()
        };
        let terms = p.extension_terms("a", t(0), t(20));
        assert_eq!(terms.opens, Some(t(16)));
        assert_eq!(terms.closes, Some(t(19)));
        assert_eq!(terms.minimum, Some(Duration::hours(2)));
        assert_eq!(terms.latest_end, Some(t(44)));
        // Each bound, checked against check_update just inside and outside it.
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(44)), t(16)).is_ok());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(22)), t(19)).is_ok());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(22)), t(16) - Duration::seconds(1)).is_err());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(22)), t(19) + Duration::seconds(1)).is_err());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(44) + Duration::seconds(1)), t(17)).is_err());
        assert!(p.check_update("a", (t(0), t(20)), (t(0), t(22) - Duration::seconds(1)), t(17)).is_err());
        let none = ExtensionTerms { opens: None, closes: None, minimum: None, latest_end: None };
        assert_eq!(p.extension_terms("ops", t(0), t(20)), none);
        let no_window = LeasePolicy { extension_window: None, ..p };
        assert_eq!(no_window.extension_terms("a", t(0), t(20)).latest_end, Some(t(24)));
    }
}
