//! Executions: run code as the caller, list and read records, and decide
//! a paused one.

use std::time::Duration;

use executor_call::{Action, ApprovalMode, CallContext};
use executor_engine::{CoreTool, Decider, ToolOutcome};
use executor_store::{ApprovalChannel, ExecutionFilter, ExecutionRecord, ExecutionStatus, PageKey};

use crate::paging::{Listed, PageAsk};
use crate::tool_calls::ToolCall;
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// Which executions to list; every field set narrows the list.
#[derive(Debug, Clone, Default)]
pub struct ListExecutions {
    pub status: Option<ExecutionStatus>,
    pub session_id: Option<String>,
    /// Executions started at or after this time.
    pub since_ms: Option<i64>,
    /// Executions started before this time.
    pub until_ms: Option<i64>,
    pub page: PageAsk,
}

/// An execution as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionSummary {
    pub id: String,
    pub org_id: String,
    pub session_id: Option<String>,
    /// completed, error or waiting_for_interaction.
    #[schema(value_type = String, example = "completed")]
    pub status: ExecutionStatus,
    pub started_at_ms: i64,
    pub duration_ms: i64,
    /// The code's first line, cut at 80 characters.
    pub code_preview: String,
}

/// An execution in full: its code, result or error, logs and tool calls.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionDetail {
    pub id: String,
    pub org_id: String,
    pub account_id: String,
    pub session_id: Option<String>,
    pub code: String,
    /// completed, error or waiting_for_interaction.
    #[schema(value_type = String, example = "completed")]
    pub status: ExecutionStatus,
    /// What the code returned, as JSON.
    pub result: Option<Value>,
    pub error: Option<String>,
    /// What the code printed (console.log and friends).
    pub logs: Vec<String>,
    /// The tool calls the run made, in order.
    pub tool_calls: Vec<ToolCall>,
    pub started_at_ms: i64,
    pub duration_ms: i64,
}

impl From<ExecutionRecord> for ExecutionDetail {
    fn from(x: ExecutionRecord) -> Self {
        ExecutionDetail {
            id: x.id,
            org_id: x.org_id,
            account_id: x.account_id,
            session_id: x.session_id,
            code: x.code,
            status: x.status,
            result: x.result,
            error: x.error,
            logs: x.logs,
            tool_calls: x.tool_calls.into_iter().map(ToolCall::from).collect(),
            started_at_ms: x.started_at_ms,
            duration_ms: x.duration_ms,
        }
    }
}

/// What running code (or one tool) came to.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallResult {
    /// The run's text, as an agent reads it.
    pub text: String,
    /// The result as JSON (`structuredContent`), when there is one.
    pub structured: Option<Value>,
    pub is_error: bool,
    /// Set when the run waits for a human: decide it with `resume`.
    pub paused_execution_id: Option<String>,
}

impl CallResult {
    fn of(outcome: ToolOutcome) -> Self {
        let paused_execution_id = match &outcome {
            ToolOutcome::Paused(paused) => Some(paused.request.execution_id.clone()),
            ToolOutcome::Answered(_) => None,
        };
        let result = outcome.into_result();
        let text = result["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let structured = result.get("structuredContent").cloned();
        let is_error = result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || result.pointer("/structuredContent/result/ok") == Some(&Value::Bool(false));
        CallResult {
            text,
            structured,
            is_error,
            paused_execution_id,
        }
    }
}

impl Operations {
    /// Runs `code` as `actor`, as `execute` would, without an MCP session.
    pub async fn run_code(&self, actor: &Actor, code: &str) -> OpResult<CallResult> {
        self.run_code_as(actor, code, ApprovalMode::AskAHuman).await
    }

    /// Runs `code` as [`Operations::run_code`], with calls that need
    /// approval waiting for a human or approved by the caller.
    pub(crate) async fn run_code_as(
        &self,
        actor: &Actor,
        code: &str,
        approval: ApprovalMode,
    ) -> OpResult<CallResult> {
        if code.is_empty() {
            return Err(OpError::invalid("code", "the code is empty"));
        }
        let engine = self.engine()?;
        let ctx = CallContext {
            principal: actor.clone(),
            session_id: None,
            approval,
            holder: None,
        };
        let outcome = engine
            .call_tool(&ctx, CoreTool::Execute, &json!({ "code": code }))
            .await;
        Ok(CallResult::of(outcome))
    }

