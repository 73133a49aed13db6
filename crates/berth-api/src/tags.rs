//! The sections of the OpenAPI document: every handler's declaration names
//! its tag. A module of its own, below both the handlers and the document
//! that gathers them.

pub const BERTH: &str = "berth";
pub const PLACEMENT: &str = "placement";
pub const LEASES: &str = "leases (Blazar v1)";
pub const HOSTS: &str = "hosts (Blazar v1)";
pub const ADDITIONS: &str = "additions";
