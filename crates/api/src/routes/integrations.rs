//! `/integrations`: add (from a URL or an uploaded document), preview,
//! list, read, update, refresh, remove, and an integration's tools.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use executor_ops::{
    AddIntegration, DocumentSource, GraphqlSchemaSource, HttpTransport, IntegrationAdded,
    IntegrationSummary, McpEndpoint, ToolHit, UpdateIntegration,
};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Params, Segment};
use crate::page::{Page, PageQuery, page_of};
use crate::routes::created;

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list_integrations, add_integration))
        .routes(routes!(preview_integration))
        .routes(routes!(
            get_integration,
            update_integration,
            remove_integration
        ))
        .routes(routes!(refresh_integration))
        .routes(routes!(integration_tools))
}

/// An integration to add. A namespace already in use is replaced.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum NewIntegration {
    /// An OpenAPI 3.x or Swagger 2.0 document (JSON or YAML).
    Openapi {
        /// The first segment of every tool address.
        #[schema(pattern = "^[A-Za-z][A-Za-z0-9_]{0,63}$")]
        namespace: String,
        spec: SpecSource,
        /// Overrides the servers the document declares.
        #[serde(default, rename = "baseUrl")]
        #[schema(pattern = "^https?://[^\\s]+$")]
        base_url: Option<String>,
    },
    /// A GraphQL API: one tool per query and mutation field.
    Graphql {
        #[schema(pattern = "^[A-Za-z][A-Za-z0-9_]{0,63}$")]
        namespace: String,
        /// Where the API answers.
        #[schema(pattern = "^https?://[^\\s]+$")]
        endpoint: String,
        /// The schema as introspection JSON or SDL; without it the endpoint
        /// is asked (introspection).
        #[serde(default)]
        schema: Option<String>,
    },
    /// An MCP server over HTTP (streamable HTTP or legacy SSE).
    Mcp {
        #[schema(pattern = "^[A-Za-z][A-Za-z0-9_]{0,63}$")]
        namespace: String,
        #[schema(pattern = "^https?://[^\\s]+$")]
        url: String,
        /// auto (streamable HTTP, then SSE), streamable-http or sse.
        #[serde(default)]
        transport: Option<Transport>,
    },
    /// An MCP server started as a command speaking MCP on stdio: only on a
    /// server started with --allow-stdio-integrations.
    McpStdio {
        #[schema(pattern = "^[A-Za-z][A-Za-z0-9_]{0,63}$")]
        namespace: String,
        #[schema(min_length = 1)]
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// Environment variables of the command.
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
}

/// Where an OpenAPI document comes from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum SpecSource {
    /// Fetched now and at each refresh.
    Url {
        #[schema(pattern = "^https?://[^\\s]+$")]
        url: String,
    },
    /// The document's text (uploaded); kept for refresh.
    Document { document: String },
}

/// How an MCP server over HTTP is spoken to.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    #[default]
    Auto,
    StreamableHttp,
    Sse,
}

impl NewIntegration {
    fn into_input(self) -> AddIntegration {
        match self {
            NewIntegration::Openapi {
                namespace,
                spec,
                base_url,
            } => AddIntegration::OpenApi {
                namespace,
                spec: match spec {
                    SpecSource::Url { url } => DocumentSource::Url(url),
                    SpecSource::Document { document } => DocumentSource::Text(document),
                },
                base_url,
            },
            NewIntegration::Graphql {
                namespace,
                endpoint,
                schema,
            } => AddIntegration::Graphql {
                namespace,
                endpoint,
                schema: schema.map_or(GraphqlSchemaSource::Introspect, GraphqlSchemaSource::Text),
            },
            NewIntegration::Mcp {
                namespace,
                url,
                transport,
            } => AddIntegration::Mcp {
                namespace,
                endpoint: McpEndpoint::Http {
                    url,
                    transport: match transport.unwrap_or_default() {
                        Transport::Auto => HttpTransport::Auto,
                        Transport::StreamableHttp => HttpTransport::StreamableHttp,
                        Transport::Sse => HttpTransport::Sse,
                    },
                },
            },
            NewIntegration::McpStdio {
                namespace,
                command,
                args,
                env,
            } => AddIntegration::Mcp {
                namespace,
                endpoint: McpEndpoint::Stdio {
                    command,
                    args,
                    env: env.into_iter().collect(),
                },
            },
        }
    }
}

/// The org's integrations, by namespace.
#[utoipa::path(get, path = "/integrations", tag = "integrations",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of the org's integrations", body = Page<IntegrationSummary>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn list_integrations(
    State(state): State<ApiState>,
    caller: Caller,
    Params(query): Params<PageQuery>,
) -> ApiResult<Json<Page<IntegrationSummary>>> {
    let all = state.ops.list_integrations(&caller.actor).await?;
    Ok(Json(page_of(all, |i| i.namespace.as_str(), &query)?))
}

