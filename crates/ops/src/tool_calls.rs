//! The audit trail: every tool call made by `execute`, `executor call` or
//! the API, with its outcome, the policy that decided it, the approval and
//! who gave it, its duration and its argument names (never their values).

use executor_store::{
    ApprovalChannel, ApprovalDecision, PageKey, PolicyAction, ToolCallFilter, ToolCallOutcome,
    ToolCallRecord,
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::paging::{Listed, PageAsk};
use crate::{Actor, OpResult, Operations};

/// Which tool calls to list; every field set narrows the list.
#[derive(Debug, Clone, Default)]
pub struct ToolCallQuery {
    /// An exact tool path, or a prefix ending in `.`.
    pub tool: Option<String>,
    pub outcome: Option<ToolCallOutcome>,
    pub session_id: Option<String>,
    pub execution_id: Option<String>,
    /// Calls started at or after this time.
    pub since_ms: Option<i64>,
    /// Calls started before this time.
    pub until_ms: Option<i64>,
    pub page: PageAsk,
}

/// One tool call, as the audit trail shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// `<execution id>.<call index>`.
    pub id: String,
    pub execution_id: String,
    pub session_id: Option<String>,
    /// Who ran the code that made the call.
    pub account_id: String,
    pub tool_path: String,
    /// ok, failed, blocked, declined, timed_out or error.
    #[schema(value_type = String, example = "ok")]
    pub outcome: ToolCallOutcome,
    /// Why it was not ok: a §7 error code, or how its approval ended.
    pub error_code: Option<String>,
    /// The policy action that applied (a rule's or the tool's default);
    /// none when no policy was consulted.
    #[schema(value_type = Option<String>, example = "require_approval")]
    pub policy_action: Option<PolicyAction>,
    /// The rule that decided it (pol_…); none: the tool's default.
    pub policy_rule: Option<String>,
    /// approved or declined; none when no approval was asked.
    #[schema(value_type = Option<String>, example = "approved")]
    pub approval: Option<ApprovalDecision>,
    /// The account that decided, when known.
    pub decided_by: Option<String>,
    /// How it was decided: resume, native, console, api, cli, caller (the
    /// operator's own call) or timeout; none when no approval was asked.
    #[schema(value_type = Option<String>, example = "console")]
    pub decided_via: Option<ApprovalChannel>,
    /// How long the call waited for a human.
    pub approval_wait_ms: i64,
    /// The top-level argument names; never their values.
    pub arg_names: Vec<String>,
    pub started_at_ms: i64,
    /// The call's own time, the approval wait excluded.
    pub duration_ms: i64,
}

impl From<ToolCallRecord> for ToolCall {
    fn from(r: ToolCallRecord) -> Self {
        ToolCall {
            id: r.id,
            execution_id: r.execution_id,
            session_id: r.session_id,
            account_id: r.account_id,
            tool_path: r.tool_path,
            outcome: r.outcome,
            error_code: r.error_code,
            policy_action: r.policy_action,
            policy_rule: r.policy_rule,
            approval: r.approval,
            decided_by: r.decided_by,
            decided_via: r.decided_via,
            approval_wait_ms: r.approval_wait_ms,
            arg_names: r.arg_names,
            started_at_ms: r.started_at_ms,
            duration_ms: r.duration_ms,
        }
    }
}

impl Operations {
    /// The org's tool calls, newest first.
    pub async fn list_tool_calls(
        &self,
        actor: &Actor,
        query: &ToolCallQuery,
    ) -> OpResult<Listed<ToolCall>> {
        let filter = ToolCallFilter {
            tool: query.tool.clone(),
            outcome: query.outcome,
            session_id: query.session_id.clone(),
            execution_id: query.execution_id.clone(),
            since_ms: query.since_ms,
            until_ms: query.until_ms,
        };
        let request = query.page.request()?;
        let rows = self
            .store()
            .list_tool_calls(&actor.org_id, &filter, &request)
            .await?;
        Ok(query.page.page(
            rows,
            |r| PageKey {
                started_at_ms: r.started_at_ms,
                id: r.id.clone(),
            },
            ToolCall::from,
        ))
    }
}
