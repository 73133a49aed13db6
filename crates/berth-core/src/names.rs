//! Names Placement gives meaning to: standard resource classes and the
//! shape of custom class and trait names.

/// The standard resource classes (os-resource-classes), in their canonical order.
pub const STANDARD_RESOURCE_CLASSES: &[&str] = &[
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "PCI_DEVICE",
    "SRIOV_NET_VF",
    "NUMA_SOCKET",
    "NUMA_CORE",
    "NUMA_THREAD",
    "NUMA_MEMORY_MB",
    "IPV4_ADDRESS",
    "VGPU",
    "VGPU_DISPLAY_HEAD",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "PCPU",
    "MEM_ENCRYPTION_CONTEXT",
    "FPGA",
    "PGPU",
    "NET_PACKET_RATE_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
    "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC",
];

/// `CUSTOM_` followed by upper-case letters, digits and underscores.
pub fn is_custom_name(name: &str) -> bool {
    name.len() > "CUSTOM_".len()
        && name.len() <= 255
        && name.starts_with("CUSTOM_")
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Standard classes in their canonical order, then custom ones by name (as
/// Placement lists them).
pub fn in_standard_order(classes: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = classes.into_iter().collect();
    v.sort_by(|a, b| class_rank(a).cmp(&class_rank(b)));
    v
}

/// Where a class goes in Placement's order of classes: the standard ones
/// by their canonical place, then custom ones by name. A sort key.
pub fn class_rank(class: &str) -> (usize, &str) {
    (STANDARD_RESOURCE_CLASSES.iter().position(|s| *s == class).unwrap_or(usize::MAX), class)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_classes_come_first_in_their_order() {
        let classes = ["CUSTOM_B", "MEMORY_MB", "CUSTOM_A", "VCPU"].map(String::from);
        assert_eq!(in_standard_order(classes), ["VCPU", "MEMORY_MB", "CUSTOM_A", "CUSTOM_B"]);
    }

    #[test]
    fn custom_names() {
        assert!(is_custom_name("CUSTOM_IRON_NFV"));
        assert!(is_custom_name("CUSTOM_A1"));
        assert!(!is_custom_name("CUSTOM_"));
        assert!(!is_custom_name("CUSTOM_lower"));
        assert!(!is_custom_name("VCPU"));
        assert!(!is_custom_name("CUSTOM_A-B"));
    }
}
