//! RFC 8414 authorization server metadata (SPEC §4).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::server::{AuthorizationServer, SCOPES, open_cors};

pub(crate) async fn metadata(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
) -> Response {
    let issuer = server.config.origin.for_request(&headers);
    let documents = server.documents.is_some();
    open_cors(Json(document(&issuer, documents)).into_response())
}

/// The metadata of the server whose issuer is `issuer`; `documents`: it
/// fetches client ID metadata documents.
pub fn document(issuer: &str, documents: bool) -> Value {
    let mut document = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "registration_endpoint": format!("{issuer}/register"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "scopes_supported": SCOPES,
        "authorization_response_iss_parameter_supported": true,
    });
    if documents {
        document["client_id_metadata_document_supported"] = json!(true);
    }
    document
}
