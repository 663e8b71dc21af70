//! `/tool-calls`: the audit trail.

use axum::Json;
use axum::extract::State;
use executor_ops::{ToolCall, ToolCallQuery};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::Params;
use crate::page::Page;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(list_tool_calls))
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Failed,
    Blocked,
    Declined,
    TimedOut,
    Error,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolCallParams {
    /// An exact tool path, or a prefix ending in `.` (`github.`).
    pub tool: Option<String>,
    /// Only calls with this outcome.
    #[param(inline)]
    pub outcome: Option<Outcome>,
    /// Calls of this MCP session.
    pub session: Option<String>,
    /// Calls of this execution.
    pub execution: Option<String>,
    /// Calls started at or after this time (ms since the epoch).
    #[param(minimum = 0, maximum = 253402300799999_i64)]
    pub since: Option<u64>,
    /// Calls started before this time (ms since the epoch).
    #[param(minimum = 0, maximum = 253402300799999_i64)]
    pub until: Option<u64>,
    /// Items to return, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// Where the previous page ended: its `next_cursor`.
    #[param(pattern = "^[A-Za-z0-9_-]{1,1400}$")]
    pub cursor: Option<String>,
}

/// The org's tool calls, newest first: outcome, the policy action and rule
/// that decided, the approval and who gave it, duration (approval wait
/// apart) and argument names, never their values.
#[utoipa::path(get, path = "/tool-calls", tag = "tool-calls",
    params(ToolCallParams),
    responses(
        (status = 200, description = "A page of the org's tool calls", body = Page<ToolCall>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad filter, limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_tool_calls(
    State(state): State<ApiState>,
    caller: Caller,
    Params(params): Params<ToolCallParams>,
) -> ApiResult<Json<Page<ToolCall>>> {
    let page = crate::page::ask(params.limit, params.cursor)?;
    let query = ToolCallQuery {
        tool: params.tool,
        outcome: params.outcome.map(|o| match o {
            Outcome::Ok => executor_store::ToolCallOutcome::Ok,
            Outcome::Failed => executor_store::ToolCallOutcome::Failed,
            Outcome::Blocked => executor_store::ToolCallOutcome::Blocked,
            Outcome::Declined => executor_store::ToolCallOutcome::Declined,
            Outcome::TimedOut => executor_store::ToolCallOutcome::TimedOut,
            Outcome::Error => executor_store::ToolCallOutcome::Error,
        }),
        session_id: params.session,
        execution_id: params.execution,
        since_ms: crate::page::time_param(params.since, "since")?,
        until_ms: crate::page::time_param(params.until, "until")?,
        page,
    };
    let listed = state.ops.list_tool_calls(&caller.actor, &query).await?;
    Ok(Json(Page::from(listed)))
}
