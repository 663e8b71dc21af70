//! The HTTP surface: `/mcp`, `/healthz`, protected-resource metadata,
//! `/metrics`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, BodyDataStream};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use executor_engine::{CallContext, Reply};
use executor_mcp::{
    Approvals, Incoming, McpServer, Message, Method as RpcMethod, Request, RequestScope, RpcError,
    versions,
};
use executor_sessions::{
    AcquireError, Holder, Lease, OutboundStream, PostStream, Sessions, parse_event_id, replay,
};
use executor_store::tokens::{TokenCache, random_id};
use executor_store::{ElicitationMode, Principal, Store, StoreError};
use futures::{FutureExt, StreamExt};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tracing::Instrument;

use crate::WireError;
use crate::auth::{self, Authenticated, MetricsToken, authenticate};
use crate::drain::{InFlight, InFlightGuard};
use crate::forward::{self, HandOver};
use crate::guard::HostPolicy;
use crate::oauth::{SharedCallbacks, oauth_router};
use crate::sse::{
    self, FIRST_EVENT_WINDOW, GET_STREAM_ROTATION, SSE_KEEPALIVE, Source, StreamOwner,
};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";
const REQUEST_ID_HEADER: &str = "x-request-id";

/// How long a client may take to send a request's headers (SPEC §12). It
/// also closes a keep-alive connection idle for that long between requests.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may stall between two chunks (SPEC §12).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest request body read (SPEC §12); a larger one gets 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct WireConfig {
    pub hosts: HostPolicy,
    /// `access-control-allow-origin`; `*` suits a bearer-only API.
    pub cors_origin: String,
    /// See [`MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// Most messages in one JSON-RPC batch.
    pub max_batch: usize,
    /// See [`HEADER_READ_TIMEOUT`]; applied by [`crate::serve`]. Zero
    /// turns it off.
    pub header_read_timeout: Duration,
    /// See [`BODY_READ_TIMEOUT`]. Zero turns it off.
    pub body_read_timeout: Duration,
    /// Most client connections open at once; `None` derives it from the
    /// process's descriptor limit (see [`crate::serve`]).
    pub max_connections: Option<usize>,
    /// When set, `/metrics` answers only `Authorization: Bearer <token>`.
    pub metrics_token: Option<MetricsToken>,
    /// See [`SSE_KEEPALIVE`].
    pub sse_keepalive: Duration,
    /// See [`GET_STREAM_ROTATION`].
    pub get_stream_rotation: Duration,
    /// See [`FIRST_EVENT_WINDOW`].
    pub first_event_window: Duration,
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            hosts: HostPolicy::loopback(),
            cors_origin: "*".into(),
            max_body_bytes: MAX_BODY_BYTES,
            max_batch: executor_mcp::MAX_BATCH,
            header_read_timeout: HEADER_READ_TIMEOUT,
            body_read_timeout: BODY_READ_TIMEOUT,
            max_connections: None,
            metrics_token: None,
            sse_keepalive: SSE_KEEPALIVE,
            get_stream_rotation: GET_STREAM_ROTATION,
            first_event_window: FIRST_EVENT_WINDOW,
        }
    }
}

/// Shared state of the HTTP server.
#[derive(Clone)]
pub struct App {
    pub sessions: Sessions,
    pub config: Arc<WireConfig>,
    /// `/mcp` requests in flight; shutdown waits for them.
    pub in_flight: InFlight,
    /// `/oauth/callback` and the client metadata document, when wired.
    pub oauth: Option<SharedCallbacks>,
    /// Bearers verified at the store's current access revision.
    pub tokens: Arc<TokenCache>,
}

impl App {
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        self.sessions.store()
    }
    fn server(&self) -> &Arc<McpServer> {
        self.sessions.server()
    }
}

