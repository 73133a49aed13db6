//! The grammar of oslo.policy rules, with winnow:
//!
//! ```text
//! or    := and ("or" and)*
//! and   := not ("and" not)*
//! not   := "not" not | atom
//! atom  := "(" or ")" | "@" | "!" | check
//! check := KIND ":" MATCH        (role:admin, rule:x, project_id:%(project_id)s, 'lit':%(x)s)
//! ```
//! Keywords are case-insensitive; the empty rule allows anyone.

use winnow::ascii::{multispace0, multispace1, Caseless};
use winnow::combinator::{alt, cut_err, delimited, eof, peek, preceded, repeat, separated, terminated};
use winnow::error::{ContextError, ErrMode, StrContext, StrContextValue};
use winnow::prelude::*;
use winnow::token::{literal, one_of, take_while};

use crate::rule::{Rule, Subject, Value, ATTRIBUTES};
use crate::RuleError;

// Here rather than beside the rule's other methods, so that the grammar
// builds rules and the rules know nothing of the grammar.
impl Rule {
    /// Reads one expression of oslo.policy's language.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        rule(text)
    }
}

fn rule(text: &str) -> Result<Rule, RuleError> {
    if text.trim().is_empty() {
        return Ok(Rule::Always);
    }
    delimited(multispace0, or_expr, (multispace0, eof))
        .parse(text)
        .map_err(|e| RuleError(format!("bad rule {text:?}: {}", e.inner().to_string().trim())))
}

fn flatten(mut rules: Vec<Rule>, make: fn(Vec<Rule>) -> Rule) -> Rule {
    if rules.len() == 1 {
        rules.pop().expect("one rule")
    } else {
        make(rules)
    }
}

fn or_expr(i: &mut &str) -> ModalResult<Rule> {
    separated(1.., and_expr, keyword("or")).map(|rs| flatten(rs, Rule::Or)).parse_next(i)
}

fn and_expr(i: &mut &str) -> ModalResult<Rule> {
    separated(1.., not_expr, keyword("and")).map(|rs| flatten(rs, Rule::And)).parse_next(i)
}

fn not_expr(i: &mut &str) -> ModalResult<Rule> {
    alt((preceded(keyword("not"), cut_err(not_expr)).map(|r| Rule::Not(Box::new(r))), atom)).parse_next(i)
}

fn atom(i: &mut &str) -> ModalResult<Rule> {
    delimited(
        multispace0,
        alt((delimited('(', or_expr, cut_err((multispace0, ')')).context(expected("a closing parenthesis"))), check)),
        multispace0,
    )
    .parse_next(i)
}

/// `word` as a whole word: followed by a space, a parenthesis or the end.
fn keyword<'s>(word: &'static str) -> impl Parser<&'s str, (), ErrMode<ContextError>> {
    delimited(
        multispace0,
        terminated(literal(Caseless(word)), peek(alt((multispace1, "(", ")", eof)))).void(),
        multispace0,
    )
}

fn expected(what: &'static str) -> StrContext {
    StrContext::Expected(StrContextValue::Description(what))
}

/// One check token: everything up to a space or a parenthesis, where
/// `%(name)s` is one piece (its parentheses do not end the token).
fn check(i: &mut &str) -> ModalResult<Rule> {
    let plain = |c: char| !c.is_whitespace() && c != '(' && c != ')';
    let piece = alt((("%(", take_while(1.., |c| c != ')'), ")s").void(), one_of(plain).void()));
    let token = repeat::<_, _, (), _, _>(1.., piece)
        .take()
        .verify(|t: &str| !["and", "or", "not"].iter().any(|k| t.eq_ignore_ascii_case(k)))
        .context(expected("a check such as role:admin"))
        .parse_next(i)?;
    let mut token = token;
    terminated(check_token, eof)
        .context(expected("KIND:MATCH, @ or !"))
        .parse_next(&mut token)
        .map_err(|e: ErrMode<ContextError>| e.cut())
}

fn check_token(i: &mut &str) -> ModalResult<Rule> {
    alt((
        ("@", eof).value(Rule::Always),
        ("!", eof).value(Rule::Never),
        (kind, ':', value).verify_map(|(kind, _, value)| make_check(kind, value)),
    ))
    .parse_next(i)
}

fn kind<'s>(i: &mut &'s str) -> ModalResult<Kind<'s>> {
    alt((
        delimited('\'', take_while(0.., |c| c != '\''), '\'').map(Kind::Quoted),
        delimited('"', take_while(0.., |c| c != '"'), '"').map(Kind::Quoted),
        take_while(1.., |c: char| c != ':').map(Kind::Plain),
    ))
    .parse_next(i)
}

enum Kind<'s> {
    Plain(&'s str),
    Quoted(&'s str),
}

/// `%(name)s` or a literal, to the end of the token.
fn value(i: &mut &str) -> ModalResult<Value> {
    alt((
        (delimited("%(", take_while(1.., |c| c != ')'), ")s"), eof)
            .map(|(k, _): (&str, _)| Value::FromTarget(k.into())),
        take_while(1.., |_| true).map(|l: &str| Value::Literal(l.into())),
    ))
    .parse_next(i)
}

fn make_check(kind: Kind<'_>, value: Value) -> Option<Rule> {
    match kind {
        Kind::Quoted(l) => Some(Rule::Generic(Subject::Literal(l.into()), value)),
        Kind::Plain("role") => Some(Rule::Role(value)),
        Kind::Plain("service_role") => Some(Rule::ServiceRole(value)),
        Kind::Plain("rule") => match value {
            Value::Literal(name) => Some(Rule::Named(name)),
            Value::FromTarget(_) => None,
        },
        Kind::Plain(attr) if ATTRIBUTES.contains(&attr) => Some(Rule::Generic(Subject::Attribute(attr.into()), value)),
        Kind::Plain(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(r: &str) -> Rule {
        Rule::Role(Value::Literal(r.into()))
    }

    #[test]
    fn precedence_is_not_then_and_then_or() {
        let r = rule("role:a or role:b and not role:c").unwrap();
        assert_eq!(r, Rule::Or(vec![role("a"), Rule::And(vec![role("b"), Rule::Not(Box::new(role("c")))])]));
        let r = rule("(role:a or role:b) AND project_id:%(project_id)s").unwrap();
        assert_eq!(
            r,
            Rule::And(vec![
                Rule::Or(vec![role("a"), role("b")]),
                Rule::Generic(Subject::Attribute("project_id".into()), Value::FromTarget("project_id".into())),
            ])
        );
        assert_eq!(rule("not(role:a)").unwrap(), Rule::Not(Box::new(role("a"))));
        assert_eq!(rule("rule:admin_api").unwrap(), Rule::Named("admin_api".into()));
        assert_eq!(rule("@").unwrap(), Rule::Always);
        assert_eq!(rule("  ").unwrap(), Rule::Always);
        assert_eq!(rule("!").unwrap(), Rule::Never);
        assert_eq!(
            rule("'member':%(role.name)s").unwrap(),
            Rule::Generic(Subject::Literal("member".into()), Value::FromTarget("role.name".into()))
        );
        assert_eq!(
            rule("is_admin:True").unwrap(),
            Rule::Generic(Subject::Attribute("is_admin".into()), Value::Literal("True".into()))
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "role:",
            "role",
            "(role:a",
            "role:a)",
            "role:a and",
            "and role:a",
            "role:a or or role:b",
            "nosuch_attribute:x",
            "http://example.com",
            "rule:%(x)s",
            "not",
            "@@",
        ] {
            assert!(rule(bad).is_err(), "{bad:?} parsed as {:?}", rule(bad));
        }
    }
}
