//! Org catalogs at the `CatalogSource` seam: one build per (org, catalog
//! version), shared by every request that waits for it; another org's
//! requests never wait for it; a change loads the changed integration only;
//! a record in an older format is upgraded, and one that cannot be read is
//! reported, never silently dropped; the search index stored beside a
//! record is used, and one a load had to build is stored back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_catalog::{CatalogSource, IntegrationLoader, LoadedIntegration, ToolError};
use executor_integrations::{IntegrationKind, Kinds, StoreCatalogs};
use executor_openapi::{ImportOptions, OpenApiKind};
use executor_outbound::{Credential, CredentialSource, HttpClient, HttpConfig};
use executor_store::{AccountStore, IntegrationRecord, SqliteStore, Store, now_ms};
use futures::future::BoxFuture;

const SPEC: &str = r#"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
  "servers": [{"url": "https://example.com"}],
  "paths": {"/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}}}}"#;

/// No connection anywhere: the tools are not called in these tests.
struct NoCredentials;

impl CredentialSource for NoCredentials {
    fn credential<'a>(
        &'a self,
        _org_id: &'a str,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, ToolError>> {
        Box::pin(async { Ok(None) })
    }
}

/// The OpenAPI kind, counting loads per org and per (org, namespace), and
/// making the slow org's loads take a while.
struct Counting {
    openapi: OpenApiKind,
    builds: Mutex<HashMap<String, usize>>,
    loads: Mutex<HashMap<(String, String), usize>>,
    slow_org: Mutex<Option<String>>,
}

impl Default for Counting {
    fn default() -> Self {
        let http = HttpClient::new(HttpConfig::default()).unwrap();
        Counting {
            openapi: OpenApiKind::new(Arc::new(http), Arc::new(NoCredentials)),
            builds: Mutex::default(),
            loads: Mutex::default(),
            slow_org: Mutex::default(),
        }
    }
}

impl IntegrationLoader for Counting {
    fn load(
        &self,
        org_id: &str,
        namespace: &str,
        document: &str,
    ) -> Result<LoadedIntegration, executor_catalog::Unavailable> {
        *self
            .builds
            .lock()
            .unwrap()
            .entry(org_id.to_string())
            .or_default() += 1;
        *self
            .loads
            .lock()
            .unwrap()
            .entry((org_id.to_string(), namespace.to_string()))
            .or_default() += 1;
        if self.slow_org.lock().unwrap().as_deref() == Some(org_id) {
            std::thread::sleep(Duration::from_millis(800));
        }
        self.openapi.load(org_id, namespace, document)
    }

    fn status(&self, document: &str) -> String {
        self.openapi.status(document)
    }
}

impl Counting {
    fn builds(&self, org: &str) -> usize {
        self.builds.lock().unwrap().get(org).copied().unwrap_or(0)
    }

    fn loads(&self, org: &str, namespace: &str) -> usize {
        let key = (org.to_string(), namespace.to_string());
        self.loads.lock().unwrap().get(&key).copied().unwrap_or(0)
    }
}

/// Stores `document` as the org's integration `namespace`.
async fn store_document(store: &dyn Store, org: &str, namespace: &str, document: String) {
    store
        .upsert_integration(IntegrationRecord {
            org_id: org.to_string(),
            namespace: namespace.into(),
            kind: "openapi".into(),
            source: "inline".into(),
            base_url: None,
            tool_count: 1,
            document,
            updated_at_ms: now_ms(),
            revision: 0,
            search_index: None,
        })
        .await
        .unwrap();
}

