//! A service's named rules: their defaults, an operator's overrides, and
//! the check.

use std::collections::HashMap;

use crate::rule::{Credentials, Rule, Target};
use crate::RuleError;

/// A rule as the service defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Default {
    pub name: &'static str,
    pub rule: &'static str,
    pub description: &'static str,
}

/// Every rule of a service, each its default or the operator's override.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: HashMap<String, Rule>,
    overridden: Vec<String>,
}

impl Policy {
    /// The defaults alone. Refuses a default that does not parse or refers
    /// to a rule not in `defaults` (a bug of the service, caught by its tests).
    pub fn new(defaults: &[Default]) -> Result<Policy, RuleError> {
        let mut rules = HashMap::new();
        for d in defaults {
            let rule = Rule::parse(d.rule).map_err(|e| RuleError(format!("{}: {e}", d.name)))?;
            rules.insert(d.name.to_string(), rule);
        }
        let policy = Policy { rules, overridden: Vec::new() };
        policy.check_references()?;
        Ok(policy)
    }

    /// The defaults, with `yaml`'s rules in place of theirs (see [`crate::FileError`]).
    pub fn with_overrides(defaults: &[Default], yaml: &str) -> Result<Policy, crate::FileError> {
        let mut policy = Policy::new(defaults).map_err(|e| crate::FileError { line: None, message: e.0 })?;
        for (name, rule) in crate::file::read(yaml, &|n| policy.rules.contains_key(n))? {
            policy.rules.insert(name.clone(), rule);
            policy.overridden.push(name);
        }
        policy.check_references().map_err(|e| crate::FileError { line: None, message: e.0 })?;
        Ok(policy)
    }

    /// The rules the operator's file replaced.
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// Whether `who` passes the rule `name` on `target`. An unknown name
    /// passes no one.
    pub fn check(&self, name: &str, who: &dyn Credentials, target: &dyn Target) -> bool {
        let named = |n: &str| self.rules.get(n);
        self.rules.get(name).is_some_and(|r| r.check(who, target, &named))
    }

    /// Every `rule:NAME` names a rule, and no rule reaches itself.
    fn check_references(&self) -> Result<(), RuleError> {
        for (name, rule) in &self.rules {
            for r in rule.references() {
                if !self.rules.contains_key(r) {
                    return Err(RuleError(format!("{name} refers to rule:{r}, which does not exist")));
                }
            }
        }
        for name in self.rules.keys() {
            self.no_cycle_from(name, &mut Vec::new())?;
        }
        Ok(())
    }

    fn no_cycle_from<'a>(&'a self, name: &'a str, path: &mut Vec<&'a str>) -> Result<(), RuleError> {
        if path.contains(&name) {
            path.push(name);
            return Err(RuleError(format!("rules refer to each other in a circle: {}", path.join(" -> "))));
        }
        path.push(name);
        for r in self.rules.get(name).map(|r| r.references()).unwrap_or_default() {
            self.no_cycle_from(r, path)?;
        }
        path.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Who {
        roles: Vec<String>,
        project: &'static str,
    }
    impl Credentials for Who {
        fn roles(&self) -> &[String] {
            &self.roles
        }
        fn attribute(&self, name: &str) -> Option<&str> {
            (name == "project_id").then_some(self.project)
        }
    }
    struct Of(&'static str);
    impl Target for Of {
        fn attribute(&self, name: &str) -> Option<&str> {
            (name == "project_id").then_some(self.0)
        }
    }

    const DEFAULTS: &[Default] = &[
        Default { name: "admin", rule: "role:admin", description: "" },
        Default { name: "owner", rule: "rule:admin or (role:reader and project_id:%(project_id)s)", description: "" },
        Default { name: "nobody", rule: "!", description: "" },
    ];

    fn who(roles: &[&str], project: &'static str) -> Who {
        Who { roles: roles.iter().map(|r| r.to_string()).collect(), project }
    }

    #[test]
    fn rules_check_roles_projects_and_each_other() {
        let p = Policy::new(DEFAULTS).unwrap();
        assert!(p.check("owner", &who(&["ADMIN"], "x"), &Of("p1")));
        assert!(p.check("owner", &who(&["reader"], "p1"), &Of("p1")));
        assert!(!p.check("owner", &who(&["reader"], "p2"), &Of("p1")));
        assert!(!p.check("owner", &who(&["member"], "p1"), &Of("p1")));
        assert!(!p.check("nobody", &who(&["admin"], "p1"), &Of("p1")));
        assert!(!p.check("no_such_rule", &who(&["admin"], "p1"), &Of("p1")));
    }

    #[test]
    fn overrides_replace_defaults_and_are_checked() {
        let p = Policy::with_overrides(DEFAULTS, "\"nobody\": \"role:member\"\n").unwrap();
        assert!(p.check("nobody", &who(&["member"], "p1"), &Of("p1")));
        assert_eq!(p.overridden(), ["nobody"]);
        let e = Policy::with_overrides(DEFAULTS, "admin: role:admin\n\nnosuch: role:x\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("nosuch"), "{e}");
        let e = Policy::with_overrides(DEFAULTS, "admin: role:admin\nowner: \"role:a or\"\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e = Policy::with_overrides(DEFAULTS, "admin: rule:owner\n").unwrap_err();
        assert!(e.to_string().contains("circle"), "{e}");
        let e = Policy::with_overrides(DEFAULTS, "admin: rule:missing\n").unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = Policy::with_overrides(DEFAULTS, "admin: [1, 2]\n").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        let e = Policy::with_overrides(DEFAULTS, "admin: role:a\nadmin: role:b\n").unwrap_err();
        assert!(e.line.is_some(), "{e}");
        assert!(Policy::with_overrides(DEFAULTS, "").is_ok());
        assert!(Policy::with_overrides(DEFAULTS, "# only comments\n").is_ok());
    }
}
