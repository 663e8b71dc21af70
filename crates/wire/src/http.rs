//! The HTTP surface: the router, and `/mcp`'s [`route`]: the checks of
//! SPEC §2 in order, then the handler of the method (`post.rs`,
//! `listen.rs`, `delete.rs`). Also `/healthz`, protected-resource metadata
//! and `/metrics`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use executor_store::tokens::random_id;
use futures::{FutureExt, StreamExt};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;
use serde_json::json;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tracing::Instrument;

use crate::WireError;
use crate::app::{App, WireConfig};
use crate::auth::{Authenticated, authenticate};
use crate::delete::delete;
use crate::drain::InFlightGuard;
use crate::forward::RequestParts;
use crate::listen::listen;
use crate::oauth::oauth_router;
use crate::post::{Caller, McpQuery, post};
use crate::transport::{SESSION_HEADER, header_str, json_response};

const REQUEST_ID_HEADER: &str = "x-request-id";

pub fn router(app: App) -> Router {
    let oauth = app.oauth.clone().map(oauth_router).unwrap_or_default();
    let extra = app.extra.clone().unwrap_or_default();
    // Outermost last: the id is set before it is propagated to the response.
    Router::new()
        .route("/mcp", any(mcp_endpoint))
        .route("/healthz", get(healthz))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource),
        )
        .route("/metrics", get(metrics))
        .with_state(app)
        .merge(oauth)
        .merge(extra)
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
}

/// Request ids for requests that bring none: `<boot>-<n>`, a random prefix
/// drawn once per process and a counter, so ids stay unique across restarts
/// without a random draw per request.
#[derive(Clone)]
struct RequestIds {
    boot: Arc<str>,
    next: Arc<AtomicU64>,
}

impl RequestIds {
    fn new() -> Self {
        RequestIds {
            boot: random_id(6).into(),
            next: Arc::new(AtomicU64::new(1)),
        }
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        HeaderValue::from_str(&format!("{}-{n}", self.boot))
            .ok()
            .map(RequestId::new)
    }
}

/// The request's id for the log (the client's may be anything; a log line
/// keeps 64 bytes of it).
fn request_id_of(headers: &HeaderMap) -> &str {
    let id = headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    let mut end = id.len().min(64);
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    id.get(..end).unwrap_or("-")
}

/// `ok` while serving; 503 once shutdown has begun, so a load balancer
/// stops sending new work while in-flight requests finish.
async fn healthz(State(app): State<App>) -> Response {
    if app.sessions.is_draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining").into_response()
    } else {
        "ok".into_response()
    }
}

async fn mcp_endpoint(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    Query(query): Query<McpQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let in_flight = app.in_flight.enter();
    // The request id ties the server log lines of one request together, and
    // the client's logs to ours (it is echoed on the response).
    let request_id = request_id_of(&headers).to_string();
    let span = tracing::debug_span!("mcp", %request_id, %method);
    // A panic anywhere below costs this request a 500, nothing more: no
    // state is held across it that a later request could trip on.
    let request = RequestParts {
        method,
        uri,
        headers,
    };
    let routed = AssertUnwindSafe(route(&app, &request, query, body).instrument(span))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| {
            tracing::error!(%request_id, "request handler panicked");
            Err(WireError::Internal)
        });
    let response = match routed {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%request_id, error = %e, "request refused");
            e.into_response()
        }
    };
    let response = with_cors(&app.config, response);
    held_until_sent(response, in_flight)
}

/// Keeps a streamed answer counted as in flight until its stream ends, so
/// that shutdown waits for it; a JSON answer is complete already.
fn held_until_sent(response: Response, in_flight: InFlightGuard) -> Response {
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streamed {
        return response;
    }
    let (parts, body) = response.into_parts();
    let guarded = body.into_data_stream().map(move |chunk| {
        let _counted = &in_flight;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(guarded))
}

/// The checks of SPEC §2, in order.
async fn route(
    app: &App,
    request: &RequestParts,
    query: McpQuery,
    body: Body,
) -> Result<Response, WireError> {
    let (method, headers) = (request.method.clone(), &request.headers);
    if method == Method::OPTIONS {
        return Ok(preflight());
    }
    if !matches!(method, Method::GET | Method::POST | Method::DELETE) {
        return Err(WireError::MethodNotAllowed);
    }
    // Draining: no new streams and no new sessions; POSTs to existing
    // sessions are refused below only when they carry new requests, so an
    // answer to our own elicitation still reaches a run in flight.
    if app.sessions.is_draining() && method == Method::GET {
        return Err(WireError::Draining);
    }
    app.config.hosts.check(headers)?;
    let Authenticated {
        principal,
        token_id,
    } = authenticate(
        app.store().as_ref(),
        &app.tokens,
        headers,
        || resource_metadata_url(&app.config, headers),
        app.config.oauth,
    )
    .await?;
    let session_id = header_str(headers, SESSION_HEADER).map(str::to_string);
    match method {
        Method::POST => {
            let caller = Caller {
                principal,
                token_id,
            };
            post(app, caller, session_id, query, request, body).await
        }
        Method::GET => listen(app, principal, token_id, session_id, headers).await,
        _ => delete(app, principal, session_id, request).await,
    }
}

fn preflight() -> Response {
    let mut res = StatusCode::NO_CONTENT.into_response();
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, mcp-session-id, mcp-protocol-version, last-event-id, accept",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    res
}

fn with_cors(config: &WireConfig, mut res: Response) -> Response {
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&config.cors_origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
    }
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("mcp-session-id, www-authenticate"),
    );
    res
}

fn resource_metadata_url(config: &WireConfig, headers: &HeaderMap) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        config.public.for_request(headers)
    )
}

/// RFC 9728 metadata. Any origin may read it (CORS), but the Host is
/// checked as on `/mcp`: the document names this server by its Host, and a
/// rebinding page must not get its own name back as the resource.
async fn protected_resource(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Err(e) = app.config.hosts.check_host(&headers) {
        return with_cors(&app.config, e.into_response());
    }
    let base = app.config.public.for_request(&headers);
    let mut body = json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "resource_name": "Executor",
    });
    if app.config.oauth {
        body["authorization_servers"] = json!([base]);
        body["scopes_supported"] = json!(executor_authz::SCOPES);
    }
    with_cors(&app.config, json_response(body))
}

async fn metrics(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Some(token) = &app.config.metrics_token
        && !token.admits(&headers)
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: /metrics needs the metrics token as a bearer\n",
        )
            .into_response();
    }
    // Encoding into a String fails only if a metric cannot write its value.
    let Ok(text) = metrics_text(&app) else {
        tracing::error!("could not encode /metrics");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    (
        [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

/// The `/metrics` exposition: the sessions' series, then the engine's, in
/// the Prometheus text format 0.0.4 (counter `# TYPE` lines name the
/// `_total` series and there is no `# EOF` line, as before). The registry is
/// built per scrape: registering clones a few handles, and the gauges (live
/// sessions, running and paused executions) are read now.
fn metrics_text(app: &App) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    let live = app.sessions.live_count();
    app.sessions.metrics().register(&mut registry, live);
    app.server().engine().register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}
