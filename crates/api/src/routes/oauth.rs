//! `/oauth`: the built-in authorization server's grants of the caller's
//! org (list, revoke) and the clients it sees (list, get, pre-register,
//! remove from the org). See `executor_ops::oauth` for what an org sees.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use executor_ops::{ClientAdded, ClientInfo, GrantInfo};
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
        .routes(routes!(list_grants))
        .routes(routes!(revoke_grant))
        .routes(routes!(list_clients, add_client))
        .routes(routes!(get_client, remove_client))
}

/// A client to pre-register (one that cannot register itself).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewClient {
    /// Shown on the consent page.
    #[schema(min_length = 1, max_length = 100, pattern = "\\S")]
    pub name: String,
    /// Where it receives codes: https, loopback http (any port matches),
    /// or a private-use scheme.
    #[schema(min_items = 1, max_items = 20)]
    pub redirect_uris: Vec<String>,
    /// A confidential client, with a secret (shown once).
    #[serde(default)]
    pub secret: bool,
}

/// The org's grants, newest first: the consent people gave clients,
/// never a token.
#[utoipa::path(get, path = "/oauth/grants", tag = "oauth",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the org's grants", body = Page<GrantInfo>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_grants(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<axum::Json<Page<GrantInfo>>> {
    let all = state.ops.list_grants(&caller.actor).await?;
    Ok(axum::Json(page_in_order(all, |g| g.id.as_str(), &query)?))
}

/// Revokes a grant: its tokens stop working at once, on every node, and
/// the streams they opened close within 5 s. It stays listed, revoked.
#[utoipa::path(post, path = "/oauth/grants/{id}/revoke", tag = "oauth",
    params(("id" = String, Path, description = "The grant's id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such grant in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn revoke_grant(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<StatusCode> {
    state
        .ops
        .revoke_grant(Some(&caller.actor.org_id), &id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The clients the org sees: those it granted, and the pre-registered.
#[utoipa::path(get, path = "/oauth/clients", tag = "oauth",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of clients", body = Page<ClientInfo>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_clients(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<axum::Json<Page<ClientInfo>>> {
    let all = state.ops.list_org_clients(&caller.actor).await?;
    Ok(axum::Json(page_in_order(all, |c| c.id.as_str(), &query)?))
}

/// Pre-registers a client. Its secret, if asked for, is in this answer
/// only.
#[utoipa::path(post, path = "/oauth/clients", tag = "oauth",
    request_body = NewClient,
    responses(
        (status = 201, description = "The client, and its secret once", body = ClientAdded),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad name or redirect URI", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn add_client(
    State(state): State<ApiState>,
    _caller: Caller,
    Body(body): Body<NewClient>,
) -> ApiResult<Response> {
    let added = state
        .ops
        .add_client(&body.name, &body.redirect_uris, body.secret)
        .await?;
    Ok(created(
        &format!("/api/v1/oauth/clients/{}", added.client.id),
        added,
    ))
}

/// One client the org sees; never its secret.
#[utoipa::path(get, path = "/oauth/clients/{id}", tag = "oauth",
    params(("id" = String, Path, description = "The client's id")),
    responses(
        (status = 200, description = "The client", body = ClientInfo),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such client for the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn get_client(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<axum::Json<ClientInfo>> {
    Ok(axum::Json(
        state.ops.get_org_client(&caller.actor, &id).await?,
    ))
}

/// Removes a client from the org: every grant the org gave it is revoked.
/// The client stays registered for other orgs.
#[utoipa::path(delete, path = "/oauth/clients/{id}", tag = "oauth",
    params(("id" = String, Path, description = "The client's id")),
    responses(
        (status = 204, description = "The org's grants of it are revoked"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such client for the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn remove_client(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
) -> ApiResult<StatusCode> {
    state.ops.revoke_client_in_org(&caller.actor, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