    /// Decides a paused execution of the caller's org: hands the decision to
    /// the server holding the run, or applies it here when none takes it
    /// within `wait`.
    pub async fn resume_execution(
        &self,
        actor: Option<&Actor>,
        id: &str,
        action: &str,
        wait: Duration,
        via: ApprovalChannel,
    ) -> OpResult<CallResult> {
        let action: Action = action
            .parse()
            .map_err(|e: executor_call::UnknownAction| OpError::invalid("action", e.to_string()))?;
        self.paused_execution_of(actor.map(|a| a.org_id.as_str()), id)
            .await?;
        let engine = self.engine()?;
        // The audit trail says who decided, and through which surface.
        let decider = Decider::new(actor.map(|a| a.account_id.clone()), via);
        let outcome = engine.resume_from_outside(id, action, wait, decider).await;
        Ok(CallResult::of(outcome))
    }

    /// The newest executions, of `org_id` or (the store's operator) of all.
    pub async fn list_executions(
        &self,
        org_id: Option<&str>,
        query: &ListExecutions,
    ) -> OpResult<Listed<ExecutionSummary>> {
        let filter = ExecutionFilter {
            status: query.status,
            session_id: query.session_id.clone(),
            since_ms: query.since_ms,
            until_ms: query.until_ms,
        };
        let request = query.page.request()?;
        let records = self
            .store()
            .list_executions(org_id, &filter, &request)
            .await?;
        Ok(query.page.page(
            records,
            |x| PageKey {
                started_at_ms: x.started_at_ms,
                id: x.id.clone(),
            },
            |x| summary(&x),
        ))
    }

    /// One execution in full: of `org_id`, or of any org for `None`.
    pub async fn get_execution(&self, org_id: Option<&str>, id: &str) -> OpResult<ExecutionDetail> {
        self.store()
            .get_execution(id)
            .await?
            .filter(|x| org_id.is_none_or(|org| x.org_id == org))
            .map(ExecutionDetail::from)
            .ok_or_else(|| OpError::not_found(format_args!("execution {id}")))
    }

    /// Checks that `id` is a paused execution of the actor's org.
    async fn paused_execution_of(&self, org_id: Option<&str>, id: &str) -> OpResult<()> {
        let not_found = || OpError::not_found(format_args!("execution {id}"));
        // A run's record says whether it still waits: one that finished was
        // decided already (a repeated decision is said so, not replayed).
        if let Ok(record) = self.get_execution(org_id, id).await
            && record.status != ExecutionStatus::WaitingForInteraction
        {
            return Err(OpError::conflict(
                "already_finished",
                format!(
                    "execution {id} was decided and has finished ({}); nothing waits for a \
                     decision: read it with `executor executions show {id}` or GET \
                     /api/v1/executions/{id}",
                    record.status
                ),
            ));
        }
        if let Some(action) = self.engine()?.decision_of(id).await {
            let decision = match action {
                Action::Accept => "approved",
                Action::Decline | Action::Cancel => "declined",
            };
            return Err(OpError::conflict(
                "already_decided",
                format!(
                    "execution {id} was already decided ({decision}); nothing waits for a decision"
                ),
            ));
        }
        let Some(org_id) = org_id else {
            return Ok(());
        };
        let state = self.store().load_execution_state(id).await?;
        let Some(state) = state else {
            return Err(not_found());
        };
        let org = serde_json::from_str::<Value>(&state).ok().and_then(|v| {
            v.pointer("/owner/org_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        // A state whose owner cannot be read is nobody's to decide here.
        match org {
            Some(org) if org == org_id => Ok(()),
            _ => Err(not_found()),
        }
    }
}

fn summary(x: &ExecutionRecord) -> ExecutionSummary {
    let first = x.code.lines().next().unwrap_or("");
    ExecutionSummary {
        id: x.id.clone(),
        org_id: x.org_id.clone(),
        session_id: x.session_id.clone(),
        status: x.status,
        started_at_ms: x.started_at_ms,
        duration_ms: x.duration_ms,
        code_preview: first.chars().take(80).collect(),
    }
}
