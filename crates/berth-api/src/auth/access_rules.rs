//! Access rules: a token made from a restricted Keystone application
//! credential (or a JWT carrying an `access_rules` claim) may make only the
//! requests its rules name, as keystonemiddleware's
//! `validate_allowed_request` enforces them. A rule is a service type, a
//! method and a path glob; a request is allowed when one rule has the
//! route's service type ([`service_type_of`]), the same method, and a glob
//! matching the path. An empty list allows nothing.
//!
//! The glob has Keystone's meaning: `*` and `{name}` stand for one path
//! segment (one or more characters, no `/`), `**` for anything, `/`
//! included; every other character stands for itself.

use axum::http::Method;
use serde::Deserialize;

/// The Placement API's root: everything under it is service type `placement`.
const PLACEMENT: &str = "/placement";

/// The service type a path belongs to, as a restricted credential names it:
/// `placement` under `/placement`, `reservation` (Blazar's) for the Blazar
/// API, Berth's additions and the console.
pub fn service_type_of(path: &str) -> &'static str {
    match path.strip_prefix(PLACEMENT) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => "placement",
        _ => "reservation",
    }
}

/// One rule, as Keystone gives it in `application_credential.access_rules`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessRule {
    pub service: String,
    pub method: String,
    pub path: String,
}

/// The rules a token is restricted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRules(Vec<AccessRule>);

impl AccessRules {
    pub fn new(rules: Vec<AccessRule>) -> AccessRules {
        AccessRules(rules)
    }

    /// Whether one rule allows `method` on `path` (the path as the client
    /// sent it, without the query). Placement's rules may name the path
    /// with or without its `/placement` root, as a Placement endpoint may
    /// be registered either way.
    pub fn allow(&self, method: &Method, path: &str) -> bool {
        let service = service_type_of(path);
        let inner = if service == "placement" { path.strip_prefix(PLACEMENT).filter(|p| !p.is_empty()) } else { None };
        self.0.iter().any(|r| {
            r.service == service
                && r.method == method.as_str()
                && (glob_matches(&r.path, path) || inner.is_some_and(|p| glob_matches(&r.path, p)))
        })
    }
}

/// Whether `path` matches the whole of `glob` (Keystone's wildcards).
fn glob_matches(glob: &str, path: &str) -> bool {
    let tokens = tokens(glob);
    matches_from(&tokens, path.as_bytes())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// One or more characters other than `/`.
    Segment,
    /// Any characters, none included.
    Anything,
    Literal(u8),
}

fn tokens(glob: &str) -> Vec<Token> {
    let b = glob.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'*' if b.get(i + 1) == Some(&b'*') => {
                out.push(Token::Anything);
                i += 2;
            }
            b'*' => {
                out.push(Token::Segment);
                i += 1;
            }
            b'{' => match b[i..].iter().position(|&c| c == b'}') {
                Some(end) => {
                    out.push(Token::Segment);
                    i += end + 1;
                }
                None => {
                    out.push(Token::Literal(b'{'));
                    i += 1;
                }
            },
            c => {
                out.push(Token::Literal(c));
                i += 1;
            }
        }
    }
    out
}

