//! Opening one MCP session with an upstream: a supervised child over
//! stdio, or streamable HTTP through the guarded client (rmcp's client and
//! transport; SSE streams read by rmcp), with the connection's credential.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use executor_outbound::{Credential, HttpClient, HttpFailure};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientInitializeError, NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::{
    StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use zeroize::Zeroizing;

use crate::env::{self, EnvSecrets};
use crate::error::{GuardRefusal, OpenError};
use crate::http::UpstreamHttp;
use crate::sse::{self, SseTasks};
use crate::stdio::{self, ChildGuard};
use crate::stored::{Endpoint, HttpTransport};

/// How long opening a session (the child starting, the handshake) may take.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// One live MCP session with an upstream.
pub struct Session {
    pub service: RunningService<RoleClient, UpstreamClient>,
    /// Over HTTP: noted when the outbound guard refused one of the
    /// session's requests (see `error.rs`).
    refusal: Option<GuardRefusal>,
    /// What the session runs on and ends with it: the child process of a
    /// stdio session (its group dies), a legacy SSE stream's tasks.
    _runs_on: RunsOn,
}

/// Held for its `Drop` only.
#[allow(dead_code)]
enum RunsOn {
    Nothing,
    Child(ChildGuard),
    Sse(SseTasks),
}

impl Session {
    /// Whether the session can no longer carry a call: cancelled, or its
    /// transport gone (the child exited, the stream broke).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.is_transport_closed()
    }

    /// The guard's refusal of one of the session's requests, as the agent
    /// sees it: the upstream's host now resolves to a local network.
    pub fn refused_target(&self) -> Option<HttpFailure> {
        self.refusal.as_ref().and_then(GuardRefusal::failure)
    }
}

/// Our side of a session: it answers the upstream's requests (elicitation
/// and sampling declined, no roots) and tells the pool when the upstream's
/// tool list changed.
#[derive(Clone)]
pub struct UpstreamClient {
    on_tools_changed: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Declares form elicitation: on 2026-07-28, where an upstream's
    /// questions come back as `input_required` and are answered through
    /// the approval path (`questions.rs`). A session of an older version
    /// declares none: its server→client requests are declined.
    answers_questions: bool,
}

