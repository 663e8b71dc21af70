//! An integration's connection: set (idempotent `PUT`), status, remove;
//! and the org's connections. Secret values go in and never come out.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use executor_ops::{ConnectionStatus, CredentialInput, SetConnection};
use executor_store::CredentialKind;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use zeroize::Zeroizing;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Params, Segment};
use crate::page::{Page, PageQuery, page_of};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_connections))
        .routes(routes!(
            set_connection,
            connection_status,
            remove_connection
        ))
}

/// A credential. Values are sealed on arrival and never returned.
#[derive(Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum NewConnection {
    /// An API key, presented where the integration's security scheme says.
    ApiKey {
        #[schema(value_type = String, format = Password, min_length = 4)]
        value: Zeroizing<String>,
    },
    /// A bearer token.
    Bearer {
        #[schema(value_type = String, format = Password, min_length = 4)]
        value: Zeroizing<String>,
    },
    /// HTTP Basic.
    Basic {
        #[schema(pattern = "^[^:]*$")]
        username: String,
        #[schema(value_type = String, format = Password, min_length = 4)]
        password: Zeroizing<String>,
    },
    /// A secret read from the server's environment at call time.
    SecretRef {
        /// `env://NAME`.
        #[schema(pattern = "^env://[A-Za-z_][A-Za-z0-9_]*$")]
        reference: String,
        /// How the secret is presented (default api_key).
        #[serde(default)]
        kind: Option<ReferenceKind>,
        /// With kind basic: the user name.
        #[serde(default)]
        #[schema(pattern = "^[^:]*$")]
        username: Option<String>,
    },
}

/// How a referenced secret is presented.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceKind {
    ApiKey,
    Bearer,
    Basic,
}

impl NewConnection {
    fn into_credential(self) -> CredentialInput {
        match self {
            NewConnection::ApiKey { value } => CredentialInput::ApiKey(value),
            NewConnection::Bearer { value } => CredentialInput::Bearer(value),
            NewConnection::Basic { username, password } => {
                CredentialInput::Basic { username, password }
            }
            NewConnection::SecretRef {
                reference,
                kind,
                username,
            } => CredentialInput::Reference {
                reference,
                kind: match kind.unwrap_or(ReferenceKind::ApiKey) {
                    ReferenceKind::ApiKey => CredentialKind::ApiKey,
                    ReferenceKind::Bearer => CredentialKind::Bearer,
                    ReferenceKind::Basic => CredentialKind::Basic,
                },
                username,
            },
        }
    }
}

/// The org's connections (never their secrets).
#[utoipa::path(get, path = "/connections", tag = "connections",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the org's connections", body = Page<ConnectionStatus>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_connections(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<Json<Page<ConnectionStatus>>> {
    let all = state.ops.list_connections(&caller.actor).await?;
    Ok(Json(page_of(all, |c| c.namespace.as_str(), &query)?))
}

/// Sets the integration's credential, replacing any it had.
#[utoipa::path(put, path = "/integrations/{namespace}/connection", tag = "connections",
    params(("namespace" = String, Path, description = "The integration's namespace", pattern = "^[A-Za-z][A-Za-z0-9_]{0,63}$")),
    request_body = NewConnection,
    responses(
        (status = 200, description = "Set; the value is not shown", body = ConnectionStatus),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "A reference to the server's own settings", body = Problem),
        (status = 409, description = "The namespace is reserved for the built-in tools", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad credential (naming the field)", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn set_connection(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
    Body(body): Body<NewConnection>,
) -> ApiResult<Json<ConnectionStatus>> {
    let set = SetConnection {
        namespace,
        credential: body.into_credential(),
    };
    Ok(Json(state.ops.set_connection(&caller.actor, set).await?))
}

#[utoipa::path(get, path = "/integrations/{namespace}/connection", tag = "connections",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 200, description = "The connection's kind and state, never its secret", body = ConnectionStatus),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "The integration has no connection", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn connection_status(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<Json<ConnectionStatus>> {
    Ok(Json(
        state
            .ops
            .connection_status(&caller.actor, &namespace)
            .await?,
    ))
}

#[utoipa::path(delete, path = "/integrations/{namespace}/connection", tag = "connections",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "The integration has no connection", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn remove_connection(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<StatusCode> {
    state
        .ops
        .remove_connection(&caller.actor, &namespace)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
