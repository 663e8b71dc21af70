//! `/executions`: run code as the caller, list and read records, and
//! decide a paused run.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use executor_ops::{CallResult, ExecutionDetail, ExecutionSummary, ListExecutions};
use executor_store::ExecutionStatus;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Params, Segment};
use crate::page::Page;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_executions, run_code))
        .routes(routes!(get_execution))
        .routes(routes!(resume_execution))
}

/// How a run ended (or waits).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Completed,
    Error,
    WaitingForInteraction,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecutionParams {
    /// Only executions in this state.
    #[param(inline)]
    pub status: Option<Status>,
    /// Executions of this MCP session.
    pub session: Option<String>,
    /// Started at or after this time (ms since the epoch).
    #[param(minimum = 0, maximum = 253402300799999_i64)]
    pub since: Option<u64>,
    /// Started before this time (ms since the epoch).
    #[param(minimum = 0, maximum = 253402300799999_i64)]
    pub until: Option<u64>,
    /// Items to return, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// Where the previous page ended: its `next_cursor`.
    #[param(pattern = "^[A-Za-z0-9_-]{1,1400}$")]
    pub cursor: Option<String>,
}

/// The org's executions, newest first.
#[utoipa::path(get, path = "/executions", tag = "executions",
    params(ExecutionParams),
    responses(
        (status = 200, description = "A page of the org's executions", body = Page<ExecutionSummary>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_executions(
    State(state): State<ApiState>,
    caller: Caller,
    Params(params): Params<ExecutionParams>,
) -> ApiResult<Json<Page<ExecutionSummary>>> {
    let query = ListExecutions {
        status: params.status.map(|s| match s {
            Status::Completed => ExecutionStatus::Completed,
            Status::Error => ExecutionStatus::Error,
            Status::WaitingForInteraction => ExecutionStatus::WaitingForInteraction,
        }),
        session_id: params.session,
        since_ms: crate::page::time_param(params.since, "since")?,
        until_ms: crate::page::time_param(params.until, "until")?,
        page: crate::page::ask(params.limit, params.cursor)?,
    };
    let listed = state
        .ops
        .list_executions(Some(&caller.actor.org_id), &query)
        .await?;
    Ok(Json(Page::from(listed)))
}

/// Code to run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCode {
    /// TypeScript or JavaScript: the body of an async function; `return`
    /// gives the result. `tools.<path>(args)` calls the catalog.
    #[schema(min_length = 1)]
    pub code: String,
}

/// Runs code as the caller, as the `execute` tool does. A call that needs
/// approval pauses the run: decide it with `POST /executions/{id}/resume`.
#[utoipa::path(post, path = "/executions", tag = "executions",
    request_body = RunCode,
    responses(
        (status = 200, description = "What the run came to (isError for a failed one)", body = CallResult),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "No code", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn run_code(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<RunCode>,
) -> ApiResult<Json<CallResult>> {
    Ok(Json(state.ops.run_code(&caller.actor, &body.code).await?))
}

#[utoipa::path(get, path = "/executions/{id}", tag = "executions",
    params(("id" = String, Path, description = "The execution's id (exec_…)")),
    responses(
        (status = 200, description = "The execution: code, status, result or error, logs, tool calls", body = ExecutionDetail),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such execution in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn get_execution(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<Json<ExecutionDetail>> {
    Ok(Json(
        state
            .ops
            .get_execution(Some(&caller.actor.org_id), &id)
            .await?,
    ))
}

/// A decision on a paused run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// accept runs the waiting call; decline or cancel makes it throw.
    pub action: DecisionAction,
}

/// accept runs the waiting call; decline or cancel makes it throw.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionAction {
    Accept,
    Decline,
    Cancel,
}

impl DecisionAction {
    fn word(self) -> &'static str {
        match self {
            DecisionAction::Accept => "accept",
            DecisionAction::Decline => "decline",
            DecisionAction::Cancel => "cancel",
        }
    }
}

/// How long a decision waits for the run it continues to settle or pause
/// again before answering with what it has.
const DECISION_WAIT: Duration = Duration::from_secs(2);

/// Decides the call a paused execution waits on, and answers with what
/// the run came to (or its next pause).
#[utoipa::path(post, path = "/executions/{id}/resume", tag = "executions",
    params(("id" = String, Path, description = "The execution's id (exec_…)")),
    request_body = Decision,
    responses(
        (status = 200, description = "What the run came to after the decision", body = CallResult),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such paused execution in the org", body = Problem),
        (status = 409, description = "The execution has finished or was decided", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad action", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn resume_execution(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
    Body(body): Body<Decision>,
) -> ApiResult<Json<CallResult>> {
    Ok(Json(decide(&state, &caller, &id, body.action).await?))
}

/// Decides the call `id` waits on, for the caller's org: the one code path
/// of `/executions/{id}/resume` and `/approvals/{id}`.
pub(crate) async fn decide(
    state: &ApiState,
    caller: &Caller,
    id: &str,
    action: DecisionAction,
) -> ApiResult<CallResult> {
    Ok(state
        .ops
        .resume_execution(
            Some(&caller.actor),
            id,
            action.word(),
            DECISION_WAIT,
            executor_store::ApprovalChannel::Api,
        )
        .await?)
}
