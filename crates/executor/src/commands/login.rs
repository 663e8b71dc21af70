//! OAuth logins (SPEC §9): `executor connections login`, and the callback
//! that completes a login, served by `executor serve` or, when no server
//! runs, by the login command itself on `--listen`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_integrations::IntegrationKind;
use executor_oauth::{
    Challenge, Declared, Flow, Grant, LoginOptions, LoginTarget, OAuth, Resource, Started,
};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::secrets::SecretString;
use executor_store::{CredentialKind, Store, now_ms};
use executor_wire::{CallbackPage, CallbackQuery, OAuthCallbacks};
use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use executor_ops::Operations;

use super::resolve_actor;
use crate::AnyResult;
use crate::cli::{GlobalOpts, LoginArgs, LoginFlow, PublicOpts};

/// How often the login command looks whether its login was completed (a
/// point read; a callback served by the command itself wakes it at once).
const OUTCOME_POLL: Duration = Duration::from_millis(25);

/// The public URL: `--public-url` (without a trailing `/`), else
/// `http://<listen>` with an unspecified address read as loopback.
pub(crate) fn public_url(public: &PublicOpts, listen: SocketAddr) -> String {
    match &public.public_url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            let mut addr = listen;
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            format!("http://{addr}")
        }
    }
}

/// Where our client ID metadata document is published, if anywhere: the
/// flag, else our own route when the public URL is https (the draft wants
/// an https URL with a path).
fn client_metadata_url(public: &PublicOpts, public_url: &str) -> Option<String> {
    public.oauth_client_metadata_url.clone().or_else(|| {
        public_url
            .starts_with("https://")
            .then(|| format!("{public_url}/oauth/client-metadata.json"))
    })
}

/// What completes a login in this process: the code exchange, then the
/// integration's tools listed with the new token.
pub(crate) struct Callbacks {
    pub oauth: Arc<OAuth>,
    pub ops: Arc<Operations>,
    pub http: Arc<HttpClient>,
    /// The metadata document's URL and our redirect URI, when published.
    pub metadata: Option<(String, String)>,
    /// Woken when a login completes here (the login command waits on it).
    pub settled: Arc<tokio::sync::Notify>,
}

impl Callbacks {
    pub(crate) fn new(
        oauth: Arc<OAuth>,
        ops: Arc<Operations>,
        http: Arc<HttpClient>,
        public: &PublicOpts,
        public_url: &str,
    ) -> Self {
        let redirect_uri = format!("{public_url}/oauth/callback");
        let metadata = client_metadata_url(public, public_url).map(|url| (url, redirect_uri));
        Callbacks {
            oauth,
            ops,
            http,
            metadata,
            settled: Arc::new(tokio::sync::Notify::new()),
        }
    }

    async fn complete(&self, query: CallbackQuery) -> CallbackPage {
        let finished = self
            .oauth
            .finish_login(
                query.code.as_deref(),
                query.state.as_deref(),
                query.iss.as_deref(),
                query.error.as_deref(),
            )
            .await;
        let finished = match finished {
            Ok(finished) => finished,
            Err(e) => {
                self.settled.notify_waiters();
                tracing::warn!(error = %e, "an OAuth login failed at its callback");
                return CallbackPage {
                    ok: false,
                    message: format!("The login failed: {e}"),
                };
            }
        };
        let note = after_login(&self.ops, &self.http, &finished.org_id, &finished.namespace)
            .await
            .err();
        let state = query.state.unwrap_or_default();
        self.oauth.settle_login(&state, Ok(()), note.clone()).await;
        self.settled.notify_waiters();
        tracing::info!(namespace = %finished.namespace, "an OAuth login completed");
        CallbackPage {
            ok: true,
            message: match note {
                None => format!(
                    "{} is connected; you can close this tab.",
                    finished.namespace
                ),
                Some(note) => format!("{} is connected, but {note}", finished.namespace),
            },
        }
    }
}

impl OAuthCallbacks for Callbacks {
    fn finish(&self, query: CallbackQuery) -> BoxFuture<'_, CallbackPage> {
        Box::pin(self.complete(query))
    }

    fn client_metadata(&self) -> Option<serde_json::Value> {
        let (url, redirect_uri) = self.metadata.as_ref()?;
        Some(executor_oauth::client_metadata_document(url, redirect_uri))
    }
}

/// After a login: an MCP server's tools, listed with the new token (they
/// were unknown while it needed a login). Err says why not, for a note.
async fn after_login(
    ops: &Operations,
    http: &HttpClient,
    org_id: &str,
    namespace: &str,
) -> Result<(), String> {
    let records = ops
        .store()
        .list_integrations(org_id, true)
        .await
        .map_err(|e| e.to_string())?;
    let Some(record) = records.into_iter().find(|r| r.namespace == namespace) else {
        return Ok(());
    };
    if record.integration_kind() != Ok(IntegrationKind::Mcp) {
        return Ok(());
    }
    let endpoint = executor_upstream::load(&record.document)?.endpoint;
    ops.sync_mcp(org_id, namespace, &endpoint, http)
        .await
        .map(|_| ())
        .map_err(|e| format!("its tools could not be listed: {e}"))
}

