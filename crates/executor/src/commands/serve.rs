//! `executor serve`: wires the store, engine, integrations, sessions and
//! the wire into a server, owns its background tasks, and shuts it down
//! without losing work (SPEC §11).

use std::sync::Arc;
use std::time::Duration;

use executor_api::ApiState;
use executor_mcp::{McpServer, RequestStateKey};
use executor_ops::{SessionControl, SessionFuture};
use executor_sessions::Sessions;
use executor_store::tokens::TokenCache;
use executor_store::{PUBLIC_URL_ANNOUNCEMENT, Store};
use executor_wire::App;

use crate::AnyResult;
use crate::cli::{GlobalOpts, ServeOpts};
use crate::wiring::{ClientDocuments, operations_of, wire_engine};

/// What the key that signs 2026-07-28 `requestState`s is derived for.
const REQUEST_STATE_KEY_PURPOSE: &str = "executor/request-state/v1";

pub(crate) async fn serve(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: ServeOpts,
) -> AnyResult<()> {
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {:?} (--listen, EXECUTOR_LISTEN): {e}; give a free HOST:PORT, \
                 e.g. 127.0.0.1:4788",
                opts.listen
            )
        })?;
    let local = listener.local_addr()?;
    let public_url = super::login::public_url(&opts.public, local);
    let wired = wire_engine(store.clone(), global, &opts.engine, Some(&public_url))?;
    let outbound = &wired.outbound;
    // Every node derives the same key from the store's secret key, so a
    // retry of an `input_required` result may reach any of them.
    let state_key = crate::wiring::load_secret_key(global)?.derive(REQUEST_STATE_KEY_PURPOSE);
    let server = Arc::new(
        McpServer::new(wired.engine.clone()).with_state_key(RequestStateKey::new(*state_key)),
    );
    let login_callback = super::login::login_callback(&opts.public, &public_url);
    let node_url = opts.node_url(local, global.shared_store())?;
    let sessions = Sessions::new(store.clone(), server, opts.sessions(node_url));
    let ops = Arc::new(operations_of(
        store.clone(),
        &wired,
        &opts.engine,
        opts.engine.api_surface(),
        Some(login_callback.clone()),
        Some(Arc::new(LiveSessions(sessions.clone()))),
    ));
    // `connections login` on this store sends its browser here.
    if let Err(e) = store.announce(PUBLIC_URL_ANNOUNCEMENT, &public_url).await {
        tracing::warn!(error = %e, "could not record this server's public URL in the store");
    }
    // Background loops end when `stop` flips, after the drain; serve awaits them.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut background = vec![
        tokio::spawn(sessions.clone().run_maintenance(stopped.clone())),
        tokio::spawn(
            sessions
                .server()
                .engine()
                .clone()
                .apply_posted_decisions(stopped.clone()),
        ),
    ];
    let callbacks = super::login::Callbacks::new(
        outbound.oauth.clone(),
        ops.clone(),
        outbound.http.clone(),
        login_callback,
    );
    let tokens: Arc<TokenCache> = Default::default();
    // Sign-in serves the console and the consent page alike: the
    // authorization server always runs; `--oauth off` leaves its OAuth
    // endpoints out.
    let documents = ClientDocuments::fetcher(opts.engine.client_documents())?;
    let authz =
        executor_authz::AuthorizationServer::new(store.clone(), opts.authz(local), Some(documents));
    let holder = executor_store::tokens::random_id(8);
    background.push(tokio::spawn(authz.clone().run_gc(holder, stopped)));
    let api = executor_api::router(ApiState {
        ops: ops.clone(),
        tokens: tokens.clone(),
        limits: Arc::new(opts.api_rate_limits()),
        streams: Default::default(),
        draining: sessions.draining(),
        public: opts.public_origin(local),
    });
    let console = executor_console::router(executor_console::ConsoleState {
        ops,
        public: opts.public_origin(local),
        draining: sessions.draining(),
        live: Default::default(),
    });
    let mut extra = api
        .merge(executor_authz::sign_in_router(authz.clone()))
        .merge(console);
    if opts.oauth_on() {
        extra = extra.merge(executor_authz::router(authz));
    }
    let app = App {
        sessions,
        oauth: Some(Arc::new(callbacks)),
        in_flight: executor_wire::InFlight::default(),
        tokens,
        config: Arc::new(opts.wire(local)),
        extra: Some(extra),
    };
    tracing::info!(%local, "executor listening; MCP at http://{local}/mcp");
    // SPEC §11: on SIGTERM, drain: `/healthz` turns 503, new `/mcp`
    // requests get 503 + Retry-After, standalone GET streams end, and
    // in-flight requests — JSON or SSE — finish and are recorded, up to the
    // drain deadline. Then the listener closes, runtimes are disposed
    // (records stay) and the process exits. A second signal exits at once.
    let sessions = app.sessions.clone();
    let in_flight = app.in_flight.clone();
    let drain_deadline = opts.drain_deadline();
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

/// The operations' hold on this server's live sessions: an operator's
/// `DELETE /api/v1/sessions/{id}` ends the session here at once and tells
/// the other nodes (`Sessions::end`).
struct LiveSessions(Sessions);

impl SessionControl for LiveSessions {
    fn terminate<'a>(&'a self, session_id: &'a str) -> SessionFuture<'a> {
        Box::pin(async move { Ok(self.0.end(session_id).await?) })
    }
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
