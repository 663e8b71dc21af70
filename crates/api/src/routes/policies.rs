//! `/policies`: the org's rules in match order; add, read, remove, and
//! what they make of one tool address.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use executor_ops::{NewPolicy, Policy, PolicyEvaluation};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, Problem};

/// The largest position a rule can be given (past the last rule is last).
const MAX_POSITION: u32 = 1_000_000;
use crate::extract::{Body, Params, Segment};
use crate::page::{Page, PageQuery};
use crate::routes::created;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_policies, add_policy))
        .routes(routes!(get_policy, update_policy, remove_policy))
        .routes(routes!(move_policy))
        .routes(routes!(evaluate_policy))
}

/// A rule to add.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyInput {
    /// `*`, `ns.*` (a subtree), `ns.*.tool` (`*` = one segment) or a full
    /// tool address.
    #[schema(
        pattern = "^(?:[A-Za-z0-9_-]+|\\*)(?:\\.(?:[A-Za-z0-9_-]+|\\*))*$",
        max_length = 512
    )]
    pub pattern: String,
    pub action: RuleAction,
    /// 0-based place in the match order (default: last).
    #[serde(default, deserialize_with = "crate::extract::whole_number")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub position: Option<u32>,
}

/// What a rule does to a matching call.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    Allow,
    RequireApproval,
    Block,
}

impl RuleAction {
    fn word(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::RequireApproval => "require_approval",
            RuleAction::Block => "block",
        }
    }
}

/// The rules in the order they are matched (first match wins). Pages
/// follow that order.
#[utoipa::path(get, path = "/policies", tag = "policies",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the org's rules", body = Page<Policy>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_policies(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<Json<Page<Policy>>> {
    let all = state.ops.list_policies(&caller.actor).await?;
    Ok(Json(crate::page::page_in_order(
        all,
        |p| p.id.as_str(),
        &query,
    )?))
}

#[utoipa::path(post, path = "/policies", tag = "policies",
    request_body = PolicyInput,
    responses(
        (status = 201, description = "Added; Location names it", body = Policy),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad pattern, action or position", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn add_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<PolicyInput>,
) -> ApiResult<Response> {
    if body.position.is_some_and(|p| p > MAX_POSITION) {
        return Err(ApiError::invalid(
            "position",
            format!("a position is at most {MAX_POSITION}"),
        ));
    }
    let input = NewPolicy {
        pattern: body.pattern,
        action: body.action.word().to_string(),
        position: body.position.map(i64::from),
    };
    let added = state.ops.add_policy(&caller.actor, input).await?;
    Ok(created(&format!("/api/v1/policies/{}", added.id), added))
}

#[utoipa::path(get, path = "/policies/{id}", tag = "policies",
    params(("id" = String, Path, description = "The rule's id (pol_…)")),
    responses(
        (status = 200, description = "The rule", body = Policy),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such rule in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn get_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<Json<Policy>> {
    Ok(Json(state.ops.get_policy(&caller.actor, &id).await?))
}

/// A rule's new pattern and action; its place in the order stays.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyChange {
    #[schema(
        pattern = "^(?:[A-Za-z0-9_-]+|\\*)(?:\\.(?:[A-Za-z0-9_-]+|\\*))*$",
        max_length = 512
    )]
    pub pattern: String,
    pub action: RuleAction,
}

#[utoipa::path(put, path = "/policies/{id}", tag = "policies",
    params(("id" = String, Path, description = "The rule's id (pol_…)")),
    request_body = PolicyChange,
    responses(
        (status = 200, description = "The rule as changed", body = Policy),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such rule in the org", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad pattern or action", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn update_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
    Body(body): Body<PolicyChange>,
) -> ApiResult<Json<Policy>> {
    let updated = state
        .ops
        .update_policy(&caller.actor, &id, &body.pattern, body.action.word())
        .await?;
    Ok(Json(updated))
}

/// Where to move a rule.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyMove {
    /// 0-based place in the match order (past the end: last).
    #[serde(deserialize_with = "crate::extract::whole")]
    #[schema(minimum = 0, maximum = 1000000)]
    pub position: u32,
}

/// Moves a rule in the match order; the others keep their order.
#[utoipa::path(post, path = "/policies/{id}/move", tag = "policies",
    params(("id" = String, Path, description = "The rule's id (pol_…)")),
    request_body = PolicyMove,
    responses(
        (status = 200, description = "The rule at its new place", body = Policy),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such rule in the org", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad position", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn move_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
    Body(body): Body<PolicyMove>,
) -> ApiResult<Json<Policy>> {
    if body.position > MAX_POSITION {
        return Err(ApiError::invalid(
            "position",
            format!("a position is at most {MAX_POSITION}"),
        ));
    }
    let moved = state
        .ops
        .move_policy(&caller.actor, &id, i64::from(body.position))
        .await?;
    Ok(Json(moved))
}

#[utoipa::path(delete, path = "/policies/{id}", tag = "policies",
    params(("id" = String, Path, description = "The rule's id (pol_…)")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such rule in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn remove_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<StatusCode> {
    state.ops.remove_policy(&caller.actor, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A tool address to evaluate.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluate {
    /// A tool address, e.g. `github.issues.create`.
    pub path: String,
}

/// What the rules make of a call of one tool now, and which rule decides.
#[utoipa::path(post, path = "/policies/evaluate", tag = "policies",
    request_body = Evaluate,
    responses(
        (status = 200, description = "The action and the deciding rule", body = PolicyEvaluation),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "No address given", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn evaluate_policy(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<Evaluate>,
) -> ApiResult<Json<PolicyEvaluation>> {
    Ok(Json(
        state.ops.evaluate_policy(&caller.actor, &body.path).await?,
    ))
}
