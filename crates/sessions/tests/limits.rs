//! SPEC §12 limits at the `Sessions` seam: live sessions per (account, org),
//! GET streams per session, the event log of finished POST streams and the
//! events a stream keeps for replay.

use std::sync::Arc;
use std::time::Duration;

use executor_engine::{Engine, EngineConfig};
use executor_mcp::{McpServer, ProtocolVersion};
use executor_sessions::{AcquireError, OutboundStream, Sessions, SessionsConfig, StreamLimit};
use executor_store::testing::TestStore;
use executor_store::{ElicitationMode, LogBounds, Principal, Store};
use serde_json::json;

struct Fixture {
    sessions: Sessions,
    store: Arc<dyn Store>,
    alice: Principal,
    bob: Principal,
    /// Removed when the fixture is dropped.
    _db: TestStore,
}

async fn fixture(config: SessionsConfig) -> Fixture {
    let db = TestStore::from_env().await;
    let store = db.store();
    let alice = store
        .ensure_account("alice@example.com", None)
        .await
        .unwrap();
    let bob = store.ensure_account("bob@example.com", None).await.unwrap();
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let server = Arc::new(McpServer::new(engine));
    Fixture {
        sessions: Sessions::new(store.clone(), server, config),
        store,
        alice,
        bob,
        _db: db,
    }
}

