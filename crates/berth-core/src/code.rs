//! Every code Berth answers with, as one closed set. The wire string of
//! each (`as_str`) is stable: clients match on it, and Placement's own codes
//! keep Placement's names.

/// A machine-readable error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Placement's: a generation moved, or a concurrent writer changed what was read.
    ConcurrentUpdate,
    DuplicateName,
    InventoryInUse,
    ProviderInUse,
    /// No such resource class (a 400 where a request names one).
    ResourceClassNotFound,
    /// No such resource provider where a request names one.
    ProviderNotFound,
    /// No such trait where a request names one.
    TraitNotFound,
    /// No inventory of that class on that provider.
    InventoryNotFound,
    /// That class already has an inventory on that provider.
    InventoryExists,
    CannotDeleteParent,
    ResourceClassInUse,
    TraitInUse,
    /// Placement's catch-all.
    Undefined,
    QueryBadValue,
    QueryMissingValue,
    QueryDuplicateKey,
    Capacity,
    Invalid,
    NotFound,
    Internal,
    Unavailable,
    /// A write's COMMIT got no answer (503): it may or may not have been
    /// made; retrying it with the same generation or Idempotency-Key is safe.
    OutcomeUnknown,
    StreamVersion,
    InvalidDate,
    InvalidLease,
    LeaseNotFound,
    LeaseStarted,
    LeaseEnded,
    DuplicateLeaseName,
    HostNotFound,
    HostExists,
    HostInUse,
    HostInvalid,
    PropertyNotFound,
    /// No maintenance window with that id.
    MaintenanceNotFound,
    /// A maintenance window without hosts, or not ending after it starts and after now.
    MaintenanceInvalid,
    /// A reservation past the first `lease::MAX_RESERVATIONS` (never reached: leases are refused before that).
    NoCapacity,
    /// Reservation `.0` (0-based, in request order) of a lease did not fit:
    /// `berth.lease.reservation_<index>.no_capacity`.
    ReservationNoCapacity(usize),
    /// A recurring lease books more occurrences than one request may.
    TooManyOccurrences,
    /// A time zone name the tz database does not have, or not a name at all.
    UnknownTimeZone,
    /// A key Berth's own request objects do not have.
    UnknownKey,
    /// A reservation names a parameter its plugin does not take.
    UnknownParameter,
    /// A reservation parameter's value is not of its type.
    InvalidParameter,
    /// A reservation names an instance that is not a Placement consumer.
    UnknownInstance,
    /// A reservation names another project's instance.
    ForeignInstance,
    /// No such lease event (404).
    LeaseEventNotFound,
    /// Only a lease event in ERROR can be retried.
    LeaseEventNotInError,
    /// Only a waiting (UNDONE) lease event can be cancelled or fired.
    LeaseEventNotPending,
    /// Only a lease in ERROR can be recovered.
    LeaseNotInError,
    /// A lease that has not started cannot be ended (delete it instead).
    LeaseNotStarted,
    /// One of the lease's events is running: wait for it.
    LeaseEventRunning,
    /// A split that cannot be made of this lease: it would leave a
    /// reservation empty, or names hosts or more slots than it holds (409).
    SplitRefused,
    /// A transfer its owner (or an admin) did not consent to (403).
    TransferNoConsent,
    /// No transfer of the lease is offered (404).
    TransferNotFound,
    /// Password login where berthd does not use Keystone.
    LoginUnavailable,
    /// An `Idempotency-Key` sent again with another request.
    IdempotencyKeyReused,
    /// An `Idempotency-Key` that is empty, too long, not printable or repeated.
    IdempotencyKeyInvalid,
    /// A claim draws from a reservation whose lease is not running now.
    ReservationNotActive,
    /// A claim draws from another project's reservation.
    ReservationNotYours,
    /// A claim draws from a reservation that holds nothing on that provider.
    ReservationNotHere,
    /// A change would take usage past a limit (403).
    QuotaExceeded,
    /// A malformed limit or scope (400).
    QuotaInvalid,
    /// A lease longer than the maximum duration (403).
    MaxLeaseDuration,
    /// An offer request that cannot be read: an unknown key, a bad range (400).
    OfferInvalid,
    /// An offer id that is not one of the caller's: garbled, forged, or
    /// another's, alike (404).
    OfferNotFound,
    /// An offer past its expiry (409).
    OfferExpired,
    /// An offer already booked, even if that lease is gone since (409).
    OfferTaken,
    /// An offer that no longer fits: capacity or quota taken since (409).
    OfferGone,
    /// A sharing list that cannot be read: too long, a bad or repeated
    /// project id, the lease's own project (400).
    ShareInvalid,
    /// A lease that has ended (or failed, or is being deleted) cannot be
    /// shared (409).
    ShareLeaseOver,
    /// An extension asked for before the extension window opened (403).
    ExtensionWindow,
    /// An extension asked for after the extension cut-off (403).
    ExtensionCutoff,
    /// An extension shorter than the minimum extension (403).
    ExtensionTooShort,
    /// The external policy service said no (403).
    PolicyDenied,
    /// No token, or one that is not (or no longer) valid (401).
    Unauthenticated,
    /// A token Berth cannot use: ids too long or with control characters, no project (401).
    BadToken,
    /// A restricted token (an application credential's access rules) that may not make this request (401).
    AccessRules,
    /// The identity service did not answer in time, or answered an error (503).
    AuthUnavailable,
    Forbidden,
    RouteNotFound,
    MethodNotAllowed,
    BodyTooLarge,
    BadRequest,
    BadEncoding,
    ControlCharacter,
    TooLong,
    TooDeep,
    BadLimit,
    BadMarker,
    Timeout,
    TooManyStreams,
    /// A loan asked for where no capacity is idle long enough: taken now,
    /// or needed within the reclaim lead (409).
    NoIdleCapacity,
    /// An ordinary write to a preemptible consumer, or the reverse (409).
    LoanKind,
    /// A loan asked for as Placement cannot lend: in a batch, or drawing
    /// from a reservation (400).
    LendInvalid,
}

