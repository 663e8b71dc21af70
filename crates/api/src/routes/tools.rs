//! `/tools`: search the catalog as agents do, describe one tool as agents
//! read it, and call one tool as the operator (policies and approvals
//! apply as to any call).

use axum::Json;
use axum::extract::State;
use executor_ops::{ApprovalMode, CallResult, ToolDescription, ToolHit};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Problem};
use crate::extract::{Body, Params, Segment};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(search_tools))
        .routes(routes!(describe_tool))
        .routes(routes!(call_tool))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// What the tool should do, in plain words.
    pub q: String,
    /// Only tools of this integration.
    pub namespace: Option<String>,
    /// Hits to return, best first (1 to 100, default 12).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// The org's tools ranked for a query, as `tools.search` ranks them.
#[utoipa::path(get, path = "/tools/search", tag = "tools",
    params(SearchQuery),
    responses(
        (status = 200, description = "The best matches, best first", body = Vec<ToolHit>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad query", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn search_tools(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<SearchQuery>,
) -> ApiResult<Json<Vec<ToolHit>>> {
    let limit = match query.limit {
        None => 12,
        Some(n @ 1..=100) => n as usize,
        Some(_) => return Err(ApiError::invalid("limit", "a limit is 1 to 100")),
    };
    let hits = state
        .ops
        .search_tools(&caller.actor, &query.q, query.namespace.as_deref(), limit)
        .await?;
    Ok(Json(hits))
}

/// One tool as agents read it (`tools.describe.tool`): its TypeScript and
/// its JSON schemas. A tool's path always has a dot (`namespace.name`), so
/// it never meets `/tools/search` or `/tools/call`.
#[utoipa::path(get, path = "/tools/{path}", tag = "tools",
    params(("path" = String, Path, description = "The tool's address, dotted: `petstore.pets.list`")),
    responses(
        (status = 200, description = "The tool, described", body = ToolDescription),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such tool in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn describe_tool(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(path): Segment,
) -> ApiResult<Json<ToolDescription>> {
    Ok(Json(state.ops.describe_tool(&caller.actor, &path).await?))
}

/// A tool to call, with its input.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRequest {
    /// The tool's address, e.g. `github.issues.list`.
    pub path: String,
    /// The tool's input: a JSON object.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

/// Calls one tool as the caller, through the policies, validation and
/// record every call meets. The caller is the operator: a call that needs
/// approval counts as approved by them (recorded so); `block` still
/// applies.
#[utoipa::path(post, path = "/tools/call", tag = "tools",
    request_body = ToolCallRequest,
    responses(
        (status = 200, description = "What the call came to (isError for a failed one)", body = CallResult),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad path or input", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn call_tool(
    State(state): State<ApiState>,
    caller: Caller,
    Body(call): Body<ToolCallRequest>,
) -> ApiResult<Json<CallResult>> {
    let result = state
        .ops
        .call_tool(
            &caller.actor,
            &call.path,
            &call.input,
            ApprovalMode::GivenByCaller,
        )
        .await?;
    Ok(Json(result))
}
