//! The property this project exists for: after idle disposal, any number of
//! concurrent requests on one session build exactly one runtime, all of them
//! succeed, and every later request succeeds too.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig};
use executor_mcp::McpServer;
use executor_sessions::{AcquireError, Sessions, SessionsConfig};
use executor_store::{ElicitationMode, Principal, SqliteStore, Store};
use serde_json::json;

struct Fixture {
    sessions: Sessions,
    owner: Principal,
    /// Removed when the fixture is dropped.
    dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("executor.db")).expect("store"));
    let owner = store
        .ensure_account("owner@example.com", None)
        .await
        .expect("account");
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let server = Arc::new(McpServer::new(engine));
    let config = SessionsConfig {
        // Zero: every runtime without a lease is disposed by dispose_idle.
        idle_timeout: Duration::ZERO,
        ..SessionsConfig::default()
    };
    Fixture {
        sessions: Sessions::new(store, server, config),
        owner,
        dir,
    }
}

async fn new_session(f: &Fixture) -> String {
    let lease = f
        .sessions
        .create(
            f.owner.clone(),
            "2025-06-18",
            json!({"name": "t"}),
            json!({}),
            ElicitationMode::Model,
        )
        .await
        .expect("create");
    lease.id().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_after_idle_build_exactly_one_runtime() {
    let f = fixture().await;
    let ids: Vec<String> = futures_join(3, |_| new_session(&f)).await;
    const ROUNDS: usize = 150;
    const CONCURRENT: usize = 12;
    for round in 0..ROUNDS {
        assert_eq!(
            f.sessions.dispose_idle(),
            ids.len(),
            "round {round}: all runtimes disposed"
        );
        assert_eq!(f.sessions.live_count(), 0);
        let builds_before = f.sessions.metrics().builds.load(Ordering::SeqCst);
        let mut tasks = Vec::new();
        for id in &ids {
            for _ in 0..CONCURRENT {
                let sessions = f.sessions.clone();
                let (id, owner) = (id.clone(), f.owner.clone());
                tasks.push(tokio::spawn(async move {
                    let lease = sessions.acquire(&id, &owner).await?;
                    Ok::<_, AcquireError>(Arc::as_ptr(lease.runtime()) as usize)
                }));
            }
        }
        let mut runtimes = std::collections::HashSet::new();
        for t in tasks {
            runtimes.insert(t.await.expect("task").expect("acquire succeeds"));
        }
        let builds = f.sessions.metrics().builds.load(Ordering::SeqCst) - builds_before;
        assert_eq!(
            builds as usize,
            ids.len(),
            "round {round}: one build per session"
        );
        assert_eq!(
            runtimes.len(),
            ids.len(),
            "round {round}: every request shares its session's runtime"
        );
        // The follow-ups: sequential requests after the burst work too.
        for id in &ids {
            for _ in 0..2 {
                f.sessions
                    .acquire(id, &f.owner)
                    .await
                    .expect("follow-up succeeds");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_runtime_is_not_disposed() {
    let f = fixture().await;
    let id = new_session(&f).await;
    let lease = f.sessions.acquire(&id, &f.owner).await.unwrap();
    assert_eq!(f.sessions.dispose_idle(), 0, "busy runtime kept");
    drop(lease);
    assert_eq!(f.sessions.dispose_idle(), 1, "idle runtime disposed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_fail_cleanly_and_leave_nothing_behind() {
    let f = fixture().await;
    for _ in 0..3 {
        let err = f.sessions.acquire("no-such-session", &f.owner).await.err();
        assert_eq!(err, Some(AcquireError::NotFound));
        assert_eq!(f.sessions.live_count(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_caller_is_refused_and_the_session_still_works() {
    let f = fixture().await;
    let id = new_session(&f).await;
    let stranger = f
        .sessions
        .store()
        .ensure_account("stranger@example.com", None)
        .await
        .unwrap();
    f.sessions.dispose_idle();
    // Refused whether the runtime is dormant or live.
    assert_eq!(
        f.sessions.acquire(&id, &stranger).await.err(),
        Some(AcquireError::Forbidden)
    );
    assert_eq!(
        f.sessions.acquire(&id, &stranger).await.err(),
        Some(AcquireError::Forbidden)
    );
    assert!(f.sessions.acquire(&id, &f.owner).await.is_ok());
    assert_eq!(
        f.sessions.terminate(&id, &stranger).await.err(),
        Some(AcquireError::Forbidden)
    );
    assert!(f.sessions.acquire(&id, &f.owner).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_sessions_answer_terminated_even_after_disposal() {
    let f = fixture().await;
    let id = new_session(&f).await;
    f.sessions
        .terminate(&id, &f.owner)
        .await
        .expect("terminate");
    assert_eq!(
        f.sessions.acquire(&id, &f.owner).await.err(),
        Some(AcquireError::Terminated)
    );
    f.sessions.dispose_idle();
    assert_eq!(
        f.sessions.acquire(&id, &f.owner).await.err(),
        Some(AcquireError::Terminated)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_a_new_process_on_the_same_store() {
    let f = fixture().await;
    let id = new_session(&f).await;
    // A second Sessions over the same database stands in for a restarted
    // server: it has nothing in memory and restores from the record.
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&f.dir.path().join("executor.db")).unwrap());
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let restarted = Sessions::new(
        store,
        Arc::new(McpServer::new(engine)),
        SessionsConfig::default(),
    );
    // While the first process is alive it holds the session: the second
    // hands requests to it rather than build a second runtime.
    match restarted.acquire(&id, &f.owner).await {
        Err(AcquireError::HeldElsewhere(holder)) => {
            assert_eq!(holder.node_id, f.sessions.node_id());
            assert_eq!(holder.owner, f.owner);
        }
        other => panic!(
            "expected the live first process to hold it: {:?}",
            other.err()
        ),
    }
    // A stranger learns nothing of where it is held.
    let stranger = Principal {
        account_id: "acct_other".into(),
        org_id: f.owner.org_id.clone(),
    };
    assert_eq!(
        restarted.acquire(&id, &stranger).await.err(),
        Some(AcquireError::Forbidden)
    );
    // Shut down, the first process leaves the store and its sessions go free.
    f.sessions.dispose_all().await;
    let lease = restarted
        .acquire(&id, &f.owner)
        .await
        .expect("restored after restart");
    assert_eq!(lease.protocol_version(), "2025-06-18");
    assert_eq!(lease.record.client_info, json!({"name": "t"}));
}

async fn futures_join<T, Fut: std::future::Future<Output = T>>(
    n: usize,
    f: impl Fn(usize) -> Fut,
) -> Vec<T> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(f(i).await);
    }
    out
}