macro_rules! no_capacity_codes {
    ($($i:literal)*) => { [$(concat!("berth.lease.reservation_", $i, ".no_capacity")),*] };
}
/// One code for each reservation a lease may carry (`lease` checks that
/// there is one for each).
pub(crate) const NO_CAPACITY_CODES: [&str; 32] =
    no_capacity_codes!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);

/// Reservation `i`'s code for no capacity; past the last, the lease's.
fn no_capacity(i: usize) -> &'static str {
    NO_CAPACITY_CODES.get(i).copied().unwrap_or("berth.lease.no_capacity")
}

/// The codes of lending idle capacity (`crate::lend`).
fn lend(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::NoIdleCapacity => "berth.lend.no_idle_capacity",
        ErrorCode::LoanKind => "berth.lend.consumer_kind",
        _ => "berth.lend.invalid",
    }
}

/// The codes of offers (`POST /v1/offers` and booking one), and of a
/// malformed quota (kept apart for the length of [`ErrorCode::as_str`]).
fn offer_or_quota(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::QuotaInvalid => "berth.quota.invalid",
        ErrorCode::OfferInvalid => "berth.offer.invalid",
        ErrorCode::OfferNotFound => "berth.offer.not_found",
        ErrorCode::OfferExpired => "berth.offer.expired",
        ErrorCode::OfferTaken => "berth.offer.taken",
        _ => "berth.offer.gone",
    }
}