/// What a login is for, from the integration's stored record.
async fn login_target(store: &dyn Store, org_id: &str, namespace: &str) -> AnyResult<LoginTarget> {
    let records = store.list_integrations(org_id, true).await?;
    let record = records
        .into_iter()
        .find(|r| r.namespace == namespace)
        .ok_or_else(|| format!("no integration named {namespace:?}: add it first"))?;
    let resource = match record.integration_kind() {
        Ok(IntegrationKind::Mcp) => {
            let (url, challenge) = executor_upstream::login_resource(&record.document)?
                .ok_or_else(|| format!("{namespace} is a stdio MCP server: it has no login"))?;
            Resource::Mcp {
                url,
                challenge: challenge.as_deref().and_then(Challenge::parse),
            }
        }
        Ok(IntegrationKind::OpenApi) => {
            let stored = executor_openapi::load(&record.document)
                .map_err(|e| format!("{namespace} cannot be logged in to: {e}"))?;
            let url = record.base_url.clone().ok_or_else(|| {
                format!("{namespace} has no base URL: add it again with --base-url")
            })?;
            Resource::Api {
                url,
                declared: declared_oauth(&stored.auth_methods),
                probe_body: None,
            }
        }
        Ok(IntegrationKind::Graphql) => Resource::Api {
            url: record
                .base_url
                .clone()
                .ok_or_else(|| format!("{namespace} has no endpoint"))?,
            declared: Declared::default(),
            probe_body: Some(r#"{"query":"{ __typename }"}"#.into()),
        },
        Err(e) => return Err(format!("{namespace} cannot be logged in to: {e}").into()),
    };
    Ok(LoginTarget {
        org_id: org_id.to_string(),
        namespace: namespace.to_string(),
        resource,
    })
}

/// What an OpenAPI document's first OAuth scheme declares.
fn declared_oauth(methods: &[executor_openapi::AuthMethod]) -> Declared {
    let Some(executor_openapi::AuthMethod::OAuth2 {
        flows,
        openid_connect_url,
        required_scopes,
        ..
    }) = methods
        .iter()
        .find(|m| matches!(m, executor_openapi::AuthMethod::OAuth2 { .. }))
    else {
        return Declared::default();
    };
    let flows = flows.clone().unwrap_or_default();
    let code = flows.authorization_code.unwrap_or_default();
    Declared {
        authorization_url: code.authorization_url,
        token_url: code.token_url,
        client_credentials_token_url: flows.client_credentials.and_then(|f| f.token_url),
        openid_connect_url: openid_connect_url.clone(),
        scopes: required_scopes.clone(),
    }
}

/// Who completes the login: this command on its own listener, or the
/// server already listening there.
enum Completer {
    Here(TcpListener),
    Server,
}

pub(crate) async fn login(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    args: LoginArgs,
) -> AnyResult<()> {
    let ops = Arc::new(crate::wiring::command_operations(
        store.clone(),
        global,
        true,
    )?);
    let org_id = resolve_actor(&ops, &args.org).await?.org_id;
    let namespace = args.namespace.clone();
    let target = login_target(store.as_ref(), &org_id, &namespace).await?;
    let client_secret = if args.client_secret_stdin {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| format!("cannot read the client secret from standard input: {e}"))?;
        let secret = SecretString::from(text.trim_end_matches(['\n', '\r']).to_string());
        if secret.expose().is_empty() {
            return Err("the client secret is empty".into());
        }
        Some(secret)
    } else {
        None
    };
    let key = Arc::new(crate::wiring::load_secret_key(global)?);
    let http = Arc::new(HttpClient::new(HttpConfig {
        allow_local_network: args.local_network.allowed,
        ..HttpConfig::default()
    })?);
    let oauth = Arc::new(OAuth::new(store.clone(), key.clone(), (*http).clone()));
    let (completer, public_url) = completer(&args).await?;
    let callbacks = Arc::new(Callbacks::new(
        oauth.clone(),
        ops.clone(),
        http.clone(),
        &args.public,
        &public_url,
    ));
    let options = LoginOptions {
        client_id: args.client_id.clone(),
        client_secret,
        scopes: args.scopes.clone(),
        flow: args.flow.map(|f| match f {
            LoginFlow::AuthorizationCode => Flow::AuthorizationCode,
            LoginFlow::ClientCredentials => Flow::ClientCredentials,
        }),
        redirect_uri: format!("{public_url}/oauth/callback"),
        client_metadata_url: client_metadata_url(&args.public, &public_url),
        issuer: args.issuer.clone(),
        resource: args.resource.clone(),
    };
    match oauth.start_login(&target, options).await? {
        Started::Done(_) => {
            if let Err(note) = after_login(&ops, &http, &org_id, &namespace).await {
                eprintln!("note: {namespace} is connected, but {note}");
            }
        }
        Started::Browser {
            authorization_url,
            state_hash,
        } => {
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let settled = callbacks.settled.clone();
            let serving = match completer {
                Completer::Here(listener) => Some(tokio::spawn(executor_wire::serve_oauth(
                    listener,
                    callbacks,
                    async {
                        let _ = stopped.await;
                    },
                ))),
                Completer::Server => None,
            };
            println!("{authorization_url}");
            let _ = std::io::stdout().flush();
            eprintln!(
                "Open the URL above in a browser to log in to {namespace}; waiting up to {} s",
                args.timeout
            );
            if !args.no_browser {
                open_browser(&authorization_url);
            }
            let timeout = Duration::from_secs(args.timeout);
            let waited = wait_for_outcome(&oauth, &state_hash, &settled, timeout).await;
            let _ = stop.send(());
            if let Some(serving) = serving {
                let _ = serving.await;
            }
            if let Some(note) = waited? {
                eprintln!("note: {namespace} is connected, but {note}");
            }
        }
    }
    print_status(store.as_ref(), &org_id, &namespace).await
}

