//! What an `oauth` connection holds: the [`Grant`] (endpoints, client,
//! scopes, expiry, status: plain JSON in the record's `oauth` column) and
//! the [`Secrets`] (tokens and client secret: sealed JSON in `secret`).

use executor_store::ConnectionRecord;
use executor_store::secrets::{self, SecretKey, SecretString};
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::error::OAuthError;
use crate::metadata::ServerMetadata;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    AuthorizationCode,
    ClientCredentials,
}

/// The lifecycle of a connection's grant: usable, or waiting for a person
/// to log in again (the authorization server refused the refresh token or
/// forgot our client, or the resource wants a scope the grant lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GrantStatus {
    Ready,
    ReauthRequired { reason: String },
}

/// How the client is known to the authorization server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientSource {
    /// `--client-id` (and a secret from stdin).
    Preregistered,
    /// A client ID metadata document (its URL is the id).
    MetadataDocument,
    /// RFC 7591 dynamic registration at login.
    Dynamic,
}

/// RFC 8414 `token_endpoint_auth_method`s we speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    pub fn parse(text: &str) -> Option<AuthMethod> {
        Some(match text {
            "none" => AuthMethod::None,
            "client_secret_basic" => AuthMethod::ClientSecretBasic,
            "client_secret_post" => AuthMethod::ClientSecretPost,
            _ => return None,
        })
    }
}

/// The non-secret part of an OAuth connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    pub flow: Flow,
    #[serde(flatten)]
    pub status: GrantStatus,
    pub server: ServerMetadata,
    pub client_id: String,
    pub client_source: ClientSource,
    pub auth_method: AuthMethod,
    /// RFC 8707 `resource`, sent with every authorization and token request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Where discovery found the resource metadata (asked first next time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metadata_url: Option<String>,
    #[serde(default)]
    pub scopes_granted: Vec<String>,
    /// Scopes the resource asked for beyond the grant (a 403
    /// `insufficient_scope`): the next login asks for them too.
    #[serde(default)]
    pub scopes_required: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
    pub obtained_at_ms: i64,
}

impl Grant {
    pub fn from_record(record: &ConnectionRecord) -> Result<Grant, OAuthError> {
        let text = record
            .oauth
            .as_deref()
            .ok_or_else(|| OAuthError::Stored("the connection has no OAuth grant".into()))?;
        serde_json::from_str(text)
            .map_err(|e| OAuthError::Stored(format!("the stored OAuth grant is unreadable: {e}")))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Fresh until a margin before expiry: a third of the lifetime, at most
    /// a minute, so a call never leaves with a token about to lapse.
    pub fn is_fresh(&self, now_ms: i64) -> bool {
        let Some(expires) = self.expires_at_ms else {
            return true;
        };
        let lifetime = (expires - self.obtained_at_ms).max(0);
        now_ms < expires - (lifetime / 3).min(60_000)
    }

    /// A one-line summary for `connections list` (never a value).
    pub fn describe(&self, now_ms: i64) -> String {
        let mut text = match &self.status {
            GrantStatus::Ready => "ready".to_string(),
            GrantStatus::ReauthRequired { reason } => format!("needs login ({reason})"),
        };
        if !self.scopes_granted.is_empty() {
            text.push_str(&format!("\tscopes={}", self.scopes_granted.join(" ")));
        }
        if let Some(expires) = self.expires_at_ms {
            text.push_str(&format!(
                "\texpires_in={}s",
                ((expires - now_ms) / 1000).max(0)
            ));
        }
        text
    }
}

/// The secret part of an OAuth connection. Never printed; wiped on drop.
pub struct Secrets {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub client_secret: Option<SecretString>,
}

#[derive(Serialize, Deserialize)]
struct SecretsJson<'a> {
    access_token: &'a str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<&'a str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<&'a str>,
}

#[derive(Deserialize)]
struct OwnedSecretsJson {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    client_secret: Option<String>,
}

