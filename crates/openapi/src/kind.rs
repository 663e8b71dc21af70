//! OpenAPI as a kind of integration the server serves: stored records
//! loaded into tools that call the API through the guarded client.

use std::sync::Arc;

use executor_catalog::{IntegrationLoader, LoadedIntegration, ToolInvoker, Unavailable};
use executor_outbound::{CredentialSource, HttpClient};

use crate::invoker::OpenApiInvoker;
use crate::model::{AuthMethod, FORMAT};
use crate::stored::{LoadError, format_of, load, upgrade};

/// Loads stored OpenAPI records; their tools call through one HTTP client
/// with the org's connections.
pub struct OpenApiKind {
    http: Arc<HttpClient>,
    credentials: Arc<dyn CredentialSource>,
}

impl OpenApiKind {
    pub fn new(http: Arc<HttpClient>, credentials: Arc<dyn CredentialSource>) -> Self {
        OpenApiKind { http, credentials }
    }
}

impl IntegrationLoader for OpenApiKind {
    fn load(
        &self,
        org_id: &str,
        namespace: &str,
        document: &str,
    ) -> Result<LoadedIntegration, Unavailable> {
        let (stored, upgraded) = match load(document) {
            Err(LoadError::Older(_)) => {
                let upgraded = upgrade(document).map_err(|e| e.to_string())?;
                (load(&upgraded).map_err(|e| e.to_string())?, Some(upgraded))
            }
            Err(e) => return Err(e.to_string().into()),
            Ok(stored) => (stored, None),
        };
        Unavailable::unless_same_namespace(&stored.namespace, namespace)?;
        let (http, credentials) = (self.http.clone(), self.credentials.clone());
        let tools = stored.into_entries(|service| -> Arc<dyn ToolInvoker> {
            Arc::new(OpenApiInvoker::new(org_id, service, http, credentials))
        });
        Ok(LoadedIntegration { tools, upgraded })
    }

    /// `ok`, an older format the server upgrades when it loads the record,
    /// or why its tools are unavailable.
    fn status(&self, document: &str) -> String {
        let format = format_of(document);
        if format < FORMAT {
            return format!("ok (format {format}: upgraded when the server loads it)");
        }
        match load(document) {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("unavailable: {e}"),
        }
    }

    /// The security schemes the API description declares.
    fn auth(&self, document: &str) -> Vec<String> {
        #[derive(serde::Deserialize)]
        struct Declared {
            #[serde(default)]
            auth_methods: Vec<AuthMethod>,
        }
        serde_json::from_str::<Declared>(document)
            .map(|d| d.auth_methods.iter().map(AuthMethod::describe).collect())
            .unwrap_or_default()
    }
}
