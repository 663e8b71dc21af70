//! GraphQL as a kind of integration the server serves: stored records
//! loaded into tools that call the endpoint through the guarded client.

use std::sync::Arc;

use executor_catalog::{IntegrationLoader, LoadedIntegration, ToolInvoker, Unavailable};
use executor_outbound::{CredentialSource, HttpClient};

use crate::invoker::GraphqlInvoker;
use crate::stored::load;

/// Loads stored GraphQL records; their tools call through one HTTP client
/// with the org's connections.
pub struct GraphqlKind {
    http: Arc<HttpClient>,
    credentials: Arc<dyn CredentialSource>,
}

impl GraphqlKind {
    pub fn new(http: Arc<HttpClient>, credentials: Arc<dyn CredentialSource>) -> Self {
        GraphqlKind { http, credentials }
    }
}

impl IntegrationLoader for GraphqlKind {
    fn load(
        &self,
        org_id: &str,
        namespace: &str,
        document: &str,
    ) -> Result<LoadedIntegration, Unavailable> {
        let stored = load(document)?;
        Unavailable::unless_same_namespace(&stored.namespace, namespace)?;
        let (http, credentials) = (self.http.clone(), self.credentials.clone());
        let tools = stored.into_entries(|service| -> Arc<dyn ToolInvoker> {
            Arc::new(GraphqlInvoker::new(org_id, service, http, credentials))
        });
        Ok(LoadedIntegration {
            tools,
            upgraded: None,
        })
    }

    fn status(&self, document: &str) -> String {
        match load(document) {
            Ok(_) => "ok".into(),
            Err(why) => format!("unavailable: {why}"),
        }
    }
}
