//! OAuth logins (SPEC §9): `executor connections login`, and the callback
//! that completes a login, served by `executor serve` or, when no server
//! runs, by the login command itself on `--listen`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_oauth::OAuth;
use executor_ops::{
    Actor, CallbackParams, LoginCallback, LoginStarted, LoginState, Operations, StartLogin,
};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::secrets::SecretString;
use executor_store::{PUBLIC_URL_ANNOUNCEMENT, Store};
use executor_wire::{CallbackPage, CallbackQuery, OAuthCallbacks};
use futures::future::BoxFuture;
use tokio::net::TcpListener;

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

/// Where logins started with these options come back.
pub(crate) fn login_callback(public: &PublicOpts, public_url: &str) -> LoginCallback {
    LoginCallback::at(public_url, public.oauth_client_metadata_url.clone())
}

/// What completes a login in this process: the code exchange, then the
/// integration's tools listed with the new token.
pub(crate) struct Callbacks {
    pub oauth: Arc<OAuth>,
    pub ops: Arc<Operations>,
    pub http: Arc<HttpClient>,
    pub callback: LoginCallback,
    /// Woken when a login completes here (the login command waits on it).
    pub settled: Arc<tokio::sync::Notify>,
}

impl Callbacks {
    pub(crate) fn new(
        oauth: Arc<OAuth>,
        ops: Arc<Operations>,
        http: Arc<HttpClient>,
        callback: LoginCallback,
    ) -> Self {
        Callbacks {
            oauth,
            ops,
            http,
            callback,
            settled: Arc::new(tokio::sync::Notify::new()),
        }
    }

    async fn complete(&self, query: CallbackQuery) -> CallbackPage {
        let params = CallbackParams {
            code: query.code.as_deref(),
            state: query.state.as_deref(),
            iss: query.iss.as_deref(),
            error: query.error.as_deref(),
        };
        let finished = self.ops.finish_login(&self.oauth, &self.http, params).await;
        self.settled.notify_waiters();
        match finished {
            Ok(finished) => {
                tracing::info!(namespace = %finished.namespace, "an OAuth login completed");
                CallbackPage {
                    ok: true,
                    message: match finished.note {
                        None => format!(
                            "{} is connected; you can close this tab.",
                            finished.namespace
                        ),
                        Some(note) => format!("{} is connected, but {note}", finished.namespace),
                    },
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "an OAuth login failed at its callback");
                CallbackPage {
                    ok: false,
                    message: format!("The login failed: {e}"),
                }
            }
        }
    }
}

impl OAuthCallbacks for Callbacks {
    fn finish(&self, query: CallbackQuery) -> BoxFuture<'_, CallbackPage> {
        Box::pin(self.complete(query))
    }

    fn client_metadata(&self) -> Option<serde_json::Value> {
        let url = self.callback.client_metadata_url.as_ref()?;
        Some(executor_oauth::client_metadata_document(
            url,
            &self.callback.redirect_uri,
        ))
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
    let actor = resolve_actor(&ops, &args.org).await?;
    let namespace = args.namespace.clone();
    let client_secret = if args.client_secret_stdin {
        Some(read_client_secret()?)
    } else {
        None
    };
    let http = Arc::new(HttpClient::new(HttpConfig {
        allow_local_network: args.local_network.allowed,
        ..HttpConfig::default()
    })?);
    let (completer, public_url) = completer(store.as_ref(), &args).await?;
    let callback = login_callback(&args.public, &public_url);
    let ask = StartLogin {
        namespace: namespace.clone(),
        client_id: args.client_id.clone(),
        client_secret,
        scopes: args.scopes.clone(),
        flow: args.flow.map(|f| match f {
            LoginFlow::AuthorizationCode => executor_ops::LoginFlow::AuthorizationCode,
            LoginFlow::ClientCredentials => executor_ops::LoginFlow::ClientCredentials,
        }),
        issuer: args.issuer.clone(),
        resource: args.resource.clone(),
        allow_local_network: args.local_network.allowed,
    };
    match ops.start_login(&actor, ask, Some(&callback)).await? {
        LoginStarted::Connected { note, .. } => {
            if let Some(note) = note {
                eprintln!("note: {namespace} is connected, but {note}");
            }
        }
        LoginStarted::Browser {
            authorization_url,
            login_id,
        } => {
            let key = Arc::new(crate::wiring::load_secret_key(global)?);
            let oauth = Arc::new(OAuth::new(store.clone(), key, (*http).clone()));
            let callbacks = Arc::new(Callbacks::new(oauth, ops.clone(), http, callback));
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
                "Open the URL above in a browser to log in to {namespace} (the server at \
                 {public_url} completes it); waiting up to {} s",
                args.timeout
            );
            if !args.no_browser {
                open_browser(&authorization_url);
            }
            let timeout = Duration::from_secs(args.timeout);
            let waited =
                wait_for_outcome(&ops, &actor, &namespace, &login_id, &settled, timeout).await;
            let _ = stop.send(());
            if let Some(serving) = serving {
                let _ = serving.await;
            }
            if let Some(note) = waited? {
                eprintln!("note: {namespace} is connected, but {note}");
            }
        }
    }
    let grant = ops.describe_grant(&actor, &namespace).await?;
    println!("{namespace}\toauth\t{grant}");
    Ok(())
}

