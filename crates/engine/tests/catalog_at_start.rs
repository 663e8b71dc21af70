//! An execution's committed catalog read starts with the execution and
//! runs beside its program (`CatalogAtStart`): a program is not held up by
//! the read, its first tool call waits for it, and every execution still
//! makes its own read as it starts (what it calls was committed before it
//! began).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use executor_call::CallContext;
use executor_catalog::{Catalog, CatalogSource};
use executor_engine::{CoreTool, Engine, EngineConfig, core_tool_entries};
use executor_store::testing::TestStore;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::watch;

/// The core catalog, served only once the gate opens; counts its reads.
struct GatedCatalog {
    catalog: Arc<Catalog>,
    open: watch::Receiver<bool>,
    reads: AtomicUsize,
}

impl CatalogSource for GatedCatalog {
    fn catalog(&self, _org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.clone();
        Box::pin(async move {
            let _ = open.wait_for(|open| *open).await;
            self.catalog.clone()
        })
    }
}

fn status(result: &Value) -> &str {
    result["structuredContent"]["status"]
        .as_str()
        .unwrap_or("none")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_runs_while_its_catalog_is_read() {
    let db = TestStore::from_env().await;
    let store = db.store();
    let principal = store
        .ensure_account("catalog@example.com", None)
        .await
        .expect("account");
    let (gate, open) = watch::channel(false);
    let catalogs = Arc::new(GatedCatalog {
        catalog: Arc::new(Catalog::new(core_tool_entries(store.clone()))),
        open,
        reads: AtomicUsize::new(0),
    });
    let engine = Arc::new(Engine::with_catalogs(
        store,
        EngineConfig::default(),
        catalogs.clone(),
    ));
    let ctx = CallContext {
        principal,
        session_id: None,
        approval: Default::default(),
        holder: None,
    };

    // The read never answers while the gate is shut: a run that waited for
    // it before starting would never finish.
    let plain = tokio::time::timeout(
        Duration::from_secs(20),
        engine.call_tool(&ctx, CoreTool::Execute, &json!({ "code": "return 1;" })),
    )
    .await
    .expect("a program that calls no tool does not wait for the catalog")
    .into_result();
    assert_eq!(status(&plain), "completed", "{plain}");
    assert_eq!(plain["structuredContent"]["result"], json!(1));
    assert_eq!(
        catalogs.reads.load(Ordering::SeqCst),
        1,
        "the read starts with the execution"
    );

    // A tool call waits for the read, then sees the catalog.
    let calling = {
        let (engine, ctx) = (engine.clone(), ctx.clone());
        tokio::spawn(async move {
            let code =
                "const found = await tools.executor.integrations.list({}); return typeof found;";
            engine
                .call_tool(&ctx, CoreTool::Execute, &json!({ "code": code }))
                .await
        })
    };
    gate.send(true).expect("the catalog source listens");
    let called = tokio::time::timeout(Duration::from_secs(20), calling)
        .await
        .expect("the tool call is answered once the catalog is read")
        .expect("the task finished")
        .into_result();
    assert_eq!(status(&called), "completed", "{called}");
    assert_eq!(called["structuredContent"]["result"], json!("object"));
    assert_eq!(
        catalogs.reads.load(Ordering::SeqCst),
        2,
        "one read per execution"
    );
    drop(db);
}
