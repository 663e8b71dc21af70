//! `POST /register`: dynamic client registration (RFC 7591, SPEC §4).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Extensions, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_store::{OAuthClientOrigin, OAuthClientRecord, now_ms};
use serde_json::json;

use crate::endpoints::peer;
use crate::registration::{ClientAuth, RegistrationError, register as read_registration};
use crate::secrets::{SecretKind, client_id};
use crate::server::{AuthorizationServer, open_cors};

pub(crate) async fn register(
    State(server): State<Arc<AuthorizationServer>>,
    extensions: Extensions,
    body: Bytes,
) -> Response {
    open_cors(answer(&server, &extensions, &body).await)
}

async fn answer(server: &AuthorizationServer, extensions: &Extensions, body: &[u8]) -> Response {
    let registration = match read_registration(body) {
        Ok(r) => r,
        Err(e) => return refusal(&e),
    };
    if !server.admit_registration(peer(extensions)) {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({
                "error": "temporarily_unavailable",
                "error_description": "too many registrations; try again in a minute",
            })),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return response;
    }
    let now = now_ms();
    let secret = (registration.auth != ClientAuth::None).then(|| SecretKind::ClientSecret.mint());
    let record = OAuthClientRecord {
        id: client_id(),
        secret_hash: secret.as_ref().map(|s| s.hash.clone()),
        auth_method: registration.auth.as_str().to_string(),
        redirect_uris: registration
            .redirect_uris
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        client_name: registration.client_name.clone(),
        origin: OAuthClientOrigin::Registered,
        created_at_ms: now,
        last_used_at_ms: None,
    };
    if let Err(e) = server.store.insert_oauth_client(record.clone()).await {
        tracing::error!(error = %e, "could not save a client registration");
        return unavailable();
    }
    tracing::info!(client_id = %record.id, "client registered");
    let mut body = json!({
        "client_id": record.id,
        "client_id_issued_at": now / 1000,
        "redirect_uris": record.redirect_uris,
        "token_endpoint_auth_method": record.auth_method,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    });
    if let Some(name) = &record.client_name {
        body["client_name"] = json!(name);
    }
    if let Some(secret) = secret {
        body["client_secret"] = json!(secret.text);
        body["client_secret_expires_at"] = json!(0);
    }
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    no_store(&mut response);
    response
}

fn refusal(error: &RegistrationError) -> Response {
    let mut response = (
        StatusCode::BAD_REQUEST,
        Json(json!({"error": error.code(), "error_description": error.to_string()})),
    )
        .into_response();
    no_store(&mut response);
    response
}

/// 503 with `Retry-After` (SPEC §4: a transient failure of an auth
/// dependency).
pub(crate) fn unavailable() -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({
            "error": "temporarily_unavailable",
            "error_description": "the server could not reach its store; try again",
        })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

pub(crate) fn no_store(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}
