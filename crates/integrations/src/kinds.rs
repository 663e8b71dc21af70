//! The registry of integration kinds: each kind's crate, one line.

use std::sync::Arc;

use executor_catalog::IntegrationLoader;
use executor_openapi::OpenApiKind;
use executor_outbound::{CredentialSource, HttpClient};

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

    /// The loader of `kind`; None when this build does not serve it.
    pub fn loader(&self, kind: IntegrationKind) -> Option<&dyn IntegrationLoader> {
        let found = self.loaders.iter().find(|(k, _)| *k == kind);
        found.map(|(_, loader)| loader.as_ref())
    }
}
