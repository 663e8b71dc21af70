//! The accept loop: HTTP/1 connections under the read timeouts and the
//! connection cap of SPEC §12.
//!
//! hyper closes a connection whose request headers have not all arrived
//! within the header read timeout — counted from the moment it waits for a
//! request, so a connection that sends nothing at all, or sits idle between
//! keep-alive requests, is closed too. The body timeout is the handler's
//! (`read_body`). The cap keeps descriptors for the rest of the process: at
//! the cap the loop stops accepting, new clients wait in the kernel's
//! backlog, and the timeouts free slots held by clients that send nothing.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use std::time::{Duration, Instant};
use tower::ServiceExt as _;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::app::App;
use crate::http::router;

/// Descriptors left for everything but client connections (the store's
/// files, outbound calls of integrations, the runtime's own): a quarter of
/// the limit, and never fewer than this.
const MIN_RESERVED_DESCRIPTORS: usize = 64;
/// The derived connection cap is never below this, so a tiny descriptor
/// limit still serves someone.
const MIN_CONNECTIONS: usize = 16;
/// The derived cap when the descriptor limit is unknown or unbounded.
const FALLBACK_CONNECTIONS: usize = 16 * 1024;
/// Pause after a failed accept that is not the peer's fault (out of
/// descriptors or memory), so the loop does not spin on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);
/// At most one "connection cap reached" warning this often.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Serves until `shutdown` resolves, then stops accepting, lets every open
/// connection finish its request in flight (idle ones close at once) and
/// returns once all are closed. Accepted sockets get TCP_NODELAY (SSE
/// answers are several small writes).
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cap = app.config.max_connections.unwrap_or_else(connection_cap);
    tracing::info!(
        max_connections = cap,
        header_read_timeout_ms = app.config.header_read_timeout.as_millis() as u64,
        body_read_timeout_ms = app.config.body_read_timeout.as_millis() as u64,
        "accepting connections"
    );
    let mut http = http1::Builder::new();
    let header_timeout = app.config.header_read_timeout;
    // Zero turns the timeout off (hyper would otherwise close every
    // connection at once).
    http.timer(TokioTimer::new())
        .header_read_timeout((!header_timeout.is_zero()).then_some(header_timeout));
    let router = router(app);
    // One permit per open connection; a connection's task holds its permit
    // until the connection closes.
    let permits = Arc::new(Semaphore::new(cap));
    let graceful = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    let mut warned: Option<Instant> = None;
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if warned.is_none_or(|t| t.elapsed() >= CAP_WARNING_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(
                        max_connections = cap,
                        "connection cap reached; new connections wait until one closes"
                    );
                }
                tokio::select! {
                    permit = permits.clone().acquire_owned() => {
                        permit.expect("the connection semaphore is never closed")
                    }
                    () = &mut shutdown => break,
                }
            }
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        // The peer's address rides on each request (`ConnectInfo`), for
        // limits per source address (client registration).
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            },
        ));
        let connection = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
        // Detached, but not lost: `graceful` tracks the connection, and
        // shutdown below waits for it.
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The default connection cap: the descriptor limit less a reserve.
fn connection_cap() -> usize {
    match descriptor_limit() {
        Some(limit) => {
            let reserve = (limit / 4).max(MIN_RESERVED_DESCRIPTORS);
            limit.saturating_sub(reserve).max(MIN_CONNECTIONS)
        }
        None => FALLBACK_CONNECTIONS,
    }
}

/// The soft limit on open descriptors, when there is a finite one.
#[cfg(unix)]
fn descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY)
        .then(|| usize::try_from(limit.rlim_cur).ok())
        .flatten()
        .map(|n| n.min(FALLBACK_CONNECTIONS * 64))
}

#[cfg(not(unix))]
fn descriptor_limit() -> Option<usize> {
    None
}

/// A connection reset before it was accepted is the peer's business; any
/// other failure (out of descriptors or memory) is logged and waited out.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}
