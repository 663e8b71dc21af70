//! Who calls: the `Caller` extractor, from an API token or a signed-in
//! browser's console session (SPEC §13: the cookie, plus `X-CSRF-Token`
//! on unsafe methods). Every route but the document and its page takes
//! one, so a route cannot forget it. OAuth access tokens are refused
//! here: they are for `/mcp` alone.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{Method, header};
use executor_ops::Actor;
use executor_store::tokens::{self, AuthFailure, TokenRejection};

use crate::ApiState;
use crate::error::ApiError;

/// The caller: an account in an org, by its API token or console
/// session. Everything the request reads or changes is that org's.
#[derive(Clone)]
pub struct Caller {
    pub actor: Actor,
    /// The token's id, or `console:…` for a console session (rate limits
    /// and streams are kept per token).
    pub token_id: String,
    /// The console session's hash, when a browser calls.
    pub console_session: Option<Vec<u8>>,
}

/// The header that carries a console session's CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

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
            .filter(|t| !t.is_empty());
        let Some(presented) = presented else {
            return console_caller(parts, state).await;
        };
        let store = state.ops.store();
        let (actor, token_id) =
            match tokens::authenticate(store, &state.tokens, presented, false).await {
                Ok(found) => found,
                Err(AuthFailure::Rejected(TokenRejection::OnlyForMcp)) => {
                    return Err(ApiError::invalid_token(
                        TokenRejection::OnlyForMcp.description(),
                    ));
                }
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
        Ok(Caller {
            actor,
            token_id,
            console_session: None,
        })
    }
}

/// A browser's call, by its console session cookie; unsafe methods carry
/// the session's CSRF token in [`CSRF_HEADER`].
async fn console_caller(parts: &Parts, state: &ApiState) -> Result<Caller, ApiError> {
    let secure = state.public.is_https();
    let session = match executor_authz::signed_in(state.ops.store(), &parts.headers, secure).await {
        Ok(Some(session)) => session,
        Ok(None) => return Err(ApiError::unauthorized("no API token was sent")),
        Err(e) => {
            tracing::error!(error = %e, "console session lookup failed");
            return Err(ApiError::from(executor_ops::OpError::unavailable(
                "the store cannot be read now; retry shortly",
            )));
        }
    };
    let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe {
        let presented = parts
            .headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let base = state.public.for_request(&parts.headers);
        if !session.csrf_matches(presented) || !executor_authz::same_origin(&parts.headers, &base) {
            return Err(ApiError::forbidden(
                "a console session's unsafe request must carry its X-CSRF-Token and come from \
                 this server's origin",
            ));
        }
    }
    let hash = session.session_hash().to_vec();
    let token_id = format!("console:{}", hex_prefix(&hash));
    state.limits.admit(&token_id)?;
    Ok(Caller {
        actor: session.principal,
        token_id,
        console_session: Some(hash),
    })
}

fn hex_prefix(bytes: &[u8]) -> String {
    bytes.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Whether the caller's token still works (a long stream asks again: a
/// revoked or expired token ends it).
pub(crate) async fn still_valid(state: &ApiState, caller: &Caller) -> bool {
    if let Some(hash) = &caller.console_session {
        return !matches!(state.ops.store().find_console_session(hash).await, Ok(None));
    }
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
