//! Policies: the org's rules, matched in order, first match wins (SPEC §9).

use executor_engine::policy::Pattern;
use executor_store::{PolicyAction, PolicyRecord, now_ms, tokens};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// The longest pattern: as long as the longest tool path (SPEC §12).
pub const MAX_PATTERN_BYTES: usize = 512;

/// A rule to add.
#[derive(Debug, Clone)]
pub struct NewPolicy {
    /// `*`, `ns.*` (a subtree), `ns.*.tool` (`*` = one segment) or a full
    /// address.
    pub pattern: String,
    /// allow, require_approval or block (also approve, deny; any case).
    pub action: String,
    /// 0-based; default last.
    pub position: Option<i64>,
}

/// A rule, as every surface shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// pol_…
    pub id: String,
    pub pattern: String,
    /// allow, require_approval or block.
    #[schema(value_type = String, example = "require_approval")]
    pub action: PolicyAction,
    /// 0-based place in the match order.
    pub position: i64,
    pub created_at_ms: i64,
}

impl From<PolicyRecord> for Policy {
    fn from(r: PolicyRecord) -> Self {
        Policy {
            id: r.id,
            pattern: r.pattern,
            action: r.action,
            position: r.position,
            created_at_ms: r.created_at_ms,
        }
    }
}

/// What the rules make of one tool address.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEvaluation {
    pub path: String,
    /// allow, require_approval or block.
    #[schema(value_type = String, example = "allow")]
    pub action: PolicyAction,
    /// The rule that decided it; none when the tool's default did.
    pub rule: Option<Policy>,
    /// Whether the address names a tool of the org's catalog now.
    pub tool_exists: bool,
}

/// The tools of the org's catalog a pattern matches now: what a rule
/// with it would decide (before the rules above it have their say).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatternPreview {
    pub pattern: String,
    /// All the matching tools.
    pub total: usize,
    /// The first [`MAX_PREVIEWED_TOOLS`] of them, in catalog order.
    pub tools: Vec<String>,
}

/// Tools named by a [`PatternPreview`], at most.
pub const MAX_PREVIEWED_TOOLS: usize = 20;

impl Operations {
    /// Checks `pattern` as a rule would be checked, and lists the tools it
    /// matches: a bad pattern is the same error adding it gives.
    pub async fn preview_pattern(&self, actor: &Actor, pattern: &str) -> OpResult<PatternPreview> {
        check_pattern(pattern)?;
        let pattern = pattern.trim();
        let parsed = pattern
            .parse::<Pattern>()
            .map_err(|e| OpError::invalid("pattern", e.to_string()))?;
        let catalog = self.parts.catalogs.catalog(&actor.org_id).await;
        let mut matching = catalog
            .groups()
            .iter()
            .flat_map(|g| g.tools())
            .filter(|t| parsed.matches(&t.path));
        let tools: Vec<String> = matching
            .by_ref()
            .take(MAX_PREVIEWED_TOOLS)
            .map(|t| t.path.to_string())
            .collect();
        Ok(PatternPreview {
            pattern: pattern.to_string(),
            total: tools.len() + matching.count(),
            tools,
        })
    }

    pub async fn add_policy(&self, actor: &Actor, input: NewPolicy) -> OpResult<Policy> {
        check_pattern(&input.pattern)?;
        let action =
            PolicyAction::from_input(&input.action).map_err(|e| OpError::invalid("action", e))?;
        if input.position.is_some_and(|p| p < 0) {
            return Err(OpError::invalid("position", "a position is 0 or more"));
        }
        let record = self
            .store()
            .add_policy(PolicyRecord {
                id: format!("pol_{}", tokens::random_id(9)),
                org_id: actor.org_id.clone(),
                pattern: input.pattern.trim().to_string(),
                action,
                position: input.position.unwrap_or(i64::MAX),
                created_at_ms: now_ms(),
            })
            .await?;
        Ok(record.into())
    }

