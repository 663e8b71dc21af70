//! A `/token` request (RFC 6749 §4.1.3 and §6, SPEC §4): its form body and
//! the client's credentials read into one typed request, or the RFC 6749
//! §5.2 error to answer. Checking the code, the refresh token or the
//! client against what is stored comes after; this only reads.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Largest `/token` body read.
pub const MAX_TOKEN_BODY_BYTES: usize = 16 * 1024;

/// How the client authenticated itself at `/token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCredentials {
    /// `client_id` alone (a public client).
    Public { client_id: String },
    /// `client_secret_post`: both in the body.
    Post {
        client_id: String,
        client_secret: String,
    },
    /// `client_secret_basic`: the `Authorization: Basic` header.
    Basic {
        client_id: String,
        client_secret: String,
    },
}

impl ClientCredentials {
    pub fn client_id(&self) -> &str {
        match self {
            ClientCredentials::Public { client_id }
            | ClientCredentials::Post { client_id, .. }
            | ClientCredentials::Basic { client_id, .. } => client_id,
        }
    }
}

/// A `/token` request, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenRequest {
    AuthorizationCode {
        client: ClientCredentials,
        code: String,
        redirect_uri: Option<String>,
        code_verifier: String,
        resource: Option<String>,
    },
    RefreshToken {
        client: ClientCredentials,
        refresh_token: String,
        resource: Option<String>,
        scope: Option<String>,
    },
}

/// An RFC 6749 §5.2 error: its code and description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {description}")]
pub struct TokenError {
    pub code: &'static str,
    pub description: String,
}

impl TokenError {
    pub fn new(code: &'static str, description: impl Into<String>) -> Self {
        TokenError {
            code,
            description: description.into(),
        }
    }

    /// The HTTP status RFC 6749 §5.2 gives it: 401 for a client that did
    /// not authenticate, else 400.
    pub fn status(&self) -> u16 {
        if self.code == "invalid_client" {
            401
        } else {
            400
        }
    }
}

/// Reads a `/token` request from its `application/x-www-form-urlencoded`
/// body and its `Authorization` header, if any.
pub fn read_token_request(
    body: &[u8],
    authorization: Option<&str>,
) -> Result<TokenRequest, TokenError> {
    let fields = read_fields(body)?;
    let field = |name: &str| field_of(&fields, name);
    let required = |name: &str| {
        field(name).ok_or_else(|| TokenError::new("invalid_request", format!("{name} is required")))
    };
    let client = client_credentials(authorization, field("client_id"), field("client_secret"))?;
    match field("grant_type").as_deref() {
        Some("authorization_code") => Ok(TokenRequest::AuthorizationCode {
            client,
            code: required("code")?,
            redirect_uri: field("redirect_uri"),
            code_verifier: required("code_verifier")?,
            resource: field("resource"),
        }),
        Some("refresh_token") => Ok(TokenRequest::RefreshToken {
            client,
            refresh_token: required("refresh_token")?,
            resource: field("resource"),
            scope: field("scope"),
        }),
        Some(other) => Err(TokenError::new(
            "unsupported_grant_type",
            format!("grant_type {other:?} is not supported (authorization_code, refresh_token)"),
        )),
        None => Err(TokenError::new("invalid_request", "grant_type is required")),
    }
}

/// A form body's fields, each at most once (RFC 6749 §3.2).
fn read_fields(body: &[u8]) -> Result<Vec<(String, String)>, TokenError> {
    if body.len() > MAX_TOKEN_BODY_BYTES {
        return Err(TokenError::new(
            "invalid_request",
            "the request body is too large",
        ));
    }
    let mut fields: Vec<(String, String)> = Vec::new();
    for (name, value) in form_urlencoded::parse(body) {
        if fields.iter().any(|(n, _)| *n == name) {
            return Err(TokenError::new(
                "invalid_request",
                format!("the parameter {name} is repeated"),
            ));
        }
        fields.push((name.into_owned(), value.into_owned()));
    }
    Ok(fields)
}

/// A field's value; an empty one counts as absent.
fn field_of(fields: &[(String, String)], name: &str) -> Option<String> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
}

