//! Connections: the credential of each integration. Values are write-only:
//! sealed with the key as they arrive, and no operation returns them.

use executor_store::secrets::{self, SecretRef};
use executor_store::{ConnectionRecord, CredentialKind, now_ms};
use serde::Serialize;
use utoipa::ToSchema;
use zeroize::Zeroizing;

use crate::{Actor, OpError, OpResult, Operations};

/// Secrets this short could not be scrubbed from what upstreams answer
/// (SPEC §9): redaction skips strings under four bytes, which would
/// otherwise mangle every result.
pub const MIN_SECRET_CHARS: usize = 4;

/// A credential as given. Its `Debug` never shows a value.
pub enum CredentialInput {
    ApiKey(Zeroizing<String>),
    Bearer(Zeroizing<String>),
    Basic {
        username: String,
        password: Zeroizing<String>,
    },
    /// `env://NAME`, resolved at call time, of the given kind (a basic one
    /// with its user name).
    Reference {
        reference: String,
        kind: CredentialKind,
        username: Option<String>,
    },
}

impl std::fmt::Debug for CredentialInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            CredentialInput::ApiKey(_) => "ApiKey",
            CredentialInput::Bearer(_) => "Bearer",
            CredentialInput::Basic { .. } => "Basic",
            CredentialInput::Reference { .. } => "Reference",
        };
        write!(f, "CredentialInput::{kind}(…)")
    }
}

/// Sets `namespace`'s connection: replaces whatever it had.
#[derive(Debug)]
pub struct SetConnection {
    pub namespace: String,
    pub credential: CredentialInput,
}

/// A connection as shown: its kind and where its secret is, never the
/// secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    pub namespace: String,
    /// api_key, bearer, basic or oauth.
    #[schema(value_type = String, example = "bearer")]
    pub kind: CredentialKind,
    /// `sealed`, the `env://` reference, or an OAuth grant's state.
    pub stored: String,
    pub username: Option<String>,
    pub updated_at_ms: i64,
}

impl Operations {
    pub async fn set_connection(
        &self,
        actor: &Actor,
        input: SetConnection,
    ) -> OpResult<ConnectionStatus> {
        let SetConnection {
            namespace,
            credential,
        } = input;
        crate::integrations::check_namespace(&namespace)?;
        let associated = secrets::connection_aad(&actor.org_id, &namespace);
        let seal = |value: &str, field: &'static str| -> OpResult<String> {
            long_enough(value, field)?;
            secrets::seal(self.key()?, value, &associated)
                .map_err(|e| OpError::internal("cannot seal the secret", e))
        };
        let (kind, username, secret) = match credential {
            CredentialInput::ApiKey(key) => (CredentialKind::ApiKey, None, seal(&key, "value")?),
            CredentialInput::Bearer(token) => {
                (CredentialKind::Bearer, None, seal(&token, "value")?)
            }
            CredentialInput::Basic { username, password } => {
                if username.contains(':') {
                    return Err(OpError::invalid("username", "a user name has no ':'"));
                }
                (
                    CredentialKind::Basic,
                    Some(username),
                    seal(&password, "password")?,
                )
            }
            CredentialInput::Reference {
                reference,
                kind,
                username,
            } => {
                let parsed = SecretRef::parse(&reference).map_err(|e| match e {
                    secrets::SecretError::ReservedEnvVar { .. } => {
                        OpError::forbidden(e.to_string())
                    }
                    _ => OpError::invalid("reference", e.to_string()),
                })?;
                if !matches!(parsed, SecretRef::Env(_)) {
                    return Err(OpError::invalid("reference", "a reference is env://NAME"));
                }
                if username.as_deref().is_some_and(|u| u.contains(':')) {
                    return Err(OpError::invalid("username", "a user name has no ':'"));
                }
                if kind == CredentialKind::OAuth {
                    return Err(OpError::invalid(
                        "kind",
                        format!(
                            "an OAuth connection is made by logging in: run \
                             `executor connections login {namespace}`"
                        ),
                    ));
                }
                (kind, username, parsed.to_string())
            }
        };
        let record = ConnectionRecord {
            org_id: actor.org_id.clone(),
            namespace,
            kind,
            username,
            secret,
            updated_at_ms: now_ms(),
            oauth: None,
            generation: 0,
        };
        let status = status_of(&record);
        self.store().set_connection(record).await?;
        Ok(status)
    }

    pub async fn list_connections(&self, actor: &Actor) -> OpResult<Vec<ConnectionStatus>> {
        let records = self.store().list_connections(&actor.org_id).await?;
        Ok(records.iter().map(status_of).collect())
    }

    pub async fn connection_status(
        &self,
        actor: &Actor,
        namespace: &str,
    ) -> OpResult<ConnectionStatus> {
        let record = self
            .store()
            .get_connection(&actor.org_id, namespace)
            .await?
            .ok_or_else(|| OpError::not_found(format_args!("connection for {namespace:?}")))?;
        Ok(status_of(&record))
    }

    pub async fn remove_connection(&self, actor: &Actor, namespace: &str) -> OpResult<()> {
        if self
            .store()
            .remove_connection(&actor.org_id, namespace)
            .await?
        {
            Ok(())
        } else {
            Err(OpError::not_found(format_args!(
                "connection for {namespace:?}"
            )))
        }
    }
}

fn status_of(record: &ConnectionRecord) -> ConnectionStatus {
    let stored = if record.kind == CredentialKind::OAuth {
        executor_oauth::Grant::from_record(record)
            .map(|g| g.describe(now_ms()))
            .unwrap_or_else(|e| format!("unreadable: {e}"))
    } else if record.secret.starts_with("env://") {
        record.secret.clone()
    } else {
        "sealed".to_string()
    };
    ConnectionStatus {
        namespace: record.namespace.clone(),
        kind: record.kind,
        stored,
        username: record.username.clone(),
        updated_at_ms: record.updated_at_ms,
    }
}

fn long_enough(secret: &str, field: &'static str) -> OpResult<()> {
    // Counted in characters, as the API schema's minLength counts them; four
    // characters are at least four bytes, the shortest secret redaction scrubs.
    if secret.chars().count() < MIN_SECRET_CHARS {
        return Err(OpError::invalid(
            field,
            format!(
                "a secret of fewer than {MIN_SECRET_CHARS} characters is refused: it could not be \
                 kept out of results"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_measured_in_characters_as_the_schema_measures_it() {
        // Two characters, four bytes: the API schema's minLength refuses it,
        // so the operation must too.
        assert!(long_enough("\u{f0}\u{ad}", "value").is_err());
        assert!(long_enough("abc", "value").is_err());
        assert!(long_enough("abcd", "value").is_ok());
        assert!(long_enough("\u{f0}\u{ad}\u{f0}\u{ad}", "value").is_ok());
    }
}
