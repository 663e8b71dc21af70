//! `executor serve`: wires the store, engine, integrations, sessions and
//! the wire into a server, and shuts it down without losing work (SPEC §11).

use std::sync::Arc;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig, ShareLimits};
use executor_integrations::{Credentials, Kinds, StoreCatalogs};
use executor_mcp::McpServer;
use executor_oauth::OAuth;
use executor_outbound::{HttpClient, HttpConfig};
use executor_sandbox::Limits;
use executor_sessions::{Sessions, SessionsConfig};
use executor_store::{LogBounds, Store};
use executor_upstream::{UpstreamSettings, Upstreams};
use executor_wire::{App, HostPolicy, WireConfig};

use crate::AnyResult;
use crate::cli::{EngineOpts, GlobalOpts, ServeOpts};

pub(crate) fn engine(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
) -> AnyResult<Arc<Engine>> {
    Ok(engine_and_outbound(store, global, opts)?.0)
}

/// The engine, and the outbound side its tools call through (for the
/// OAuth callback of `serve`).
pub(crate) fn engine_and_outbound(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
) -> AnyResult<(Arc<Engine>, Outbound)> {
    let limits = Limits {
        timeout: Duration::from_millis(opts.execution_timeout),
        memory_bytes: opts.sandbox_memory_mb.max(1) * 1024 * 1024,
        stack_bytes: opts.sandbox_stack_kb.max(64) * 1024,
        max_log_bytes: opts.max_log_bytes,
        max_result_bytes: opts.max_result_bytes,
        max_calls_in_flight: opts.max_calls_in_flight.max(1),
        max_calls: opts.max_calls_per_execution.max(1),
        backstop_grace: Duration::from_millis(opts.sandbox_backstop),
        max_queued_jobs: opts.max_queued_sandbox_jobs.map(|n| n.max(1)),
    };
    let http = HttpConfig {
        allow_local_network: opts.allow_local_network,
        max_response_bytes: opts.max_upstream_response_bytes.max(1),
        ..HttpConfig::default()
    };
    let upstream = UpstreamSettings {
        allow_stdio: opts.allow_stdio_integrations,
        max_sessions: opts.max_upstream_sessions.max(1),
        ..UpstreamSettings::default()
    };
    let outbound = outbound(store.clone(), global, http)?;
    let catalogs = Arc::new(store_catalogs(store.clone(), &outbound, upstream));
    let engine = Arc::new(Engine::with_catalogs(
        store,
        EngineConfig {
            limits,
            share: ShareLimits::new(opts.max_concurrent_executions, opts.max_org_executions),
            approval_window: Duration::from_millis(opts.approval_window),
            wall_clock: Duration::from_millis(opts.execution_wall_clock.max(1)),
            max_journal_bytes: opts.max_journal_bytes,
            max_tool_path_bytes: opts.max_tool_path_bytes.max(1),
            max_result_text_chars: opts.max_result_text_chars,
            max_emitted_text_chars: opts.max_emitted_text_chars,
            max_approval_preview_chars: opts.max_approval_preview_chars,
        },
        catalogs,
    ));
    Ok((engine, outbound))
}

/// What tool calls go out through: the guarded HTTP client, the org's
/// connections, and the OAuth client that refreshes their tokens.
pub(crate) struct Outbound {
    pub http: Arc<HttpClient>,
    pub credentials: Arc<Credentials>,
    pub oauth: Arc<OAuth>,
}

pub(crate) fn outbound(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    http: HttpConfig,
) -> AnyResult<Outbound> {
    let http = Arc::new(HttpClient::new(http)?);
    let key = Arc::new(crate::load_secret_key(global)?);
    let oauth = Arc::new(OAuth::new(store.clone(), key.clone(), (*http).clone()));
    let credentials = Arc::new(Credentials {
        store,
        key: Some(key),
        oauth: Some(oauth.clone()),
    });
    Ok(Outbound {
        http,
        credentials,
        oauth,
    })
}

/// Org catalogs from the store, with the HTTP client and credentials their
/// tools are invoked with.
pub(crate) fn store_catalogs(
    store: Arc<dyn Store>,
    outbound: &Outbound,
    upstream: UpstreamSettings,
) -> StoreCatalogs {
    let upstreams = Upstreams::new(
        outbound.http.clone(),
        outbound.credentials.clone(),
        store.clone(),
        upstream,
    );
    let kinds = Kinds::new(
        outbound.http.clone(),
        outbound.credentials.clone(),
        upstreams,
    );
    let core = executor_engine::core_tool_entries(store.clone());
    StoreCatalogs::new(store, kinds, core)
}

