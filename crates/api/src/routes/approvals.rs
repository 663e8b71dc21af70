//! `/approvals`: the calls waiting for a human, and deciding one.

use axum::Json;
use axum::extract::State;
use executor_ops::{CallResult, PendingApproval};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Segment};
use crate::routes::executions::{Decision, decide};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(pending_approvals))
        .routes(routes!(decide_approval))
}

/// The org's calls waiting for a decision, oldest first.
#[utoipa::path(get, path = "/approvals", tag = "approvals",
    responses(
        (status = 200, description = "The waiting calls", body = Vec<PendingApproval>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn pending_approvals(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<Vec<PendingApproval>>> {
    Ok(Json(state.ops.pending_approvals(&caller.actor).await?))
}

/// Decides the call an execution waits on (the same as
/// `POST /executions/{id}/resume`), and answers with what the run came to.
#[utoipa::path(post, path = "/approvals/{executionId}", tag = "approvals",
    params(("executionId" = String, Path, description = "The paused execution (exec_…)")),
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
async fn decide_approval(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
    Body(body): Body<Decision>,
) -> ApiResult<Json<CallResult>> {
    Ok(Json(decide(&state, &caller, &id, body.action).await?))
}
