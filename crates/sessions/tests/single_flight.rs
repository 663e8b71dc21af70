//! The property this project exists for: after idle disposal, any number of
//! concurrent requests on one session build exactly one runtime, all of them
//! succeed, and every later request succeeds too.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig};
use executor_mcp::{McpServer, ProtocolVersion};
use executor_sessions::{AcquireError, Sessions, SessionsConfig};
use executor_store::testing::TestStore;
use executor_store::{ElicitationMode, Principal};
use serde_json::json;

struct Fixture {
    sessions: Sessions,
    owner: Principal,
    /// Removed when the fixture is dropped.
    db: TestStore,
}

async fn fixture() -> Fixture {
    fixture_with(SessionsConfig {
        // Zero: every runtime without a lease is disposed by dispose_idle.
        idle_timeout: Duration::ZERO,
        ..SessionsConfig::default()
    })
    .await
}

/// A node peers can reach (it has a URL), which keeps the leases of the
/// runtimes it disposes for `kept`.
async fn parking_fixture(kept: Duration) -> Fixture {
    fixture_with(SessionsConfig {
        idle_timeout: Duration::ZERO,
        node_url: Some("http://127.0.0.1:9".into()),
        lease_kept: kept,
        ..SessionsConfig::default()
    })
    .await
}

/// A second node on `f`'s store.
async fn second_node(f: &Fixture) -> Sessions {
    let store = f.db.reopen().await;
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    Sessions::new(
        store,
        Arc::new(McpServer::new(engine)),
        SessionsConfig::default(),
    )
}

async fn fixture_with(config: SessionsConfig) -> Fixture {
    let db = TestStore::from_env().await;
    let store = db.store();
    let owner = store
        .ensure_account("owner@example.com", None)
        .await
        .expect("account");
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let server = Arc::new(McpServer::new(engine));
    Fixture {
        sessions: Sessions::new(store, server, config),
        owner,
        db,
    }
}

async fn new_session(f: &Fixture) -> String {
    let lease = f
        .sessions
        .create(
            f.owner.clone(),
            ProtocolVersion::V2025_06_18,
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
    let claims = concurrent_requests_build_one_runtime(fixture().await).await;
    assert_eq!(claims, 150 * 3, "one claim per restore");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_on_a_parked_session_build_exactly_one_runtime() {
    let f = parking_fixture(Duration::from_secs(60)).await;
    let claims = concurrent_requests_build_one_runtime(f).await;
    assert_eq!(claims, 0, "a parked lease is restored without a claim");
}

/// 150 rounds of disposal and concurrent requests on three sessions;
/// returns the claims the restores made.
async fn concurrent_requests_build_one_runtime(f: Fixture) -> u64 {
    let ids: Vec<String> = futures_join(3, |_| new_session(&f)).await;
    const ROUNDS: usize = 150;
    const CONCURRENT: usize = 12;
    let claims = f.sessions.metrics().claims.get();
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
    f.sessions.metrics().claims.get() - claims
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
    let restarted = second_node(&f).await;
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
    assert_eq!(lease.protocol_version(), ProtocolVersion::V2025_06_18);
    assert_eq!(lease.record.client_info, json!({"name": "t"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disposed_session_keeps_its_lease_here_and_is_restored_without_a_claim() {
    let f = parking_fixture(Duration::from_secs(60)).await;
    let id = new_session(&f).await;
    let other = second_node(&f).await;
    for _ in 0..3 {
        assert_eq!(f.sessions.dispose_idle(), 1);
        assert_eq!(f.sessions.live_count(), 0);
        // Held here while parked: another node hands its requests here.
        match other.acquire(&id, &f.owner).await {
            Err(AcquireError::HeldElsewhere(holder)) => {
                assert_eq!(holder.node_id, f.sessions.node_id());
            }
            r => panic!("a parked session was taken by another node: {:?}", r.err()),
        }
        let claims = f.sessions.metrics().claims.get();
        let lease = f.sessions.acquire(&id, &f.owner).await.expect("restored");
        assert_eq!(lease.record.client_info, json!({"name": "t"}));
        assert_eq!(f.sessions.metrics().claims.get(), claims, "no claim");
    }
    // Terminated while parked: terminated for good, on every node.
    f.sessions.dispose_idle();
    f.sessions
        .terminate(&id, &f.owner)
        .await
        .expect("terminate");
    f.sessions.dispose_idle();
    assert_eq!(
        f.sessions.acquire(&id, &f.owner).await.err(),
        Some(AcquireError::Terminated)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_lease_is_released_once_kept_long_enough_and_the_session_moves() {
    let f = parking_fixture(Duration::from_millis(50)).await;
    let id = new_session(&f).await;
    let other = second_node(&f).await;
    assert_eq!(f.sessions.dispose_idle(), 1);
    assert!(matches!(
        other.acquire(&id, &f.owner).await.err(),
        Some(AcquireError::HeldElsewhere(_))
    ));
    tokio::time::sleep(Duration::from_millis(80)).await;
    // The reaper's next pass releases it (in the background).
    assert_eq!(f.sessions.dispose_idle(), 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let lease = loop {
        match other.acquire(&id, &f.owner).await {
            Ok(lease) => break lease,
            Err(AcquireError::HeldElsewhere(_)) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("the released session was not taken here: {e:?}"),
        }
    };
    assert_eq!(lease.protocol_version(), ProtocolVersion::V2025_06_18);
    // Its first node no longer holds it: it hands requests to the new holder.
    match f.sessions.acquire(&id, &f.owner).await {
        Err(AcquireError::HeldElsewhere(holder)) => {
            assert_eq!(holder.node_id, other.node_id());
        }
        r => panic!("the first node restored a released session: {:?}", r.err()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_own_lease_lapsed_forgets_what_it_parked() {
    // No maintenance task renews the node's lease here: it lapses.
    let f = fixture_with(SessionsConfig {
        idle_timeout: Duration::ZERO,
        node_url: Some("http://127.0.0.1:9".into()),
        node_lease: Duration::from_millis(200),
        ..SessionsConfig::default()
    })
    .await;
    let id = new_session(&f).await;
    assert_eq!(f.sessions.dispose_idle(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another node may hold it by now: the restore claims it again.
    let claims = f.sessions.metrics().claims.get();
    f.sessions.acquire(&id, &f.owner).await.expect("restored");
    assert_eq!(f.sessions.metrics().claims.get(), claims + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_an_address_releases_at_disposal() {
    // Peers could not hand it requests: it keeps nothing.
    let f = fixture_with(SessionsConfig {
        idle_timeout: Duration::ZERO,
        lease_kept: Duration::from_secs(60),
        ..SessionsConfig::default()
    })
    .await;
    let id = new_session(&f).await;
    let other = second_node(&f).await;
    assert_eq!(f.sessions.dispose_idle(), 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while let Err(e) = other.acquire(&id, &f.owner).await {
        assert!(
            matches!(e, AcquireError::HeldElsewhere(_)) && std::time::Instant::now() < deadline,
            "not released: {e:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
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