/// Imports an integration and stores it with its tools' search index.
#[utoipa::path(post, path = "/integrations", tag = "integrations",
    request_body = NewIntegration,
    responses(
        (status = 201, description = "Added; Location names it", body = IntegrationAdded),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "Not allowed on this server (a command, a local address)", body = Problem),
        (status = 409, description = "The namespace is reserved for the built-in tools", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "The input, or the source it names, cannot be used", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn add_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<NewIntegration>,
) -> ApiResult<impl IntoResponse> {
    let input = body.into_input();
    let local_network = state.ops.surface().allow_local_network;
    let added = state
        .ops
        .add_integration(&caller.actor, input, local_network, &mut |_, _| {})
        .await?;
    let location = format!("/api/v1/integrations/{}", added.integration.namespace);
    Ok(created(&location, added))
}

/// What adding would store, with the tools it would make; stores nothing.
#[utoipa::path(post, path = "/integrations/preview", tag = "integrations",
    request_body = NewIntegration,
    responses(
        (status = 200, description = "What an add would store", body = IntegrationAdded),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "Not allowed on this server", body = Problem),
        (status = 409, description = "The namespace is reserved for the built-in tools", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "The input, or the source it names, cannot be used", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn preview_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Body(body): Body<NewIntegration>,
) -> ApiResult<Json<IntegrationAdded>> {
    let input = body.into_input();
    let local_network = state.ops.surface().allow_local_network;
    let previewed = state
        .ops
        .preview_integration(&caller.actor, input, local_network)
        .await?;
    Ok(Json(previewed))
}

#[utoipa::path(get, path = "/integrations/{namespace}", tag = "integrations",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 200, description = "The integration", body = IntegrationSummary),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such integration in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn get_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<Json<IntegrationSummary>> {
    Ok(Json(
        state.ops.get_integration(&caller.actor, &namespace).await?,
    ))
}

/// Removes the integration and its tools.
#[utoipa::path(delete, path = "/integrations/{namespace}", tag = "integrations",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such integration in the org", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn remove_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<StatusCode> {
    state
        .ops
        .remove_integration(&caller.actor, &namespace)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What to change; what is left out stays.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntegrationChange {
    /// An OpenAPI integration's base URL (over its document's servers), or
    /// a GraphQL API's endpoint.
    #[schema(pattern = "^https?://")]
    base_url: Option<String>,
}

/// Changes the integration's settings; it is imported again from its
/// source with them (as a refresh), so its tools follow.
#[utoipa::path(patch, path = "/integrations/{namespace}", tag = "integrations",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    request_body = IntegrationChange,
    responses(
        (status = 200, description = "Updated", body = IntegrationAdded),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "Not allowed on this server (a file source, a command)", body = Problem),
        (status = 404, description = "No such integration in the org", body = Problem),
        (status = 409, description = "The stored record cannot be imported again by this release", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad field, or the source cannot be read", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn update_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
    Body(change): Body<IntegrationChange>,
) -> ApiResult<Json<IntegrationAdded>> {
    let local_network = state.ops.surface().allow_local_network;
    let update = UpdateIntegration {
        base_url: change.base_url,
    };
    let updated = state
        .ops
        .update_integration(
            &caller.actor,
            &namespace,
            update,
            local_network,
            &mut |_, _| {},
        )
        .await?;
    Ok(Json(updated))
}

/// Reads the integration's source again and replaces its tools.
#[utoipa::path(post, path = "/integrations/{namespace}/refresh", tag = "integrations",
    params(("namespace" = String, Path, description = "The integration's namespace")),
    responses(
        (status = 200, description = "Refreshed", body = IntegrationAdded),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 403, description = "Not allowed on this server (a file source, a command)", body = Problem),
        (status = 404, description = "No such integration in the org", body = Problem),
        (status = 409, description = "The stored record cannot be refreshed by this release", body = Problem),
        (status = 422, description = "The source cannot be read", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn refresh_integration(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
) -> ApiResult<Json<IntegrationAdded>> {
    let local_network = state.ops.surface().allow_local_network;
    let refreshed = state
        .ops
        .refresh_integration(&caller.actor, &namespace, local_network, &mut |_, _| {})
        .await?;
    Ok(Json(refreshed))
}

/// The integration's tools, by path.
#[utoipa::path(get, path = "/integrations/{namespace}/tools", tag = "integrations",
    params(("namespace" = String, Path, description = "The integration's namespace"), PageQuery),
    responses(
        (status = 200, description = "A page of the integration's tools", body = Page<ToolHit>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such integration in the org", body = Problem),
        (status = 422, description = "A bad limit or cursor", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn integration_tools(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(namespace): Segment,
    Params(query): Params<PageQuery>,
) -> ApiResult<Json<Page<ToolHit>>> {
    let tools = state
        .ops
        .integration_tools(&caller.actor, &namespace)
        .await?;
    Ok(Json(page_of(tools, |t| t.path.as_str(), &query)?))
}