impl ErrorCode {
    /// The code as the wire carries it.
    // A flat match, one arm per code: as long as the set is.
    #[allow(clippy::too_many_lines)]
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ConcurrentUpdate => "placement.concurrent_update",
            ErrorCode::DuplicateName => "placement.duplicate_name",
            ErrorCode::InventoryInUse => "placement.inventory.inuse",
            ErrorCode::ProviderInUse => "placement.resource_provider.inuse",
            ErrorCode::ResourceClassNotFound => "placement.resource_class.not_found",
            ErrorCode::ProviderNotFound => "placement.resource_provider.not_found",
            ErrorCode::TraitNotFound => "placement.trait.not_found",
            ErrorCode::InventoryNotFound => "placement.inventory.not_found",
            ErrorCode::InventoryExists => "placement.inventory.exists",
            ErrorCode::CannotDeleteParent => "placement.resource_provider.cannot_delete_parent",
            ErrorCode::ResourceClassInUse => "placement.resource_class.in_use",
            ErrorCode::TraitInUse => "placement.trait.in_use",
            ErrorCode::Undefined => "placement.undefined_code",
            ErrorCode::QueryBadValue => "placement.query.bad_value",
            ErrorCode::QueryMissingValue => "placement.query.missing_value",
            ErrorCode::QueryDuplicateKey => "placement.query.duplicate_key",
            ErrorCode::Capacity => "berth.capacity.exceeded",
            ErrorCode::Invalid => "berth.invalid",
            ErrorCode::NotFound => "berth.not_found",
            ErrorCode::Internal => "berth.internal",
            ErrorCode::Unavailable => "berth.unavailable",
            ErrorCode::OutcomeUnknown => "berth.outcome_unknown",
            ErrorCode::StreamVersion => "berth.log.stream_version",
            ErrorCode::InvalidDate => "berth.lease.invalid_date",
            ErrorCode::InvalidLease => "berth.lease.invalid",
            ErrorCode::LeaseNotFound => "berth.lease.not_found",
            ErrorCode::LeaseStarted => "berth.lease.started",
            ErrorCode::LeaseEnded => "berth.lease.ended",
            ErrorCode::DuplicateLeaseName => "berth.lease.duplicate_name",
            ErrorCode::HostNotFound => "berth.host.not_found",
            ErrorCode::HostExists => "berth.host.already_enrolled",
            ErrorCode::HostInUse => "berth.host.in_use",
            ErrorCode::HostInvalid => "berth.host.invalid",
            ErrorCode::PropertyNotFound => "berth.host.property_not_found",
            ErrorCode::MaintenanceNotFound => "berth.maintenance.not_found",
            ErrorCode::MaintenanceInvalid => "berth.maintenance.invalid",
            ErrorCode::NoCapacity => "berth.lease.no_capacity",
            ErrorCode::ReservationNoCapacity(i) => no_capacity(i),
            ErrorCode::TooManyOccurrences => "berth.lease.too_many_occurrences",
            ErrorCode::UnknownTimeZone => "berth.unknown_time_zone",
            ErrorCode::UnknownKey => "berth.unknown_key",
            ErrorCode::UnknownParameter => "berth.lease.unknown_parameter",
            ErrorCode::InvalidParameter => "berth.lease.invalid_parameter",
            ErrorCode::UnknownInstance => "berth.lease.unknown_instance",
            ErrorCode::ForeignInstance => "berth.lease.foreign_instance",
            ErrorCode::LeaseEventNotFound => "berth.lease_event.not_found",
            ErrorCode::LeaseEventNotInError => "berth.lease_event.not_in_error",
            ErrorCode::LeaseEventNotPending => "berth.lease_event.not_pending",
            ErrorCode::LeaseNotInError => "berth.lease.not_in_error",
            ErrorCode::LeaseNotStarted => "berth.lease.not_started",
            ErrorCode::LeaseEventRunning => "berth.lease.event_in_progress",
            ErrorCode::SplitRefused => "berth.lease.split_refused",
            ErrorCode::TransferNoConsent => "berth.transfer.no_consent",
            ErrorCode::TransferNotFound => "berth.transfer.not_found",
            ErrorCode::LoginUnavailable => "berth.login.unavailable",
            ErrorCode::IdempotencyKeyReused => "berth.lease.idempotency_key_reused",
            ErrorCode::IdempotencyKeyInvalid => "berth.lease.idempotency_key_invalid",
            ErrorCode::ReservationNotActive => "berth.reservation.not_active",
            ErrorCode::ReservationNotYours => "berth.reservation.not_yours",
            ErrorCode::ReservationNotHere => "berth.reservation.not_on_provider",
            ErrorCode::QuotaExceeded => "berth.quota.exceeded",
            ErrorCode::MaxLeaseDuration => "berth.policy.max_lease_duration",
            ErrorCode::QuotaInvalid | ErrorCode::OfferInvalid | ErrorCode::OfferNotFound => offer_or_quota(self),
            ErrorCode::OfferExpired | ErrorCode::OfferTaken | ErrorCode::OfferGone => offer_or_quota(self),
            ErrorCode::ShareInvalid => "berth.share.invalid",
            ErrorCode::ShareLeaseOver => "berth.share.lease_over",
            ErrorCode::ExtensionWindow => "berth.policy.extension_window",
            ErrorCode::ExtensionCutoff => "berth.policy.extension_cutoff",
            ErrorCode::ExtensionTooShort => "berth.policy.extension_too_short",
            ErrorCode::PolicyDenied => "berth.policy.denied",
            ErrorCode::Unauthenticated => "berth.unauthenticated",
            ErrorCode::BadToken => "berth.auth.bad_token",
            ErrorCode::AccessRules => "berth.auth.access_rules",
            ErrorCode::AuthUnavailable => "berth.auth.unavailable",
            ErrorCode::Forbidden => "berth.forbidden",
            ErrorCode::RouteNotFound => "berth.route_not_found",
            ErrorCode::MethodNotAllowed => "berth.method_not_allowed",
            ErrorCode::BodyTooLarge => "berth.body_too_large",
            ErrorCode::BadRequest => "berth.bad_request",
            ErrorCode::BadEncoding => "berth.invalid.encoding",
            ErrorCode::ControlCharacter => "berth.invalid.control_character",
            ErrorCode::TooLong => "berth.invalid.too_long",
            ErrorCode::TooDeep => "berth.invalid.too_deep",
            ErrorCode::BadLimit => "berth.invalid.limit",
            ErrorCode::BadMarker => "berth.invalid.marker",
            ErrorCode::Timeout => "berth.timeout",
            ErrorCode::TooManyStreams => "berth.too_many_streams",
            ErrorCode::NoIdleCapacity | ErrorCode::LoanKind | ErrorCode::LendInvalid => lend(self),
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn a_reservation_past_the_last_code_has_the_lease_code() {
        assert_eq!(ErrorCode::ReservationNoCapacity(0).as_str(), "berth.lease.reservation_0.no_capacity");
        assert_eq!(ErrorCode::ReservationNoCapacity(31).as_str(), "berth.lease.reservation_31.no_capacity");
        assert_eq!(ErrorCode::ReservationNoCapacity(32), "berth.lease.no_capacity");
    }
}
