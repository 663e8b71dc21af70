//! Opening one MCP session with an upstream: a supervised child over
//! stdio, or streamable HTTP through the guarded client (rmcp's client and
//! transport; SSE streams read by rmcp), with the connection's credential.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use executor_outbound::{Credential, HttpClient, HttpFailure};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::{
    StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use zeroize::Zeroizing;

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
pub struct UpstreamClient {
    on_tools_changed: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl ClientHandler for UpstreamClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(changed) = &self.on_tools_changed {
            changed();
        }
    }

    /// Sessions open with 2025-11-25, the newest version with the
    /// `initialize` handshake: servers of every version since 2025-03-26
    /// accept it (rmcp's default, 2026-07-28, is refused by most servers
    /// deployed today and by the conformance suite's client scenarios).
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("executor", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// Opens a session with the upstream at `endpoint`. `on_tools_changed`
/// runs when the upstream says its tool list changed.
pub async fn open(
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    http: &HttpClient,
    on_tools_changed: Option<Arc<dyn Fn() + Send + Sync>>,
) -> Result<Session, OpenError> {
    let on_tools_changed_again = on_tools_changed.clone();
    let client = UpstreamClient { on_tools_changed };
    match endpoint {
        Endpoint::Stdio { command, args, env } => {
            let child =
                stdio::spawn(namespace, command, args, env).map_err(OpenError::Unavailable)?;
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
                    let streamable =
                        open_streamable_http(url, reqwest.clone(), headers.clone(), max, client)
                            .await;
                    match streamable {
                        Err(OpenError::Unavailable(first)) => {
                            let client = UpstreamClient {
                                on_tools_changed: on_tools_changed_again,
                            };
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
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(max_response_bytes)
        .reinit_on_expired_session(true)
        .custom_headers(headers);
    let refusal = GuardRefusal::new(url);
    let http = UpstreamHttp::new(reqwest, refusal.clone());
    let listening = http.listening();
    let transport = StreamableHttpClientTransport::with_client(http, config);
    let service = within_open_timeout(client.serve(transport))
        .await?
        .map_err(|e| {
            if let Some(failure) = refusal.failure() {
                OpenError::Target(failure)
            } else if e.is_authorization_required() || e.auth_challenge().is_some() {
                OpenError::NeedsLogin(e.auth_challenge().map(str::to_string))
            } else {
                OpenError::Unavailable(format!("cannot open an MCP session with {url}: {e}"))
            }
        })?;
    // The session is ready once its GET stream is answered (see http.rs);
    // a server that holds that answer back costs at most this wait.
    let _ = tokio::time::timeout(LISTEN_WAIT, listening.notified()).await;
    Ok(Session {
        service,
        refusal: Some(refusal),
        _runs_on: RunsOn::Nothing,
    })
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