impl Secrets {
    pub fn seal(
        &self,
        key: &SecretKey,
        org_id: &str,
        namespace: &str,
    ) -> Result<String, OAuthError> {
        let json = Zeroizing::new(
            serde_json::to_string(&SecretsJson {
                access_token: self.access_token.expose(),
                refresh_token: self.refresh_token.as_ref().map(|s| s.expose()),
                client_secret: self.client_secret.as_ref().map(|s| s.expose()),
            })
            .map_err(|_| OAuthError::Stored("cannot encode the tokens".into()))?,
        );
        secrets::seal(key, &json, &secrets::connection_aad(org_id, namespace))
            .map_err(|e| OAuthError::Stored(format!("cannot seal the tokens: {e}")))
    }

    pub fn open(
        key: &SecretKey,
        sealed: &str,
        org_id: &str,
        namespace: &str,
    ) -> Result<Secrets, OAuthError> {
        let plain = secrets::open(key, sealed, &secrets::connection_aad(org_id, namespace))
            .map_err(|e| OAuthError::Stored(format!("cannot open the tokens: {e}")))?;
        let parsed: OwnedSecretsJson = serde_json::from_str(plain.expose())
            .map_err(|_| OAuthError::Stored("the sealed tokens are unreadable".into()))?;
        Ok(Secrets {
            access_token: parsed.access_token.into(),
            refresh_token: parsed.refresh_token.map(Into::into),
            client_secret: parsed.client_secret.map(Into::into),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> Grant {
        Grant {
            flow: Flow::AuthorizationCode,
            status: GrantStatus::Ready,
            server: ServerMetadata::default(),
            client_id: "c".into(),
            client_source: ClientSource::Dynamic,
            auth_method: AuthMethod::None,
            resource: None,
            resource_metadata_url: None,
            scopes_granted: vec![],
            scopes_required: vec![],
            expires_at_ms: Some(3_600_000),
            obtained_at_ms: 0,
        }
    }

    #[test]
    fn a_token_is_refreshed_a_margin_before_expiry() {
        let g = grant();
        assert!(g.is_fresh(3_500_000 - 1));
        assert!(!g.is_fresh(3_540_000));
        let short = Grant {
            expires_at_ms: Some(3_000),
            ..grant()
        };
        assert!(short.is_fresh(1_999));
        assert!(!short.is_fresh(2_000));
        assert!(
            Grant {
                expires_at_ms: None,
                ..grant()
            }
            .is_fresh(i64::MAX)
        );
    }

    #[test]
    fn the_grant_round_trips_with_its_status() {
        let g = Grant {
            status: GrantStatus::ReauthRequired {
                reason: "invalid_grant".into(),
            },
            ..grant()
        };
        let text = g.to_json();
        assert!(text.contains(r#""status":"reauth_required""#), "{text}");
        let record = ConnectionRecord {
            org_id: "o".into(),
            namespace: "n".into(),
            kind: executor_store::CredentialKind::OAuth,
            username: None,
            secret: String::new(),
            updated_at_ms: 0,
            oauth: Some(text),
            generation: 1,
        };
        assert_eq!(Grant::from_record(&record).unwrap(), g);
    }

    #[test]
    fn secrets_seal_to_their_connection_only() {
        let key = SecretKey::from_env_value(&"11".repeat(32)).unwrap();
        let s = Secrets {
            access_token: String::from("at-123456").into(),
            refresh_token: Some(String::from("rt-123456").into()),
            client_secret: None,
        };
        let sealed = s.seal(&key, "o", "n").unwrap();
        assert!(!sealed.contains("at-123456"));
        let back = Secrets::open(&key, &sealed, "o", "n").unwrap();
        assert_eq!(back.access_token.expose(), "at-123456");
        assert_eq!(back.refresh_token.unwrap().expose(), "rt-123456");
        assert!(Secrets::open(&key, &sealed, "o", "other").is_err());
    }
}