/// Binds `--listen` to serve the callback, or finds the server there.
/// A public URL on another host is served by the server behind it.
async fn completer(args: &LoginArgs) -> AnyResult<(Completer, String)> {
    let loopback_public = args.public.public_url.as_deref().is_none_or(|url| {
        url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| matches!(h, "localhost" | "127.0.0.1" | "[::1]"))
            })
            .unwrap_or(false)
    });
    let listen: SocketAddr = args
        .listen
        .parse()
        .map_err(|_| format!("--listen {:?} is not an address:port", args.listen))?;
    if !loopback_public {
        return Ok((Completer::Server, public_url(&args.public, listen)));
    }
    match TcpListener::bind(listen).await {
        Ok(listener) => {
            let bound = listener.local_addr()?;
            Ok((Completer::Here(listener), public_url(&args.public, bound)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            if server_is_healthy(listen).await {
                Ok((Completer::Server, public_url(&args.public, listen)))
            } else {
                Err(format!(
                    "{listen} is taken by something that is not an executor server; \
                     pass --listen with a free address (127.0.0.1:0 picks one)"
                )
                .into())
            }
        }
        Err(e) => Err(format!("cannot listen on {listen} for the OAuth callback: {e}").into()),
    }
}

/// `GET /healthz` answers `ok`: an executor server (or another login)
/// listens there and completes logins.
async fn server_is_healthy(addr: SocketAddr) -> bool {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let request = format!("GET /healthz HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.take(4096).read_to_end(&mut answer).await.ok()?;
        let text = String::from_utf8_lossy(&answer);
        let status_ok = text.split(' ').nth(1) == Some("200");
        Some(text.starts_with("HTTP/1.") && status_ok && text.trim_end().ends_with("ok"))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// Polls the pending login until it is settled: Ok(note) or its error.
async fn wait_for_outcome(
    oauth: &OAuth,
    state_hash: &str,
    settled_here: &tokio::sync::Notify,
    timeout: Duration,
) -> AnyResult<Option<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        // Registered before the read, so a completion in between still wakes us.
        let woken = settled_here.notified();
        if let Some(outcome) = oauth.login_outcome(state_hash).await? {
            return outcome.map_err(|e| format!("the login failed: {e}").into());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no browser completed the login within {} s",
                timeout.as_secs()
            )
            .into());
        }
        tokio::select! {
            _ = woken => {}
            _ = tokio::time::sleep(OUTCOME_POLL) => {}
        }
    }
}

/// Opens the URL where a person is at a graphical session; the URL is
/// printed either way.
fn open_browser(url: &str) {
    use std::io::IsTerminal as _;
    let graphical = std::env::var_os("DISPLAY").is_some()
        || std::env::var_os("WAYLAND_DISPLAY").is_some()
        || cfg!(target_os = "macos");
    if !graphical || !std::io::stderr().is_terminal() {
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// `NS  oauth  ready  scopes=…  expires_in=…s`.
async fn print_status(store: &dyn Store, org_id: &str, namespace: &str) -> AnyResult<()> {
    let record = store
        .get_connection(org_id, namespace)
        .await?
        .filter(|c| c.kind == CredentialKind::OAuth)
        .ok_or("the login completed but no OAuth connection was saved")?;
    let grant = Grant::from_record(&record)?;
    println!("{namespace}\toauth\t{}", grant.describe(now_ms()));
    Ok(())
}