/// `SPEC` imported as `namespace`, in the stored form.
fn stored(namespace: &str) -> String {
    let imported = executor_openapi::import(SPEC, &ImportOptions::new(namespace)).unwrap();
    serde_json::to_string(&imported).unwrap()
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
        store_document(store.as_ref(), &org, "pets", stored("pets")).await;
        orgs.push(org);
    }
    let counting = Arc::new(Counting::default());
    let kinds = Kinds::with(vec![(IntegrationKind::OpenApi, counting.clone() as _)]);
    let catalogs = StoreCatalogs::new(store.clone(), kinds, Vec::new());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_loads_that_integration_only() {
    let (store, counting, catalogs, a, _b, dir) = setup("one-integration").await;
    store_document(store.as_ref(), &a, "shop", stored("shop")).await;
    let before = catalogs.catalog(&a).await;
    assert_eq!(
        (counting.loads(&a, "pets"), counting.loads(&a, "shop")),
        (1, 1)
    );
    // Written again: pets is loaded again, shop is reused as it was.
    store_document(store.as_ref(), &a, "pets", stored("pets")).await;
    let after = catalogs.catalog(&a).await;
    assert!(!Arc::ptr_eq(&before, &after), "a new catalog version");
    assert_eq!(
        (counting.loads(&a, "pets"), counting.loads(&a, "shop")),
        (2, 1)
    );
    let group = |catalog: &executor_catalog::Catalog, namespace: &str| {
        let groups = catalog.groups();
        groups
            .iter()
            .find(|g| g.namespace() == namespace)
            .cloned()
            .unwrap()
    };
    assert!(Arc::ptr_eq(&group(&before, "shop"), &group(&after, "shop")));
    assert!(!Arc::ptr_eq(
        &group(&before, "pets"),
        &group(&after, "pets")
    ));
    // Removed: its tools go, the others stay.
    store.remove_integration(&a, "pets").await.unwrap();
    let removed = catalogs.catalog(&a).await;
    assert!(removed.get("pets.pets.listPets").is_none());
    assert!(Arc::ptr_eq(
        &group(&after, "shop"),
        &group(&removed, "shop")
    ));
    assert_eq!(counting.loads(&a, "shop"), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_format_record_is_upgraded_and_stored_back() {
    let (store, _counting, catalogs, a, _b, dir) = setup("upgrade").await;
    // Format 1: no `format`, no shared `definitions`; each tool schema
    // carries its own `$defs`.
    let mut v1: serde_json::Value = serde_json::from_str(&stored("old")).unwrap();
    v1.as_object_mut().unwrap().remove("format");
    v1.as_object_mut().unwrap().remove("definitions");
    v1["tools"][0]["output_schema"] = serde_json::json!({
        "$ref": "#/$defs/Pet", "$defs": {"Pet": {"type": "object"}}
    });
    store_document(store.as_ref(), &a, "old", v1.to_string()).await;
    let catalog = catalogs.catalog(&a).await;
    let tool = catalog
        .get("old.pets.listPets")
        .expect("the old record's tool is served");
    assert!(
        tool.definitions
            .as_ref()
            .is_some_and(|d| d.get("Pet").is_some())
    );
    let records = store.list_integrations(&a, false).await.unwrap();
    let record = records.iter().find(|r| r.namespace == "old").unwrap();
    let document = store
        .integration_document(&a, "old", record.revision)
        .await
        .unwrap()
        .unwrap()
        .document;
    assert_eq!(
        executor_openapi::format_of(&document),
        executor_openapi::FORMAT
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_read_is_reported_not_dropped() {
    let (store, _counting, catalogs, a, _b, dir) = setup("unavailable").await;
    store_document(
        store.as_ref(),
        &a,
        "future",
        r#"{"format":99,"tools":[]}"#.into(),
    )
    .await;
    store_document(
        store.as_ref(),
        &a,
        "broken",
        r#"{"format":2,"tools":"#.into(),
    )
    .await;
    let catalog = catalogs.catalog(&a).await;
    assert!(
        catalog.get("pets.pets.listPets").is_some(),
        "the others are served"
    );
    let future = catalog
        .unavailable("future.x.y")
        .expect("future is reported");
    assert!(future.message.contains("newer release"), "{future}");
    assert_eq!(future.code, "integration_unavailable");
    assert!(catalog.unavailable("broken.x").is_some());
    let listed: Vec<_> = catalog
        .integrations()
        .iter()
        .filter(|i| i.unavailable.is_some())
        .map(|i| i.namespace.as_str())
        .collect();
    assert_eq!(listed, ["broken", "future"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_record_of_a_kind_not_served_is_reported_by_its_kind() {
    let (store, counting, catalogs, a, _b, dir) = setup("kind").await;
    store
        .upsert_integration(IntegrationRecord {
            org_id: a.clone(),
            namespace: "later".into(),
            kind: "soap".into(),
            source: "inline".into(),
            base_url: None,
            tool_count: 1,
            document: "{}".into(),
            updated_at_ms: now_ms(),
            revision: 0,
            search_index: None,
        })
        .await
        .unwrap();
    let catalog = catalogs.catalog(&a).await;
    assert!(catalog.get("pets.pets.listPets").is_some());
    let why = catalog.unavailable("later.x").expect("later is reported");
    assert!(why.message.contains("`soap` is not known"), "{why}");
    // No loader was asked to read it.
    assert_eq!(counting.loads(&a, "later"), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// The search index stored beside `namespace`'s current record.
async fn stored_index(store: &dyn Store, org: &str, namespace: &str) -> Option<Vec<u8>> {
    let records = store.list_integrations(org, false).await.unwrap();
    let record = records.iter().find(|r| r.namespace == namespace).unwrap();
    store
        .integration_document(org, namespace, record.revision)
        .await
        .unwrap()
        .unwrap()
        .search_index
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_search_index_is_used_and_one_a_load_built_is_stored_back() {
    let (store, counting, catalogs, a, _b, dir) = setup("search-index").await;
    // "pets" was stored without an index, "damaged" with bytes that are
    // not one: the load builds both and stores them back.
    let mut damaged = IntegrationRecord {
        org_id: a.clone(),
        namespace: "damaged".into(),
        kind: "openapi".into(),
        source: "inline".into(),
        base_url: None,
        tool_count: 1,
        document: stored("damaged"),
        updated_at_ms: now_ms(),
        revision: 0,
        search_index: Some(b"not an index".to_vec()),
    };
    store.upsert_integration(damaged.clone()).await.unwrap();
    assert_eq!(stored_index(store.as_ref(), &a, "pets").await, None);
    let catalog = catalogs.catalog(&a).await;
    let found: Vec<_> = catalog.search("list pets", Some("damaged"));
    assert_eq!(found[0].0.path.as_ref(), "damaged.pets.listPets");
    let kinds = Kinds::with(vec![(IntegrationKind::OpenApi, counting.clone() as _)]);
    for namespace in ["pets", "damaged"] {
        let mut index = None;
        for _ in 0..200 {
            index = stored_index(store.as_ref(), &a, namespace)
                .await
                .filter(|bytes| bytes.as_slice() != b"not an index");
            if index.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let index = index.unwrap_or_else(|| panic!("{namespace}'s built index is stored back"));
        // What was stored back is taken as it is by the next load.
        damaged.namespace = namespace.into();
        damaged.document = stored(namespace);
        let loaded = kinds
            .load_group(&a, &damaged, &damaged.document, Some(&index))
            .unwrap();
        assert!(loaded.index_reused, "{namespace}'s stored index is used");
        assert_eq!(loaded.group.encoded_index(), index);
    }
    // What `integrations add` stores is used as it is, and an index of
    // other tools is not.
    let index = kinds.search_index(&a, &damaged).unwrap();
    let loaded = kinds
        .load_group(&a, &damaged, &damaged.document, Some(&index))
        .unwrap();
    assert!(loaded.index_reused);
    let mut pets = damaged.clone();
    pets.namespace = "pets".into();
    pets.document = stored("pets");
    let other = kinds
        .load_group(&a, &pets, &pets.document, Some(&index))
        .unwrap();
    assert!(!other.index_reused, "damaged's index does not serve pets");
    let _ = std::fs::remove_dir_all(dir);
}

/// On Postgres an execution's catalog is read at the version committed now,
/// so an integration another process just added is there before its notice
/// arrives (this fails when executions read the kept version); a tool
/// list, which that notice refreshes, may use the version this node kept,
/// and takes a newer catalog already built instead of building an older
/// one again (the notice often arrives first, so that half holds either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_sees_a_change_before_its_notice_and_a_tool_list_never_builds_older() {
    let Some(db) = executor_store::testing::PgTestDb::create().await else {
        return;
    };
    let (writer, reader) = (db.store().await, db.store().await);
    let org = writer
        .ensure_account("a@pg.test", None)
        .await
        .unwrap()
        .org_id;
    store_document(writer.as_ref(), &org, "pets", stored("pets")).await;
    let counting = Arc::new(Counting::default());
    let kinds = Kinds::with(vec![(IntegrationKind::OpenApi, counting.clone() as _)]);
    let catalogs = StoreCatalogs::new(reader.clone(), kinds, Vec::new());
    let listed = catalogs.listed_catalog(&org).await;
    assert!(listed.get("pets.pets.listPets").is_some());
    for round in 0..40 {
        let namespace = format!("shop{round}");
        store_document(writer.as_ref(), &org, &namespace, stored(&namespace)).await;
        // At once, not waiting for the notice.
        let executed = catalogs.catalog(&org).await;
        let tool = format!("{namespace}.pets.listPets");
        assert!(
            executed.get(&tool).is_some(),
            "{tool} in the execution's catalog"
        );
        let listed = catalogs.listed_catalog(&org).await;
        assert!(
            Arc::ptr_eq(&listed, &executed),
            "the tool list took the newer catalog"
        );
    }
    assert_eq!(counting.builds(&org), 41, "each integration loaded once");
}