/// Matches with memoised positions: a glob and a path are at most a few
/// kilobytes (the input check bounds both), and the table keeps the work
/// at their product whatever the wildcards.
fn matches_from(tokens: &[Token], path: &[u8]) -> bool {
    // reach[j]: the path's first j bytes are matched by the tokens so far.
    let mut reach = vec![false; path.len() + 1];
    reach[0] = true;
    for t in tokens {
        let mut next = vec![false; path.len() + 1];
        match *t {
            Token::Literal(c) => {
                for j in 0..path.len() {
                    next[j + 1] = reach[j] && path[j] == c;
                }
            }
            Token::Anything => {
                let mut any = false;
                for j in 0..=path.len() {
                    any |= reach[j];
                    next[j] = any;
                }
            }
            Token::Segment => {
                // j + 1 is reached from any i <= j with reach[i] and no '/' in path[i..=j].
                let mut open = false;
                for j in 0..path.len() {
                    if path[j] == b'/' {
                        open = false;
                    } else {
                        open |= reach[j];
                        next[j + 1] = open;
                    }
                }
            }
        }
        reach = next;
        if !reach.contains(&true) {
            return false;
        }
    }
    reach[path.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(service: &str, method: &str, path: &str) -> AccessRule {
        AccessRule { service: service.into(), method: method.into(), path: path.into() }
    }

    #[test]
    fn globs_mean_what_keystone_means() {
        let cases: &[(&str, &str, bool)] = &[
            ("/v1/leases", "/v1/leases", true),
            ("/v1/leases", "/v1/leases/", false),
            ("/v1/leases", "/v1/leasesx", false),
            ("/v1/leases/*", "/v1/leases/abc", true),
            ("/v1/leases/*", "/v1/leases/", false),
            ("/v1/leases/*", "/v1/leases/abc/events", false),
            ("/v1/leases/*", "/v1/leases", false),
            ("/v1/leases/{lease_id}", "/v1/leases/abc", true),
            ("/v1/leases/{lease_id}/events", "/v1/leases/abc/events", true),
            ("/v1/leases/{lease_id}/events", "/v1/leases/a/b/events", false),
            ("/v1/**", "/v1/leases/abc/events", true),
            ("/v1/**", "/v1/", true),
            ("/v1/**", "/v2/leases", false),
            ("/v1/*/abc", "/v1/leases/abc", true),
            ("**", "/anything/at/all", true),
            ("/v1/lease.", "/v1/leases", false),
            ("/v1/lease?", "/v1/leases", false),
            ("/v1/{x", "/v1/{x", true),
            ("", "", true),
            ("", "/", false),
        ];
        for (glob, path, want) in cases {
            assert_eq!(glob_matches(glob, path), *want, "{glob:?} against {path:?}");
        }
    }

    #[test]
    fn many_wildcards_stay_cheap() {
        let glob = "/**".repeat(200) + "x";
        let path = "/a".repeat(2000);
        assert!(!glob_matches(&glob, &path));
        let glob = "/*".repeat(300);
        assert!(!glob_matches(&glob, &"/a".repeat(299)));
        assert!(glob_matches(&glob, &"/a".repeat(300)));
    }

    #[test]
    fn a_rule_needs_the_service_the_method_and_the_path() {
        let rules = AccessRules::new(vec![
            rule("reservation", "GET", "/v1/leases"),
            rule("placement", "GET", "/resource_providers"),
            rule("placement", "PUT", "/placement/resource_providers/*/traits"),
        ]);
        assert!(rules.allow(&Method::GET, "/v1/leases"));
        assert!(!rules.allow(&Method::POST, "/v1/leases"));
        assert!(!rules.allow(&Method::HEAD, "/v1/leases"));
        assert!(!rules.allow(&Method::GET, "/v1/leases/x"));
        assert!(rules.allow(&Method::GET, "/placement/resource_providers"));
        assert!(rules.allow(&Method::PUT, "/placement/resource_providers/u/traits"));
        assert!(!rules.allow(&Method::GET, "/placement/usages"));
        // A placement rule never opens a reservation path, nor the reverse.
        let other = AccessRules::new(vec![rule("placement", "GET", "/v1/leases")]);
        assert!(!other.allow(&Method::GET, "/v1/leases"));
        assert!(!AccessRules::new(Vec::new()).allow(&Method::GET, "/v1/leases"));
    }

    #[test]
    fn paths_belong_to_one_service() {
        assert_eq!(service_type_of("/placement"), "placement");
        assert_eq!(service_type_of("/placement/usages"), "placement");
        assert_eq!(service_type_of("/placementx"), "reservation");
        assert_eq!(service_type_of("/v1/leases"), "reservation");
        assert_eq!(service_type_of("/v1/calendar"), "reservation");
        assert_eq!(service_type_of("/metrics"), "reservation");
    }
}
