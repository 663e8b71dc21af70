//! An integration's connection: set (idempotent `PUT`), status, remove;
//! and the org's connections. Secret values go in and never come out.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use executor_ops::{
    ConnectionStatus, ConnectionTest, CredentialInput, LoginFlow, LoginStarted, LoginState,
    SetConnection, StartLogin,
};
use executor_store::CredentialKind;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use zeroize::Zeroizing;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Params, Segment, Segments};
use crate::page::{Page, PageQuery, page_of};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_connections))
        .routes(routes!(
            set_connection,
            connection_status,
            remove_connection
        ))
        .routes(routes!(test_connection))
        .routes(routes!(start_login))
        .routes(routes!(login_state))
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

/// Tests the connection with one request that changes nothing: an MCP
/// server lists its tools, a GraphQL API answers `{ __typename }`, an
/// OpenAPI API's base URL is fetched. A refusal is `ok: false`, not an
/// error.
#[utoipa::path(post, path = "/integrations/{namespace}/connection/test", tag = "connections",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 200, description = "How the test went", body = ConnectionTest),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "Not allowed on this server (a stdio command)", body = Problem),
        (status = 404, description = "No such integration", body = Problem),
        (status = 409, description = "The integration cannot be tested (no base URL, an unreadable record)", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn test_connection(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<Json<ConnectionTest>> {
    let local_network = state.ops.surface().allow_local_network;
    Ok(Json(
        state
            .ops
            .test_connection(&caller.actor, &namespace, local_network)
            .await?,
    ))
}

/// How to log in to an OAuth-protected integration; everything optional.
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewLogin {
    /// A client registered with the authorization server beforehand (else
    /// the server's client metadata document, or dynamic registration).
    client_id: Option<String>,
    /// The secret of `clientId`, for a confidential client.
    #[schema(value_type = Option<String>, format = Password)]
    client_secret: Option<Zeroizing<String>>,
    /// Scopes to ask for; default: what the server asks for.
    #[serde(default)]
    scopes: Vec<String>,
    /// Default: client credentials when it is the only grant the server
    /// offers, else authorization code.
    flow: Option<LoginFlow>,
    /// The authorization server, when nothing else names one.
    issuer: Option<String>,
    /// The RFC 8707 resource to ask tokens for.
    resource: Option<String>,
}

/// Starts an OAuth login to the integration. With the authorization-code
/// flow, a person opens `authorizationUrl`; this server's `/oauth/callback`
/// completes the login, and `GET …/login/{loginId}` says how it ended.
#[utoipa::path(post, path = "/integrations/{namespace}/connection/login", tag = "connections",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    request_body = NewLogin,
    responses(
        (status = 200, description = "Connected at once, or the URL a person opens", body = LoginStarted),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such integration", body = Problem),
        (status = 409, description = "The integration has no login (a stdio server, no base URL)", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad field, or the authorization server refused or cannot be reached", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn start_login(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
    Body(body): Body<NewLogin>,
) -> ApiResult<Json<LoginStarted>> {
    let ask = StartLogin {
        namespace,
        client_id: body.client_id,
        client_secret: body
            .client_secret
            .map(|s| executor_store::secrets::SecretString::from(s.to_string())),
        scopes: body.scopes,
        flow: body.flow,
        issuer: body.issuer,
        resource: body.resource,
        allow_local_network: state.ops.surface().allow_local_network,
    };
    Ok(Json(state.ops.start_login(&caller.actor, ask, None).await?))
}

/// How a login started by `POST …/connection/login` stands.
#[utoipa::path(get, path = "/integrations/{namespace}/connection/login/{loginId}", tag = "connections",
    params(
        ("namespace" = String, Path, description = "The integration's namespace"),
        ("loginId" = String, Path, description = "The `loginId` the start returned"),
    ),
    responses(
        (status = 200, description = "Pending, connected or failed", body = LoginState),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such login of this integration in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn login_state(
    State(state): State<ApiState>,
    caller: Caller,
    Segments(namespace, login_id): Segments,
) -> ApiResult<Json<LoginState>> {
    Ok(Json(
        state
            .ops
            .login_state(&caller.actor, &namespace, &login_id)
            .await?,
    ))
}