    /// The rules in the order they are matched.
    pub async fn list_policies(&self, actor: &Actor) -> OpResult<Vec<Policy>> {
        let records = self.store().list_policies(&actor.org_id).await?;
        Ok(records.into_iter().map(Policy::from).collect())
    }

    pub async fn get_policy(&self, actor: &Actor, id: &str) -> OpResult<Policy> {
        self.list_policies(actor)
            .await?
            .into_iter()
            .find(|p| p.id == id)
            .ok_or_else(|| OpError::not_found(format_args!("policy {id}")))
    }

    /// Moves a rule to `position` (0-based) in the match order.
    pub async fn move_policy(&self, actor: &Actor, id: &str, position: i64) -> OpResult<Policy> {
        if position < 0 {
            return Err(OpError::invalid("position", "a position is 0 or more"));
        }
        if !self
            .store()
            .move_policy(&actor.org_id, id, position)
            .await?
        {
            return Err(OpError::not_found(format_args!("policy {id}")));
        }
        self.get_policy(actor, id).await
    }

    /// Replaces a rule's pattern and action, keeping its place.
    pub async fn update_policy(
        &self,
        actor: &Actor,
        id: &str,
        pattern: &str,
        action: &str,
    ) -> OpResult<Policy> {
        check_pattern(pattern)?;
        let action = PolicyAction::from_input(action).map_err(|e| OpError::invalid("action", e))?;
        let updated = self
            .store()
            .update_policy(&actor.org_id, id, pattern.trim().to_string(), action)
            .await?;
        updated
            .map(Policy::from)
            .ok_or_else(|| OpError::not_found(format_args!("policy {id}")))
    }

    pub async fn remove_policy(&self, actor: &Actor, id: &str) -> OpResult<()> {
        if self.store().remove_policy(&actor.org_id, id).await? {
            Ok(())
        } else {
            Err(OpError::not_found(format_args!("policy {id}")))
        }
    }

    /// The action the rules give `path`, and the rule that gives it: what a
    /// call of that tool would meet now.
    pub async fn evaluate_policy(&self, actor: &Actor, path: &str) -> OpResult<PolicyEvaluation> {
        let mut evaluated = self.evaluate_policies(actor, &[path.to_string()]).await?;
        evaluated
            .pop()
            .ok_or_else(|| OpError::internal("evaluate a policy", "one path gave no answer"))
    }

    /// [`Operations::evaluate_policy`] for many paths at once (a page of
    /// tools), reading the rules and the catalog once; in `paths`' order.
    pub async fn evaluate_policies(
        &self,
        actor: &Actor,
        paths: &[String],
    ) -> OpResult<Vec<PolicyEvaluation>> {
        let rules = self.list_policies(actor).await?;
        let patterns: Vec<(Policy, Option<Pattern>)> = rules
            .into_iter()
            .map(|r| {
                let pattern = r.pattern.parse::<Pattern>().ok();
                (r, pattern)
            })
            .collect();
        let catalog = self.parts.catalogs.catalog(&actor.org_id).await;
        Ok(paths
            .iter()
            .map(|path| {
                let path = path.trim();
                let tool = catalog.get(path);
                let rule = patterns
                    .iter()
                    .find(|(_, p)| p.as_ref().is_some_and(|p| p.matches(path)))
                    .map(|(r, _)| r.clone());
                let action = match &rule {
                    Some(rule) => rule.action,
                    None if tool.is_some_and(|t| t.requires_approval) => {
                        PolicyAction::RequireApproval
                    }
                    None => PolicyAction::Allow,
                };
                PolicyEvaluation {
                    path: path.to_string(),
                    action,
                    rule,
                    tool_exists: tool.is_some(),
                }
            })
            .collect())
    }
}

/// Validated on save (SPEC §9): a bad rule never reaches the store.
fn check_pattern(pattern: &str) -> OpResult<()> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(OpError::invalid(
            "pattern",
            format!("a pattern is at most {MAX_PATTERN_BYTES} bytes"),
        ));
    }
    pattern
        .parse::<Pattern>()
        .map(|_| ())
        .map_err(|e| OpError::invalid("pattern", e.to_string()))
}
