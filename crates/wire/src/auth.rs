//! Bearer authentication, on every request (a revoked token stops working
//! at once, also on live sessions), and the operator's token for `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use executor_store::tokens::{self, AuthFailure, TokenCache};
use executor_store::{Principal, Store, now_ms};
use subtle::ConstantTimeEq;

use crate::WireError;

/// Who a request acts for, and the token that says so.
pub struct Authenticated {
    pub principal: Principal,
    /// The token's id, to follow its revocation on a long-lived stream.
    pub token_id: String,
}

/// The token of an `Authorization: Bearer …` header, trimmed.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Authenticates a request's bearer ([`tokens::authenticate`]).
pub async fn authenticate(
    store: &dyn Store,
    cache: &TokenCache,
    headers: &HeaderMap,
    resource_metadata: impl Fn() -> String,
    scope: bool,
) -> Result<Authenticated, WireError> {
    let unauthorized = |rejection| WireError::Unauthorized {
        resource_metadata: resource_metadata(),
        scope,
        rejection,
    };
    let presented = bearer(headers)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthorized(None))?;
    match tokens::authenticate(store, cache, presented, true).await {
        Ok((principal, token_id)) => Ok(Authenticated {
            principal,
            token_id,
        }),
        Err(AuthFailure::Rejected(rejection)) => Err(unauthorized(Some(rejection))),
        Err(AuthFailure::Store(e)) => {
            tracing::error!(error = %e, "token lookup failed");
            Err(WireError::Session(
                executor_sessions::AcquireError::Unavailable,
            ))
        }
    }
}

/// The bearer `/metrics` requires when the operator sets one. Its `Debug`
/// never shows the token.
#[derive(Clone)]
pub struct MetricsToken(String);

impl MetricsToken {
    pub fn new(token: impl Into<String>) -> Self {
        MetricsToken(token.into())
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`. The
    /// digests are compared, in constant time, so neither the content nor
    /// the length of the token shows in the timing.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let presented = bearer(headers).unwrap_or("");
        let (presented, expected) = (tokens::hash(presented), tokens::hash(&self.0));
        bool::from(presented.as_slice().ct_eq(expected.as_slice()))
    }
}

impl std::fmt::Debug for MetricsToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsToken(…)")
    }
}

/// How often an open GET stream checks that its token still holds (SPEC §4:
/// a revoked token's streams close within 5 s).
const TOKEN_RECHECK: Duration = Duration::from_secs(2);

/// Resolves once the token is revoked, expires or disappears; a store that
/// cannot be read keeps the stream (the next request is checked anyway).
pub async fn token_lapsed(store: Arc<dyn Store>, token_id: String) {
    loop {
        tokio::time::sleep(TOKEN_RECHECK).await;
        match store.find_token(&token_id).await {
            Ok(None) => return,
            Ok(Some(record)) if !tokens::is_current(&record, now_ms()) => return,
            _ => {}
        }
    }
}