/// A `/revoke` request (RFC 7009 §2.1): the client's credentials, read as
/// at `/token`, and the `token` to revoke.
pub fn read_client(
    body: &[u8],
    authorization: Option<&str>,
) -> Result<(ClientCredentials, Option<String>), TokenError> {
    let fields = read_fields(body)?;
    let client = client_credentials(
        authorization,
        field_of(&fields, "client_id"),
        field_of(&fields, "client_secret"),
    )?;
    Ok((client, field_of(&fields, "token")))
}

/// The client's credentials: the Basic header, or the body; never both.
fn client_credentials(
    authorization: Option<&str>,
    client_id: Option<String>,
    client_secret: Option<String>,
) -> Result<ClientCredentials, TokenError> {
    let invalid_client = |why: &str| TokenError::new("invalid_client", why.to_string());
    if let Some(header) = authorization {
        let encoded = header
            .strip_prefix("Basic ")
            .or_else(|| header.strip_prefix("basic "))
            .ok_or_else(|| invalid_client("the Authorization header is not Basic"))?;
        if client_secret.is_some() {
            return Err(TokenError::new(
                "invalid_request",
                "the client authenticated twice (the header and the body)",
            ));
        }
        let decoded = STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| invalid_client("the Basic credentials are not base64 of id:secret"))?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or_else(|| invalid_client("the Basic credentials are not id:secret"))?;
        // RFC 6749 §2.3.1: each is form-encoded inside the header.
        let unescape = |text: &str| {
            form_urlencoded::parse(format!("x={text}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let (id, secret) = (unescape(id), unescape(secret));
        if client_id.as_deref().is_some_and(|body_id| body_id != id) {
            return Err(invalid_client(
                "client_id differs from the Basic credentials",
            ));
        }
        if id.is_empty() {
            return Err(invalid_client("the Basic credentials name no client"));
        }
        return Ok(ClientCredentials::Basic {
            client_id: id,
            client_secret: secret,
        });
    }
    let client_id = client_id.ok_or_else(|| invalid_client("client_id is required"))?;
    Ok(match client_secret {
        Some(client_secret) => ClientCredentials::Post {
            client_id,
            client_secret,
        },
        None => ClientCredentials::Public { client_id },
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_code_exchange_and_a_refresh_are_read() {
        let body = b"grant_type=authorization_code&code=c1&redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcb&code_verifier=v&client_id=cl";
        assert_eq!(
            read_token_request(body, None),
            Ok(TokenRequest::AuthorizationCode {
                client: ClientCredentials::Public {
                    client_id: "cl".into()
                },
                code: "c1".into(),
                redirect_uri: Some("http://127.0.0.1:5/cb".into()),
                code_verifier: "v".into(),
                resource: None,
            })
        );
        let basic = format!("Basic {}", STANDARD.encode("cl:s%3Ae"));
        let refresh =
            read_token_request(b"grant_type=refresh_token&refresh_token=r", Some(&basic)).unwrap();
        assert_eq!(
            refresh,
            TokenRequest::RefreshToken {
                client: ClientCredentials::Basic {
                    client_id: "cl".into(),
                    client_secret: "s:e".into()
                },
                refresh_token: "r".into(),
                resource: None,
                scope: None,
            }
        );
    }

    #[test]
    fn errors_are_rfc_6749_section_5_2() {
        let cases: [(&[u8], Option<&str>, &str, u16); 6] = [
            (
                b"grant_type=password&client_id=c",
                None,
                "unsupported_grant_type",
                400,
            ),
            (b"client_id=c", None, "invalid_request", 400),
            (
                b"grant_type=authorization_code&client_id=c&code_verifier=v",
                None,
                "invalid_request",
                400,
            ),
            (
                b"grant_type=refresh_token&refresh_token=r",
                None,
                "invalid_client",
                401,
            ),
            (
                b"grant_type=refresh_token&refresh_token=r&refresh_token=s&client_id=c",
                None,
                "invalid_request",
                400,
            ),
            (
                b"grant_type=refresh_token&refresh_token=r",
                Some("Bearer x"),
                "invalid_client",
                401,
            ),
        ];
        for (body, header, code, status) in cases {
            let e = read_token_request(body, header).expect_err("refused");
            assert_eq!(
                (e.code, e.status()),
                (code, status),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    proptest! {
        /// Any body and header are answered, never a panic.
        #[test]
        fn any_request_is_answered(
            body in proptest::collection::vec(any::<u8>(), 0..400),
            header in proptest::option::of("\\PC{0,80}"),
        ) {
            let _ = read_token_request(&body, header.as_deref());
        }
    }
}
