//! Retention at the `Sessions` seam: the maintenance loop deletes finished
//! execution records (and their tool calls) past `execution_retention`,
//! once across the processes on the store, and leaves newer ones.

use std::sync::Arc;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig};
use executor_mcp::McpServer;
use executor_sessions::{EXECUTION_RETENTION, Sessions, SessionsConfig};
use executor_store::testing::TestStore;
use executor_store::{ExecutionRecord, ExecutionStatus, now_ms};

fn record(id: &str, org: &str, started_at_ms: i64) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        session_id: None,
        account_id: "acc".into(),
        org_id: org.into(),
        code: "return 1".into(),
        status: ExecutionStatus::Completed,
        result: None,
        error: None,
        logs: Vec::new(),
        tool_calls: Vec::new(),
        started_at_ms,
        duration_ms: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_deletes_execution_records_past_their_retention() {
    assert_eq!(
        SessionsConfig::default().execution_retention,
        EXECUTION_RETENTION
    );
    let db = TestStore::from_env().await;
    let store = db.store();
    let hour = 3_600_000;
    store
        .insert_execution(record("old", "org", now_ms() - 2 * hour))
        .await
        .unwrap();
    store
        .insert_execution(record("new", "org", now_ms() - 60_000))
        .await
        .unwrap();
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let sessions = Sessions::new(
        store.clone(),
        Arc::new(McpServer::new(engine)),
        SessionsConfig {
            execution_retention: Duration::from_secs(3600),
            ..SessionsConfig::default()
        },
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let maintenance = tokio::spawn(sessions.run_maintenance(stopped));
    let mut gone = false;
    for _ in 0..100 {
        if store.get_execution("old").await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    maintenance.await.unwrap();
    assert!(gone, "the old record was never deleted");
    assert!(store.get_execution("new").await.unwrap().is_some());
}
