//! The management API (SPEC §13): everything the CLI does, over HTTP
//! under `/api/v1`, each route a thin handler over one operation of
//! `executor-ops`. The OpenAPI 3.1 document is generated from the routes
//! themselves (`utoipa-axum`: a route and its entry are registered
//! together, so neither can exist without the other) and served at
//! `/api/v1/openapi.json`; `/api/docs` renders it with a page the binary
//! carries (no external assets).
//!
//! Every route but those two takes a [`auth::Caller`]: authenticated by
//! an API token, rate-limited per token, acting in the token's org only.

mod auth;
mod docs;
mod error;
mod extract;
mod limits;
mod page;
mod routes;
mod streams;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use executor_ops::Operations;
use executor_store::tokens::TokenCache;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{InfoBuilder, OpenApi};
use utoipa_axum::router::OpenApiRouter;

pub use error::{ApiError, Problem};
pub use limits::{DEFAULT_BURST, DEFAULT_RATE, RateLimits};
pub use streams::{MAX_STREAMS_PER_TOKEN, StreamSlots};

/// Largest request body the API reads: room for an uploaded API
/// description (the largest public ones are tens of MB).
pub const MAX_API_BODY_BYTES: usize = 64 * 1024 * 1024;

/// What the API's handlers share.
#[derive(Clone)]
pub struct ApiState {
    pub ops: Arc<Operations>,
    /// Bearers verified at the store's current access revision (shared
    /// with `/mcp`'s).
    pub tokens: Arc<TokenCache>,
    pub limits: Arc<RateLimits>,
    /// The event streams open, per token.
    pub streams: Arc<StreamSlots>,
    /// Flips to true when the server drains: open streams end.
    pub draining: tokio::sync::watch::Receiver<bool>,
    /// The URL that names this server: a console session's unsafe request
    /// must come from its origin, and its cookie is `__Host-` on https.
    pub public: executor_authz::PublicOrigin,
}

/// The API's routes, the document and the documentation page, to merge
/// into the server's router.
pub fn router(state: ApiState) -> Router {
    let (api, mut document) = api_routes().split_for_parts();
    problems_as_problem_json(&mut document);
    closed_variants(&mut document);
    let document = Arc::new(document);
    Router::new()
        .merge(api.with_state(state))
        .merge(docs::router(document))
        .layer(DefaultBodyLimit::max(MAX_API_BODY_BYTES))
}

/// The OpenAPI document, for a test or a tool that wants it without a
/// server.
pub fn document() -> OpenApi {
    let mut document = api_routes().split_for_parts().1;
    problems_as_problem_json(&mut document);
    closed_variants(&mut document);
    document
}

fn api_routes() -> OpenApiRouter<ApiState> {
    let v1 = OpenApiRouter::new()
        .merge(routes::me::router())
        .merge(routes::integrations::router())
        .merge(routes::connections::router())
        .merge(routes::tools::router())
        .merge(routes::policies::router())
        .merge(routes::executions::router())
        .merge(routes::approvals::router())
        .merge(routes::tool_calls::router())
        .merge(routes::sessions::router())
        .merge(routes::tokens::router())
        .merge(routes::oauth::router());
    OpenApiRouter::with_openapi(base_document()).nest("/api/v1", v1)
}

/// The request bodies that are enums (`NewIntegration`, `NewConnection`,
/// `SpecSource`) refuse unknown fields as their structs do; utoipa writes
/// `additionalProperties: false` for a struct but not for an enum's
/// variants, so this writes it for them.
fn closed_variants(document: &mut OpenApi) {
    use utoipa::openapi::RefOr;
    use utoipa::openapi::schema::{AdditionalProperties, Schema};
    let Some(components) = document.components.as_mut() else {
        return;
    };
    for schema in components.schemas.values_mut() {
        let RefOr::T(Schema::OneOf(one_of)) = schema else {
            continue;
        };
        for variant in one_of.items.iter_mut() {
            if let RefOr::T(Schema::Object(object)) = variant
                && !object.properties.is_empty()
            {
                object.additional_properties =
                    Some(Box::new(AdditionalProperties::FreeForm(false)));
            }
        }
    }
}

/// Errors are `application/problem+json`: the routes name `Problem` as the
/// body of every error status, and this says so in the document's terms.
fn problems_as_problem_json(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in operation.responses.responses.iter_mut() {
                let utoipa::openapi::RefOr::T(response) = response else {
                    continue;
                };
                if !status.starts_with(['4', '5']) {
                    continue;
                }
                if let Some(content) = response.content.shift_remove("application/json") {
                    response
                        .content
                        .insert("application/problem+json".to_string(), content);
                }
            }
        }
    }
}

/// The document's head: what the API is and how callers authenticate.
fn base_document() -> OpenApi {
    let mut document = OpenApi::new(
        InfoBuilder::new()
            .title("Executor management API")
            .version(env!("CARGO_PKG_VERSION"))
            .description(Some(
                "Everything the `executor` CLI does, over HTTP (SPEC §13). Authenticate with an \
                 API token (`executor token create --email you@example.com`) as \
                 `Authorization: Bearer <token>`; everything is scoped to the token's org. \
                 Errors are `application/problem+json` with a stable `code`.",
            ))
            .build(),
        utoipa::openapi::Paths::new(),
    );
    let components = document.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some("An API token: exk_…"))
                .build(),
        ),
    );
    document
}
