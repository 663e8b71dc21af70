//! The authorization server's state, settings and routes (SPEC §4).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use executor_store::Store;

use crate::cimd::{DocumentFetcher, MetadataClients};
use crate::endpoints;
use crate::origin::PublicOrigin;

/// How long a code may wait for its exchange (SPEC §4: at most 5 min).
pub const CODE_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a rotated refresh token is still accepted (SPEC §4).
pub const REFRESH_GRACE: Duration = Duration::from_secs(60);
/// How often lapsed authorization records are deleted.
pub const GC_EVERY: Duration = Duration::from_secs(3600);
/// How often a server asks whether the clean-up is its turn.
const GC_CHECK_EVERY: Duration = Duration::from_secs(60);

/// The authorization server's settings; [`Default`] is SPEC §4's.
#[derive(Debug, Clone)]
pub struct AuthzConfig {
    pub origin: PublicOrigin,
    /// `--oauth-access-token-ttl` (1 h).
    pub access_token_ttl: Duration,
    /// A refresh token unused this long lapses (30 days).
    pub refresh_token_ttl: Duration,
    /// A grant lapses this long after consent (90 days).
    pub grant_ttl: Duration,
    /// How long a rotated refresh token is still accepted ([`REFRESH_GRACE`]).
    pub refresh_grace: Duration,
    /// Registrations one source address may make per minute.
    pub registrations_per_address: u32,
    /// Registrations the server takes per minute in all.
    pub registrations_total: u32,
    /// `--oauth-cimd`: client ID metadata documents are fetched and
    /// advertised (when the server is given a fetcher).
    pub metadata_documents: bool,
}

impl AuthzConfig {
    pub fn new(origin: PublicOrigin) -> Self {
        AuthzConfig {
            origin,
            access_token_ttl: Duration::from_secs(3600),
            refresh_token_ttl: Duration::from_secs(30 * 24 * 3600),
            grant_ttl: Duration::from_secs(90 * 24 * 3600),
            refresh_grace: REFRESH_GRACE,
            registrations_per_address: 30,
            registrations_total: 300,
            metadata_documents: true,
        }
    }
}

/// The scopes this server knows; `mcp` is always granted.
pub const SCOPES: [&str; 2] = ["mcp", "offline_access"];

/// Shared by every route.
pub struct AuthorizationServer {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: AuthzConfig,
    /// Clients described by metadata documents; None when they are off.
    pub(crate) documents: Option<MetadataClients>,
    registrations: Mutex<RegistrationWindow>,
}

impl AuthorizationServer {
    /// `fetcher` fetches client ID metadata documents; without one (or
    /// with `config.metadata_documents` off) they are neither fetched nor
    /// advertised.
    pub fn new(
        store: Arc<dyn Store>,
        config: AuthzConfig,
        fetcher: Option<Arc<dyn DocumentFetcher>>,
    ) -> Arc<Self> {
        let documents = fetcher
            .filter(|_| config.metadata_documents)
            .map(MetadataClients::new);
        Arc::new(AuthorizationServer {
            store,
            config,
            documents,
            registrations: Mutex::new(RegistrationWindow::default()),
        })
    }

    pub fn config(&self) -> &AuthzConfig {
        &self.config
    }

    /// The browser's live console session, if signed in; a store failure
    /// is the page to answer.
    pub(crate) async fn session(
        &self,
        headers: &axum::http::HeaderMap,
    ) -> Result<Option<crate::SignedIn>, Response> {
        crate::signin::signed_in(self.store.as_ref(), headers, self.config.origin.is_https())
            .await
            .map_err(|e| crate::pages::unavailable_page("read a console session", &e))
    }

