//! Connections: the credential of each integration, as the org stored it
//! (sealed with the data dir's key, or an `env://` reference), resolved at
//! call time for the invokers.

use std::sync::Arc;

use executor_catalog::ToolError;
use executor_oauth::OAuth;
use executor_outbound::{Credential, CredentialSource, Refusal, Retry};
use executor_store::secrets::{self, SecretKey, SecretRef};
use executor_store::{ConnectionStore, CredentialKind};
use futures::future::BoxFuture;

/// Where credentials come from: the org's connections in the store,
/// unsealed with the data dir's key; OAuth connections through `oauth`,
/// which refreshes their tokens.
pub struct Credentials {
    pub store: Arc<dyn ConnectionStore>,
    pub key: Option<Arc<SecretKey>>,
    pub oauth: Option<Arc<OAuth>>,
}

impl CredentialSource for Credentials {
    fn credential<'a>(
        &'a self,
        org_id: &'a str,
        namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, ToolError>> {
        Box::pin(self.resolve(org_id, namespace))
    }

    fn refused<'a>(
        &'a self,
        org_id: &'a str,
        namespace: &'a str,
        refusal: Refusal<'a>,
    ) -> BoxFuture<'a, Result<Retry, ToolError>> {
        Box::pin(async move {
            let Some(oauth) = &self.oauth else {
                return Ok(Retry::No);
            };
            let Credential::Bearer(token) = refusal.credential else {
                return Ok(Retry::No);
            };
            let is_oauth = matches!(
                self.store.get_connection(org_id, namespace).await,
                Ok(Some(c)) if c.kind == CredentialKind::OAuth
            );
            if !is_oauth {
                return Ok(Retry::No);
            }
            let renewed = oauth
                .refused(
                    org_id,
                    namespace,
                    token,
                    refusal.status,
                    refusal.www_authenticate,
                )
                .await?;
            Ok(renewed.map_or(Retry::No, |t| Retry::With(Credential::Bearer(t))))
        })
    }
}

impl Credentials {
    /// The credential for `namespace`, or None when no connection is set.
    async fn resolve(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> Result<Option<Credential>, ToolError> {
        let unavailable = || {
            ToolError::new(
                "connection_missing",
                format!("the connection of {namespace} could not be read"),
            )
        };
        let connection = self
            .store
            .get_connection(org_id, namespace)
            .await
            .map_err(|_| unavailable())?;
        let Some(connection) = connection else {
            return Ok(None);
        };
        if connection.kind == CredentialKind::OAuth {
            let oauth = self.oauth.as_ref().ok_or_else(unavailable)?;
            return oauth
                .access_token(&connection)
                .await
                .map(|t| Some(Credential::Bearer(t)));
        }
        let reference = SecretRef::parse(&connection.secret).map_err(|_| unavailable())?;
        let key = self.key.as_deref().ok_or_else(unavailable)?;
        let secret = secrets::resolve(key, &reference, &secrets::connection_aad(org_id, namespace))
            .map_err(|e| {
                // The error names a missing variable or a bad seal, never a value.
                ToolError::new(
                    "connection_missing",
                    format!("the credential of {namespace} cannot be used: {e}"),
                )
            })?;
        // The resolved secret moves into the credential, never copied.
        Ok(Some(match connection.kind {
            CredentialKind::Basic => Credential::Basic {
                username: connection.username.unwrap_or_default(),
                password: secret,
            },
            CredentialKind::Bearer => Credential::Bearer(secret),
            CredentialKind::ApiKey => Credential::ApiKey(secret),
            // Answered above.
            CredentialKind::OAuth => Credential::Bearer(secret),
        }))
    }
}
