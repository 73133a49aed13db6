//! A parsed rule and how it is checked against a caller and a target.

/// Who is asking, as the rules see it.
pub trait Credentials {
    /// Role names (compared without regard to case, as oslo.policy does).
    fn roles(&self) -> &[String];
    /// Roles of a service token sent beside the user's (`X-Service-Token`).
    fn service_roles(&self) -> &[String] {
        &[]
    }
    /// A named attribute: `user_id`, `project_id`, ... (see [`ATTRIBUTES`]).
    fn attribute(&self, name: &str) -> Option<&str>;
}

/// What is acted on: `%(name)s` in a rule reads `name` here.
pub trait Target {
    fn attribute(&self, name: &str) -> Option<&str>;
}

/// The caller attributes a generic check (`name:value`) may read; any other
/// name is refused when the rule is read, so a typo cannot silently never match.
pub const ATTRIBUTES: &[&str] = &[
    "user_id",
    "project_id",
    "domain_id",
    "user_domain_id",
    "project_domain_id",
    "is_admin",
    "service_user_id",
    "service_project_id",
];

/// The right side of a check: a literal, or `%(name)s` from the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Literal(String),
    FromTarget(String),
}

/// The left side of a generic check: a caller attribute, or a quoted
/// literal (`'member':%(role)s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Attribute(String),
    Literal(String),
}

/// A rule expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// `@`, or the empty rule: anyone.
    Always,
    /// `!`: no one.
    Never,
    /// `role:NAME`.
    Role(Value),
    /// `service_role:NAME`: a role of the service token sent beside the user's.
    ServiceRole(Value),
    /// `rule:NAME`: another named rule.
    Named(String),
    /// `attribute:value`.
    Generic(Subject, Value),
    Not(Box<Rule>),
    And(Vec<Rule>),
    Or(Vec<Rule>),
}

impl Rule {
    /// Every `rule:NAME` this rule refers to.
    pub fn references(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |r| {
            if let Rule::Named(n) = r {
                out.push(n.as_str());
            }
        });
        out
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Rule)) {
        f(self);
        match self {
            Rule::Not(r) => r.walk(f),
            Rule::And(rs) | Rule::Or(rs) => rs.iter().for_each(|r| r.walk(f)),
            _ => {}
        }
    }

    /// Whether the caller passes, `named` giving the rules `rule:NAME` means.
    pub(crate) fn check<'r>(
        &'r self,
        who: &dyn Credentials,
        target: &dyn Target,
        named: &dyn Fn(&str) -> Option<&'r Rule>,
    ) -> bool {
        match self {
            Rule::Always => true,
            Rule::Never => false,
            Rule::Role(v) => {
                v.resolve(target).is_some_and(|want| who.roles().iter().any(|r| r.eq_ignore_ascii_case(want)))
            }
            Rule::ServiceRole(v) => {
                v.resolve(target).is_some_and(|want| who.service_roles().iter().any(|r| r.eq_ignore_ascii_case(want)))
            }
            Rule::Named(n) => named(n).is_some_and(|r| r.check(who, target, named)),
            Rule::Generic(subject, v) => {
                let left = match subject {
                    Subject::Attribute(a) => who.attribute(a),
                    Subject::Literal(l) => Some(l.as_str()),
                };
                matches!((left, v.resolve(target)), (Some(l), Some(r)) if l == r)
            }
            Rule::Not(r) => !r.check(who, target, named),
            Rule::And(rs) => rs.iter().all(|r| r.check(who, target, named)),
            Rule::Or(rs) => rs.iter().any(|r| r.check(who, target, named)),
        }
    }
}

impl Value {
    fn resolve<'a>(&'a self, target: &'a dyn Target) -> Option<&'a str> {
        match self {
            Value::Literal(l) => Some(l),
            Value::FromTarget(k) => target.attribute(k),
        }
    }
}
