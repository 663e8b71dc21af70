//! Requests of the sessionless revision (2026-07-28, SPEC §2): each is
//! admitted on its own (`executor_mcp::admit`: `_meta`, the headers that
//! repeat the body, a method that revision has) and answered on its own;
//! a refusal carries the request's id and its own HTTP status.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_call::{CallContext, Reply};
use executor_mcp::{
    Approvals, Incoming, Message, Method as RpcMethod, ProtocolVersion, Refusal, Request,
    RequestScope, RpcError, SUBSCRIPTIONS_LISTEN, StatelessHeaders,
};
use executor_store::{ElicitationMode, Principal};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::WireError;
use crate::app::App;
use crate::post::{McpQuery, approval_of};
use crate::transport::{Accepts, VERSION_HEADER, json_response};

/// The headers a 2026-07-28 request repeats its body in.
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// A request of the sessionless revision: by header, by `_meta`, or by its
/// method (`server/discover` exists only there).
pub(crate) fn is_sessionless(version_header: Option<ProtocolVersion>, incoming: &Incoming) -> bool {
    if version_header.is_some_and(ProtocolVersion::is_sessionless) {
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
            == Some(ProtocolVersion::SESSIONLESS.as_str())
}

/// A refusal as the wire carries it: its status, and the JSON-RPC error
/// with the request's id.
pub(crate) fn refused(id: &Value, refusal: Refusal) -> Response {
    let status = StatusCode::from_u16(refusal.http_status).unwrap_or(StatusCode::BAD_REQUEST);
    let body = executor_mcp::error_response(id, &refusal.error);
    (status, axum::Json(body)).into_response()
}

pub(crate) async fn post(
    app: &App,
    principal: Principal,
    token_id: String,
    incoming: Incoming,
    query: McpQuery,
    headers: &HeaderMap,
) -> Result<Response, WireError> {
    let Incoming::Single(message) = incoming else {
        return Err(WireError::Rpc(RpcError::invalid_request(
            "batches are not supported on this protocol version",
        )));
    };
    let Message::Request(req) = message else {
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    let raw = |name: &str| headers.get(name).map(|v| v.as_bytes());
    let admitted = executor_mcp::admit(
        &req,
        StatelessHeaders {
            protocol_version: raw(VERSION_HEADER),
            method: raw(METHOD_HEADER),
            name: raw(NAME_HEADER),
        },
    );
    if let Err(refusal) = admitted {
        return Ok(refused(&req.id, refusal));
    }
    if req.method.as_str() == SUBSCRIPTIONS_LISTEN {
        return listen(app, principal, token_id, req, headers).await;
    }
    // The client's capabilities ride in each request's `_meta` here.
    let capabilities = req
        .params
        .pointer("/_meta/io.modelcontextprotocol~1clientCapabilities")
        .cloned()
        .unwrap_or(Value::Null);
    let mode = query.mode(ProtocolVersion::SESSIONLESS, &capabilities);
    let ctx = CallContext {
        principal,
        session_id: None,
        approval: approval_of(mode),
        holder: None,
    };
    if let Some(overload) = app.server().refused_for_load(&ctx, &req) {
        return Err(WireError::Overloaded(overload));
    }
    // Only `tools/list` reads the list; other requests skip building it.
    let tools = if req.method == RpcMethod::ToolsList {
        app.server()
            .build_tool_list(&ctx.principal.org_id, mode)
            .await
    } else {
        Arc::default()
    };
    let scope = RequestScope {
        ctx: &ctx,
        protocol_version: ProtocolVersion::SESSIONLESS,
        tools,
        approvals: match mode {
            ElicitationMode::Native => Approvals::InputRequired,
            ElicitationMode::Model | ElicitationMode::Console => Approvals::Model,
        },
        reply: Reply::Direct,
        // The JSON answer's future is dropped with its connection.
        gone: None,
    };
    Ok(json_response(app.server().handle(&scope, &req).await))
}

/// `subscriptions/listen`: an SSE answer that stays open, acknowledged
/// first with the notification types honoured (only the tool list's
/// change: the server has no prompts or resources), then carrying
/// `notifications/tools/list_changed` when the org's tools change, from any
/// node. Each message names the stream (its request's id). It ends, with
/// the request's result, after the GET stream's rotation time, when the
/// server drains or when the token lapses.
async fn listen(
    app: &App,
    principal: Principal,
    token_id: String,
    req: Request,
    headers: &HeaderMap,
) -> Result<Response, WireError> {
    if !Accepts::of(headers).sse {
        return Err(WireError::NotAcceptable(
            "subscriptions/listen answers with text/event-stream: the client must accept it",
        ));
    }
    let subscription = app.sessions.subscribe(&principal).await?;
    let messages = executor_mcp::listen_messages(&req);
    let mut draining = app.sessions.draining();
    let lapsed = crate::auth::token_lapsed(app.store().clone(), token_id);
    let until = Box::pin(async move {
        tokio::select! {
            _ = draining.wait_for(|d| *d) => {}
            _ = lapsed => {}
        }
    });
    let stream = ListenStream {
        ack: Some(frame(&messages.acknowledged)),
        changed: messages.tools_changed.as_ref().map(frame),
        ended: frame(&messages.ended),
        subscription,
        keepalive: tokio::time::interval_at(
            tokio::time::Instant::now() + app.config.sse_keepalive,
            app.config.sse_keepalive,
        ),
        ends_at: tokio::time::Instant::now() + app.config.get_stream_rotation,
        until,
        done: false,
    };
    let body = axum::body::Body::from_stream(futures::stream::unfold(stream, ListenStream::next));
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}

/// One SSE event carrying a JSON-RPC message (no id: a listen stream is
/// not resumed; a client opens another).
fn frame(message: &Value) -> String {
    format!("event: message\ndata: {message}\n\n")
}

/// The state of one listen stream between its events.
struct ListenStream {
    ack: Option<String>,
    /// The tool-list notification, when the client asked for it.
    changed: Option<String>,
    ended: String,
    subscription: executor_sessions::Subscription,
    keepalive: tokio::time::Interval,
    ends_at: tokio::time::Instant,
    until: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    done: bool,
}

impl ListenStream {
    async fn next(mut self) -> Option<(Result<String, std::convert::Infallible>, Self)> {
        if self.done {
            return None;
        }
        if let Some(ack) = self.ack.take() {
            return Some((Ok(ack), self));
        }
        loop {
            let event = tokio::select! {
                change = self.subscription.changed.recv() => match (change, &self.changed) {
                    (Err(broadcast::error::RecvError::Closed), _) => None,
                    (_, Some(text)) => Some(text.clone()),
                    // Not asked for: nothing is sent.
                    (_, None) => continue,
                },
                _ = self.keepalive.tick() => Some(": keepalive\n\n".to_string()),
                _ = tokio::time::sleep_until(self.ends_at) => None,
                _ = &mut self.until => None,
            };
            return Some(match event {
                Some(text) => (Ok(text), self),
                None => {
                    self.done = true;
                    let ended = std::mem::take(&mut self.ended);
                    (Ok(ended), self)
                }
            });
        }
    }
}
