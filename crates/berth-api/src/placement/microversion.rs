//! Placement microversions: negotiation from the `OpenStack-API-Version`
//! header, and every behaviour that depends on the version, as named
//! predicates. Nothing else in the Placement module compares versions.

use std::fmt;

/// A Placement microversion, `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

const fn v(minor: u32) -> Version {
    Version { major: 1, minor }
}

pub const MIN: Version = v(0);
pub const MAX: Version = v(39);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a version header was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// Not of the form `X.Y` or `latest` (400).
    Invalid(String),
    /// Well formed but outside what we serve (406).
    Unacceptable(String),
}

/// The version a request asks for: the `placement` entry of
/// `OpenStack-API-Version` (several comma-separated services may be named),
/// the minimum when absent.
pub fn negotiate(header: Option<&str>) -> Result<Version, VersionError> {
    let Some(header) = header else { return Ok(MIN) };
    let wanted = header.split(',').map(str::trim).find_map(|entry| {
        let (service, value) = entry.split_once(char::is_whitespace)?;
        service.eq_ignore_ascii_case("placement").then(|| value.trim())
    });
    let Some(value) = wanted else { return Ok(MIN) };
    if value.eq_ignore_ascii_case("latest") {
        return Ok(MAX);
    }
    let parsed = value
        .split_once('.')
        .and_then(|(a, b)| Some(Version { major: a.parse().ok()?, minor: b.parse().ok()? }))
        .filter(|_| value.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    match parsed {
        None => Err(VersionError::Invalid(format!("invalid version string: {value}"))),
        Some(ver) if ver < MIN || ver > MAX => {
            Err(VersionError::Unacceptable(format!("Unacceptable version header: {value}")))
        }
        Some(ver) => Ok(ver),
    }
}

/// What each microversion added or changed.
impl Version {
    /// 1.1: provider aggregates.
    pub fn aggregates(self) -> bool {
        self >= v(1)
    }
    /// 1.2: the resource class endpoints.
    pub fn resource_classes(self) -> bool {
        self >= v(2)
    }
    /// 1.3: `member_of` on the provider list.
    pub fn member_of(self) -> bool {
        self >= v(3)
    }
    /// 1.4: `resources` on the provider list.
    pub fn resources_filter(self) -> bool {
        self >= v(4)
    }
    /// 1.5: `DELETE /resource_providers/{uuid}/inventories`.
    pub fn delete_all_inventories(self) -> bool {
        self >= v(5)
    }
    /// 1.6: traits.
    pub fn traits(self) -> bool {
        self >= v(6)
    }
    /// 1.7: `PUT /resource_classes/{name}` creates, bodiless; no more renames.
    pub fn put_resource_class_creates(self) -> bool {
        self >= v(7)
    }
    /// 1.8: `project_id` and `user_id` required when writing allocations.
    pub fn allocation_owner_required(self) -> bool {
        self >= v(8)
    }
    /// 1.9: `GET /usages`.
    pub fn total_usages(self) -> bool {
        self >= v(9)
    }
    /// 1.10: `GET /allocation_candidates`.
    pub fn allocation_candidates(self) -> bool {
        self >= v(10)
    }
    /// 1.11: the `allocations` link of a provider.
    pub fn allocations_link(self) -> bool {
        self >= v(11)
    }
    /// 1.12: allocations keyed by provider in PUT, owner in GET.
    pub fn dict_allocations(self) -> bool {
        self >= v(12)
    }
    /// 1.13: `POST /allocations`.
    pub fn post_allocations(self) -> bool {
        self >= v(13)
    }
    /// 1.14: nested providers (parent and root).
    pub fn nested_providers(self) -> bool {
        self >= v(14)
    }
    /// 1.15: `last-modified` and `cache-control` headers.
    pub fn cache_headers(self) -> bool {
        self >= v(15)
    }
    /// 1.16: `limit` on allocation candidates.
    pub fn candidates_limit(self) -> bool {
        self >= v(16)
    }
    /// 1.17: `required` traits on allocation candidates.
    pub fn candidates_required(self) -> bool {
        self >= v(17)
    }
    /// 1.18: `required` traits on the provider list.
    pub fn providers_required(self) -> bool {
        self >= v(18)
    }
    /// 1.19: provider aggregates carry and check the generation.
    pub fn aggregates_generation(self) -> bool {
        self >= v(19)
    }
    /// 1.20: `POST /resource_providers` answers 200 with the provider.
    pub fn create_provider_returns_body(self) -> bool {
        self >= v(20)
    }
    /// 1.21: `member_of` on allocation candidates.
    pub fn candidates_member_of(self) -> bool {
        self >= v(21)
    }
    /// 1.22: forbidden traits (`!TRAIT`).
    pub fn forbidden_traits(self) -> bool {
        self >= v(22)
    }
    /// 1.24: several `member_of` parameters.
    pub fn multiple_member_of(self) -> bool {
        self >= v(24)
    }
    /// 1.25: granular (suffixed) request groups.
    pub fn granular_groups(self) -> bool {
        self >= v(25)
    }
    /// 1.26: inventory reserved may equal total.
    pub fn reserved_may_equal_total(self) -> bool {
        self >= v(26)
    }
    /// 1.27: every inventory of a provider in `provider_summaries`.
    pub fn summaries_all_classes(self) -> bool {
        self >= v(27)
    }
    /// 1.28: consumer generations.
    pub fn consumer_generations(self) -> bool {
        self >= v(28)
    }
    /// 1.29: nested providers in allocation candidates (parent/root in summaries).
    pub fn candidates_nested(self) -> bool {
        self >= v(29)
    }
    /// 1.30: `POST /reshaper`.
    pub fn reshaper(self) -> bool {
        self >= v(30)
    }
    /// 1.31: `in_tree` on allocation candidates.
    pub fn candidates_in_tree(self) -> bool {
        self >= v(31)
    }
    /// 1.32: forbidden aggregates (`member_of=!…`).
    pub fn forbidden_aggregates(self) -> bool {
        self >= v(32)
    }
    /// 1.33: group suffixes may be any `[a-zA-Z0-9_-]{1,64}`.
    pub fn string_suffixes(self) -> bool {
        self >= v(33)
    }
    /// 1.34: `mappings` in allocation requests and in allocation writes.
    pub fn mappings(self) -> bool {
        self >= v(34)
    }
    /// 1.35: `root_required` on allocation candidates.
    pub fn root_required(self) -> bool {
        self >= v(35)
    }
    /// 1.36: `same_subtree` on allocation candidates.
    pub fn same_subtree(self) -> bool {
        self >= v(36)
    }
    /// 1.37: re-parenting and un-parenting providers.
    pub fn reparenting(self) -> bool {
        self >= v(37)
    }
    /// 1.38: consumer types.
    pub fn consumer_types(self) -> bool {
        self >= v(38)
    }
    /// 1.39: `required=in:A,B` (any of) and repeated `required`.
    pub fn any_traits(self) -> bool {
        self >= v(39)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(None), Ok(MIN));
        assert_eq!(negotiate(Some("placement 1.12")), Ok(v(12)));
        assert_eq!(negotiate(Some("placement latest")), Ok(MAX));
        assert_eq!(negotiate(Some("compute 2.1, placement 1.3")), Ok(v(3)));
        assert_eq!(negotiate(Some("compute 2.1")), Ok(MIN));
        assert!(matches!(negotiate(Some("placement 0.5")), Err(VersionError::Unacceptable(_))));
        assert!(matches!(negotiate(Some("placement 1.40")), Err(VersionError::Unacceptable(_))));
        assert!(matches!(negotiate(Some("placement pony.horse")), Err(VersionError::Invalid(_))));
        assert!(matches!(negotiate(Some("placement 1.2.3")), Err(VersionError::Invalid(_))));
    }
}

/// Fuzz target: any header, bounded to a fixed number of cases.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, max_shrink_time: 10_000, ..ProptestConfig::default() })]

        #[test]
        fn any_header_negotiates_a_served_version_or_is_refused(
            header in prop_oneof![
                any::<String>(),
                "((placement|PLACEMENT|compute|[a-z]{0,5})[ \t]{0,2}([0-9]{0,12}\\.?[0-9]{0,12}|latest|LaTeSt|[^,]{0,6})[ ,]{0,3}){0,3}",
            ]
        ) {
            match negotiate(Some(&header)) {
                Ok(ver) => prop_assert!((MIN..=MAX).contains(&ver), "{header:?} gave {ver}"),
                Err(VersionError::Invalid(m) | VersionError::Unacceptable(m)) => prop_assert!(!m.is_empty()),
            }
        }
    }
}
