//! The secret of a connection as the outbound path holds it: resolved in
//! host code just before a call, wiped from memory when the call is done,
//! never printed.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use executor_catalog::ToolError;
use executor_store::secrets::SecretString;
use futures::future::BoxFuture;
use zeroize::Zeroizing;

/// Shorter secrets are not scrubbed from output: replacing a 1–3 character
/// string everywhere would mangle results without protecting anything.
pub(crate) const MIN_REDACTED_LEN: usize = 4;

/// Where a kind's invoker gets the credential of its integration at call
/// time (the server: the org's connections in the store, unsealed). None
/// when no connection is set; Err says, without the secret, why one cannot
/// be used.
pub trait CredentialSource: Send + Sync + 'static {
    fn credential<'a>(
        &'a self,
        org_id: &'a str,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, ToolError>>;

    /// The upstream refused `refusal.credential` (401, or 403 with a
    /// challenge): a credential to retry the call with once (an OAuth
    /// connection refreshed its token), `Retry::No` when retrying cannot
    /// help, or the error the call answers (a login is needed).
    fn refused<'a>(
        &'a self,
        _org_id: &'a str,
        _namespace: &'a str,
        _refusal: Refusal<'a>,
    ) -> BoxFuture<'a, Result<Retry, ToolError>> {
        Box::pin(async { Ok(Retry::No) })
    }
}

/// An upstream's refusal of a credential, for [`CredentialSource::refused`].
pub struct Refusal<'a> {
    pub status: u16,
    /// The `WWW-Authenticate` header, when there was one. Never shown to
    /// the agent.
    pub www_authenticate: Option<&'a str>,
    pub credential: &'a Credential,
}

impl<'a> Connection<'a> {
    /// `credential`, which `source` gave for `org_id`'s integration
    /// `namespace`.
    pub fn new(
        source: &'a dyn CredentialSource,
        org_id: &'a str,
        namespace: &'a str,
        credential: &'a Credential,
    ) -> Self {
        Connection {
            source,
            org_id,
            namespace,
            credential,
        }
    }
}

/// What to do after a refusal.
pub enum Retry {
    No,
    With(Credential),
}

/// A call's credential and where it came from: the source asked to renew
/// it when the upstream refuses it ([`renewed`]).
#[derive(Clone, Copy)]
pub struct Connection<'a> {
    pub source: &'a dyn CredentialSource,
    pub org_id: &'a str,
    pub namespace: &'a str,
    pub credential: &'a Credential,
}

/// The one rule of every invoker: a call the upstream refused (401/403)
/// with a credential goes back to its source once; Some is the credential
/// to send the call again with.
pub async fn renewed(
    source: &dyn CredentialSource,
    org_id: &str,
    namespace: &str,
    credential: &Credential,
    status: Option<u16>,
    www_authenticate: Option<&str>,
) -> Result<Option<Credential>, ToolError> {
    let Some(status @ (401 | 403)) = status else {
        return Ok(None);
    };
    if matches!(credential, Credential::None) {
        return Ok(None);
    }
    let refusal = Refusal {
        status,
        www_authenticate,
        credential,
    };
    Ok(match source.refused(org_id, namespace, refusal).await? {
        Retry::With(renewed) => Some(renewed),
        Retry::No => None,
    })
}

/// The secret of a connection. Every plaintext copy this crate makes of it
/// (the header text, the base64 of a Basic pair, the redactor's patterns)
/// is `Zeroizing`; the copies reqwest and hyper make inside a request
/// (`HeaderValue`, the URL) live only as long as that request.
#[derive(Clone)]
pub enum Credential {
    None,
    ApiKey(SecretString),
    Bearer(SecretString),
    Basic {
        username: String,
        password: SecretString,
    },
}

/// Written by hand so that no log line or error can print a secret.
impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Credential::None => "None",
            Credential::ApiKey(_) => "ApiKey([redacted])",
            Credential::Bearer(_) => "Bearer([redacted])",
            Credential::Basic { .. } => "Basic { [redacted] }",
        };
        write!(f, "Credential::{kind}")
    }
}

/// Credentials from plain values (tests, tools); the server builds them
/// from resolved connections, moving the secret without a copy.
impl Credential {
    pub fn api_key(secret: impl Into<String>) -> Self {
        Credential::ApiKey(SecretString::from(secret.into()))
    }

    pub fn bearer(secret: impl Into<String>) -> Self {
        Credential::Bearer(SecretString::from(secret.into()))
    }

    pub fn basic(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credential::Basic {
            username: username.into(),
            password: SecretString::from(password.into()),
        }
    }
}

impl Credential {
    /// The token of an `Authorization: Basic` header (RFC 7617).
    pub fn basic_token(username: &str, password: &str) -> Zeroizing<String> {
        let pair = Zeroizing::new(format!("{username}:{password}"));
        Zeroizing::new(STANDARD.encode(pair.as_bytes()))
    }

    /// The byte strings an upstream could echo that reveal the secret, once
    /// every escape (percent, JSON) is decoded: the secret itself and the
    /// base64 forms a header carries. Longest first, none shorter than
    /// [`MIN_REDACTED_LEN`].
    pub(crate) fn forms(&self) -> Vec<Zeroizing<Vec<u8>>> {
        let mut forms: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        let mut add_with_base64 = |plain: &[u8]| {
            if plain.len() < MIN_REDACTED_LEN {
                return;
            }
            forms.push(Zeroizing::new(plain.to_vec()));
            // Unpadded, so that a padded copy matches too.
            forms.push(Zeroizing::new(STANDARD_NO_PAD.encode(plain).into_bytes()));
            forms.push(Zeroizing::new(URL_SAFE_NO_PAD.encode(plain).into_bytes()));
        };
        match self {
            Credential::None => {}
            Credential::ApiKey(secret) | Credential::Bearer(secret) => {
                add_with_base64(secret.expose().as_bytes());
            }
            Credential::Basic { username, password } => {
                add_with_base64(password.expose().as_bytes());
                let pair = Zeroizing::new(format!("{username}:{}", password.expose()));
                add_with_base64(pair.as_bytes());
            }
        }
        forms.retain(|f| f.len() >= MIN_REDACTED_LEN);
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        forms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_token_matches_rfc7617() {
        // RFC 7617 §2's example.
        let token = Credential::basic_token("Aladdin", "open sesame");
        assert_eq!(token.as_str(), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    }
}