    /// Deletes lapsed codes, clients, tokens, grants, links and console
    /// sessions every [`GC_EVERY`], once per interval among all servers on
    /// the store (`holder` names this one), until `stop` turns true.
    pub async fn run_gc(
        self: Arc<Self>,
        holder: String,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(GC_CHECK_EVERY) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let now = executor_store::now_ms();
            match self
                .store
                .claim_job("gc_oauth", &holder, GC_EVERY.as_millis() as i64, now)
                .await
            {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "could not claim the OAuth clean-up");
                    continue;
                }
            }
            let idle_before = now - crate::signin::IDLE_TIMEOUT.as_millis() as i64;
            let oauth = self.store.gc_oauth(now).await;
            let sign_in = self.store.gc_sign_in(now, idle_before).await;
            match (oauth, sign_in) {
                (Ok(a), Ok(b)) => tracing::debug!(deleted = a + b, "OAuth clean-up"),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "the OAuth clean-up failed; it runs again later")
                }
            }
        }
    }

    /// Whether one more registration from `address` fits the limits; it is
    /// counted when it does.
    pub(crate) fn admit_registration(&self, address: Option<IpAddr>) -> bool {
        let Ok(mut window) = self.registrations.lock() else {
            return false;
        };
        window.admit(
            address,
            self.config.registrations_per_address,
            self.config.registrations_total,
        )
    }
}

/// Registrations counted over the current minute.
#[derive(Default)]
struct RegistrationWindow {
    started: Option<Instant>,
    total: u32,
    by_address: HashMap<IpAddr, u32>,
}

/// Most addresses counted at once; past it the window is full for all.
const MAX_COUNTED_ADDRESSES: usize = 10_000;

impl RegistrationWindow {
    fn admit(&mut self, address: Option<IpAddr>, per_address: u32, total: u32) -> bool {
        let now = Instant::now();
        if self
            .started
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(60))
        {
            *self = RegistrationWindow {
                started: Some(now),
                ..RegistrationWindow::default()
            };
        }
        if self.total >= total {
            return false;
        }
        if let Some(address) = address {
            if self.by_address.len() >= MAX_COUNTED_ADDRESSES
                && !self.by_address.contains_key(&address)
            {
                return false;
            }
            let count = self.by_address.entry(address).or_default();
            if *count >= per_address {
                return false;
            }
            *count += 1;
        }
        self.total += 1;
        true
    }
}

/// The authorization server's routes: the RFC 8414 document, `/register`,
/// `/authorize`, `/token` and `/revoke` (`--oauth on`).
pub fn router(server: Arc<AuthorizationServer>) -> Router {
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(endpoints::metadata::metadata).options(preflight),
        )
        .route(
            "/.well-known/oauth-authorization-server/{*path}",
            get(endpoints::metadata::metadata).options(preflight),
        )
        .route(
            "/register",
            post(endpoints::register::register).options(preflight),
        )
        .route(
            "/authorize",
            get(endpoints::authorize::ask).post(endpoints::authorize::decide),
        )
        .route("/token", post(endpoints::token::token).options(preflight))
        .route(
            "/revoke",
            post(endpoints::revoke::revoke).options(preflight),
        )
        .with_state(server)
}

/// Browser sign-in, `/console/login` and `/console/logout` (SPEC §14):
/// the consent page's and the console's, so served whether or not the
/// OAuth endpoints are.
pub fn sign_in_router(server: Arc<AuthorizationServer>) -> Router {
    Router::new()
        .route(
            "/console/login",
            get(endpoints::signin::login_page).post(endpoints::signin::login),
        )
        .route("/console/logout", post(endpoints::signin::logout))
        .with_state(server)
}

/// CORS for a cross-origin reader without credentials (SPEC §4: the
/// documents, `/register`, `/token`, `/revoke`).
pub(crate) fn open_cors(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("www-authenticate"),
    );
    response
}

async fn preflight() -> Response {
    let mut response = open_cors(StatusCode::NO_CONTENT.into_response());
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_are_bounded_per_address_and_in_total() {
        let mut window = RegistrationWindow::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!((0..3).all(|_| window.admit(Some(a), 3, 5)));
        assert!(!window.admit(Some(a), 3, 5), "a fourth from one address");
        assert!(window.admit(Some(b), 3, 5));
        assert!(window.admit(None, 3, 5));
        assert!(!window.admit(Some(b), 3, 5), "the total is reached");
    }
}
