//! Who calls: the `Caller` extractor, from an API token. Every route but
//! the document and its page takes one, so a route cannot forget it.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use executor_ops::Actor;
use executor_store::tokens::{self, AuthFailure};

use crate::ApiState;
use crate::error::ApiError;

/// The caller: an account in an org, by its API token. Everything the
/// request reads or changes is that org's.
#[derive(Clone)]
pub struct Caller {
    pub actor: Actor,
    /// The token's id (rate limits are kept per token).
    pub token_id: String,
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::unauthorized("no API token was sent"))?;
        let store = state.ops.store();
        let (actor, token_id) = match tokens::authenticate(store, &state.tokens, presented).await {
            Ok(found) => found,
            Err(AuthFailure::Rejected(rejection)) => {
                return Err(ApiError::unauthorized(rejection.description()));
            }
            Err(AuthFailure::Store(e)) => {
                tracing::error!(error = %e, "token lookup failed");
                return Err(ApiError::from(executor_ops::OpError::unavailable(
                    "the store cannot be read now; retry shortly",
                )));
            }
        };
        state.limits.admit(&token_id)?;
        Ok(Caller { actor, token_id })
    }
}

/// Whether the caller's token still works (a long stream asks again: a
/// revoked or expired token ends it).
pub(crate) async fn still_valid(state: &ApiState, caller: &Caller) -> bool {
    match state
        .ops
        .get_token(&caller.actor.org_id, &caller.token_id)
        .await
    {
        Ok(token) => token.state == "active",
        // Gone: revoked and collected. Any other failure is the store's:
        // keep the stream; the next look decides.
        Err(e) => e.kind != executor_ops::ErrorKind::NotFound,
    }
}
