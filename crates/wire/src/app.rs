//! The HTTP server's shared state ([`App`]) and its configuration
//! ([`WireConfig`]), which every route reads.

use std::sync::Arc;
use std::time::Duration;

use executor_authz::PublicOrigin;
use executor_mcp::McpServer;
use executor_sessions::Sessions;
use executor_store::Store;
use executor_store::tokens::TokenCache;

use crate::auth::MetricsToken;
use crate::drain::InFlight;
use crate::guard::HostPolicy;
use crate::oauth::SharedCallbacks;
use crate::sse::{FIRST_EVENT_WINDOW, GET_STREAM_ROTATION, SSE_KEEPALIVE};

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
    /// The URL that names this server in the protected-resource metadata
    /// and the 401 challenge (SPEC §4: never taken from `Host`, but for
    /// the loopback spelling a loopback request used).
    pub public: PublicOrigin,
    /// Whether the built-in authorization server is on (`--oauth`): the
    /// metadata then names it, and the challenge asks for `scope="mcp"`.
    pub oauth: bool,
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
            public: PublicOrigin::new(None, "http://127.0.0.1"),
            oauth: false,
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
    /// More routes served beside `/mcp` (the management API), under the
    /// same request ids, connection cap and timeouts.
    pub extra: Option<axum::Router>,
}

impl App {
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        self.sessions.store()
    }
    pub(crate) fn server(&self) -> &Arc<McpServer> {
        self.sessions.server()
    }
}
