//! RFC 8414 authorization server metadata: what discovery finds and what a
//! grant keeps of it, so that a refresh needs no discovery.

use serde::{Deserialize, Serialize};

/// RFC 8414 authorization server metadata (the fields we use), as stored
/// with a grant so that a refresh needs no discovery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_id_metadata_document_supported: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub authorization_response_iss_parameter_supported: bool,
}

impl ServerMetadata {
    /// Whether the server offers `grant` (RFC 8414: absent means the
    /// authorization code and implicit grants).
    pub fn offers_grant(&self, grant: &str) -> bool {
        match &self.grant_types_supported {
            Some(list) => list.iter().any(|g| g == grant),
            None => matches!(grant, "authorization_code" | "refresh_token"),
        }
    }

    /// RFC 8414's default is `client_secret_basic`.
    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(list) => list.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }
}