fn read_client_secret() -> AnyResult<SecretString> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| format!("cannot read the client secret from standard input: {e}"))?;
    let secret = SecretString::from(text.trim_end_matches(['\n', '\r']).to_string());
    if secret.expose().is_empty() {
        return Err("the client secret is empty".into());
    }
    Ok(secret)
}

/// Where a login command listens when nothing else is said.
const DEFAULT_LISTEN: &str = "127.0.0.1:4788";

/// Who completes the login and at which public URL: the server running on
/// this store (the URL it announced, when it answers there), else this
/// command on `--listen` or the server found there. A public URL on another
/// host is served by the server behind it.
async fn completer(store: &dyn Store, args: &LoginArgs) -> AnyResult<(Completer, String)> {
    if args.public.public_url.is_none() && args.listen.is_none() {
        let announced = store.announced(PUBLIC_URL_ANNOUNCEMENT).await?;
        if let Some(url) = announced
            && server_answers(&url).await
        {
            return Ok((Completer::Server, url));
        }
    }
    let loopback_public = args.public.public_url.as_deref().is_none_or(|url| {
        url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| matches!(h, "localhost" | "127.0.0.1" | "[::1]"))
            })
            .unwrap_or(false)
    });
    let listen_text = args.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
    let listen: SocketAddr = listen_text
        .parse()
        .map_err(|_| format!("--listen {listen_text:?} is not an address:port"))?;
    if !loopback_public {
        return Ok((Completer::Server, public_url(&args.public, listen)));
    }
    match TcpListener::bind(listen).await {
        Ok(listener) => {
            let bound = listener.local_addr()?;
            Ok((Completer::Here(listener), public_url(&args.public, bound)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            if server_answers(&format!("http://{listen}")).await {
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

/// `GET <url>/healthz` answers `ok`: an executor server (or another login)
/// listens there and completes logins.
async fn server_answers(url: &str) -> bool {
    let Ok(client) = HttpClient::new(HttpConfig {
        allow_local_network: true,
        ..HttpConfig::default()
    }) else {
        return false;
    };
    let health = format!("{}/healthz", url.trim_end_matches('/'));
    let asked = client.fetch_document(&health, 64);
    matches!(
        tokio::time::timeout(Duration::from_secs(2), asked).await,
        Ok(Ok(body)) if body.trim() == "ok"
    )
}

/// Polls the pending login until it is settled: Ok(note) or its error.
async fn wait_for_outcome(
    ops: &Operations,
    actor: &Actor,
    namespace: &str,
    login_id: &str,
    settled_here: &tokio::sync::Notify,
    timeout: Duration,
) -> AnyResult<Option<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        // Registered before the read, so a completion in between still wakes us.
        let woken = settled_here.notified();
        match ops.login_state(actor, namespace, login_id).await? {
            LoginState::Pending => {}
            LoginState::Connected { note } => return Ok(note),
            LoginState::Failed { message } => {
                return Err(format!("the login failed: {message}").into());
            }
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
