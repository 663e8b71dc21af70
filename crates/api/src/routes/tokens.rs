//! `/tokens`: API tokens of the caller's org. A new token is shown once.

use axum::extract::State;
use axum::response::Response;
use executor_ops::{MintedToken, NewToken, TokenInfo, TokenRevoked};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Params, Segment};
use crate::page::{Page, PageQuery, page_in_order};
use crate::routes::created;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(get_token))
        .routes(routes!(revoke_token))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenInput {
    /// Days until the token stops working (1 to 3650; default never).
    #[serde(default, deserialize_with = "crate::extract::whole_number")]
    #[schema(minimum = 1, maximum = 3650)]
    pub expires_in_days: Option<u32>,
}

/// The org's tokens, newest first, revoked and expired ones included;
/// never their secrets.
#[utoipa::path(get, path = "/tokens", tag = "tokens",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the org's tokens", body = Page<TokenInfo>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_tokens(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<axum::Json<Page<TokenInfo>>> {
    let all = state.ops.list_tokens(&caller.actor).await?;
    Ok(axum::Json(page_in_order(all, |t| t.id.as_str(), &query)?))
}

/// Mints a token acting for the caller's account in its org. The token is
/// in this answer only: it is stored as a hash.
#[utoipa::path(post, path = "/tokens", tag = "tokens",
    request_body = TokenInput,
    responses(
        (status = 201, description = "The new token, shown once", body = MintedToken),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad lifetime", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn create_token(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<TokenInput>,
) -> ApiResult<Response> {
    let input = NewToken {
        expires_in_days: body.expires_in_days.map(u64::from),
    };
    let minted = state.ops.create_token(&caller.actor, input).await?;
    Ok(created(&format!("/api/v1/tokens/{}", minted.id), minted))
}

/// A token of the org: its state, never its secret.
#[utoipa::path(get, path = "/tokens/{id}", tag = "tokens",
    params(("id" = String, Path, description = "The token's id")),
    responses(
        (status = 200, description = "The token", body = TokenInfo),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such token in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn get_token(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<axum::Json<TokenInfo>> {
    Ok(axum::Json(
        state.ops.get_token(&caller.actor.org_id, &id).await?,
    ))
}

/// Revokes a token of the org: it stops working at once, on every node.
/// The token stays listed, revoked (a `POST`, not a `DELETE`: it is not
/// gone).
#[utoipa::path(post, path = "/tokens/{id}/revoke", tag = "tokens",
    params(("id" = String, Path, description = "The token's id")),
    responses(
        (status = 200, description = "Revoked", body = TokenRevoked),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such token in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn revoke_token(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<axum::Json<TokenRevoked>> {
    Ok(axum::Json(
        state
            .ops
            .revoke_token(Some(&caller.actor.org_id), &id)
            .await?,
    ))
}
