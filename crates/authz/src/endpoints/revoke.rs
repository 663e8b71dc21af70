//! `POST /revoke` (RFC 7009, SPEC §4): revoking an access or a refresh
//! token revokes its whole grant. An unknown token, or one of another
//! client's grants, is answered 200 and changes nothing, as the RFC asks.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_store::now_ms;
use executor_store::tokens;

use crate::endpoints::token::{Failure, authenticate_client, failure_response};
use crate::secrets::SecretKind;
use crate::server::{AuthorizationServer, open_cors};
use crate::token_request::{TokenError, read_client};

pub(crate) async fn revoke(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let basic = headers.contains_key(header::AUTHORIZATION);
    let response = match answer(&server, &headers, &body).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(failure) => failure_response(failure, basic),
    };
    open_cors(response)
}

async fn answer(
    server: &AuthorizationServer,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Failure> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let (credentials, token) = read_client(body, authorization)?;
    let token = token.ok_or_else(|| TokenError::new("invalid_request", "token is required"))?;
    let client = authenticate_client(server, &credentials).await?;
    let Some(grant_id) = grant_of(server, &token).await? else {
        return Ok(());
    };
    match server.store.find_oauth_grant(&grant_id).await {
        Ok(Some(grant)) if grant.client_id == client.id => {}
        Ok(_) => return Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "could not read a grant");
            return Err(Failure::Unavailable);
        }
    }
    if let Err(e) = server.store.revoke_oauth_grant(&grant_id, now_ms()).await {
        tracing::error!(error = %e, "could not revoke a grant");
        return Err(Failure::Unavailable);
    }
    tracing::info!(client_id = %client.id, %grant_id, "grant revoked by its client");
    Ok(())
}

/// The grant an access or refresh token belongs to.
async fn grant_of(server: &AuthorizationServer, token: &str) -> Result<Option<String>, Failure> {
    let found = if let Some(hash) = SecretKind::RefreshToken.hash_of(token) {
        server.store.grant_of_refresh_token(&hash).await
    } else if let Some((id, secret)) = tokens::parse(token) {
        match server.store.find_token(id).await {
            Ok(Some(record))
                if bool::from(subtle::ConstantTimeEq::ct_eq(
                    tokens::hash(secret).as_slice(),
                    record.secret_hash.as_slice(),
                )) =>
            {
                Ok(record.grant_id)
            }
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        }
    } else {
        Ok(None)
    };
    found.map_err(|e| {
        tracing::error!(error = %e, "could not look a token up");
        Failure::Unavailable
    })
}
