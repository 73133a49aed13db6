//! Inventory of one resource class on one provider, and the rules an amount
//! must follow to be allocated from it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};

/// Placement's largest integer for amounts.
pub const MAX_AMOUNT: i64 = 2_147_483_647;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory { total: 0, reserved: 0, min_unit: 1, max_unit: MAX_AMOUNT, step_size: 1, allocation_ratio: 1.0 }
    }
}

impl Inventory {
    /// `(total − reserved) × allocation_ratio`, rounded down: what may be
    /// allocated at any one instant.
    pub fn capacity(&self) -> i64 {
        (((self.total - self.reserved) as f64) * self.allocation_ratio).floor() as i64
    }

    /// The shape rules every inventory must meet, whatever the API version.
    pub fn validate(&self, class: &str) -> Result<(), Error> {
        let bad = |what: String| Err(Error::invalid(ErrorCode::Invalid, format!("inventory of {class}: {what}")));
        if self.total < 0 || self.total > MAX_AMOUNT {
            return bad(format!("total {} out of range", self.total));
        }
        if self.reserved < 0 || self.reserved > MAX_AMOUNT {
            return bad(format!("reserved {} out of range", self.reserved));
        }
        if self.reserved > self.total {
            return bad(format!("reserved {} is greater than total {}", self.reserved, self.total));
        }
        if self.min_unit < 1 || self.max_unit < 1 || self.step_size < 1 {
            return bad("min_unit, max_unit and step_size must be at least 1".into());
        }
        if self.min_unit > self.max_unit {
            return bad(format!("min_unit {} is greater than max_unit {}", self.min_unit, self.max_unit));
        }
        if !(self.allocation_ratio.is_finite() && self.allocation_ratio > 0.0) {
            return bad(format!("allocation_ratio {} must be a positive number", self.allocation_ratio));
        }
        Ok(())
    }

    /// Whether one allocation of `used` obeys min_unit, max_unit and step_size.
    pub fn check_amount(&self, provider: &str, class: &str, used: i64) -> Result<(), Error> {
        if used < 1 {
            return Err(Error::invalid(
                ErrorCode::Invalid,
                format!("allocation of {class} on {provider} must be at least 1, got {used}"),
            ));
        }
        if used < self.min_unit || used > self.max_unit || used % self.step_size != 0 {
            return Err(Error::capacity(format!(
                "unable to allocate {used} {class} on {provider}: min_unit {}, max_unit {}, step_size {}",
                self.min_unit, self.max_unit, self.step_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_applies_reserved_then_ratio() {
        let inv = Inventory { total: 16, reserved: 2, allocation_ratio: 1.5, ..Default::default() };
        assert_eq!(inv.capacity(), 21);
        let inv = Inventory { total: 10, reserved: 0, allocation_ratio: 0.33, ..Default::default() };
        assert_eq!(inv.capacity(), 3);
    }

    #[test]
    fn amounts_follow_units_and_steps() {
        let inv = Inventory { total: 2048, min_unit: 10, max_unit: 1000, step_size: 10, ..Default::default() };
        assert!(inv.check_amount("p", "DISK_GB", 10).is_ok());
        assert!(inv.check_amount("p", "DISK_GB", 1000).is_ok());
        assert!(inv.check_amount("p", "DISK_GB", 5).is_err());
        assert!(inv.check_amount("p", "DISK_GB", 15).is_err());
        assert!(inv.check_amount("p", "DISK_GB", 1010).is_err());
        assert!(inv.check_amount("p", "DISK_GB", 0).is_err());
    }

    #[test]
    fn invalid_inventories_are_refused() {
        let ok = Inventory { total: 4, ..Default::default() };
        assert!(ok.validate("VCPU").is_ok());
        assert!(Inventory { reserved: 5, ..ok }.validate("VCPU").is_err());
        assert!(Inventory { min_unit: 0, ..ok }.validate("VCPU").is_err());
        assert!(Inventory { allocation_ratio: 0.0, ..ok }.validate("VCPU").is_err());
        assert!(Inventory { min_unit: 5, max_unit: 4, ..ok }.validate("VCPU").is_err());
    }
}
