//! Why a session with an upstream could not be opened: the one error of
//! every transport (`connect.rs`, `sse.rs`) and of the pool that leases
//! sessions; and [`GuardRefusal`], how a transport tells that the outbound
//! guard refused one of its requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use executor_outbound::{HttpFailure, is_local_network_refusal};
use reqwest::Url;

/// Why a session could not be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// 401/403 with an OAuth challenge (the `WWW-Authenticate` text): a
    /// login is needed (SPEC §8), or the token of one must be renewed.
    NeedsLogin(Option<String>),
    /// The server refused the credential without a challenge.
    Refused(String),
    /// It could not be started or reached, or did not speak MCP.
    Unavailable(String),
    /// The upstream's address was refused before anything reached it: not
    /// an http(s) URL, or on a local network this server may not call (the
    /// outbound guard). The failure as the outbound path shaped it for the
    /// agent, retryable only as it says: the same address is refused again.
    Target(HttpFailure),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NeedsLogin(_) => f.write_str("the server asks for an OAuth login"),
            OpenError::Refused(why) | OpenError::Unavailable(why) => f.write_str(why),
            OpenError::Target(failure) => f.write_str(&failure.message),
        }
    }
}

/// Noted by a session's HTTP transport when the outbound guard refused one
/// of its requests: the upstream's host resolved only to local addresses
/// (at the session's start, or later, when its DNS changed). rmcp keeps a
/// transport's error only as text — `StreamableHttpError::Client` names no
/// source, and its worker hands the opener the error's `Debug` form — so
/// the refusal is noted where the typed `reqwest::Error` is still at hand
/// (`http.rs`, `sse.rs`), and read by whoever sees the session fail.
#[derive(Clone, Debug)]
pub(crate) struct GuardRefusal {
    /// The upstream's host, as the agent's message names it.
    host: Arc<str>,
    refused: Arc<AtomicBool>,
}

impl GuardRefusal {
    /// For a session with the upstream at `url`.
    pub fn new(url: &str) -> Self {
        let host = Url::parse(url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_string))
            .unwrap_or_default();
        GuardRefusal {
            host: host.into(),
            refused: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Notes `error` when it is the guard's refusal.
    pub fn note(&self, error: &reqwest::Error) {
        if is_local_network_refusal(error) {
            self.refused.store(true, Ordering::Relaxed);
        }
    }

    /// The refusal as the agent sees it, once one was noted.
    pub fn failure(&self) -> Option<HttpFailure> {
        self.refused
            .load(Ordering::Relaxed)
            .then(|| HttpFailure::local_network(&self.host))
    }
}
