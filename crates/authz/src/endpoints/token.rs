//! `POST /token` (SPEC §4): a code or a refresh token for tokens. Errors
//! are RFC 6749 §5.2's, exactly: a dead code or refresh token is
//! `invalid_grant`, an unknown client `invalid_client` (401, so that the
//! client registers again), a wrong resource `invalid_target`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_store::tokens::{hash, mint};
use executor_store::{
    CodeTake, IssuedTokens, OAuthClientRecord, OAuthGrantRecord, Principal, RefreshRefusal,
    RefreshUse, now_ms,
};
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::endpoints::register::{no_store, unavailable};
use crate::pkce::verify_s256;
use crate::secrets::{SecretKind, grant_id};
use crate::server::{AuthorizationServer, open_cors};
use crate::token_request::{ClientCredentials, TokenError, TokenRequest, read_token_request};

/// Why a token request failed: an RFC 6749 §5.2 error, or the store.
pub(crate) enum Failure {
    Oauth(TokenError),
    Unavailable,
}

impl From<TokenError> for Failure {
    fn from(e: TokenError) -> Self {
        Failure::Oauth(e)
    }
}

fn error(code: &'static str, description: &str) -> Failure {
    Failure::Oauth(TokenError::new(code, description))
}

pub(crate) async fn token(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let basic = headers.contains_key(header::AUTHORIZATION);
    let response = match answer(&server, &headers, &body).await {
        Ok(body) => {
            let mut response = Json(body).into_response();
            no_store(&mut response);
            response
        }
        Err(failure) => failure_response(failure, basic),
    };
    open_cors(response)
}

pub(crate) fn failure_response(failure: Failure, basic: bool) -> Response {
    let e = match failure {
        Failure::Oauth(e) => e,
        Failure::Unavailable => return unavailable(),
    };
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut response = (
        status,
        Json(json!({"error": e.code, "error_description": e.description})),
    )
        .into_response();
    no_store(&mut response);
    if status == StatusCode::UNAUTHORIZED && basic {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"executor\""),
        );
    }
    response
}

async fn answer(
    server: &AuthorizationServer,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<serde_json::Value, Failure> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let request = read_token_request(body, authorization)?;
    let issuer = server.config.origin.for_request(headers);
    match request {
        TokenRequest::AuthorizationCode {
            client,
            code,
            redirect_uri,
            code_verifier,
            resource,
        } => {
            let client = authenticate_client(server, &client).await?;
            check_resource(server, resource.as_deref(), &issuer)?;
            exchange_code(
                server,
                &client,
                &code,
                redirect_uri.as_deref(),
                &code_verifier,
            )
            .await
        }
        TokenRequest::RefreshToken {
            client,
            refresh_token,
            resource,
            scope: _,
        } => {
            let client = authenticate_client(server, &client).await?;
            check_resource(server, resource.as_deref(), &issuer)?;
            refresh(server, &client, &refresh_token).await
        }
    }
}

fn check_resource(
    server: &AuthorizationServer,
    resource: Option<&str>,
    issuer: &str,
) -> Result<(), Failure> {
    if server.config.origin.names_mcp(resource, issuer) {
        Ok(())
    } else {
        Err(error(
            "invalid_target",
            "resource must be this server's MCP endpoint",
        ))
    }
}

/// The client the credentials name, if they prove it: a confidential
/// client's secret is checked (as hashes, in constant time); a public
/// client has none to check.
pub(crate) async fn authenticate_client(
    server: &AuthorizationServer,
    credentials: &ClientCredentials,
) -> Result<OAuthClientRecord, Failure> {
    let client = match server
        .store
        .find_oauth_client(credentials.client_id())
        .await
    {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(error(
                "invalid_client",
                "the client is not registered (register again)",
            ));
        }
        Err(e) => {
            tracing::error!(error = %e, "could not read a client");
            return Err(Failure::Unavailable);
        }
    };
    if let Some(expected) = &client.secret_hash {
        let presented = match credentials {
            ClientCredentials::Post { client_secret, .. }
            | ClientCredentials::Basic { client_secret, .. } => client_secret,
            ClientCredentials::Public { .. } => {
                return Err(error(
                    "invalid_client",
                    "this client authenticates with its secret",
                ));
            }
        };
        if !bool::from(hash(presented).as_slice().ct_eq(expected.as_slice())) {
            return Err(error("invalid_client", "the client secret is wrong"));
        }
    }
    Ok(client)
}

