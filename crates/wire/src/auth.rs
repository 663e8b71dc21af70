//! Bearer authentication, on every request (a revoked token stops working
//! at once, also on live sessions).

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use executor_store::tokens::{self, TokenRejection};
use executor_store::{Principal, Store, now_ms};

use crate::WireError;

/// Who a request acts for, and the token that says so.
pub struct Authenticated {
    pub principal: Principal,
    /// The token's id, to follow its revocation on a long-lived stream.
    pub token_id: String,
}

pub async fn authenticate(
    store: &dyn Store,
    headers: &HeaderMap,
    resource_metadata: String,
) -> Result<Authenticated, WireError> {
    let unauthorized = |rejection| WireError::Unauthorized {
        resource_metadata: resource_metadata.clone(),
        rejection,
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthorized(None))?;
    let (id, secret) =
        tokens::parse(presented).ok_or_else(|| unauthorized(Some(TokenRejection::Malformed)))?;
    let record = store.find_token(id).await.map_err(|e| {
        tracing::error!(error = %e, "token lookup failed");
        WireError::Session(executor_sessions::AcquireError::Unavailable)
    })?;
    let record = record.ok_or_else(|| unauthorized(Some(TokenRejection::Unknown)))?;
    let principal = tokens::verify(&record, secret, now_ms()).map_err(|r| unauthorized(Some(r)))?;
    Ok(Authenticated {
        principal,
        token_id: record.id,
    })
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
