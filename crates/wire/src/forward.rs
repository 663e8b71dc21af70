//! Handing a request to the node that holds its session (SPEC §10).
//!
//! A POST or DELETE for a session another live node holds is sent to that
//! node as it came (method, path, query, headers, body) and its answer,
//! streamed or not, is passed back: the client never sees the difference.
//! The holder runs every SPEC §2 check itself. One hop only: the forwarded
//! request carries `x-executor-hop`, and a node that receives one for a
//! session it does not hold answers 503 `Retry-After` instead of forwarding
//! again. The header needs no seal: all it can make a node do is refuse to
//! forward, which a client can only do to its own request.
//!
//! A holder that refuses the connection is dead: this node evicts it (ends
//! its lease on the store) and serves the request itself. A holder that
//! accepts and then never answers (a stopped process) is given up once its
//! lease lapses on the store: the answer is 503, and the client's retry is
//! served by the node that claims the session then.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, header};
use axum::response::Response;
use bytes::Bytes;
use executor_sessions::{AcquireError, Holder, Lease};
use executor_store::Principal;
use futures::StreamExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::WireError;
use crate::app::App;

/// Marks a request one node handed to another.
const HOP_HEADER: &str = "x-executor-hop";
/// How long a connection to a peer may take before it counts as refused.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What a request came with besides its body, as a hand-over resends it.
pub(crate) struct RequestParts {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
}

/// What handing a request over came to.
enum HandOver {
    /// The holder answered (or it failed in a way the client must see).
    Answered(Response),
    /// The holder is gone; the caller serves the request itself.
    Unreachable,
}

/// The request as it came in, to be sent on.
struct Forward<'a> {
    method: Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
    body: Bytes,
}

type PeerClient = Client<HttpConnector, Body>;

/// The session's runtime here, or the holder's answer when another node
/// holds it: the request (with `body`) is handed over, and served here
/// after all when the holder turns out to be dead.
pub(crate) async fn acquire_or_hand_over(
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
    let incoming = Forward {
        method: request.method.clone(),
        uri: &request.uri,
        headers: &request.headers,
        body,
    };
    match hand_over(app, &holder, incoming).await? {
        HandOver::Answered(response) => Ok(Err(response)),
        HandOver::Unreachable => {
            evict(app, &holder).await;
            match app.sessions.acquire(session_id, principal).await {
                Ok(lease) => Ok(Ok(lease)),
                // Another node claimed it first: the client retries.
                Err(AcquireError::HeldElsewhere(_)) => Err(WireError::Moving),
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// One keep-alive pool of connections to peers, for the process. Plain
/// HTTP: nodes reach each other on the network they share (TLS between
/// them is the network's, e.g. a service mesh).
fn client() -> &'static PeerClient {
    static CLIENT: OnceLock<PeerClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// Headers that describe one connection, not the request (RFC 9110 §7.6.1),
/// and the length, which the client sets for the body it sends.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
    )
}

/// Sends `request` to `holder`. Refused before a byte of it was sent:
/// [`HandOver::Unreachable`]; any later failure is the client's 503.
async fn hand_over(
    app: &App,
    holder: &Holder,
    request: Forward<'_>,
) -> Result<HandOver, WireError> {
    if request.headers.contains_key(HOP_HEADER) {
        // Handed here by a node that saw us as the holder, and we are not:
        // the session is on its way somewhere. The client retries.
        return Err(WireError::Moving);
    }
    // A holder without an address (a CLI command) is waited out.
    let Some(base) = holder.url.as_deref() else {
        return Err(WireError::Moving);
    };
    if Some(base) == app.sessions.node_url() {
        // Our own address: a previous run of this node, killed before it
        // could leave. Nobody else can listen here.
        return Ok(HandOver::Unreachable);
    }
    let path = request
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/mcp");
    let Ok(uri) = format!("{}{path}", base.trim_end_matches('/')).parse::<Uri>() else {
        tracing::warn!(node = %holder.node_id, url = base, "a peer registered an address that is not a URL");
        return Err(WireError::Moving);
    };
    if uri.scheme_str() != Some("http") {
        tracing::warn!(node = %holder.node_id, url = base, "a peer registered an address that is not http://");
        return Err(WireError::Moving);
    }
    let mut out = Request::builder().method(request.method).uri(uri);
    if let Some(headers) = out.headers_mut() {
        for (name, value) in request.headers {
            if !hop_by_hop(name) {
                headers.append(name, value.clone());
            }
        }
        headers.insert(HOP_HEADER, HeaderValue::from_static("1"));
    }
    let Ok(out) = out.body(Body::from(request.body)) else {
        return Err(WireError::Moving);
    };
    let lapsed = holder_lapsed(app.clone(), holder.node_id.clone());
    let sent = tokio::select! {
        sent = client().request(out) => sent,
        () = lapsed => {
            tracing::warn!(node = %holder.node_id, "a session's holder stopped answering; its lease lapsed");
            return Err(WireError::Moving);
        }
    };
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) if e.is_connect() => {
            tracing::warn!(node = %holder.node_id, error = %e, "a session's holder refused the connection");
            return Ok(HandOver::Unreachable);
        }
        Err(e) => {
            tracing::warn!(node = %holder.node_id, error = %e, "could not hand a request to its session's holder");
            return Err(WireError::Moving);
        }
    };
    app.sessions.metrics().forwarded.inc();
    Ok(HandOver::Answered(response_of(app, holder, answer)))
}

/// The holder's answer as ours; its body streams through, and stops if the
/// holder's lease lapses while it is open.
fn response_of(app: &App, holder: &Holder, answer: hyper::Response<Incoming>) -> Response {
    let (mut parts, body) = answer.into_parts();
    let connection_headers: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|name| hop_by_hop(name))
        .cloned()
        .collect();
    for name in connection_headers {
        parts.headers.remove(name);
    }
    // Ours to set (CORS is added by the caller, as for any answer).
    parts.headers.remove(header::ACCESS_CONTROL_ALLOW_ORIGIN);
    let lapsed = Box::pin(holder_lapsed(app.clone(), holder.node_id.clone()));
    let body = Body::new(body).into_data_stream().take_until(lapsed);
    Response::from_parts(parts, Body::from_stream(body))
}

/// Resolves once the node's lease has lapsed on the store; checked every
/// half lease, so a stopped holder is given up within about one lease.
async fn holder_lapsed(app: App, node_id: String) {
    let every = app.sessions.node_lease() / 2;
    loop {
        tokio::time::sleep(every).await;
        match app.sessions.store().node_alive(&node_id).await {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => tracing::warn!(error = %e, "could not check a peer's lease"),
        }
    }
}

/// Ends the holder's lease at once (it refused a connection), so the
/// session can be claimed here without waiting for the lease to run out.
async fn evict(app: &App, holder: &Holder) {
    if let Err(e) = app.sessions.store().evict_node(&holder.node_id).await {
        tracing::warn!(error = %e, "could not evict an unreachable node");
    }
}
