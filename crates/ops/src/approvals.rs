//! Approvals: the calls that wait for a human, and deciding one (which is
//! resuming its execution, see `executions.rs`).

use serde::Serialize;
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// A call that waits for a human's decision.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The paused execution: decide with its resume.
    pub execution_id: String,
    pub session_id: Option<String>,
    /// Who ran the code.
    pub account_id: String,
    /// The tool the call is for.
    pub tool_path: String,
    /// Its arguments as pretty JSON, cut at the preview length.
    pub args_preview: String,
    /// The integration's question about the call, when it asked one.
    pub question: Option<String>,
    /// The rule that asks for approval now (pol_…); none: the tool's
    /// default.
    pub policy_rule: Option<String>,
    pub paused_at_ms: i64,
    /// After this the call is declined by itself.
    pub expires_at_ms: i64,
}

impl Operations {
    /// The org's calls waiting for a decision, oldest first.
    pub async fn pending_approvals(&self, actor: &Actor) -> OpResult<Vec<PendingApproval>> {
        let engine = self.engine()?;
        let mut pending: Vec<PendingApproval> = engine
            .pending_approvals(&actor.org_id)
            .await
            .map_err(OpError::from)?
            .into_iter()
            .map(|p| PendingApproval {
                execution_id: p.execution_id,
                session_id: p.session_id,
                account_id: p.account_id,
                tool_path: p.tool_path,
                args_preview: p.args_preview,
                question: p.question,
                policy_rule: p.policy_rule,
                paused_at_ms: p.paused_at_ms,
                expires_at_ms: p.expires_at_ms,
            })
            .collect();
        pending.sort_by(|a, b| {
            (a.paused_at_ms, &a.execution_id).cmp(&(b.paused_at_ms, &b.execution_id))
        });
        Ok(pending)
    }
}