pub fn router(app: App) -> Router {
    let oauth = app.oauth.clone().map(oauth_router).unwrap_or_default();
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

#[derive(Debug, Deserialize, Default)]
struct McpQuery {
    elicitation_mode: Option<String>,
}

impl McpQuery {
    /// The client opted in to native elicitation (SPEC §9).
    fn native(&self) -> bool {
        self.elicitation_mode.as_deref() == Some(ElicitationMode::Native.as_str())
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

/// What a request came with besides its body, as a hand-over resends it.
struct RequestParts {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
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
    } = authenticate(app.store().as_ref(), &app.tokens, headers, || {
        resource_metadata_url(headers)
    })
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

/// The session's runtime here, or the holder's answer when another node
/// holds it: the request (with `body`) is handed over, and served here
/// after all when the holder turns out to be dead.
async fn acquire_or_hand_over(
    app: &App,
    session_id: &str,
    principal: &Principal,
    request: &RequestParts,
    body: Bytes,
) -> Result<Result<Lease, Response>, WireError> {
    let holder: Box<Holder> = match app.sessions.acquire(session_id, principal).await {
        Ok(lease) => return Ok(Ok(lease)),
        Err(AcquireError::HeldElsewhere(holder)) => holder,
        Err(e) => return Err(e.into()),
    };
    let incoming = forward::Forward {
        method: request.method.clone(),
        uri: &request.uri,
        headers: &request.headers,
        body,
    };
    match forward::hand_over(app, &holder, incoming).await? {
        HandOver::Answered(response) => Ok(Err(response)),
        HandOver::Unreachable => {
            forward::evict(app, &holder).await;
            match app.sessions.acquire(session_id, principal).await {
                Ok(lease) => Ok(Ok(lease)),
                // Another node claimed it first: the client retries.
                Err(AcquireError::HeldElsewhere(_)) => Err(WireError::Moving),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// Who a POST acts for, and the token its streams follow.
struct Caller {
    principal: Principal,
    token_id: String,
}

async fn post(
    app: &App,
    caller: Caller,
    session_id: Option<String>,
    query: McpQuery,
    request: &RequestParts,
    mut body: Body,
) -> Result<Response, WireError> {
    let headers = &request.headers;
    let principal = caller.principal;
    let lease = match &session_id {
        Some(id) => match app.sessions.acquire(id, &principal).await {
            Ok(lease) => Some(lease),
            Err(AcquireError::HeldElsewhere(_)) => {
                let bytes = read_bytes(app, headers, body).await?;
                match acquire_or_hand_over(app, id, &principal, request, bytes.clone()).await? {
                    Ok(lease) => {
                        body = Body::from(bytes);
                        Some(lease)
                    }
                    Err(answered) => return Ok(answered),
                }
            }
            Err(e) => return Err(e.into()),
        },
        // Draining: no new sessions and no sessionless work.
        None if app.sessions.is_draining() => return Err(WireError::Draining),
        None => None,
    };
    let accepts = Accepts::of(headers);
    if !accepts.json && !accepts.sse {
        return Err(WireError::NotAcceptable(
            "the client must accept application/json or text/event-stream",
        ));
    }
    check_content_type(headers)?;
    let incoming = read_body(app, headers, body).await?;
    let version_header = header_str(headers, VERSION_HEADER);
    if let Some(v) = version_header
        && !versions::is_supported(v)
    {
        return Err(WireError::BadRequest(format!(
            "Unsupported protocol version: {v}"
        )));
    }
    let is_initialize = incoming.messages().iter().any(|m| {
        m.as_request()
            .is_some_and(|r| r.method == RpcMethod::Initialize)
    });
    match lease {
        Some(lease) => {
            if is_initialize {
                return Err(WireError::Rpc(RpcError::invalid_request(
                    "initialize must not carry an Mcp-Session-Id",
                )));
            }
            post_in_session(app, lease, incoming, accepts, caller.token_id).await
        }
        None => match incoming {
            Incoming::Single(Message::Request(req)) if req.method == RpcMethod::Initialize => {
                initialize(app, principal, req, query).await
            }
            Incoming::Batch(_) if is_initialize => Err(WireError::Rpc(RpcError::invalid_request(
                "initialize must not be part of a batch",
            ))),
            incoming if is_sessionless(version_header, &incoming) => {
                post_sessionless(app, principal, incoming, query).await
            }
            _ => Err(WireError::BadRequest(
                "Mcp-Session-Id header is required".into(),
            )),
        },
    }
}

/// A request of the sessionless revision: by header, by `_meta`, or by its
/// method (`server/discover` exists only there).
fn is_sessionless(version_header: Option<&str>, incoming: &Incoming) -> bool {
    if version_header == Some(versions::SESSIONLESS) {
        return true;
    }
    let Incoming::Single(Message::Request(req)) = incoming else {
        return false;
    };
    req.method == RpcMethod::ServerDiscover
        || req
            .params
            .pointer("/_meta/io.modelcontextprotocol~1protocolVersion")
            .and_then(Value::as_str)
            == Some(versions::SESSIONLESS)
}

async fn initialize(
    app: &App,
    principal: Principal,
    req: Request,
    query: McpQuery,
) -> Result<Response, WireError> {
    let requested = req.params.get("protocolVersion").and_then(Value::as_str);
    let version = versions::negotiate(requested);
    let client_info = req.params.get("clientInfo").cloned().unwrap_or(Value::Null);
    let capabilities = req.params.get("capabilities").cloned().unwrap_or(json!({}));
    let native = executor_mcp::native_mode(version, query.native(), &capabilities);
    let lease = app
        .sessions
        .create(
            principal,
            version,
            client_info,
            capabilities,
            if native {
                ElicitationMode::Native
            } else {
                ElicitationMode::Model
            },
        )
        .await?;
    let body = executor_mcp::result_response(&req.id, McpServer::initialize_result(version));
    let mut res = json_response(body);
    set_session_header(&mut res, lease.id());
    Ok(res)
}

async fn post_in_session(
    app: &App,
    lease: Lease,
    incoming: Incoming,
    accepts: Accepts,
    token_id: String,
) -> Result<Response, WireError> {
    let batch = matches!(incoming, Incoming::Batch(_));
    if batch && lease.protocol_version() != versions::BATCHING {
        return Err(WireError::Rpc(RpcError::invalid_request(
            "batches are not supported on this protocol version",
        )));
    }
    for message in incoming.messages() {
        if let Message::Response(response) = message
            && !lease.deliver_client_response(response)
        {
            tracing::debug!("a client response matched no waiting request");
        }
    }
    let requests: Vec<Request> = incoming
        .messages()
        .iter()
        .filter_map(|m| m.as_request().cloned())
        .collect();
    if requests.is_empty() {
        // Notifications and responses only: accepted, nothing to answer.
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    if app.sessions.is_draining() {
        return Err(WireError::Draining);
    }
    if let [req] = requests.as_slice()
        && app.server().refused_for_load(&lease.ctx, req)
    {
        return Err(WireError::Overloaded);
    }
    let session_id = lease.id().to_string();
    let mut res = match requests.as_slice() {
        [req] if !batch && accepts.sse && (req.method == RpcMethod::ToolsCall || !accepts.json) => {
            // Counted as open before its first event is logged, so a GET
            // racing it never takes an event this stream is about to write.
            let post = lease.runtime().open_post_stream(&random_id(9)).await;
            stream_one(app, lease, post, req.clone(), token_id).await
        }
        [req] if !batch => {
            let scope = scope_of(&lease);
            json_text_response(app.server().handle_text(&scope, req).await)
        }
        _ => {
            let scope = scope_of(&lease);
            let mut answers = Vec::with_capacity(requests.len());
            for req in &requests {
                answers.push(app.server().handle(&scope, req).await);
            }
            json_response(Value::Array(answers))
        }
    };
    set_session_header(&mut res, &session_id);
    Ok(res)
}

fn scope_of(lease: &Lease) -> RequestScope<'_> {
    RequestScope {
        ctx: &lease.ctx,
        protocol_version: lease.protocol_version(),
        tools: lease.tools(),
        approvals: Approvals::Model,
        reply: Reply::Direct,
    }
}

/// Answers one request on its own SSE stream: the priming event, then the
/// response once it is logged — in the same write when the response is
/// ready within [`WireConfig::first_event_window`]. The work runs in its own task so a
/// client that drops the socket never cancels it; its answer then waits in
/// the log for the session's next GET.
async fn stream_one(
    app: &App,
    lease: Lease,
    post: PostStream,
    req: Request,
    token_id: String,
) -> Response {
    let store = app.store().clone();
    let server = app.server().clone();
    let out = app
        .sessions
        .outbound_stream(&lease, post.stream_id().to_string());
    let preamble = vec![out.priming().frame()];
    let owner = StreamOwner::post(lease.clone(), post, app.sessions.clone());
    let (tx, rx) = mpsc::channel(4);
    let stream = RequestStream {
        out: Arc::new(tokio::sync::Mutex::new(out)),
        tx,
        lease: lease.clone(),
        sessions: app.sessions.clone(),
        store: store.clone(),
    };
    // The work outlives a client that goes away; shutdown still waits for it.
    let in_flight = app.in_flight.enter();
    tokio::spawn(async move {
        let _in_flight = in_flight;
        let prompt = lease.native_elicitation().then(|| ElicitPrompt {
            stream: stream.clone(),
        });
        let scope = RequestScope {
            approvals: match &prompt {
                Some(p) => Approvals::Elicit(p),
                None => Approvals::Model,
            },
            // `RequestStream::send` logs the answer before it sends it.
            reply: Reply::Logged,
            ..scope_of(&lease)
        };
        let response = AssertUnwindSafe(server.handle(&scope, &req))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!(method = %req.method, "request handler panicked");
                executor_mcp::error_response(&req.id, &RpcError::internal())
            });
        stream.send(&response).await;
    });
    let timing = sse::Timing {
        keepalive: app.config.sse_keepalive,
        rotate_after: None,
        first_event_window: Some(app.config.first_event_window),
    };
    sse::response(
        owner,
        store,
        preamble,
        Source::Post(rx),
        timing,
        // SPEC §4: a revoked token's streams close within 5 s, this one too
        // (the work goes on, and its answer waits in the log).
        Some(Box::pin(auth::token_lapsed(app.store().clone(), token_id))),
    )
    .await
}

/// The SSE stream of one POSTed request: each message is logged, then
/// written to the POST's socket, or to a GET stream once that socket is gone.
///
/// Its answer is a [`Reply::Logged`] one: the log write is the flushed
/// write that makes the execution record durable, so every path that
/// does not log it syncs the store first.
#[derive(Clone)]
struct RequestStream {
    out: Arc<tokio::sync::Mutex<OutboundStream>>,
    tx: mpsc::Sender<executor_sessions::SseEvent>,
    lease: Lease,
    sessions: Sessions,
    store: Arc<dyn Store>,
}

impl RequestStream {
    async fn send(&self, message: &Value) {
        let event = {
            let mut out = self.out.lock().await;
            match out.log(message).await {
                Ok(event) => event,
                Err(StoreError::Fenced { .. }) => {
                    // Another node holds the session now: this one's
                    // runtime goes, and its streams end with it. The
                    // answer is not sent; its record is flushed all the same.
                    tracing::warn!(
                        session = self.lease.id(),
                        "the session moved to another node; its stream here ends"
                    );
                    self.sessions.fenced(self.lease.runtime());
                    if let Err(e) = self.store.sync().await {
                        tracing::warn!(error = %e, "could not flush the store");
                    }
                    return;
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not log a message; sending it unlogged");
                    executor_sessions::SseEvent {
                        stream_id: out.stream_id().to_string(),
                        seq: i64::MAX,
                        data: self.unlogged(message).await,
                    }
                }
            }
        };
        if let Err(mpsc::error::SendError(event)) = self.tx.send(event).await {
            let stream_id = event.stream_id.clone();
            if !self.lease.deliver_to_listener(&stream_id, event) {
                // Logged and undelivered: a GET stream on another node may
                // take it now, or the session's next GET will.
                self.sessions.events_waiting(self.lease.id());
            }
        }
    }

    /// What to send in place of a message the log refused: the message once
    /// the store is synced (its execution record is durable then), or, if
    /// the store cannot even do that, an internal error in place of an
    /// answer, as when the record itself cannot be written.
    async fn unlogged(&self, message: &Value) -> String {
        match self.store.sync().await {
            Ok(()) => message.to_string(),
            Err(e) => {
                tracing::error!(error = %e, "could not flush the store");
                let answer = message
                    .get("id")
                    .filter(|_| message.get("method").is_none());
                match answer {
                    Some(request) => {
                        executor_mcp::error_response(request, &RpcError::internal()).to_string()
                    }
                    None => message.to_string(),
                }
            }
        }
    }
}

/// Native elicitation on a session-based revision: the approval goes to the
/// client as `elicitation/create` on the request's own stream, and the
/// client's POSTed response carries the human's answer.
struct ElicitPrompt {
    stream: RequestStream,
}

impl executor_engine::ApprovalPrompt for ElicitPrompt {
    fn ask(
        &self,
        request: executor_engine::ApprovalRequest,
    ) -> futures::future::BoxFuture<'static, Option<executor_engine::Action>> {
        let stream = self.stream.clone();
        Box::pin(async move {
            let id = json!(format!("approval-{}", random_id(9)));
            let version = stream.lease.protocol_version().to_string();
            let answer = stream.lease.runtime().await_client_response(&id);
            let params = executor_mcp::elicitation_params(&version, &request);
            let ask = executor_mcp::elicitation_request(&id, params);
            stream.send(&ask).await;
            let cancel_if_dropped = CancelOnDrop {
                stream: Some(stream),
                id,
            };
            let response = answer.recv().await;
            cancel_if_dropped.disarm();
            executor_mcp::action_of(response?.get("result")?)
        })
    }
}

/// Tells the client to stop asking when the approval was settled another
/// way (window closed, `executor resume`) before it answered.
struct CancelOnDrop {
    stream: Option<RequestStream>,
    id: Value,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.stream = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        let cancelled =
            executor_mcp::cancelled_notification(&self.id, "the approval was settled another way");
        tokio::spawn(async move { stream.send(&cancelled).await });
    }
}

async fn post_sessionless(
    app: &App,
    principal: Principal,
    incoming: Incoming,
    query: McpQuery,
) -> Result<Response, WireError> {
    let Incoming::Single(message) = incoming else {
        return Err(WireError::Rpc(RpcError::invalid_request(
            "batches are not supported on this protocol version",
        )));
    };
    let Message::Request(req) = message else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let ctx = CallContext {
        principal,
        session_id: None,
    };
    if app.server().refused_for_load(&ctx, &req) {
        return Err(WireError::Overloaded);
    }
    // The client's capabilities ride in each request's `_meta` here.
    let capabilities = req
        .params
        .pointer("/_meta/io.modelcontextprotocol~1clientCapabilities")
        .cloned()
        .unwrap_or(Value::Null);
    let native = executor_mcp::native_mode(versions::SESSIONLESS, query.native(), &capabilities);
    // Only `tools/list` reads the list; other requests skip building it.
    let tools = if req.method == RpcMethod::ToolsList {
        app.server()
            .build_tool_list(&ctx.principal.org_id, native)
            .await
    } else {
        Arc::default()
    };
    let scope = RequestScope {
        ctx: &ctx,
        protocol_version: versions::SESSIONLESS,
        tools,
        approvals: if native {
            Approvals::InputRequired
        } else {
            Approvals::Model
        },
        reply: Reply::Direct,
    };
    Ok(json_response(app.server().handle(&scope, &req).await))
}

async fn listen(
    app: &App,
    principal: Principal,
    token_id: String,
    session_id: Option<String>,
    headers: &HeaderMap,
) -> Result<Response, WireError> {
    let session_id = session_id
        .ok_or_else(|| WireError::BadRequest("Mcp-Session-Id header is required".into()))?;
    // Another live node holds the session: the stream is served here from
    // the log, fed as that node logs (SPEC §10; the owner was checked).
    let lease = match app.sessions.acquire(&session_id, &principal).await {
        Ok(lease) => Some(lease),
        Err(AcquireError::HeldElsewhere(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if !Accepts::of(headers).sse {
        return Err(WireError::NotAcceptable(
            "the client must accept text/event-stream",
        ));
    }
    if let Some(v) = header_str(headers, VERSION_HEADER)
        && !versions::is_supported(v)
    {
        return Err(WireError::BadRequest(format!(
            "Unsupported protocol version: {v}"
        )));
    }
    let last_event = header_str(headers, LAST_EVENT_HEADER).and_then(parse_event_id);
    let stream_id = last_event
        .map(|(s, _)| s.to_string())
        .unwrap_or_else(|| random_id(9));
    // Registered first: a POST stream whose body goes from now on hands
    // what it did not write to a GET stream open here (this one, or the
    // stream it resumes, or an older one), or, gone before the look below,
    // leaves it to the replay. Before the replay, which takes the
    // undelivered events: a stream refused over the limit leaves them for
    // the next GET.
    let runtime = lease.as_ref().map(|l| l.runtime().clone());
    let (listener, owner) = match lease {
        Some(lease) => (
            lease.add_listener(stream_id.clone())?,
            StreamOwner::lease(lease),
        ),
        None => {
            let remote = app
                .sessions
                .listen_elsewhere(&session_id, stream_id.clone())?;
            (
                remote.listener,
                StreamOwner::elsewhere(&session_id, remote.gone),
            )
        }
    };
    // POST streams open here write their own events: taking one of them
    // too would send it twice. None joins until the take below is done.
    let in_transit = match &runtime {
        Some(runtime) => Some(runtime.in_transit().await),
        None => None,
    };
    let except = in_transit
        .as_ref()
        .map_or(&[][..], |t| t.streams.as_slice());
    let replayed = replay(app.store(), &session_id, last_event, except)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "could not read the event log");
            WireError::Internal
        })?;
    drop(in_transit);
    let mut preamble = Vec::with_capacity(replayed.len() + 1);
    match last_event {
        // A resumed stream keeps its ids; a comment flushes the headers.
        Some(_) => preamble.push(": resumed\n\n".to_string()),
        None => preamble.push(
            OutboundStream::new(app.store().clone(), &session_id, stream_id, 0)
                .priming()
                .frame(),
        ),
    }
    preamble.extend(replayed.iter().map(|e| e.frame()));
    // The stream ends when the server drains or the token lapses.
    let mut draining = app.sessions.draining();
    let lapsed = auth::token_lapsed(app.store().clone(), token_id);
    let until = Box::pin(async move {
        tokio::select! {
            _ = draining.wait_for(|d| *d) => {}
            _ = lapsed => {}
        }
    });
    let mut res = sse::response(
        owner,
        app.store().clone(),
        preamble,
        Source::listen(listener, &replayed),
        sse::Timing {
            keepalive: app.config.sse_keepalive,
            rotate_after: Some(app.config.get_stream_rotation),
            first_event_window: None,
        },
        Some(until),
    )
    .await;
    set_session_header(&mut res, &session_id);
    Ok(res)
}

async fn delete(
    app: &App,
    principal: Principal,
    session_id: Option<String>,
    request: &RequestParts,
) -> Result<Response, WireError> {
    let session_id = session_id
        .ok_or_else(|| WireError::BadRequest("Mcp-Session-Id header is required".into()))?;
    match acquire_or_hand_over(app, &session_id, &principal, request, Bytes::new()).await? {
        Ok(lease) => app.sessions.terminate_lease(lease).await?,
        Err(answered) => return Ok(answered),
    }
    Ok(StatusCode::OK.into_response())
}

// --- transport helpers ------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Accepts {
    json: bool,
    sse: bool,
}

impl Accepts {
    fn of(headers: &HeaderMap) -> Self {
        // Media ranges of every Accept header, without their parameters;
        // read in place (this runs on every request).
        let mut ranges = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|part| part.split(';').next().unwrap_or("").trim());
        let mut accepts = Accepts {
            json: false,
            sse: false,
        };
        ranges.all(|range| {
            let is = |t: &str| range.eq_ignore_ascii_case(t);
            if is("*/*") {
                accepts.json = true;
                accepts.sse = true;
            }
            accepts.json |= is("application/json") || is("application/*");
            accepts.sse |= is("text/event-stream") || is("text/*");
            !(accepts.json && accepts.sse)
        });
        accepts
    }
}

fn check_content_type(headers: &HeaderMap) -> Result<(), WireError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(WireError::UnsupportedMediaType)
    }
}

