//! Org catalogs at the `CatalogSource` seam: one build per (org, catalog
//! version), shared by every request that waits for it, and another org's
//! requests never wait for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_engine::{CatalogSource, ToolInvocation, ToolInvoker, ToolResult};
use executor_integrations::{ImportOptions, ImportedIntegration, InvokerFactory, StoreCatalogs};
use executor_store::{IntegrationRecord, SqliteStore, Store, now_ms};
use futures::future::BoxFuture;

const SPEC: &str = r#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
  "servers": [{"url": "https://example.com"}],
  "paths": {"/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}}}"#;

struct Never;

impl ToolInvoker for Never {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { unreachable!("not called in these tests") })
    }
}

/// Counts builds per org (an integration's invoker is made once per build)
/// and makes the slow org's builds take a while.
#[derive(Default)]
struct Counting {
    builds: Mutex<HashMap<String, usize>>,
    slow_org: Mutex<Option<String>>,
}

impl InvokerFactory for Counting {
    fn openapi(&self, org_id: &str, _integration: ImportedIntegration) -> Arc<dyn ToolInvoker> {
        *self
            .builds
            .lock()
            .unwrap()
            .entry(org_id.to_string())
            .or_default() += 1;
        if self.slow_org.lock().unwrap().as_deref() == Some(org_id) {
            std::thread::sleep(Duration::from_millis(800));
        }
        Arc::new(Never)
    }
}

impl Counting {
    fn builds(&self, org: &str) -> usize {
        self.builds.lock().unwrap().get(org).copied().unwrap_or(0)
    }
}

async fn setup(
    name: &str,
) -> (
    Arc<dyn Store>,
    Arc<Counting>,
    StoreCatalogs,
    String,
    String,
    std::path::PathBuf,
) {
    let dir = std::env::temp_dir().join(format!("executor-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("executor.db")).unwrap());
    let mut orgs = Vec::new();
    for email in ["a@builds.test", "b@builds.test"] {
        let org = store.ensure_account(email, None).await.unwrap().org_id;
        let imported = executor_integrations::import(
            SPEC,
            &ImportOptions {
                namespace: "pets".into(),
                ..ImportOptions::default()
            },
        )
        .unwrap();
        store
            .upsert_integration(IntegrationRecord {
                org_id: org.clone(),
                namespace: "pets".into(),
                kind: "openapi".into(),
                source: "inline".into(),
                base_url: None,
                tool_count: imported.tools.len() as i64,
                document: serde_json::to_string(&imported).unwrap(),
                updated_at_ms: now_ms(),
            })
            .await
            .unwrap();
        orgs.push(org);
    }
    let counting = Arc::new(Counting::default());
    let catalogs = StoreCatalogs::new(store.clone(), counting.clone());
    let b = orgs.pop().unwrap();
    let a = orgs.pop().unwrap();
    (store, counting, catalogs, a, b, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_build() {
    let (_store, counting, catalogs, a, _b, dir) = setup("one-build").await;
    *counting.slow_org.lock().unwrap() = Some(a.clone());
    let catalogs = Arc::new(catalogs);
    let waiting: Vec<_> = (0..8)
        .map(|_| {
            let (catalogs, a) = (catalogs.clone(), a.clone());
            tokio::spawn(async move { catalogs.catalog(&a).await })
        })
        .collect();
    let mut built = Vec::new();
    for w in waiting {
        built.push(w.await.unwrap());
    }
    assert_eq!(counting.builds(&a), 1, "one build for eight requests");
    assert!(built.iter().all(|c| Arc::ptr_eq(c, &built[0])));
    assert!(built[0].get("pets.pets.listPets").is_some());
    // Cached afterwards: no second build until the version changes.
    let again = catalogs.catalog(&a).await;
    assert!(Arc::ptr_eq(&again, &built[0]));
    assert_eq!(counting.builds(&a), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_org_never_waits_for_a_build() {
    let (_store, counting, catalogs, a, b, dir) = setup("other-org").await;
    *counting.slow_org.lock().unwrap() = Some(a.clone());
    let catalogs = Arc::new(catalogs);
    let slow = {
        let (catalogs, a) = (catalogs.clone(), a.clone());
        tokio::spawn(async move { catalogs.catalog(&a).await })
    };
    for _ in 0..200 {
        if counting.builds(&a) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(counting.builds(&a), 1, "A's build has started");
    let other = catalogs.catalog(&b).await;
    assert!(other.get("pets.pets.listPets").is_some());
    assert!(
        !slow.is_finished(),
        "B was answered while A's build was still running"
    );
    slow.await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