async fn exchange_code(
    server: &AuthorizationServer,
    client: &OAuthClientRecord,
    code: &str,
    redirect_uri: Option<&str>,
    verifier: &str,
) -> Result<serde_json::Value, Failure> {
    let dead = || error("invalid_grant", "the code is invalid, expired or used");
    let code_hash = SecretKind::Code.hash_of(code).ok_or_else(dead)?;
    let now = now_ms();
    let record = match server.store.take_oauth_code(&code_hash, now).await {
        Ok(CodeTake::Fresh(record)) => record,
        Ok(CodeTake::Replayed) => {
            tracing::warn!(client_id = %client.id, "a code was presented twice; its grant is revoked");
            return Err(dead());
        }
        Ok(CodeTake::Unknown) => return Err(dead()),
        Err(e) => {
            tracing::error!(error = %e, "could not take a code");
            return Err(Failure::Unavailable);
        }
    };
    let bound = record.client_id == client.id
        && redirect_uri.is_none_or(|r| r == record.redirect_uri)
        && verify_s256(verifier, &record.code_challenge);
    if !bound {
        return Err(error(
            "invalid_grant",
            "the code was not issued for this client, redirect URI and code verifier",
        ));
    }
    let grant = OAuthGrantRecord {
        id: grant_id(),
        client_id: client.id.clone(),
        principal: record.principal.clone(),
        scope: record.scope.clone(),
        resource: record.resource.clone(),
        redirect_uri: record.redirect_uri.clone(),
        created_at_ms: now,
        last_used_at_ms: now,
        expires_at_ms: now + server.config.grant_ttl.as_millis() as i64,
        revoked_at_ms: None,
    };
    let (tokens, body) = issue(server, &grant.principal, &grant.scope, now);
    match server
        .store
        .create_oauth_grant(&code_hash, grant.clone(), tokens)
        .await
    {
        Ok(true) => {
            tracing::info!(client_id = %client.id, grant_id = %grant.id, "grant created");
            Ok(body)
        }
        Ok(false) => Err(dead()),
        Err(e) => {
            tracing::error!(error = %e, "could not save a grant");
            Err(Failure::Unavailable)
        }
    }
}

async fn refresh(
    server: &AuthorizationServer,
    client: &OAuthClientRecord,
    refresh_token: &str,
) -> Result<serde_json::Value, Failure> {
    let dead = || {
        error(
            "invalid_grant",
            "the refresh token is invalid, expired or revoked",
        )
    };
    let token_hash = SecretKind::RefreshToken
        .hash_of(refresh_token)
        .ok_or_else(dead)?;
    let now = now_ms();
    // The principal and scope come from the grant; the store writes the
    // access token's row with them.
    let placeholder = Principal {
        account_id: String::new(),
        org_id: String::new(),
    };
    let (tokens, mut body) = issue(server, &placeholder, "", now);
    let used = RefreshUse {
        token_hash,
        client_id: client.id.clone(),
        at_ms: now,
        grace_ms: server.config.refresh_grace.as_millis() as i64,
    };
    match server.store.refresh_oauth_grant(used, tokens).await {
        Ok(Ok(grant)) => {
            body["scope"] = json!(grant.scope);
            Ok(body)
        }
        Ok(Err(RefreshRefusal::Invalid)) => Err(dead()),
        Ok(Err(RefreshRefusal::Reused)) => {
            tracing::warn!(
                client_id = %client.id,
                "a rotated refresh token was used again after the grace; its grant is revoked"
            );
            Err(error(
                "invalid_grant",
                "the refresh token was already used; the grant is revoked",
            ))
        }
        Err(e) => {
            tracing::error!(error = %e, "could not refresh a grant");
            Err(Failure::Unavailable)
        }
    }
}

/// New tokens (hashed, for the store) and the response that hands them out.
fn issue(
    server: &AuthorizationServer,
    principal: &Principal,
    scope: &str,
    now: i64,
) -> (IssuedTokens, serde_json::Value) {
    let ttl = server.config.access_token_ttl;
    let access = mint(principal.clone(), now, Some(now + ttl.as_millis() as i64));
    let refresh = SecretKind::RefreshToken.mint();
    let tokens = IssuedTokens {
        access_id: access.record.id.clone(),
        access_hash: access.record.secret_hash.clone(),
        access_expires_at_ms: now + ttl.as_millis() as i64,
        refresh_hash: refresh.hash,
        refresh_expires_at_ms: now + server.config.refresh_token_ttl.as_millis() as i64,
        issued_at_ms: now,
    };
    let body = json!({
        "access_token": access.plaintext,
        "token_type": "Bearer",
        "expires_in": ttl.as_secs(),
        "refresh_token": refresh.text,
        "scope": scope,
    });
    (tokens, body)
}
