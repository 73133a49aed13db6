//! berth-policy: oslo.policy's rule language, without I/O.
//!
//! A rule is an expression such as `role:admin or (role:reader and
//! project_id:%(project_id)s)`; [`Rule::parse`] reads one, and
//! [`Policy`] holds a service's named rules (each with its default and
//! description), checks a caller against a target, and takes an operator's
//! overrides from a YAML document in oslo.policy's format, refusing an
//! unknown rule name or a bad expression with the line it is on.
//!
//! It knows nothing of HTTP or of which rules a service has: the service
//! passes its list of [`Default`]s.

mod file;
mod parse;
mod policy;
mod rule;

pub use file::FileError;
pub use policy::{Default, Policy};
pub use rule::{Credentials, Rule, Target};

/// A rule expression that does not parse, or names what does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);
