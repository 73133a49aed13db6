//! OpenStack's noauth2 rules, for local use and tests: `X-Auth-Token:
//! user[:project]` (no project: the project is the user, as noauth2 has it);
//! the token `admin` has the admin and service roles; `X-Roles`, when present, sets the
//! roles, and `X-Project-Id` the project, as behind Placement's own noauth.
//! `OpenStack-System-Scope: all` makes a system-scoped caller, which every
//! rule refuses (all are project-scoped, as Placement's and Blazar's are
//! when scope is enforced), so Placement's secure-RBAC tests run as written.
//! berthd serves it on loopback addresses only unless told otherwise.

use axum::http::HeaderMap;
use berth_core::error::ErrorCode;

use super::{Context, Failure};

/// Keystone's bound on user and project ids.
pub const MAX_ID: usize = 64;

pub(super) fn context(headers: &HeaderMap) -> Result<Context, Failure> {
    let Some(raw) = headers.get("x-auth-token") else { return Err(Failure::Missing) };
    let token = raw.to_str().map_err(|_| bad("the token must be visible ASCII".into()))?.trim();
    if token.is_empty() {
        return Err(Failure::Missing);
    }
    let (user, mut project) = match token.split_once(':') {
        Some((u, p)) => (id("user", u)?, id("project", p)?),
        None => (id("user", token)?, id("user", token)?),
    };
    if let Some(p) = headers.get("x-project-id") {
        project = id("project", p.to_str().map_err(|_| bad("X-Project-Id must be visible ASCII".into()))?.trim())?;
    }
    let system = headers.get("openstack-system-scope").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"all"));
    let roles = match headers.get("x-roles") {
        Some(r) => {
            let r = r.to_str().map_err(|_| bad("X-Roles must be visible ASCII".into()))?;
            r.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| id("role", s).map(str::to_string))
                .collect::<Result<_, _>>()?
        }
        // The local operator: the administrator and the services at once, as
        // noauth2's admin is under Placement's legacy defaults (it reshapes).
        None if user == "admin" => vec!["admin".into(), "member".into(), "reader".into(), "service".into()],
        None => vec!["member".into(), "reader".into()],
    };
    let mut ctx = Context::new(user, project, roles);
    ctx.system_scoped = system;
    Ok(ctx)
}

fn bad(why: String) -> Failure {
    Failure::Invalid(ErrorCode::BadToken, why)
}

/// A user, project or role name: not empty, at most [`MAX_ID`] characters,
/// no control characters.
pub(super) fn id<'a>(what: &str, s: &'a str) -> Result<&'a str, Failure> {
    if s.is_empty() {
        Err(bad(format!("the token names an empty {what}: use user or user:project")))
    } else if s.chars().count() > MAX_ID {
        Err(bad(format!("a {what} id has at most {MAX_ID} characters")))
    } else if s.chars().any(char::is_control) {
        Err(bad(format!("a {what} id must not hold control characters")))
    } else {
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ctx(token: &str, roles: Option<&str>) -> Result<Context, Failure> {
        let mut h = HeaderMap::new();
        h.insert("x-auth-token", HeaderValue::from_str(token).unwrap());
        if let Some(r) = roles {
            h.insert("x-roles", HeaderValue::from_str(r).unwrap());
        }
        context(&h)
    }

    #[test]
    fn tokens_name_a_user_and_a_project_within_bounds() {
        let c = ctx("alice:p1", None).unwrap();
        assert_eq!((c.user_id.as_str(), c.project_id.as_str()), ("alice", "p1"));
        assert_eq!(c.roles, ["member", "reader"]);
        let c = ctx("alice", None).unwrap();
        assert_eq!(c.project_id, "alice");
        assert!(ctx("admin", None).unwrap().roles.contains(&"admin".to_string()));
        assert_eq!(ctx("svc:service", Some("service, reader")).unwrap().roles, ["service", "reader"]);
        for bad in ["eve:", ":p1", &"u".repeat(65), &format!("alice:{}", "p".repeat(65)), "alice:p\t1"] {
            assert!(matches!(ctx(bad, None), Err(Failure::Invalid(ErrorCode::BadToken, _))), "{bad:?}");
        }
        assert!(matches!(ctx("   ", None), Err(Failure::Missing)));
        assert!(matches!(ctx("alice:p1", Some(&"r".repeat(65))), Err(Failure::Invalid(..))));
        assert!(ctx(&"u".repeat(64), None).is_ok());
    }

    #[test]
    fn a_project_header_and_system_scope_are_honoured() {
        let mut h = HeaderMap::new();
        h.insert("x-auth-token", HeaderValue::from_static("user"));
        h.insert("x-project-id", HeaderValue::from_static("p9"));
        let c = context(&h).unwrap();
        assert_eq!((c.user_id.as_str(), c.project_id.as_str(), c.system_scoped), ("user", "p9", false));
        h.insert("openstack-system-scope", HeaderValue::from_static("all"));
        assert!(context(&h).unwrap().system_scoped);
        h.insert("x-project-id", HeaderValue::from_static(""));
        assert!(matches!(context(&h), Err(Failure::Invalid(ErrorCode::BadToken, _))));
    }
}
