//! POST `/mcp`: `initialize`, the messages of a session (answered as JSON
//! or on their own SSE stream, `request_stream.rs`), and the requests of
//! the sessionless revision.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use executor_call::ApprovalMode;
use executor_mcp::Overload;
use executor_mcp::{
    Incoming, McpServer, Message, Method as RpcMethod, ProtocolVersion, Refusal, Request, RpcError,
};
use executor_sessions::{AcquireError, Lease};
use executor_store::tokens::random_id;
use executor_store::{ElicitationMode, Principal};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::WireError;
use crate::app::App;
use crate::forward::{RequestParts, acquire_or_hand_over};
use crate::request_stream::{scope_of, stream_one};
use crate::sessionless;
use crate::transport::{
    Accepts, VERSION_HEADER, check_content_type, header_str, json_response, json_text_response,
    read_body, read_bytes, set_session_header,
};

/// The query of `/mcp`; only a POST reads it.
#[derive(Debug, Deserialize, Default)]
pub(crate) struct McpQuery {
    elicitation_mode: Option<String>,
}

impl McpQuery {
    /// The client opted in to native elicitation (SPEC §9).
    fn native(&self) -> bool {
        self.elicitation_mode.as_deref() == Some(ElicitationMode::Native.as_str())
    }

    /// The approval mode a client with these capabilities gets: native
    /// when it asked and can, the console's when it asked for it (SPEC
    /// §14), else model mode. Any other word is model mode, as before.
    pub(crate) fn mode(&self, version: ProtocolVersion, capabilities: &Value) -> ElicitationMode {
        if executor_mcp::native_mode(version, self.native(), capabilities) {
            ElicitationMode::Native
        } else if self.elicitation_mode.as_deref() == Some(ElicitationMode::Console.as_str()) {
            ElicitationMode::Console
        } else {
            ElicitationMode::Model
        }
    }
}

/// Whether a caller in `mode` waits for the console's decision.
pub(crate) fn approval_of(mode: ElicitationMode) -> ApprovalMode {
    match mode {
        ElicitationMode::Console => ApprovalMode::InConsole,
        ElicitationMode::Model | ElicitationMode::Native => ApprovalMode::AskAHuman,
    }
}

/// Who a POST acts for, and the token its streams follow.
pub(crate) struct Caller {
    pub(crate) principal: Principal,
    pub(crate) token_id: String,
}

pub(crate) async fn post(
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
    // Parsed once: an unsupported version is refused here, with the
    // request's id when there is one request.
    let version_header = match header_str(headers, VERSION_HEADER) {
        Some(text) => match text.parse::<ProtocolVersion>() {
            Ok(version) => Some(version),
            Err(e) => {
                return match &incoming {
                    Incoming::Single(Message::Request(req)) => Ok(sessionless::refused(
                        &req.id,
                        Refusal::unsupported_version(text),
                    )),
                    _ => Err(WireError::BadRequest(e.to_string())),
                };
            }
        },
        None => None,
    };
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
            // First: at 2026-07-28 `initialize` is a method that is gone.
            incoming if sessionless::is_sessionless(version_header, &incoming) => {
                sessionless::post(app, principal, caller.token_id, incoming, query, headers).await
            }
            Incoming::Single(Message::Request(req)) if req.method == RpcMethod::Initialize => {
                initialize(app, principal, req, query).await
            }
            Incoming::Batch(_) if is_initialize => Err(WireError::Rpc(RpcError::invalid_request(
                "initialize must not be part of a batch",
            ))),
            _ => Err(WireError::BadRequest(
                "Mcp-Session-Id header is required".into(),
            )),
        },
    }
}

async fn initialize(
    app: &App,
    principal: Principal,
    req: Request,
    query: McpQuery,
) -> Result<Response, WireError> {
    let requested = req.params.get("protocolVersion").and_then(Value::as_str);
    let version = ProtocolVersion::negotiate(requested);
    let client_info = req.params.get("clientInfo").cloned().unwrap_or(Value::Null);
    let capabilities = req.params.get("capabilities").cloned().unwrap_or(json!({}));
    let mode = query.mode(version, &capabilities);
    // A new session is a write: with the store's writes backed up it would
    // only wait, then fail.
    if app.store().writes_backed_up() {
        return Err(WireError::Overloaded(Overload::StoreWrites));
    }
    let lease = app
        .sessions
        .create(principal, version, client_info, capabilities, mode)
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
    if batch && !lease.protocol_version().allows_batches() {
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
        && let Some(overload) = app.server().refused_for_load(&lease.ctx, req)
    {
        return Err(WireError::Overloaded(overload));
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
