//! `/sessions`: the org's MCP sessions, and ending one.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use executor_ops::SessionInfo;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Params, Segment};
use crate::page::Page;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_sessions))
        .routes(routes!(terminate_session))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionParams {
    /// Items to return, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// Where the previous page ended: its `next_cursor`.
    #[param(pattern = "^[A-Za-z0-9_-]{1,1400}$")]
    pub cursor: Option<String>,
}

/// The org's MCP sessions, most recently active first. Activity moves a
/// session to the front, so one may show on two pages.
#[utoipa::path(get, path = "/sessions", tag = "sessions",
    params(SessionParams),
    responses(
        (status = 200, description = "A page of the org's sessions", body = Page<SessionInfo>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_sessions(
    State(state): State<ApiState>,
    caller: Caller,
    Params(params): Params<SessionParams>,
) -> ApiResult<Json<Page<SessionInfo>>> {
    let page = crate::page::ask(params.limit, params.cursor)?;
    let listed = state.ops.list_sessions(&caller.actor, &page).await?;
    Ok(Json(Page::from(listed)))
}

/// Ends a session at once: its next request gets 404 (terminated) and its
/// open streams end; the client must initialize a new one. The record
/// stays, listed as terminated. Ending a terminated session again does
/// nothing more.
#[utoipa::path(delete, path = "/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "The session's id (its Mcp-Session-Id)")),
    responses(
        (status = 204, description = "Terminated"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such session in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn terminate_session(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<StatusCode> {
    state.ops.terminate_session(&caller.actor, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
