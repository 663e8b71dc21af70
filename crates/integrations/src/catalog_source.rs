//! Org catalogs built from the store: the core tools plus every stored
//! integration's tools. One catalog per org is shared by all its sessions
//! and rebuilt only when the org's catalog version changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_engine::{Catalog, CatalogSource, ToolEntry, ToolInvoker};
use executor_store::{IntegrationRecord, Store};
use futures::future::BoxFuture;

use crate::ImportedIntegration;
use crate::http::HttpInvoker;
use crate::invoker::{Credentials, OpenApiInvoker};

/// What a stored integration's tools are invoked with.
pub trait InvokerFactory: Send + Sync + 'static {
    fn openapi(&self, org_id: &str, integration: ImportedIntegration) -> Arc<dyn ToolInvoker>;
}

pub struct StoreCatalogs {
    store: Arc<dyn Store>,
    invokers: Arc<dyn InvokerFactory>,
    cache: Mutex<HashMap<String, (i64, Arc<Catalog>)>>,
}

impl StoreCatalogs {
    pub fn new(store: Arc<dyn Store>, invokers: Arc<dyn InvokerFactory>) -> Self {
        StoreCatalogs {
            store,
            invokers,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, org_id: &str, version: i64) -> Option<Arc<Catalog>> {
        let cache = self.cache.lock().ok()?;
        let (v, catalog) = cache.get(org_id)?;
        (*v == version).then(|| catalog.clone())
    }

    /// The org's catalog, and whether it is complete: a catalog built
    /// while the integrations could not be read serves the core tools for
    /// now but is not cached, so the next request tries again.
    ///
    /// Runs on the blocking pool: it reads whole stored documents, parses
    /// them and builds the search index (tens of ms for a large API), which
    /// must not hold an async worker.
    async fn build(&self, org_id: &str) -> (Arc<Catalog>, bool) {
        let (store, invokers, org) = (
            self.store.clone(),
            self.invokers.clone(),
            org_id.to_string(),
        );
        let handle = tokio::runtime::Handle::current();
        let built = tokio::task::spawn_blocking(move || {
            let records = handle.block_on(store.list_integrations(&org, true));
            let mut entries = executor_engine::core_tool_entries(store);
            let complete = match records {
                Ok(records) => {
                    for record in records {
                        entries.extend(tools_of(invokers.as_ref(), &org, record));
                    }
                    true
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not load integrations; serving the core tools only");
                    false
                }
            };
            (Arc::new(Catalog::new(entries)), complete)
        })
        .await;
        built.unwrap_or_else(|e| {
            tracing::error!(error = %e, "building a catalog failed; serving the core tools only");
            let core = executor_engine::core_tool_entries(self.store.clone());
            (Arc::new(Catalog::new(core)), false)
        })
    }
}

fn tools_of(
    invokers: &dyn InvokerFactory,
    org_id: &str,
    record: IntegrationRecord,
) -> Vec<ToolEntry> {
    if record.kind != "openapi" {
        tracing::warn!(kind = %record.kind, namespace = %record.namespace, "unknown integration kind");
        return Vec::new();
    }
    let integration: ImportedIntegration = match serde_json::from_str(&record.document) {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(error = %e, namespace = %record.namespace, "stored integration does not parse");
            return Vec::new();
        }
    };
    let invoker = invokers.openapi(org_id, integration.clone());
    tool_entries(&integration, invoker)
}

/// The catalog entries of an imported integration, all invoked by `invoker`.
pub fn tool_entries(
    integration: &ImportedIntegration,
    invoker: Arc<dyn ToolInvoker>,
) -> Vec<ToolEntry> {
    let namespace = &integration.namespace;
    integration
        .tools
        .iter()
        .map(|t| ToolEntry {
            path: format!("{namespace}.{}", t.name),
            name: t.name.clone(),
            description: t.description.clone(),
            integration: namespace.clone(),
            input_schema: Some(t.input_schema.clone()),
            output_schema: t.output_schema.clone(),
            requires_approval: t.requires_approval,
            invoker: invoker.clone(),
        })
        .collect()
}

impl CatalogSource for StoreCatalogs {
    fn catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        let org_id = org_id.to_string();
        Box::pin(async move {
            let version = self.store.catalog_version(&org_id).await.unwrap_or(-1);
            if let Some(catalog) = self.cached(&org_id, version) {
                return catalog;
            }
            let (catalog, complete) = self.build(&org_id).await;
            if complete && let Ok(mut cache) = self.cache.lock() {
                cache.insert(org_id, (version, catalog.clone()));
            }
            catalog
        })
    }
}

/// Invokers for stored OpenAPI integrations: one HTTP client and one
/// credential source shared by all of them.
pub struct OpenApiInvokers {
    pub http: Arc<HttpInvoker>,
    pub credentials: Arc<Credentials>,
}

impl InvokerFactory for OpenApiInvokers {
    fn openapi(&self, org_id: &str, integration: ImportedIntegration) -> Arc<dyn ToolInvoker> {
        Arc::new(OpenApiInvoker::new(
            org_id,
            integration,
            self.http.clone(),
            self.credentials.clone(),
        ))
    }
}