async fn read_body(app: &App, headers: &HeaderMap, body: Body) -> Result<Incoming, WireError> {
    let bytes = read_bytes(app, headers, body).await?;
    executor_mcp::parse(&bytes, app.config.max_batch).map_err(WireError::Rpc)
}

/// The request body, within the size and stall limits (SPEC §12).
async fn read_bytes(app: &App, headers: &HeaderMap, body: Body) -> Result<Bytes, WireError> {
    let limit = app.config.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        drain(body).await;
        return Err(WireError::PayloadTooLarge(limit));
    }
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    let stalled = app.config.body_read_timeout;
    // The timer restarts with every chunk (SPEC §12: between chunks). On a
    // stall the body is left unread, so the connection closes after the 408.
    let next_chunk = async |stream: &mut BodyDataStream| {
        if stalled.is_zero() {
            return Ok(stream.next().await);
        }
        tokio::time::timeout(stalled, stream.next())
            .await
            .map_err(|_| WireError::BodyTimeout(stalled))
    };
    while let Some(chunk) = next_chunk(&mut stream).await? {
        let chunk = chunk
            .map_err(|_| WireError::BadRequest("the request body could not be read".into()))?;
        if bytes.len() + chunk.len() > limit {
            drain(Body::from_stream(stream)).await;
            return Err(WireError::PayloadTooLarge(limit));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(bytes))
}

