//! Policies (SPEC §9): rules `{pattern, action}` over tool addresses.
//!
//! Grammar, checked when a rule is saved:
//! - `*` alone matches every tool;
//! - a trailing `.*` matches a subtree (`github.*`: every tool under `github.`);
//! - `*` as any other segment matches exactly one segment (`github.*.delete`);
//! - every other segment is a literal name (letters, digits, `_`, `-`).
//!
//! The first matching rule by position wins; no match leaves the tool's
//! default (`requires_approval` from its integration).

use std::str::FromStr;

pub use executor_store::PolicyAction;

/// A validated pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    segments: Vec<Segment>,
    subtree: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    AnyOne,
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(Pattern {
                segments: Vec::new(),
                subtree: true,
            });
        }
        let (body, subtree) = match text.strip_suffix(".*") {
            Some(body) => (body, true),
            None => (text, false),
        };
        if body.is_empty() {
            return Err(format!("invalid pattern {text:?}: nothing before `.*`"));
        }
        let segments = body
            .split('.')
            .map(|seg| parse_segment(seg, text))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pattern { segments, subtree })
    }
}

fn parse_segment(seg: &str, whole: &str) -> Result<Segment, String> {
    if seg == "*" {
        return Ok(Segment::AnyOne);
    }
    let valid = !seg.is_empty()
        && seg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(Segment::Literal(seg.to_string()))
    } else {
        Err(format!(
            "invalid pattern {whole:?}: segment {seg:?} must be a name or `*` (patterns: `*`, `ns.*`, `ns.*.tool`, `ns.group.tool`)"
        ))
    }
}

impl Pattern {
    pub fn matches(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('.').collect();
        let fixed = self.segments.len();
        let length_ok = if self.subtree {
            parts.len() > fixed
        } else {
            parts.len() == fixed
        };
        length_ok
            && self
                .segments
                .iter()
                .zip(&parts)
                .all(|(seg, part)| match seg {
                    Segment::AnyOne => true,
                    Segment::Literal(lit) => lit == part,
                })
    }
}

/// One saved rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub pattern: Pattern,
    pub action: PolicyAction,
}

/// An org's rules, in position order.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    rules: Vec<Rule>,
}

impl PolicySet {
    pub fn new(rules: Vec<Rule>) -> Self {
        PolicySet { rules }
    }

    /// The action for `path`: the first matching rule, else the default.
    pub fn resolve(&self, path: &str, requires_approval_by_default: bool) -> PolicyAction {
        self.resolve_rule(path, requires_approval_by_default).0
    }

    /// The action for `path` and the rule that decided it (None: the
    /// tool's default).
    pub fn resolve_rule(
        &self,
        path: &str,
        requires_approval_by_default: bool,
    ) -> (PolicyAction, Option<&Rule>) {
        match self.rules.iter().find(|r| r.pattern.matches(path)) {
            Some(rule) => (rule.action, Some(rule)),
            None if requires_approval_by_default => (PolicyAction::RequireApproval, None),
            None => (PolicyAction::Allow, None),
        }
    }

    pub fn is_blocked(&self, path: &str) -> bool {
        self.rules
            .iter()
            .find(|r| r.pattern.matches(path))
            .is_some_and(|r| r.action == PolicyAction::Block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn grammar() {
        assert!(p("*").matches("a.b.c"));
        assert!(p("github.*").matches("github.issues.create"));
        assert!(p("github.*").matches("github.x"));
        assert!(!p("github.*").matches("github"));
        assert!(!p("github.*").matches("githubx.issues"));
        assert!(p("github.*.delete").matches("github.repos.delete"));
        assert!(!p("github.*.delete").matches("github.repos.hooks.delete"));
        assert!(p("github.issues.create").matches("github.issues.create"));
        assert!(!p("github.issues.create").matches("github.issues.create2"));
        assert!(p("*.*.delete").matches("a.b.delete"));
        for bad in [
            "", ".*", "git*", "a..b", "a.**", "a b", "a.*.", "**", "a.b*c",
        ] {
            assert!(
                bad.parse::<Pattern>().is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn first_match_wins_then_the_default() {
        let set = PolicySet::new(vec![
            Rule {
                id: "1".into(),
                pattern: p("github.issues.*"),
                action: PolicyAction::Allow,
            },
            Rule {
                id: "2".into(),
                pattern: p("github.*"),
                action: PolicyAction::Block,
            },
        ]);
        assert_eq!(
            set.resolve("github.issues.create", true),
            PolicyAction::Allow
        );
        assert_eq!(
            set.resolve("github.repos.delete", false),
            PolicyAction::Block
        );
        assert_eq!(
            set.resolve("stripe.charges.create", true),
            PolicyAction::RequireApproval
        );
        assert_eq!(
            set.resolve("stripe.charges.list", false),
            PolicyAction::Allow
        );
        let decided_by = |path: &str| set.resolve_rule(path, true).1.map(|r| r.id.as_str());
        assert_eq!(decided_by("github.issues.create"), Some("1"));
        assert_eq!(decided_by("github.repos.delete"), Some("2"));
        assert_eq!(decided_by("stripe.charges.create"), None);
        assert!(set.is_blocked("github.repos.get"));
        assert!(!set.is_blocked("github.issues.get"));
    }

    #[test]
    fn actions_parse() {
        assert_eq!(
            PolicyAction::from_input("require-approval"),
            Ok(PolicyAction::RequireApproval)
        );
        assert_eq!(PolicyAction::from_input("BLOCK"), Ok(PolicyAction::Block));
        assert!(PolicyAction::from_input("maybe").is_err());
    }
}
