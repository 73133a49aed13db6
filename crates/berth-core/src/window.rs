//! A window `[start, end)` in time; `end = None` is open-ended.

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Window {
    pub start: DateTime<Utc>,
    /// Exclusive; `None` holds forever.
    pub end: Option<DateTime<Utc>>,
}

impl Window {
    /// A window; the end must be after the start. Times are cut to
    /// microseconds, the precision PostgreSQL keeps, so that what a command
    /// decides on is exactly what the log and the projections hold.
    pub fn new(start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> Result<Window, Error> {
        let start = start.trunc_subsecs(6);
        let end = end.map(|e| e.trunc_subsecs(6));
        if let Some(e) = end {
            if e <= start {
                return Err(Error::invalid(
                    ErrorCode::Invalid,
                    format!("window end {e} is not after its start {start}"),
                ));
            }
        }
        Ok(Window { start, end })
    }

    /// From `start` on, forever.
    pub fn from(start: DateTime<Utc>) -> Window {
        Window { start: start.trunc_subsecs(6), end: None }
    }

    pub fn overlaps(&self, other: &Window) -> bool {
        let a_before_b_ends = other.end.is_none_or(|e| self.start < e);
        let b_before_a_ends = self.end.is_none_or(|e| other.start < e);
        a_before_b_ends && b_before_a_ends
    }

    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.start <= t && self.end.is_none_or(|e| t < e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, h, 0, 0).unwrap()
    }

    #[test]
    fn back_to_back_windows_do_not_overlap() {
        let a = Window::new(t(1), Some(t(2))).unwrap();
        let b = Window::new(t(2), Some(t(3))).unwrap();
        assert!(!a.overlaps(&b));
        assert!(!b.overlaps(&a));
        assert!(a.overlaps(&Window::new(t(1), Some(t(3))).unwrap()));
        assert!(Window::from(t(0)).overlaps(&b));
        assert!(!Window::from(t(3)).overlaps(&b));
    }

    #[test]
    fn empty_or_reversed_windows_are_refused() {
        assert!(Window::new(t(2), Some(t(2))).is_err());
        assert!(Window::new(t(3), Some(t(2))).is_err());
    }
}
