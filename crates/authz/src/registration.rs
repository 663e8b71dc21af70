//! Dynamic client registration (RFC 7591, SPEC §4): what a client asks to
//! be, checked into what the server keeps. A client is public (no secret)
//! unless it asks for a secret method; its name is kept as unverified;
//! fields and grant types we do not know are ignored, as the RFC asks.

use serde::Deserialize;

use crate::redirect::{RedirectError, RedirectUri};

/// Longest `client_name` kept (longer ones are cut).
pub const MAX_CLIENT_NAME_CHARS: usize = 100;
/// Most redirect URIs one client registers.
pub const MAX_REDIRECT_URIS: usize = 20;
/// Largest registration body read.
pub const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

/// How a client proves itself at `/token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A public client: PKCE alone.
    None,
    ClientSecretPost,
    ClientSecretBasic,
}

impl ClientAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::ClientSecretPost => "client_secret_post",
            ClientAuth::ClientSecretBasic => "client_secret_basic",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(ClientAuth::None),
            "client_secret_post" => Some(ClientAuth::ClientSecretPost),
            "client_secret_basic" => Some(ClientAuth::ClientSecretBasic),
            _ => None,
        }
    }
}

/// A registration as the server keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRegistration {
    pub redirect_uris: Vec<RedirectUri>,
    pub auth: ClientAuth,
    /// As the client gave it (unverified), cut to [`MAX_CLIENT_NAME_CHARS`].
    pub client_name: Option<String>,
}

/// Why a registration is refused: the RFC 7591 §3.2.2 error and its
/// description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// `invalid_redirect_uri`.
    #[error("{0}")]
    RedirectUri(String),
    /// `invalid_client_metadata`.
    #[error("{0}")]
    Metadata(String),
}

impl RegistrationError {
    /// The RFC 7591 `error` code.
    pub fn code(&self) -> &'static str {
        match self {
            RegistrationError::RedirectUri(_) => "invalid_redirect_uri",
            RegistrationError::Metadata(_) => "invalid_client_metadata",
        }
    }
}

/// The fields of a registration request (or a client ID metadata
/// document) we read; the rest is ignored.
#[derive(Deserialize)]
pub(crate) struct Requested {
    redirect_uris: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_method: Option<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
    client_name: Option<String>,
}

/// Checks a registration request's JSON body.
pub fn register(body: &[u8]) -> Result<ClientRegistration, RegistrationError> {
    if body.len() > MAX_REGISTRATION_BYTES {
        return Err(RegistrationError::Metadata(format!(
            "the registration is over {MAX_REGISTRATION_BYTES} bytes"
        )));
    }
    let requested: Requested = serde_json::from_slice(body).map_err(|e| {
        RegistrationError::Metadata(format!(
            "the registration is not the JSON object RFC 7591 describes: {e}"
        ))
    })?;
    check(requested)
}

/// Checks what a client asks to be into what the server keeps.
pub(crate) fn check(requested: Requested) -> Result<ClientRegistration, RegistrationError> {
    let uris = requested
        .redirect_uris
        .filter(|u| !u.is_empty())
        .ok_or_else(|| RegistrationError::RedirectUri("redirect_uris is required".into()))?;
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(RegistrationError::RedirectUri(format!(
            "at most {MAX_REDIRECT_URIS} redirect URIs"
        )));
    }
    let redirect_uris = uris
        .iter()
        .map(|text| {
            RedirectUri::parse(text).map_err(|e: RedirectError| {
                RegistrationError::RedirectUri(format!("{text:?}: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let auth = match requested.token_endpoint_auth_method.as_deref() {
        None => ClientAuth::None,
        Some(text) => ClientAuth::parse(text).ok_or_else(|| {
            RegistrationError::Metadata(format!(
                "token_endpoint_auth_method {text:?} is not supported (none, client_secret_post, client_secret_basic)"
            ))
        })?,
    };
    if let Some(grants) = &requested.grant_types
        && !grants.iter().any(|g| g == "authorization_code")
    {
        return Err(RegistrationError::Metadata(
            "grant_types must include authorization_code".into(),
        ));
    }
    if let Some(types) = &requested.response_types
        && !types.iter().any(|t| t == "code")
    {
        return Err(RegistrationError::Metadata(
            "response_types must include code".into(),
        ));
    }
    let client_name = requested
        .client_name
        .map(|name| {
            name.chars()
                .filter(|c| !c.is_control())
                .take(MAX_CLIENT_NAME_CHARS)
                .collect::<String>()
        })
        .filter(|name| !name.trim().is_empty());
    Ok(ClientRegistration {
        redirect_uris,
        auth,
        client_name,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_custom_scheme_an_https_and_a_loopback_uri_register_together() {
        let body = br#"{
            "redirect_uris": ["cursor://anysphere.cursor-retrieval/oauth/callback",
                              "https://example.com/cb", "http://127.0.0.1/callback"],
            "client_name": "Cursor", "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"], "software_id": "ignored"
        }"#;
        let registered = register(body).expect("the registration");
        assert_eq!(registered.redirect_uris.len(), 3);
        assert_eq!(
            registered.auth,
            ClientAuth::None,
            "public unless a secret method is asked"
        );
        assert_eq!(registered.client_name.as_deref(), Some("Cursor"));
    }

    #[test]
    fn refusals_name_the_rfc_7591_error() {
        let cases: [(&[u8], &str); 6] = [
            (br#"{}"#, "invalid_redirect_uri"),
            (br#"{"redirect_uris": ["http://example.com/cb"]}"#, "invalid_redirect_uri"),
            (br#"{"redirect_uris": ["javascript:alert(1)"]}"#, "invalid_redirect_uri"),
            (br#"{"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}"#, "invalid_client_metadata"),
            (br#"{"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]}"#, "invalid_client_metadata"),
            (b"not json", "invalid_client_metadata"),
        ];
        for (body, code) in cases {
            let refused = register(body).expect_err("refused");
            assert_eq!(refused.code(), code, "{}", String::from_utf8_lossy(body));
        }
    }

    proptest! {
        /// Whatever bytes arrive, registration answers (never panics), and
        /// what it accepts has between 1 and the bound of valid URIs.
        #[test]
        fn any_body_is_answered(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(r) = register(&body) {
                prop_assert!(!r.redirect_uris.is_empty() && r.redirect_uris.len() <= MAX_REDIRECT_URIS);
            }
        }

        #[test]
        fn a_client_name_is_kept_short_and_printable(name in "\\PC{0,300}") {
            let body = serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": name});
            let r = register(body.to_string().as_bytes()).unwrap();
            if let Some(kept) = r.client_name {
                prop_assert!(kept.chars().count() <= MAX_CLIENT_NAME_CHARS);
                prop_assert!(!kept.chars().any(char::is_control));
            }
        }
    }
}