/// Reads and discards the rest of an oversized body (bounded in bytes and
/// time) so the client, still uploading, receives the 413 instead of a
/// reset connection.
async fn drain(body: Body) {
    const MAX_DRAIN_BYTES: usize = 64 * 1024 * 1024;
    let mut stream = body.into_data_stream();
    let mut seen = 0usize;
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(Ok(chunk)) = stream.next().await {
            seen += chunk.len();
            if seen > MAX_DRAIN_BYTES {
                break;
            }
        }
    })
    .await;
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn json_response(body: Value) -> Response {
    json_text_response(body.to_string())
}

fn json_text_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn set_session_header(res: &mut Response, session_id: &str) {
    if let Ok(v) = HeaderValue::from_str(session_id) {
        res.headers_mut().insert(SESSION_HEADER, v);
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

/// `<origin>` of this server as the client addressed it.
fn origin_of(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|p| *p == "https")
        .unwrap_or("http");
    format!("{scheme}://{host}")
}

fn resource_metadata_url(headers: &HeaderMap) -> String {
    format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        origin_of(headers)
    )
}

/// RFC 9728 metadata. Any origin may read it (CORS), but the Host is
/// checked as on `/mcp`: the document names this server by its Host, and a
/// rebinding page must not get its own name back as the resource.
async fn protected_resource(State(app): State<App>, headers: HeaderMap) -> Response {
    if let Err(e) = app.config.hosts.check_host(&headers) {
        return with_cors(&app.config, e.into_response());
    }
    let origin = origin_of(&headers);
    let body = json!({
        "resource": format!("{origin}/mcp"),
        "authorization_servers": [],
        "bearer_methods_supported": ["header"],
        "resource_name": "Executor",
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(values: &[&str]) -> (bool, bool) {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::ACCEPT, HeaderValue::from_str(v).expect("header"));
        }
        let a = Accepts::of(&headers);
        (a.json, a.sse)
    }

    #[test]
    fn accept_headers_are_read_by_media_range() {
        assert_eq!(
            accepts(&["application/json, text/event-stream"]),
            (true, true)
        );
        assert_eq!(
            accepts(&["Application/JSON;q=0.9", "TEXT/Event-Stream"]),
            (true, true)
        );
        assert_eq!(accepts(&["*/*"]), (true, true));
        assert_eq!(accepts(&["application/*"]), (true, false));
        assert_eq!(accepts(&["text/*;q=1"]), (false, true));
        assert_eq!(
            accepts(&["application/jsonx, text/event-streams"]),
            (false, false)
        );
        assert_eq!(accepts(&[]), (false, false));
    }
}
