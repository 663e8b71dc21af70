//! The SSE stream of one POSTed request ([`RequestStream`]): the work runs
//! in its own task, each message it sends is logged first, and the
//! native-elicitation prompt asks the client on the same stream.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::response::Response;
use executor_call::{Action, ApprovalPrompt, ApprovalRequest, ClientGone, Reply};
use executor_mcp::{Approvals, Request, RequestScope, RpcError};
use executor_sessions::{Lease, OutboundStream, PostStream, Sessions};
use executor_store::tokens::random_id;
use executor_store::{Store, StoreError};
use futures::FutureExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::app::App;
use crate::auth;
use crate::sse::{self, Source, StreamOwner};

/// The scope of a request in the lease's session: approved by the model,
/// answered directly (a streamed answer overrides both).
pub(crate) fn scope_of(lease: &Lease) -> RequestScope<'_> {
    RequestScope {
        ctx: &lease.ctx,
        protocol_version: lease.protocol_version(),
        tools: lease.tools(),
        approvals: Approvals::Model,
        reply: Reply::Direct,
        // A JSON answer's future is dropped with its connection.
        gone: None,
    }
}

/// Answers one request on its own SSE stream: the priming event, then the
/// response once it is logged — in the same write when the response is
/// ready within [`crate::WireConfig::first_event_window`]. The work runs in
/// its own task so a client that drops the socket never cancels it; its
/// answer then waits in the log for the session's next GET.
pub(crate) async fn stream_one(
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
    // The socket is gone once the SSE body that reads `rx` is dropped.
    let watched = tx.downgrade();
    let gone = ClientGone::new(move || {
        let watched = watched.clone();
        Box::pin(async move {
            if let Some(tx) = watched.upgrade() {
                tx.closed().await;
            }
        })
    });
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
            gone: Some(gone),
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

impl ApprovalPrompt for ElicitPrompt {
    fn ask(&self, request: ApprovalRequest) -> futures::future::BoxFuture<'static, Option<Action>> {
        let stream = self.stream.clone();
        Box::pin(async move {
            let id = json!(format!("approval-{}", random_id(9)));
            let version = stream.lease.protocol_version();
            let answer = stream.lease.runtime().await_client_response(&id);
            let params = executor_mcp::elicitation_params(version, &request);
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