pub(crate) async fn serve(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: ServeOpts,
) -> AnyResult<()> {
    let (engine, outbound) = engine_and_outbound(store.clone(), global, &opts.engine)?;
    let server = Arc::new(McpServer::new(engine));
    let listener = tokio::net::TcpListener::bind(&opts.listen).await?;
    let local = listener.local_addr()?;
    let node_url = node_url(&opts, local, global.shared_store())?;
    let sessions = Sessions::new(
        store.clone(),
        server,
        SessionsConfig {
            idle_timeout: Duration::from_millis(opts.session_idle_timeout),
            paused_idle_timeout: Duration::from_millis(opts.paused_session_idle_timeout),
            retention: Duration::from_secs(opts.session_retention_days * 24 * 3600),
            max_sessions_per_principal: opts.max_sessions_per_principal,
            max_get_streams_per_session: opts.max_get_streams_per_session,
            busy_ceiling: Duration::from_millis(opts.keep_alive_ceiling),
            replay_window: Duration::from_millis(opts.replay_window),
            sse_replay: LogBounds {
                max_events: opts.sse_replay_events.max(1),
                max_bytes: opts.sse_replay_bytes,
            },
            slow_reader_bytes: opts.slow_reader_bytes,
            node_url: Some(node_url),
            node_lease: Duration::from_millis(opts.node_lease),
            lease_kept: Duration::from_millis(opts.session_lease_kept),
        },
    );
    // Background loops end when `stop` flips, after the drain; serve awaits them.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let background = [
        tokio::spawn(sessions.clone().run_maintenance(stopped.clone())),
        tokio::spawn(
            sessions
                .server()
                .engine()
                .clone()
                .apply_posted_decisions(stopped),
        ),
    ];
    let hosts = match (&opts.allowed_hosts, local.ip().is_loopback()) {
        (Some(list), _) => HostPolicy {
            allowed_hosts: Some(list.clone()),
            allowed_origins: opts.allowed_origins.clone(),
        },
        (None, true) => HostPolicy {
            allowed_origins: opts.allowed_origins.clone(),
            ..HostPolicy::loopback()
        },
        (None, false) => HostPolicy {
            allowed_origins: opts.allowed_origins.clone(),
            ..HostPolicy::open()
        },
    };
    let public_url = crate::login::public_url(&opts.public, local);
    let callbacks = crate::login::Callbacks::new(
        outbound.oauth.clone(),
        store.clone(),
        outbound.credentials.clone(),
        outbound.http.clone(),
        &opts.public,
        &public_url,
    );
    let app = App {
        sessions,
        oauth: Some(Arc::new(callbacks)),
        in_flight: executor_wire::InFlight::default(),
        tokens: Default::default(),
        config: Arc::new(WireConfig {
            hosts,
            cors_origin: opts.cors_origin.clone(),
            max_batch: opts.max_batch,
            header_read_timeout: Duration::from_millis(opts.header_read_timeout),
            body_read_timeout: Duration::from_millis(opts.body_read_timeout),
            max_connections: opts.max_connections,
            metrics_token: opts
                .metrics_token
                .clone()
                .map(executor_wire::MetricsToken::new),
            max_body_bytes: opts.max_body_bytes,
            sse_keepalive: Duration::from_millis(opts.sse_keepalive),
            get_stream_rotation: Duration::from_millis(opts.get_stream_rotation),
            first_event_window: executor_wire::FIRST_EVENT_WINDOW,
        }),
    };
    tracing::info!(%local, "executor listening; MCP at http://{local}/mcp");
    // SPEC §11: on SIGTERM, drain: `/healthz` turns 503, new `/mcp`
    // requests get 503 + Retry-After, standalone GET streams end, and
    // in-flight requests — JSON or SSE — finish and are recorded, up to the
    // drain deadline. Then the listener closes, runtimes are disposed
    // (records stay) and the process exits. A second signal exits at once.
    let sessions = app.sessions.clone();
    let in_flight = app.in_flight.clone();
    let drain_deadline = Duration::from_millis(opts.shutdown_drain_deadline);
    let graceful = {
        let sessions = sessions.clone();
        async move {
            shutdown_signal().await;
            sessions.drain();
            tokio::spawn(async {
                shutdown_signal().await;
                tracing::warn!("second signal: exiting without waiting for in-flight requests");
                std::process::exit(1);
            });
            let left = in_flight.current();
            tracing::info!(in_flight = left, "draining");
            if tokio::time::timeout(drain_deadline, in_flight.idle())
                .await
                .is_err()
            {
                tracing::warn!(
                    in_flight = in_flight.current(),
                    "in-flight requests outlived the shutdown deadline"
                );
            }
        }
    };
    // Once drained, the server stops; connections still open then (a
    // request past the deadline) get a moment, not forever.
    let served = executor_wire::serve(listener, app, graceful);
    tokio::pin!(served);
    tokio::select! {
        result = &mut served => result?,
        _ = async {
            let mut draining = sessions.draining();
            let _ = draining.wait_for(|d| *d).await;
            tokio::time::sleep(drain_deadline + CLOSE_GRACE).await;
        } => tracing::warn!("connections still open after the drain; closing them"),
    }
    stop.send_replace(true);
    for task in background {
        let _ = task.await;
    }
    sessions.dispose_all().await;
    // Last: the store writer commits what the loops and disposals queued.
    if let Err(e) = store.flush().await {
        tracing::error!(error = %e, "the store could not commit its last writes");
    }
    Ok(())
}

/// How long connections may stay open once the drain has ended.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}

/// Where peers reach this node: `--node-url`, else the address it listens
/// on. A node listening on every address has no one address to give, and on
/// a shared store its peers are on other machines: it must be told.
fn node_url(opts: &ServeOpts, local: std::net::SocketAddr, shared: bool) -> AnyResult<String> {
    if let Some(url) = &opts.node_url {
        let url = url.trim_end_matches('/');
        // Nodes talk plain HTTP on the network they share (see forward.rs).
        if !url.starts_with("http://") {
            return Err(format!("--node-url must be an http:// URL, got {url:?}").into());
        }
        return Ok(url.to_string());
    }
    if local.ip().is_unspecified() {
        if shared {
            return Err(format!(
                "listening on {local} with a shared store: set --node-url (EXECUTOR_NODE_URL) to the address the other nodes reach this one at"
            )
            .into());
        }
        // One machine (nodes sharing a SQLite file): loopback reaches it.
        let loopback = if local.is_ipv4() {
            "127.0.0.1"
        } else {
            "[::1]"
        };
        return Ok(format!("http://{loopback}:{}", local.port()));
    }
    Ok(format!("http://{local}"))
}