impl ClientHandler for UpstreamClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(changed) = &self.on_tools_changed {
            changed();
        }
    }

    /// The version an `initialize` handshake asks for (stdio, legacy SSE,
    /// an older server's fallback); 2026-07-28 has no handshake.
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.answers_questions {
            serde_json::from_value(serde_json::json!({ "elicitation": { "form": {} } }))
                .unwrap_or_default()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(
            capabilities,
            Implementation::new("executor", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(LEGACY_VERSION)
    }
}

/// The newest version with the `initialize` handshake: servers of every
/// version since 2025-03-26 accept it.
const LEGACY_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// How a streamable HTTP session starts first (SPEC §8): `server/discover`
/// at 2026-07-28 (again at a version the server names when it refuses the
/// first). A server that answers it as one of an older version does (see
/// [`open_streamable_http`]) gets the `initialize` handshake at
/// [`LEGACY_VERSION`] on a new connection, from a client that declares no
/// elicitation. Stdio and legacy SSE sessions keep the handshake alone: a
/// stdio server of an older SDK may leave a request before `initialize`
/// unanswered, and every open would wait out the discovery's time.
fn discover() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// How long a server may take to answer `server/discover` before it is
/// taken for one of an older version (rmcp's own probe waits as long).
const DISCOVER_WAIT: Duration = Duration::from_secs(10);

/// Opens a session with the upstream at `endpoint`. `on_tools_changed`
/// runs when the upstream says its tool list changed; `secrets` opens a
/// stdio command's sealed `--env` values.
pub async fn open(
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    http: &HttpClient,
    secrets: EnvSecrets<'_>,
    on_tools_changed: Option<Arc<dyn Fn() + Send + Sync>>,
) -> Result<Session, OpenError> {
    let client = UpstreamClient {
        on_tools_changed,
        answers_questions: false,
    };
    match endpoint {
        Endpoint::Stdio { command, args, env } => {
            let env = env::open_env(secrets, namespace, env).map_err(|why| {
                OpenError::Unavailable(format!("`{command}` cannot be started: {why}"))
            })?;
            let child =
                stdio::spawn(namespace, command, args, &env).map_err(OpenError::Unavailable)?;
            // One message per line, no longer than an HTTP answer may be.
            let transport = AsyncRwTransport::new_client(child.stdout, child.stdin)
                .with_max_line_length(http.config().max_response_bytes);
            let handshake = client.serve(transport);
            let service = within_open_timeout(handshake).await?.map_err(|e| {
                OpenError::Unavailable(format!("`{command}` did not start an MCP session: {e}"))
            })?;
            Ok(Session {
                service,
                refusal: None,
                _runs_on: RunsOn::Child(child.guard),
            })
        }
        Endpoint::Http { url, transport } => {
            // Refused here: a literal local IP, a scheme that is not HTTP.
            let reqwest = http.client_for(url).map_err(OpenError::Target)?;
            let headers = auth_headers(credential)?;
            let max = http.config().max_response_bytes;
            match transport {
                HttpTransport::StreamableHttp => {
                    open_streamable_http(url, reqwest, headers, max, client).await
                }
                HttpTransport::Sse => open_sse(url, reqwest, headers, max, client).await,
                // SSE only when the transport failed: a 401/403 is about
                // the credential, and SSE would answer it the same.
                HttpTransport::Auto => {
                    let streamable = open_streamable_http(
                        url,
                        reqwest.clone(),
                        headers.clone(),
                        max,
                        client.clone(),
                    )
                    .await;
                    match streamable {
                        Err(OpenError::Unavailable(first)) => {
                            open_sse(url, reqwest, headers, max, client).await.map_err(
                                |e| match e {
                                    OpenError::Unavailable(second) => OpenError::Unavailable(
                                        format!("{first}; as legacy SSE: {second}"),
                                    ),
                                    other => other,
                                },
                            )
                        }
                        other => other,
                    }
                }
            }
        }
    }
}

async fn open_streamable_http(
    url: &str,
    reqwest: reqwest::Client,
    headers: HashMap<HeaderName, HeaderValue>,
    max_response_bytes: usize,
    client: UpstreamClient,
) -> Result<Session, OpenError> {
    let modern = UpstreamClient {
        answers_questions: true,
        ..client.clone()
    };
    let opened = start_streamable_http(
        url,
        reqwest.clone(),
        headers.clone(),
        max_response_bytes,
        modern,
        discover(),
    )
    .await;
    match opened {
        // A server of an older version gets the handshake on a new
        // connection.
        Err(Opening::Refused(refused)) if answered_as_an_older_server(&refused) => {
            start_streamable_http(
                url,
                reqwest,
                headers,
                max_response_bytes,
                client,
                ClientLifecycleMode::Initialize,
            )
            .await
            .map_err(|e| e.into_open_error(url))
        }
        other => other.map_err(|e| e.into_open_error(url)),
    }
}

/// Whether `server/discover` was answered as a server of an older version
/// answers it: with an error (a method it does not know; a 4xx without a
/// session, which rmcp turns into one), with something else than a
/// discovery result (an empty result, an error of no request, a bare 202
/// that leaves the request unanswered), or not in time.
fn answered_as_an_older_server(refused: &ClientInitializeError) -> bool {
    matches!(
        refused,
        ClientInitializeError::JsonRpcError(_)
            | ClientInitializeError::ExpectedInitResult(_)
            | ClientInitializeError::ExpectedInitResponse(_)
            | ClientInitializeError::UncorrelatedErrorResponse { .. }
            | ClientInitializeError::ConnectionClosed(_)
            | ClientInitializeError::Cancelled
    )
}

/// Why a streamable HTTP session did not start.
enum Opening {
    Failed(OpenError),
    Refused(Box<ClientInitializeError>),
}

impl Opening {
    fn into_open_error(self, url: &str) -> OpenError {
        match self {
            Opening::Failed(error) => error,
            Opening::Refused(e) => {
                OpenError::Unavailable(format!("cannot open an MCP session with {url}: {e}"))
            }
        }
    }
}

async fn start_streamable_http(
    url: &str,
    reqwest: reqwest::Client,
    headers: HashMap<HeaderName, HeaderValue>,
    max_response_bytes: usize,
    client: UpstreamClient,
    lifecycle: ClientLifecycleMode,
) -> Result<Session, Opening> {
    // An answer is bounded before it is parsed, as one JSON body or as one
    // SSE event (rmcp's own bound for an event is 16 MiB).
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(max_response_bytes)
        .max_sse_event_size(max_response_bytes)
        .reinit_on_expired_session(true)
        .custom_headers(headers);
    let refusal = GuardRefusal::new(url);
    let http = UpstreamHttp::new(reqwest, refusal.clone());
    let listening = http.listening();
    let transport = StreamableHttpClientTransport::with_client(http, config);
    // Discovery has its own, shorter wait: past it the server is taken for
    // an older one (the tools listed after it are not counted in it).
    let discovering = matches!(lifecycle, ClientLifecycleMode::Discover { .. });
    let opening = client.serve_with_lifecycle(transport, lifecycle);
    let opened = if discovering {
        tokio::time::timeout(DISCOVER_WAIT, opening)
            .await
            .unwrap_or(Err(ClientInitializeError::Cancelled))
    } else {
        within_open_timeout(opening)
            .await
            .map_err(Opening::Failed)?
    };
    let service = opened.map_err(|e| {
        if let Some(failure) = refusal.failure() {
            Opening::Failed(OpenError::Target(failure))
        } else if e.is_authorization_required() || e.auth_challenge().is_some() {
            Opening::Failed(OpenError::NeedsLogin(
                e.auth_challenge().map(str::to_string),
            ))
        } else {
            Opening::Refused(Box::new(e))
        }
    })?;
    if speaks_stateless(&service) {
        // rmcp mirrors a tool's `x-mcp-header` arguments into headers only
        // for tools it has seen listed on this transport (and leaves out
        // those whose declarations are invalid): list them once, before
        // the session's first call.
        within_open_timeout(service.list_all_tools())
            .await
            .map_err(Opening::Failed)?
            .map_err(|e| {
                Opening::Failed(OpenError::Unavailable(format!(
                    "{url} did not list its tools: {e}"
                )))
            })?;
    } else {
        // The session is ready once its GET stream is answered (see
        // http.rs); a server that holds that answer back costs at most
        // this wait. 2026-07-28 has no such stream.
        let _ = tokio::time::timeout(LISTEN_WAIT, listening.notified()).await;
    }
    Ok(Session {
        service,
        refusal: Some(refusal),
        _runs_on: RunsOn::Nothing,
    })
}

/// Whether the session speaks 2026-07-28 (or later): no handshake, every
/// request carrying its own `_meta`.
pub(crate) fn speaks_stateless(service: &RunningService<RoleClient, UpstreamClient>) -> bool {
    service
        .peer()
        .peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
}

/// How long a new session waits for its GET stream's answer.
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

async fn open_sse(
    url: &str,
    reqwest: reqwest::Client,
    headers: HashMap<HeaderName, HeaderValue>,
    max_response_bytes: usize,
    client: UpstreamClient,
) -> Result<Session, OpenError> {
    let headers: HeaderMap = headers.into_iter().collect();
    let refusal = GuardRefusal::new(url);
    let opened = sse::open(
        reqwest,
        url,
        headers,
        max_response_bytes,
        OPEN_TIMEOUT,
        refusal.clone(),
    );
    let channel = opened.await?;
    let service = within_open_timeout(client.serve((channel.outgoing, channel.incoming)))
        .await?
        .map_err(|e| match refusal.failure() {
            Some(failure) => OpenError::Target(failure),
            None => OpenError::Unavailable(format!(
                "cannot open an MCP session with {url} over SSE: {e}"
            )),
        })?;
    Ok(Session {
        service,
        refusal: Some(refusal),
        _runs_on: RunsOn::Sse(channel.tasks),
    })
}

async fn within_open_timeout<T>(opening: impl Future<Output = T>) -> Result<T, OpenError> {
    tokio::time::timeout(OPEN_TIMEOUT, opening)
        .await
        .map_err(|_| {
            OpenError::Unavailable(format!(
                "the MCP server did not complete its handshake within {} s",
                OPEN_TIMEOUT.as_secs()
            ))
        })
}

/// The credential's `Authorization` header: a bearer token (an API key is
/// sent as one: MCP names no other scheme), or Basic.
fn auth_headers(credential: &Credential) -> Result<HashMap<HeaderName, HeaderValue>, OpenError> {
    let text = match credential {
        Credential::None => return Ok(HashMap::new()),
        Credential::ApiKey(secret) | Credential::Bearer(secret) => {
            Zeroizing::new(format!("Bearer {}", secret.expose()))
        }
        Credential::Basic { username, password } => {
            let token = Credential::basic_token(username, password.expose());
            Zeroizing::new(format!("Basic {}", token.as_str()))
        }
    };
    let value = executor_outbound::sensitive_header(&text).ok_or_else(|| {
        OpenError::Refused(
            "the connection's credential contains characters an HTTP header cannot carry".into(),
        )
    })?;
    Ok(HashMap::from([(AUTHORIZATION, value)]))
}
