//! Org catalogs built from the store: the core tools plus every stored
//! integration's tools. One catalog per org is shared by all its sessions
//! and rebuilt only when the org's catalog version changes.
//!
//! A build is single-flight per (org, version), the shape of
//! `Sessions::acquire`: the first request after a change starts it on its
//! own task (the work itself on the blocking pool), every request that
//! arrives meanwhile awaits that one build, and a requester that goes away
//! does not cancel it. Each org has its own build, so another org's
//! requests never wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_engine::{Catalog, CatalogSource, ToolEntry, ToolInvoker};
use executor_store::{IntegrationRecord, Store};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::ImportedIntegration;
use crate::http::HttpInvoker;
use crate::invoker::{Credentials, OpenApiInvoker};

/// What a stored integration's tools are invoked with.
pub trait InvokerFactory: Send + Sync + 'static {
    fn openapi(&self, org_id: &str, integration: ImportedIntegration) -> Arc<dyn ToolInvoker>;
}

/// A build in flight: the catalog, and whether it is complete.
type Build = Shared<BoxFuture<'static, (Arc<Catalog>, bool)>>;

pub struct StoreCatalogs {
    store: Arc<dyn Store>,
    invokers: Arc<dyn InvokerFactory>,
    /// Built catalogs by org, with the catalog version they were built at.
    /// Std locks: held only to read or swap an entry, never across an await.
    cache: Mutex<HashMap<String, (i64, Arc<Catalog>)>>,
    /// Builds in flight by org, with the version each builds.
    building: Mutex<HashMap<String, (i64, Build)>>,
}

impl StoreCatalogs {
    pub fn new(store: Arc<dyn Store>, invokers: Arc<dyn InvokerFactory>) -> Self {
        StoreCatalogs {
            store,
            invokers,
            cache: Mutex::new(HashMap::new()),
            building: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, org_id: &str, version: i64) -> Option<Arc<Catalog>> {
        let cache = self.cache.lock().ok()?;
        let (v, catalog) = cache.get(org_id)?;
        (*v == version).then(|| catalog.clone())
    }

    /// The build of `org_id` at `version`: the one in flight, or a new one
    /// started on its own task.
    fn build_at(&self, org_id: &str, version: i64) -> Build {
        let mut building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, build)) = building.get(org_id)
            && *v == version
        {
            return build.clone();
        }
        let task = tokio::spawn(build(
            self.store.clone(),
            self.invokers.clone(),
            org_id.to_string(),
        ));
        let store = self.store.clone();
        let shared = async move {
            task.await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "building a catalog failed; serving the core tools only");
                let core = executor_engine::core_tool_entries(store);
                (Arc::new(Catalog::new(core)), false)
            })
        }
        .boxed()
        .shared();
        building.insert(org_id.to_string(), (version, shared.clone()));
        shared
    }

    /// Keeps a finished build (when complete) and forgets it as in flight.
    fn finish(&self, org_id: &str, version: i64, catalog: &Arc<Catalog>, complete: bool) {
        if complete && let Ok(mut cache) = self.cache.lock() {
            let newer = cache.get(org_id).is_some_and(|(v, _)| *v > version);
            if !newer {
                cache.insert(org_id.to_string(), (version, catalog.clone()));
            }
        }
        if let Ok(mut building) = self.building.lock()
            && building.get(org_id).is_some_and(|(v, _)| *v == version)
        {
            building.remove(org_id);
        }
    }
}

/// The org's catalog, and whether it is complete: a catalog built while the
/// integrations could not be read serves the core tools for now but is not
/// cached, so the next request tries again.
///
/// Runs on the blocking pool: it reads whole stored documents, parses them
/// and builds the search index (tens of ms for a large API), which must not
/// hold an async worker.
async fn build(
    store: Arc<dyn Store>,
    invokers: Arc<dyn InvokerFactory>,
    org: String,
) -> (Arc<Catalog>, bool) {
    let handle = tokio::runtime::Handle::current();
    let fallback = store.clone();
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
        let core = executor_engine::core_tool_entries(fallback);
        (Arc::new(Catalog::new(core)), false)
    })
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
            let (catalog, complete) = self.build_at(&org_id, version).await;
            self.finish(&org_id, version, &catalog, complete);
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
