//! The registry of integration kinds: each kind's crate, one line.

use std::sync::Arc;

use executor_catalog::IntegrationLoader;
use executor_openapi::OpenApiKind;
use executor_outbound::{CredentialSource, HttpClient};

use executor_store::IntegrationRecord;

use crate::IntegrationKind;

/// The loader of every kind this release serves.
pub struct Kinds {
    loaders: Vec<(IntegrationKind, Arc<dyn IntegrationLoader>)>,
}

impl Kinds {
    /// The kinds this release serves; their tools call through `http` with
    /// the org's connections from `credentials`.
    pub fn new(http: Arc<HttpClient>, credentials: Arc<dyn CredentialSource>) -> Self {
        Kinds::with(vec![(
            IntegrationKind::OpenApi,
            Arc::new(OpenApiKind::new(http, credentials)),
        )])
    }

    /// Kinds with the given loaders (a test stands in its own).
    pub fn with(loaders: Vec<(IntegrationKind, Arc<dyn IntegrationLoader>)>) -> Self {
        Kinds { loaders }
    }

    /// The loader of `record`'s kind; Err says, for `integrations list`
    /// and the agent, that this release does not serve it.
    pub fn of(&self, record: &IntegrationRecord) -> Result<&dyn IntegrationLoader, String> {
        let kind = record.integration_kind().ok();
        kind.and_then(|kind| self.loaders.iter().find(|(k, _)| *k == kind))
            .map(|(_, loader)| loader.as_ref())
            .ok_or_else(|| format!("its kind `{}` is not known to this release", record.kind))
    }
}
