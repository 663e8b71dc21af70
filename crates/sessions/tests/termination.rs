//! Ending a session, as an operator does (`Sessions::end`, behind the
//! management API's `DELETE /api/v1/sessions/{id}`): whether its runtime is
//! live, parked or on another node, it is terminated at once — its next
//! request is told so and its runtime's streams end — and no runtime is
//! built to do it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig};
use executor_mcp::{McpServer, ProtocolVersion};
use executor_sessions::{AcquireError, Lease, Sessions, SessionsConfig};
use executor_store::testing::PgTestDb;
use executor_store::{ElicitationMode, Principal, SqliteStore, Store};
use serde_json::json;

/// A node on `store`: peers can reach it (it keeps the leases of the
/// runtimes it disposes), and every runtime without a lease is idle.
fn node(store: Arc<dyn Store>) -> Sessions {
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let config = SessionsConfig {
        idle_timeout: Duration::ZERO,
        node_url: Some("http://127.0.0.1:9".into()),
        ..SessionsConfig::default()
    };
    Sessions::new(store, Arc::new(McpServer::new(engine)), config)
}

async fn open(sessions: &Sessions, owner: &Principal) -> Lease {
    sessions
        .create(
            owner.clone(),
            ProtocolVersion::V2025_11_25,
            json!({"name": "t"}),
            json!({}),
            ElicitationMode::Model,
        )
        .await
        .expect("create")
}

/// Waits until the runtime behind `lease` has been disposed.
async fn disposed(lease: &Lease, within: Duration) {
    let mut gone = lease.disposed();
    tokio::time::timeout(within, gone.wait_for(|d| *d))
        .await
        .expect("the runtime is disposed in time")
        .expect("the runtime's signal stays open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_ends_a_live_or_parked_session_here_at_once_without_a_build() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("executor.db")).expect("store"));
    let owner = store
        .ensure_account("owner@example.com", None)
        .await
        .unwrap();
    let sessions = node(store);

    // Live, with a request in flight (its lease): disposed, streams end.
    let live = open(&sessions, &owner).await;
    let live_id = live.id().to_string();
    sessions.end(&live_id).await.expect("end");
    disposed(&live, Duration::from_secs(1)).await;
    assert_eq!(sessions.live_count(), 0);
    drop(live);

    // Parked (its runtime disposed, its lease kept here): forgotten, not
    // rebuilt from the record this node still held in memory.
    let parked_id = open(&sessions, &owner).await.id().to_string();
    assert_eq!(sessions.dispose_idle(), 1);
    let builds = sessions.metrics().builds.load(Ordering::Relaxed);
    sessions.end(&parked_id).await.expect("end");
    assert_eq!(
        sessions.metrics().builds.load(Ordering::Relaxed),
        builds,
        "ending a session builds no runtime"
    );

    for id in [&live_id, &parked_id] {
        assert_eq!(
            sessions.acquire(id, &owner).await.err(),
            Some(AcquireError::Terminated),
            "{id}"
        );
    }
}

/// Issue 37: a session terminated through one node's API (or by a CLI
/// process) went on working on the node that held it live: `SessionGone`
/// ended that node's GET streams of sessions held elsewhere, never its own
/// runtime. Now the holder lets the session go on the notice. Postgres
/// only: it is the store that carries notices between processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ended_on_another_node_is_let_go_by_its_holder_at_once() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let holder_store: Arc<dyn Store> = db.store().await;
    let owner = holder_store
        .ensure_account("owner@pg.test", None)
        .await
        .unwrap();
    let holder = node(holder_store);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let maintenance = tokio::spawn(holder.clone().run_maintenance(stopped));
    let lease = open(&holder, &owner).await;
    let id = lease.id().to_string();

    let other = node(db.store().await);
    match other.acquire(&id, &owner).await {
        Err(AcquireError::HeldElsewhere(h)) => assert_eq!(h.node_id, holder.node_id()),
        r => panic!("the live holder should hold it: {:?}", r.err()),
    }
    other.end(&id).await.expect("end on the other node");

    disposed(&lease, Duration::from_secs(10)).await;
    drop(lease);
    assert_eq!(
        holder.acquire(&id, &owner).await.err(),
        Some(AcquireError::Terminated)
    );
    stop.send_replace(true);
    maintenance.await.expect("maintenance ends");
}