async fn create(f: &Fixture, owner: &Principal) -> Result<String, AcquireError> {
    let lease = f
        .sessions
        .create(
            owner.clone(),
            ProtocolVersion::V2025_06_18,
            json!({}),
            json!({}),
            ElicitationMode::Model,
        )
        .await?;
    Ok(lease.id().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_per_principal_are_capped_for_that_principal_only() {
    let f = fixture(SessionsConfig {
        max_sessions_per_principal: 2,
        ..SessionsConfig::default()
    })
    .await;
    let first = create(&f, &f.alice).await.unwrap();
    create(&f, &f.alice).await.unwrap();
    assert_eq!(
        create(&f, &f.alice).await.err(),
        Some(AcquireError::SessionLimit(2)),
        "the third live session of one (account, org) is refused"
    );
    let refused = AcquireError::SessionLimit(2).to_string();
    assert!(
        refused.contains("limit 2"),
        "the error names the limit: {refused}"
    );
    // Another principal is not affected.
    create(&f, &f.bob).await.unwrap();
    create(&f, &f.bob).await.unwrap();
    // Live sessions of the capped principal keep working.
    f.sessions.acquire(&first, &f.alice).await.unwrap();
    // Ending one frees a slot... but not the creation window: a session
    // made and deleted still counts as created within the idle timeout.
    f.sessions.terminate(&first, &f.alice).await.unwrap();
    assert_eq!(
        create(&f, &f.alice).await.err(),
        Some(AcquireError::SessionLimit(2)),
        "create-and-delete loops are capped by the creation window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposed_runtimes_free_their_slot_and_restores_count_against_the_cap() {
    let f = fixture(SessionsConfig {
        max_sessions_per_principal: 2,
        // Zero: runtimes without a lease are disposed at once, and the
        // creation window lapses at once.
        idle_timeout: Duration::ZERO,
        ..SessionsConfig::default()
    })
    .await;
    let a = create(&f, &f.alice).await.unwrap();
    let b = create(&f, &f.alice).await.unwrap();
    assert_eq!(f.sessions.dispose_idle(), 2);
    // Dormant records do not count: two more can be created.
    let c = create(&f, &f.alice).await.unwrap();
    let d = create(&f, &f.alice).await.unwrap();
    let held = (
        f.sessions.acquire(&c, &f.alice).await.unwrap(),
        f.sessions.acquire(&d, &f.alice).await.unwrap(),
    );
    // With two live, restoring a dormant one would make three.
    assert_eq!(
        f.sessions.acquire(&a, &f.alice).await.err(),
        Some(AcquireError::SessionLimit(2))
    );
    assert_eq!(
        f.sessions.live_count(),
        2,
        "the refused restore left nothing"
    );
    drop(held);
    assert_eq!(f.sessions.dispose_idle(), 2);
    // Once the live ones are disposed, the dormant ones restore again.
    f.sessions.acquire(&a, &f.alice).await.unwrap();
    f.sessions.acquire(&b, &f.alice).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_streams_per_session_are_capped_and_freed_when_closed() {
    let f = fixture(SessionsConfig {
        max_get_streams_per_session: 2,
        ..SessionsConfig::default()
    })
    .await;
    let id = create(&f, &f.alice).await.unwrap();
    let lease = f.sessions.acquire(&id, &f.alice).await.unwrap();
    let first = lease.add_listener("a".into()).unwrap();
    let _second = lease.add_listener("b".into()).unwrap();
    assert_eq!(
        lease.add_listener("c".into()).err(),
        Some(StreamLimit(2)),
        "a third GET stream is refused"
    );
    // Another session of the same owner has its own streams.
    let other = create(&f, &f.alice).await.unwrap();
    let other = f.sessions.acquire(&other, &f.alice).await.unwrap();
    other.add_listener("x".into()).unwrap();
    // A closed stream (its client went away) frees its place.
    drop(first);
    lease.add_listener("c".into()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_events_of_lapsed_streams_are_deleted_and_undelivered_kept() {
    let f = fixture(SessionsConfig {
        replay_window: Duration::from_millis(200),
        ..SessionsConfig::default()
    })
    .await;
    let id = create(&f, &f.alice).await.unwrap();
    // A finished POST stream whose answer was delivered...
    let mut done = OutboundStream::new(f.store.clone(), &id, "done".into(), 0);
    let answer = done
        .log(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
        .await
        .unwrap();
    f.store
        .mark_delivered(&id, "done", answer.seq)
        .await
        .unwrap();
    // ...and one whose socket died before its answer was written.
    let mut lost = OutboundStream::new(f.store.clone(), &id, "lost".into(), 0);
    lost.log(&json!({"jsonrpc": "2.0", "id": 2, "result": {}}))
        .await
        .unwrap();
    // Inside the window nothing goes: a Last-Event-ID replay may need it.
    assert_eq!(f.sessions.delete_lapsed_events().await, 0);
    assert_eq!(f.store.events_after(&id, "done", 0).await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A stream still being written keeps its delivered events.
    let mut live = OutboundStream::new(f.store.clone(), &id, "live".into(), 0);
    let early = live
        .log(&json!({"jsonrpc": "2.0", "method": "n"}))
        .await
        .unwrap();
    f.store
        .mark_delivered(&id, "live", early.seq)
        .await
        .unwrap();
    assert_eq!(f.sessions.delete_lapsed_events().await, 1);
    assert!(
        f.store
            .events_after(&id, "done", 0)
            .await
            .unwrap()
            .is_empty(),
        "the delivered answer of the finished stream is gone"
    );
    assert_eq!(f.store.events_after(&id, "live", 0).await.unwrap().len(), 1);
    // The undelivered answer is still replayed on the next GET.
    let replayed = executor_sessions::replay(&f.store, &id, None, &[])
        .await
        .unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0].stream_id, "lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_keeps_the_configured_number_of_events_for_replay() {
    let f = fixture(SessionsConfig {
        sse_replay: LogBounds {
            max_events: 2,
            ..LogBounds::DEFAULT
        },
        ..SessionsConfig::default()
    })
    .await;
    let id = create(&f, &f.alice).await.unwrap();
    let lease = f.sessions.acquire(&id, &f.alice).await.unwrap();
    let mut stream = f.sessions.outbound_stream(&lease, "s".into());
    for n in 1..=3 {
        stream
            .log(&json!({"jsonrpc": "2.0", "method": "n", "params": {"n": n}}))
            .await
            .unwrap();
    }
    let kept: Vec<i64> = f
        .store
        .events_after(&id, "s", 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(kept, [2, 3], "the oldest event past the bound is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_leaves_the_events_of_a_post_stream_open_here_to_it() {
    let f = fixture(SessionsConfig::default()).await;
    let id = create(&f, &f.alice).await.unwrap();
    let lease = f.sessions.acquire(&id, &f.alice).await.unwrap();
    // A POST stream whose body is open: its event is logged (undelivered)
    // and on its way to its own connection.
    let post = lease.runtime().open_post_stream("post").await;
    let mut stream = f.sessions.outbound_stream(&lease, "post".into());
    let asked = stream
        .log(&json!({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create"}))
        .await
        .unwrap();
    let open = lease.runtime().in_transit().await;
    assert_eq!(open.streams, ["post"]);
    let replayed = executor_sessions::replay(&f.store, &id, None, &open.streams)
        .await
        .unwrap();
    assert!(
        replayed.is_empty(),
        "a GET took an event in transit: {replayed:?}"
    );
    // While a GET looks, no POST stream joins: it waits for the take.
    let runtime = lease.runtime().clone();
    let joining = tokio::spawn(async move { runtime.open_post_stream("late").await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !joining.is_finished(),
        "a POST stream joined during a GET's take"
    );
    drop(open);
    drop(joining.await.unwrap());
    // Its body went without writing it: the next GET replays it, once.
    drop(post);
    let open = lease.runtime().in_transit().await.streams;
    assert!(open.is_empty());
    let replayed = executor_sessions::replay(&f.store, &id, None, &open)
        .await
        .unwrap();
    assert_eq!(replayed, [asked]);
    let again = executor_sessions::replay(&f.store, &id, None, &open)
        .await
        .unwrap();
    assert!(again.is_empty());
}
