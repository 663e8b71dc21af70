//! Bearer authentication, on every request (a revoked token stops working
//! at once, also on live sessions).

use axum::http::{HeaderMap, header};
use executor_store::tokens::{self, TokenRejection};
use executor_store::{Principal, Store, now_ms};

use crate::WireError;

pub async fn authenticate(
    store: &dyn Store,
    headers: &HeaderMap,
    resource_metadata: String,
) -> Result<Principal, WireError> {
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
    tokens::verify(&record, secret, now_ms()).map_err(|r| unauthorized(Some(r)))
}
