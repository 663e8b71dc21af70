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
//!
//! A build loads only what changed: each integration's tools are a
//! [`ToolGroup`] kept with the record's revision, and a build reuses every
//! group whose record has not been written since. Loading hands the
//! record's compact stored form to its kind's loader; the source document
//! is never read again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use executor_catalog::{Catalog, CatalogSource, ToolEntry, ToolGroup, Unavailable};
use executor_store::{CatalogStore, IntegrationDocument, IntegrationRecord};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

use crate::Kinds;

/// A build in flight: the catalog, and whether it is complete.
type Build = Shared<BoxFuture<'static, (Arc<Catalog>, bool)>>;

/// A loaded integration: its group, or why it cannot be served; with the
/// revision of the record it was loaded from.
#[derive(Clone)]
struct Loaded {
    revision: i64,
    outcome: Result<Arc<ToolGroup>, Unavailable>,
}

/// What builds share: the store, the kinds, the core tools' group and the
/// integrations loaded so far.
struct Loader {
    store: Arc<dyn CatalogStore>,
    kinds: Kinds,
    core: Arc<ToolGroup>,
    /// By (org, namespace). Std lock: held only to read or swap entries.
    loaded: Mutex<HashMap<(String, String), Loaded>>,
}

pub struct StoreCatalogs {
    loader: Arc<Loader>,
    /// Built catalogs by org, with the catalog version they were built at.
    /// Std locks: held only to read or swap an entry, never across an await.
    cache: Mutex<HashMap<String, (i64, Arc<Catalog>)>>,
    /// Builds in flight by org, with the version each builds.
    building: Mutex<HashMap<String, (i64, Build)>>,
}

impl StoreCatalogs {
    /// Catalogs of the store's integrations, each beside `core`: the
    /// engine's built-in tools, under `executor.`.
    pub fn new(store: Arc<dyn CatalogStore>, kinds: Kinds, core: Vec<ToolEntry>) -> Self {
        let core = Arc::new(ToolGroup::new(CORE_NAMESPACE, core));
        StoreCatalogs {
            loader: Arc::new(Loader {
                store,
                kinds,
                core,
                loaded: Mutex::new(HashMap::new()),
            }),
            cache: Mutex::new(HashMap::new()),
            building: Mutex::new(HashMap::new()),
        }
    }

    /// The kept catalog if it is at `version` or newer (versions only
    /// grow, and a build reads the store after its version was read): a
    /// tool list asked for at a kept version that trails an execution's
    /// committed one takes the newer catalog instead of building the
    /// older one again.
    fn cached_since(&self, org_id: &str, version: i64) -> Option<Arc<Catalog>> {
        let cache = self.cache.lock().ok()?;
        let (v, catalog) = cache.get(org_id)?;
        (*v >= version).then(|| catalog.clone())
    }

