//! The resource class a reservation's flavor requests, as Blazar names it.

use uuid::Uuid;

/// The reservation's resource class as Blazar's flavors request it:
/// `CUSTOM_RESERVATION_<id, upper-case, dashes as underscores>`.
pub fn reservation_class(reservation: Uuid) -> String {
    format!("CUSTOM_RESERVATION_{}", reservation.hyphenated().to_string().to_ascii_uppercase().replace('-', "_"))
}

/// The reservation a `CUSTOM_RESERVATION_...` class names, if it is one.
pub fn reservation_of_class(class: &str) -> Option<Uuid> {
    let rest = class.strip_prefix("CUSTOM_RESERVATION_")?;
    Uuid::parse_str(&rest.replace('_', "-").to_ascii_lowercase()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_classes_round_trip() {
        let id = Uuid::parse_str("0f6b1a4e-3c2d-4b5a-9e8f-7d6c5b4a3f2e").unwrap();
        let class = reservation_class(id);
        assert_eq!(class, "CUSTOM_RESERVATION_0F6B1A4E_3C2D_4B5A_9E8F_7D6C5B4A3F2E");
        assert!(crate::names::is_custom_name(&class));
        assert_eq!(reservation_of_class(&class), Some(id));
        assert_eq!(reservation_of_class("CUSTOM_GPU"), None);
    }
}