    /// A build of `org_id` at `version` or newer, with the version it is
    /// at: the one in flight, or a new one started on its own task.
    fn build_at(&self, org_id: &str, version: i64) -> (i64, Build) {
        let mut building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, build)) = building.get(org_id)
            && *v >= version
        {
            return (*v, build.clone());
        }
        let task = tokio::spawn(build(self.loader.clone(), org_id.to_string()));
        let core = self.loader.core.clone();
        let shared = async move {
            task.await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "building a catalog failed; serving the core tools only");
                (core_only(core), false)
            })
        }
        .boxed()
        .shared();
        building.insert(org_id.to_string(), (version, shared.clone()));
        (version, shared)
    }

    /// The org's catalog at `version` or newer: the one kept, else a build
    /// (the one in flight, or a new one), kept once done.
    async fn catalog_at(&self, org_id: &str, version: i64) -> Arc<Catalog> {
        if let Some(catalog) = self.cached_since(org_id, version) {
            return catalog;
        }
        let (built_at, build) = self.build_at(org_id, version);
        let (catalog, complete) = build.await;
        self.finish(org_id, built_at, &catalog, complete);
        catalog
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

/// The core tools' namespace (`tools.executor.*`).
const CORE_NAMESPACE: &str = "executor";

fn core_only(core: Arc<ToolGroup>) -> Arc<Catalog> {
    Arc::new(Catalog::from_groups(vec![core], Vec::new()))
}

/// The org's catalog, and whether it is complete: a catalog built while the
/// integrations could not be read serves what it could load for now but is
/// not cached, so the next request tries again.
///
/// Runs on the blocking pool: loading a changed integration reads its
/// stored record and indexes its tools (tens of ms for a large API), which
/// must not hold an async worker.
async fn build(loader: Arc<Loader>, org: String) -> (Arc<Catalog>, bool) {
    let handle = tokio::runtime::Handle::current();
    let core = loader.core.clone();
    let built = tokio::task::spawn_blocking(move || loader.build(&handle, &org)).await;
    built.unwrap_or_else(|e| {
        tracing::error!(error = %e, "building a catalog failed; serving the core tools only");
        (core_only(core), false)
    })
}

impl Loader {
    fn build(&self, handle: &tokio::runtime::Handle, org: &str) -> (Arc<Catalog>, bool) {
        let records = match handle.block_on(self.store.list_integrations(org, false)) {
            Ok(records) => records,
            Err(e) => {
                tracing::error!(error = %e, "could not list integrations; serving the core tools only");
                return (core_only(self.core.clone()), false);
            }
        };
        let mut complete = true;
        let mut groups = vec![self.core.clone()];
        let mut unavailable = Vec::new();
        let mut current = Vec::with_capacity(records.len());
        let mut loaded_any = false;
        for record in records {
            current.push(record.namespace.clone());
            let Some((loaded, fresh)) = self.integration(handle, org, &record) else {
                complete = false;
                continue;
            };
            loaded_any |= fresh;
            match loaded.outcome {
                Ok(group) => groups.push(group),
                Err(why) => unavailable.push((record.namespace, why)),
            }
        }
        self.forget_removed(org, &current);
        if loaded_any {
            // Loading parsed whole stored records; their text is freed now.
            // Not on the way of the requests waiting for this build.
            handle.spawn_blocking(executor_call::release_freed_memory);
        }
        (
            Arc::new(Catalog::from_groups(groups, unavailable)),
            complete,
        )
    }

    /// One integration's tools: reused while its record is unchanged, else
    /// loaded from the store (then `true`). None when its record could not
    /// be read (or was written again meanwhile): the build is then
    /// incomplete.
    fn integration(
        &self,
        handle: &tokio::runtime::Handle,
        org: &str,
        record: &IntegrationRecord,
    ) -> Option<(Loaded, bool)> {
        let key = (org.to_string(), record.namespace.clone());
        if let Ok(loaded) = self.loaded.lock()
            && let Some(found) = loaded.get(&key)
            && found.revision == record.revision
        {
            return Some((found.clone(), false));
        }
        let started = Instant::now();
        let stored = handle.block_on(self.store.integration_document(
            org,
            &record.namespace,
            record.revision,
        ));
        let stored = match stored {
            Ok(Some(stored)) => stored,
            Ok(None) => return None,
            Err(e) => {
                tracing::error!(error = %e, namespace = %record.namespace, "could not read an integration");
                return None;
            }
        };
        let read = started.elapsed();
        let loaded = Loaded {
            revision: record.revision,
            outcome: self.load(handle, org, record, stored),
        };
        tracing::info!(
            namespace = %record.namespace,
            tools = loaded.outcome.as_ref().map_or(0, |group| group.len()),
            read_ms = read.as_millis() as u64,
            load_ms = (started.elapsed() - read).as_millis() as u64,
            "loaded an integration"
        );
        if let Ok(mut cache) = self.loaded.lock() {
            cache.insert(key, loaded.clone());
        }
        Some((loaded, true))
    }

    /// Loads a stored document by its kind, storing back a record its kind
    /// upgraded from an older format and a search index it had to build;
    /// Err says why the integration cannot be served.
    fn load(
        &self,
        handle: &tokio::runtime::Handle,
        org: &str,
        record: &IntegrationRecord,
        stored: IntegrationDocument,
    ) -> Result<Arc<ToolGroup>, Unavailable> {
        let IntegrationDocument {
            document,
            search_index,
        } = stored;
        let loaded = self
            .kinds
            .load_group(org, record, &document, search_index.as_deref())
            .inspect_err(|why| {
                tracing::warn!(error = %why, namespace = %record.namespace, "integration cannot be served");
            })?;
        drop((document, search_index));
        let group = Arc::new(loaded.group);
        tracing::debug!(namespace = %record.namespace, index_reused = loaded.index_reused, "search index");
        if !loaded.index_reused {
            self.store_search_index(handle, org, record, group.clone());
        }
        if let Some(upgraded) = loaded.upgraded {
            let kept = handle.block_on(self.store.replace_integration_document(
                org,
                &record.namespace,
                record.revision,
                upgraded,
            ));
            tracing::info!(namespace = %record.namespace, stored = ?kept.ok(), "upgraded a stored integration");
        }
        Ok(group)
    }

    /// Stores the index a load had to build (the record was written
    /// without one, or by another release), so that the next load of the
    /// record reads it. Off the way of the requests waiting for the build.
    fn store_search_index(
        &self,
        handle: &tokio::runtime::Handle,
        org: &str,
        record: &IntegrationRecord,
        group: Arc<ToolGroup>,
    ) {
        let store = self.store.clone();
        let (org, namespace, revision) =
            (org.to_string(), record.namespace.clone(), record.revision);
        handle.spawn(async move {
            let Ok(index) = tokio::task::spawn_blocking(move || group.encoded_index()).await else {
                return;
            };
            let kept = store
                .replace_search_index(&org, &namespace, revision, index)
                .await;
            tracing::info!(%namespace, stored = ?kept.ok(), "stored a search index the load built");
        });
    }

    /// Drops what was loaded for integrations the org no longer has.
    fn forget_removed(&self, org: &str, current: &[String]) {
        if let Ok(mut loaded) = self.loaded.lock() {
            loaded.retain(|(o, namespace), _| o != org || current.contains(namespace));
        }
    }
}

impl CatalogSource for StoreCatalogs {
    fn catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        let org_id = org_id.to_string();
        Box::pin(async move {
            // Committed now, not kept: an integration the CLI just added
            // is callable by the next execution on every node, without
            // waiting for its notice (a race CI's pg-e2e found). On a
            // store error (-1) any catalog kept here is served.
            let version = self
                .loader
                .store
                .committed_catalog_version(&org_id)
                .await
                .unwrap_or(-1);
            self.catalog_at(&org_id, version).await
        })
    }

    fn listed_catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        let org_id = org_id.to_string();
        Box::pin(async move {
            // Kept (Postgres keeps it until a catalog notice moves it, and
            // the tool-list refresh that notice starts reads the new one):
            // a session's restore and initialize make no committed read.
            // On a store error (-1) any catalog kept here is served.
            let version = self
                .loader
                .store
                .catalog_version(&org_id)
                .await
                .unwrap_or(-1);
            self.catalog_at(&org_id, version).await
        })
    }
}
