//! The store contract: every behaviour the code above the store relies on,
//! run against both implementations. A function here takes a
//! [`TestStore`]; `contract!` makes a `sqlite::NAME` and a `postgres::NAME`
//! test of it. The Postgres ones skip (saying so) where no Postgres answers,
//! unless `EXECUTOR_REQUIRE_POSTGRES=1`.

use std::collections::{BTreeSet, HashSet};

use executor_store::testing::{PgTestDb, TestStore, sqlite_store};
use executor_store::*;

macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (store, dir) = super::sqlite_store();
                    super::$name(super::TestStore::Sqlite(store, dir)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(db) = super::PgTestDb::create().await else { return };
                    let store = db.store().await;
                    super::$name(super::TestStore::Postgres(store, db)).await;
                }
            )*
        }
    };
}

contract!(
    accounts_are_idempotent_and_personal_org_defaults_to_email,
    hardening_personal_orgs_belong_to_their_account,
    one_account_and_one_org_when_first_logins_race,
    tokens_are_found_and_revoked_once,
    sessions_round_trip_and_activity_only_moves_forward,
    terminating_a_session_drops_its_events,
    retention_removes_only_untouched_sessions_and_their_events,
    event_log_keeps_the_newest_within_bounds,
    undelivered_events_are_taken_once,
    undelivered_events_are_taken_once_by_racing_takers,
    replayed_events_go_once_their_stream_is_quiet,
    flush_returns_once_queued_writes_are_committed,
    policies_keep_dense_positions_under_racing_writers,
    integrations_carry_their_revision_and_documents,
    racing_integration_writes_get_distinct_revisions,
    connections_round_trip_in_namespace_order,
    one_refresh_lease_across_two_handles,
    tokens_are_saved_only_at_the_generation_read,
    a_pending_login_is_taken_once_and_never_after_expiry,
    a_posted_decision_is_taken_exactly_once,
    racing_takers_get_a_posted_decision_once,
    executions_round_trip_and_list_newest_first,
    text_with_nul_is_stored_not_refused,
    a_periodic_job_runs_once_per_interval_across_processes,
);

fn session(id: &str, owner: &Principal, at: i64) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        owner: owner.clone(),
        protocol_version: "2025-06-18".into(),
        client_info: serde_json::json!({"name": "t", "version": "1"}),
        client_capabilities: serde_json::json!({"elicitation": {}}),
        elicitation_mode: ElicitationMode::Native,
        created_at_ms: at,
        last_activity_at_ms: at,
        terminated_at_ms: None,
    }
}

fn event(stream: &str, seq: i64, data: &str) -> EventRecord {
    EventRecord {
        session_id: "s".into(),
        stream_id: stream.into(),
        seq,
        data: data.into(),
        undelivered: true,
        created_at_ms: seq,
    }
}

fn oauth_connection(secret: &str) -> ConnectionRecord {
    ConnectionRecord {
        org_id: "org".into(),
        namespace: "api".into(),
        kind: CredentialKind::OAuth,
        username: None,
        secret: secret.into(),
        updated_at_ms: 1,
        oauth: Some("{}".into()),
        generation: 0,
    }
}

fn integration(org: &str, namespace: &str, document: &str) -> IntegrationRecord {
    IntegrationRecord {
        org_id: org.into(),
        namespace: namespace.into(),
        kind: "openapi".into(),
        source: format!("https://example.test/{namespace}.json"),
        base_url: Some("https://api.example.test".into()),
        tool_count: 2,
        document: document.into(),
        updated_at_ms: 7,
        revision: 0,
        search_index: Some(vec![1, 2, 3]),
    }
}

fn execution(id: &str, org: &str, started: i64) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        session_id: Some("s".into()),
        account_id: "acc".into(),
        org_id: org.into(),
        code: "return 1".into(),
        status: ExecutionStatus::Completed,
        result: Some(serde_json::json!({"n": 1})),
        error: None,
        logs: vec!["one".into(), "two".into()],
        tool_calls: serde_json::json!([{"path": "a.b"}]),
        started_at_ms: started,
        duration_ms: 3,
    }
}

fn seqs(events: &[EventRecord]) -> Vec<i64> {
    events.iter().map(|e| e.seq).collect()
}

async fn accounts_are_idempotent_and_personal_org_defaults_to_email(t: TestStore) {
    let s = t.store();
    let a = s.ensure_account("A@example.com", None).await.unwrap();
    let b = s.ensure_account("a@example.com", None).await.unwrap();
    assert_eq!(a, b);
    let c = s
        .ensure_account("a@example.com", Some("acme"))
        .await
        .unwrap();
    assert_eq!(c.account_id, a.account_id);
    assert_ne!(c.org_id, a.org_id);
    assert!(matches!(
        s.ensure_account("nope", None).await,
        Err(StoreError::Invalid(_))
    ));
    let orgs = s.list_orgs().await.unwrap();
    let names: Vec<&str> = orgs.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(names, ["a@example.com", "acme"], "byte order");
    assert_eq!(s.find_org("acme").await.unwrap(), Some(c.org_id.clone()));
    assert_eq!(s.find_org(&c.org_id).await.unwrap(), Some(c.org_id));
    assert_eq!(s.find_org("nobody").await.unwrap(), None);
}

fn is_foreign_personal_org(result: StoreResult<Principal>, org: &str) -> bool {
    matches!(result, Err(StoreError::ForeignPersonalOrg { org: named }) if named == org)
}

/// Hardening: `--org <someone's email>` neither creates nor joins that
/// account's personal org, before or after the account exists.
async fn hardening_personal_orgs_belong_to_their_account(t: TestStore) {
    let s = t.store();
    let early = s.ensure_account("carol@c.test", Some("dave@d.test")).await;
    assert!(is_foreign_personal_org(early, "dave@d.test"));
    let dave = s.ensure_account("dave@d.test", None).await.unwrap();
    let carol = s.ensure_account("carol@c.test", None).await.unwrap();
    assert_ne!(carol.org_id, dave.org_id);
    for name in ["dave@d.test", " Dave@D.test "] {
        let late = s.ensure_account("carol@c.test", Some(name)).await;
        assert!(is_foreign_personal_org(late, "dave@d.test"), "{name}");
    }
    // The owner may name his own; shared orgs are joined by name.
    let own = s
        .ensure_account("dave@d.test", Some("DAVE@d.test"))
        .await
        .unwrap();
    assert_eq!(own, dave);
    let shared_by_dave = s.ensure_account("dave@d.test", Some("acme")).await.unwrap();
    let shared_by_carol = s
        .ensure_account("carol@c.test", Some("acme"))
        .await
        .unwrap();
    assert_eq!(shared_by_dave.org_id, shared_by_carol.org_id);
    assert_ne!(shared_by_dave.org_id, dave.org_id);
    // Operator commands still find a personal org by its email.
    assert_eq!(
        s.find_org("Dave@D.test").await.unwrap(),
        Some(dave.org_id.clone())
    );
}

/// Two processes (or nodes) running `token create` for a new email at once
/// make one account, one personal org and one shared org.
async fn one_account_and_one_org_when_first_logins_race(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    let mut tasks = Vec::new();
    for i in 0..12 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            let org = (i % 3 == 0).then_some("team");
            s.ensure_account("race@r.test", org).await.unwrap()
        }));
    }
    let mut principals = HashSet::new();
    for task in tasks {
        principals.insert(task.await.unwrap());
    }
    let accounts: BTreeSet<_> = principals.iter().map(|p| p.account_id.clone()).collect();
    assert_eq!(accounts.len(), 1, "{principals:?}");
    assert_eq!(principals.len(), 2, "personal + team: {principals:?}");
}

async fn tokens_are_found_and_revoked_once(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("tok@t.test", None).await.unwrap();
    s.insert_token(TokenRecord {
        id: "tok_1".into(),
        secret_hash: vec![0, 1, 2, 255],
        principal: owner.clone(),
        created_at_ms: 5,
        expires_at_ms: Some(99),
        revoked_at_ms: None,
    })
    .await
    .unwrap();
    let found = s.find_token("tok_1").await.unwrap().unwrap();
    assert_eq!(found.secret_hash, vec![0, 1, 2, 255]);
    assert_eq!(found.principal, owner);
    assert_eq!((found.created_at_ms, found.expires_at_ms), (5, Some(99)));
    assert!(s.revoke_token("tok_1", 10).await.unwrap());
    assert!(s.revoke_token("tok_1", 20).await.unwrap());
    assert_eq!(
        s.find_token("tok_1").await.unwrap().unwrap().revoked_at_ms,
        Some(10),
        "the first revocation's time stays"
    );
    assert!(!s.revoke_token("tok_none", 10).await.unwrap());
    assert!(s.find_token("tok_none").await.unwrap().is_none());
}

async fn sessions_round_trip_and_activity_only_moves_forward(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("s@s.test", None).await.unwrap();
    let record = session("sess_1", &owner, 1_000);
    s.insert_session(record.clone()).await.unwrap();
    assert_eq!(s.get_session("sess_1").await.unwrap(), Some(record));
    s.touch_sessions(vec![
        ("sess_1".into(), 3_000),
        ("sess_1".into(), 2_000),
        ("sess_gone".into(), 9_000),
    ])
    .await
    .unwrap();
    s.touch_sessions(vec![("sess_1".into(), 1_500)])
        .await
        .unwrap();
    s.touch_sessions(Vec::new()).await.unwrap();
    let touched = s.get_session("sess_1").await.unwrap().unwrap();
    assert_eq!(touched.last_activity_at_ms, 3_000);
    assert!(s.get_session("sess_gone").await.unwrap().is_none());
}

async fn terminating_a_session_drops_its_events(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("term@t.test", None).await.unwrap();
    s.insert_session(session("s", &owner, 1)).await.unwrap();
    s.append_event(event("x", 1, "{}"), LogBounds::default())
        .await
        .unwrap();
    s.terminate_session("s", 50).await.unwrap();
    s.terminate_session("s", 60).await.unwrap();
    let ended = s.get_session("s").await.unwrap().unwrap();
    assert_eq!(ended.terminated_at_ms, Some(50));
    assert!(s.events_after("s", "x", 0).await.unwrap().is_empty());
}

async fn retention_removes_only_untouched_sessions_and_their_events(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("gc@example.com", None).await.unwrap();
    s.insert_session(session("old", &owner, 1_000))
        .await
        .unwrap();
    s.insert_session(session("recent", &owner, 5_000))
        .await
        .unwrap();
    s.append_event(
        EventRecord {
            session_id: "old".into(),
            ..event("x", 1, "{}")
        },
        LogBounds::default(),
    )
    .await
    .unwrap();
    s.touch_sessions(vec![("old".into(), 2_000)]).await.unwrap();
    assert_eq!(s.gc_sessions(3_000).await.unwrap(), 1);
    assert!(s.get_session("old").await.unwrap().is_none());
    assert!(s.get_session("recent").await.unwrap().is_some());
    assert!(s.events_after("old", "x", 0).await.unwrap().is_empty());
    // Saved execution states follow the same retention.
    s.save_execution_state("exec_old", "org", "{}".into())
        .await
        .unwrap();
    s.gc_sessions(now_ms() - 60_000).await.unwrap();
    assert!(s.load_execution_state("exec_old").await.unwrap().is_some());
    s.gc_sessions(now_ms() + 1).await.unwrap();
    assert!(s.load_execution_state("exec_old").await.unwrap().is_none());
}

async fn event_log_keeps_the_newest_within_bounds(t: TestStore) {
    let s = t.store();
    let bounds = LogBounds {
        max_events: 3,
        max_bytes: 1024,
    };
    for seq in 1..=5 {
        s.append_event(event("x", seq, "{}"), bounds).await.unwrap();
    }
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [3, 4, 5]);
    assert_eq!(seqs(&s.events_after("s", "x", 4).await.unwrap()), [5]);
    // A single event larger than the byte bound is still kept (never evict the newest).
    let big = "x".repeat(2000);
    s.append_event(event("x", 6, &big), bounds).await.unwrap();
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [6]);
    // The byte bound counts bytes: three events of 400 two-byte
    // characters (800 bytes each) do not fit in 1024 bytes together.
    let wide = "é".repeat(400);
    for seq in 7..=9 {
        s.append_event(event("x", seq, &wide), bounds)
            .await
            .unwrap();
    }
    let kept = s.events_after("s", "x", 0).await.unwrap();
    assert_eq!(seqs(&kept), [9]);
    assert_eq!(kept[0].data, wide);
    // Other streams are untouched by this one's bounds.
    s.append_event(event("y", 1, "{}"), bounds).await.unwrap();
    assert_eq!(seqs(&s.events_after("s", "y", 0).await.unwrap()), [1]);
}

async fn undelivered_events_are_taken_once(t: TestStore) {
    let s = t.store();
    for (stream, seq, data, at) in [("b", 1, "2", 2), ("a", 1, "1", 1), ("a", 2, "3", 3)] {
        s.append_event(
            EventRecord {
                created_at_ms: at,
                ..event(stream, seq, data)
            },
            LogBounds::default(),
        )
        .await
        .unwrap();
    }
    s.mark_delivered("s", "a", 1).await.unwrap();
    let taken = s.take_undelivered("s").await.unwrap();
    let data: Vec<&str> = taken.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(data, ["2", "3"], "oldest first");
    assert!(taken.iter().all(|e| e.undelivered));
    assert!(s.take_undelivered("s").await.unwrap().is_empty());
    // Replay still finds them, now delivered.
    let replay = s.events_after("s", "a", 0).await.unwrap();
    assert!(replay.iter().all(|e| !e.undelivered));
}

/// Two nodes serving GET streams of one session: each event goes to one.
async fn undelivered_events_are_taken_once_by_racing_takers(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    for seq in 1..=40 {
        stores[0]
            .append_event(event("x", seq, "{}"), LogBounds::default())
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.take_undelivered("s").await.unwrap()
        }));
    }
    let mut taken = Vec::new();
    for task in tasks {
        taken.extend(seqs(&task.await.unwrap()));
    }
    taken.sort_unstable();
    assert_eq!(taken, (1..=40).collect::<Vec<_>>());
}

async fn replayed_events_go_once_their_stream_is_quiet(t: TestStore) {
    let s = t.store();
    for (stream, seq) in [("quiet", 1), ("quiet", 2), ("busy", 1), ("busy", 50)] {
        s.append_event(event(stream, seq, "{}"), LogBounds::default())
            .await
            .unwrap();
        if seq == 1 {
            s.mark_delivered("s", stream, seq).await.unwrap();
        }
    }
    s.flush().await.unwrap();
    // "quiet"'s newest event is at 2, "busy"'s at 50: only "quiet" lapsed,
    // and only its delivered event goes.
    assert_eq!(s.delete_replayed_events(10).await.unwrap(), 1);
    assert_eq!(seqs(&s.events_after("s", "quiet", 0).await.unwrap()), [2]);
    assert_eq!(
        seqs(&s.events_after("s", "busy", 0).await.unwrap()),
        [1, 50]
    );
}

async fn flush_returns_once_queued_writes_are_committed(t: TestStore) {
    let s = t.store();
    s.append_event(event("x", 1, "{}"), LogBounds::default())
        .await
        .unwrap();
    // Fire-and-forget on SQLite: queued, not awaited.
    s.mark_delivered("s", "x", 1).await.unwrap();
    s.flush().await.unwrap();
    // Another handle (another process) sees it.
    let other = t.reopen().await;
    let events = other.events_after("s", "x", 0).await.unwrap();
    assert_eq!(events.len(), 1);
    assert!(!events[0].undelivered);
}

async fn policies_keep_dense_positions_under_racing_writers(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    let policy = |i: usize, position: i64| PolicyRecord {
        id: format!("pol_{i}"),
        org_id: "org".into(),
        pattern: format!("ns.tool{i}"),
        action: PolicyAction::RequireApproval,
        position,
        created_at_ms: i as i64,
    };
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.add_policy(policy(i, (i % 3) as i64)).await.unwrap()
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let s = &stores[0];
    let listed = s.list_policies("org").await.unwrap();
    let positions: Vec<i64> = listed.iter().map(|p| p.position).collect();
    assert_eq!(positions, (0..16).collect::<Vec<_>>());
    // Clamped to the end; removal closes the gap.
    let last = s.add_policy(policy(99, 1_000)).await.unwrap();
    assert_eq!(last.position, 16);
    assert_eq!(last.action, PolicyAction::RequireApproval);
    assert!(s.remove_policy("org", &listed[3].id).await.unwrap());
    assert!(!s.remove_policy("org", &listed[3].id).await.unwrap());
    assert!(!s.remove_policy("other", &listed[4].id).await.unwrap());
    let positions: Vec<i64> = s
        .list_policies("org")
        .await
        .unwrap()
        .iter()
        .map(|p| p.position)
        .collect();
    assert_eq!(positions, (0..16).collect::<Vec<_>>());
    assert!(s.list_policies("other").await.unwrap().is_empty());
}

async fn integrations_carry_their_revision_and_documents(t: TestStore) {
    let s = t.store();
    assert_eq!(s.catalog_version("org").await.unwrap(), 0);
    let document = format!(
        "{{\"format\":2,\"tools\":[{}]}}",
        "{\"name\":\"a\"},".repeat(500) + "{}"
    );
    s.upsert_integration(integration("org", "zeta", &document))
        .await
        .unwrap();
    s.upsert_integration(integration("org", "alpha", "{}"))
        .await
        .unwrap();
    assert_eq!(s.catalog_version("org").await.unwrap(), 2);
    let listed = s.list_integrations("org", true).await.unwrap();
    let names: Vec<&str> = listed.iter().map(|r| r.namespace.as_str()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!((listed[0].revision, listed[1].revision), (2, 1));
    assert_eq!(listed[1].document, document);
    assert_eq!(
        listed[1].base_url.as_deref(),
        Some("https://api.example.test")
    );
    let bare = s.list_integrations("org", false).await.unwrap();
    assert!(bare.iter().all(|r| r.document.is_empty()));
    let stored = s
        .integration_document("org", "zeta", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.document, document);
    assert_eq!(stored.search_index, Some(vec![1, 2, 3]));
    assert!(
        s.integration_document("org", "zeta", 2)
            .await
            .unwrap()
            .is_none()
    );
    // Replacing at a revision changes neither the revision nor the version.
    assert!(
        s.replace_search_index("org", "zeta", 1, vec![9])
            .await
            .unwrap()
    );
    assert!(
        s.replace_integration_document("org", "zeta", 1, "{\"format\":3}".into())
            .await
            .unwrap()
    );
    assert!(
        !s.replace_search_index("org", "zeta", 7, vec![9])
            .await
            .unwrap()
    );
    let replaced = s
        .integration_document("org", "zeta", 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.document, "{\"format\":3}");
    assert_eq!(replaced.search_index, Some(vec![9]));
    assert_eq!(s.catalog_version("org").await.unwrap(), 2);
    // A rewrite moves the revision; removal bumps the version.
    s.upsert_integration(integration("org", "zeta", "{}"))
        .await
        .unwrap();
    assert!(
        !s.replace_search_index("org", "zeta", 1, vec![9])
            .await
            .unwrap()
    );
    assert!(s.remove_integration("org", "zeta").await.unwrap());
    assert!(!s.remove_integration("org", "zeta").await.unwrap());
    assert_eq!(s.catalog_version("org").await.unwrap(), 4);
    assert_eq!(s.list_integrations("org", false).await.unwrap().len(), 1);
}

/// Two nodes writing integrations of one org at once: every write gets its
/// own catalog version as its revision.
async fn racing_integration_writes_get_distinct_revisions(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    let mut tasks = Vec::new();
    for i in 0..12 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.upsert_integration(integration("org", &format!("ns{i:02}"), "{}"))
                .await
                .unwrap()
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let revisions: BTreeSet<i64> = stores[0]
        .list_integrations("org", false)
        .await
        .unwrap()
        .iter()
        .map(|r| r.revision)
        .collect();
    assert_eq!(revisions, (1..=12).collect());
    assert_eq!(stores[1].catalog_version("org").await.unwrap(), 12);
}

async fn connections_round_trip_in_namespace_order(t: TestStore) {
    let s = t.store();
    for namespace in ["b", "a", "B"] {
        s.set_connection(ConnectionRecord {
            namespace: namespace.into(),
            kind: CredentialKind::Basic,
            username: Some("user".into()),
            ..oauth_connection("v1:x")
        })
        .await
        .unwrap();
    }
    let listed = s.list_connections("org").await.unwrap();
    let names: Vec<&str> = listed.iter().map(|c| c.namespace.as_str()).collect();
    assert_eq!(names, ["B", "a", "b"]);
    let one = s.get_connection("org", "a").await.unwrap().unwrap();
    assert_eq!(one.kind, CredentialKind::Basic);
    assert_eq!(one.username.as_deref(), Some("user"));
    assert_eq!(one.generation, 1);
    assert!(s.remove_connection("org", "a").await.unwrap());
    assert!(!s.remove_connection("org", "a").await.unwrap());
    assert!(s.get_connection("org", "a").await.unwrap().is_none());
    assert!(s.list_connections("other").await.unwrap().is_empty());
}

async fn one_refresh_lease_across_two_handles(t: TestStore) {
    let first = t.store();
    let second = t.reopen().await;
    first
        .set_connection(oauth_connection("v1:a"))
        .await
        .unwrap();
    let generation = first
        .get_connection("org", "api")
        .await
        .unwrap()
        .unwrap()
        .generation;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tasks.push(tokio::spawn(async move {
            store
                .lease_connection(
                    "org",
                    "api",
                    generation,
                    &format!("holder-{i}"),
                    30_000,
                    1_000,
                )
                .await
                .unwrap()
        }));
    }
    let mut taken = 0;
    for task in tasks {
        taken += usize::from(task.await.unwrap());
    }
    assert_eq!(taken, 1, "exactly one refresher holds the lease");
    // A lapsed lease can be taken again; a moved generation cannot.
    assert!(
        second
            .lease_connection("org", "api", generation, "late", 90_000, 31_000)
            .await
            .unwrap()
    );
    assert!(
        !first
            .lease_connection("org", "api", generation + 1, "x", 99_000, 95_000)
            .await
            .unwrap()
    );
    // Given back, it is free at once.
    first
        .release_connection_lease("org", "api", "late")
        .await
        .unwrap();
    assert!(
        first
            .lease_connection("org", "api", generation, "next", 99_000, 32_000)
            .await
            .unwrap()
    );
}

async fn tokens_are_saved_only_at_the_generation_read(t: TestStore) {
    let s = t.store();
    s.set_connection(oauth_connection("v1:a")).await.unwrap();
    let read = s.get_connection("org", "api").await.unwrap().unwrap();
    assert!(
        s.save_connection_if(oauth_connection("v1:b"), read.generation)
            .await
            .unwrap()
    );
    // A second refresher that read the same generation loses.
    assert!(
        !s.save_connection_if(oauth_connection("v1:c"), read.generation)
            .await
            .unwrap()
    );
    let now = s.get_connection("org", "api").await.unwrap().unwrap();
    assert_eq!(now.secret, "v1:b");
    assert_eq!(now.generation, read.generation + 1);
    // A login (set_connection) moves the generation too.
    s.set_connection(oauth_connection("v1:d")).await.unwrap();
    assert!(
        !s.save_connection_if(oauth_connection("v1:e"), now.generation)
            .await
            .unwrap()
    );
}

async fn a_pending_login_is_taken_once_and_never_after_expiry(t: TestStore) {
    let s = t.store();
    let pending = |hash: &str, expires_at_ms| PendingLoginRecord {
        state_hash: hash.into(),
        org_id: "org".into(),
        namespace: "api".into(),
        sealed: "v1:x".into(),
        request: "{}".into(),
        created_at_ms: 0,
        expires_at_ms,
    };
    s.insert_pending_login(pending("a", 1_000)).await.unwrap();
    s.insert_pending_login(pending("b", 1_000)).await.unwrap();
    assert_eq!(s.pending_login_outcome("a").await.unwrap(), Some(None));
    // Callbacks racing on two nodes: one takes it.
    let other = t.reopen().await;
    let (one, two) = tokio::join!(
        s.take_pending_login("a", 500),
        other.take_pending_login("a", 500)
    );
    let taken: Vec<_> = [one.unwrap(), two.unwrap()].into_iter().flatten().collect();
    assert_eq!(taken.len(), 1, "single use");
    assert_eq!(taken[0].sealed, "v1:x");
    assert!(s.take_pending_login("a", 500).await.unwrap().is_none());
    assert!(
        s.take_pending_login("b", 1_001).await.unwrap().is_none(),
        "expired"
    );
    assert!(s.take_pending_login("zzz", 0).await.unwrap().is_none());
    s.settle_pending_login("a", "{\"ok\":true}".into())
        .await
        .unwrap();
    assert_eq!(
        s.pending_login_outcome("a").await.unwrap(),
        Some(Some("{\"ok\":true}".into()))
    );
    assert_eq!(s.pending_login_outcome("zzz").await.unwrap(), None);
}

async fn a_posted_decision_is_taken_exactly_once(t: TestStore) {
    let s = t.store();
    assert!(!s.post_execution_decision("exec_x", "accept").await.unwrap());
    s.save_execution_state("exec_x", "org", "{}".into())
        .await
        .unwrap();
    assert_eq!(s.take_execution_decision("exec_x").await.unwrap(), None);
    assert!(s.post_execution_decision("exec_x", "accept").await.unwrap());
    assert!(
        !s.post_execution_decision("exec_x", "decline")
            .await
            .unwrap()
    );
    assert_eq!(
        s.take_execution_decision("exec_x")
            .await
            .unwrap()
            .as_deref(),
        Some("accept")
    );
    assert_eq!(s.take_execution_decision("exec_x").await.unwrap(), None);
    // Saving the paused run's state again (its journal grew) keeps a
    // decision posted meanwhile.
    assert!(
        s.post_execution_decision("exec_x", "decline")
            .await
            .unwrap()
    );
    s.save_execution_state("exec_x", "org", "{\"journal\":[1]}".into())
        .await
        .unwrap();
    assert_eq!(
        s.take_execution_decision("exec_x")
            .await
            .unwrap()
            .as_deref(),
        Some("decline")
    );
    assert_eq!(
        s.load_execution_state("exec_x").await.unwrap().as_deref(),
        Some("{\"journal\":[1]}")
    );
    assert_eq!(s.load_execution_state("exec_none").await.unwrap(), None);
}

async fn racing_takers_get_a_posted_decision_once(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    stores[0]
        .save_execution_state("exec_r", "org", "{}".into())
        .await
        .unwrap();
    for round in 0..5 {
        assert!(
            stores[round % 2]
                .post_execution_decision("exec_r", "accept")
                .await
                .unwrap()
        );
        let mut tasks = Vec::new();
        for i in 0..6 {
            let s = stores[i % 2].clone();
            tasks.push(tokio::spawn(async move {
                s.take_execution_decision("exec_r").await.unwrap()
            }));
        }
        let mut got = 0;
        for task in tasks {
            got += usize::from(task.await.unwrap().is_some());
        }
        assert_eq!(got, 1, "round {round}");
    }
}

async fn executions_round_trip_and_list_newest_first(t: TestStore) {
    let s = t.store();
    for (id, org, started) in [("x1", "a", 1), ("x2", "b", 2), ("x3", "a", 3)] {
        s.insert_execution(execution(id, org, started))
            .await
            .unwrap();
    }
    let stored = s.get_execution("x1").await.unwrap().unwrap();
    assert_eq!(stored, execution("x1", "a", 1));
    // Written again (a paused run that finished): replaced.
    let finished = ExecutionRecord {
        status: ExecutionStatus::Error,
        result: None,
        error: Some("boom".into()),
        ..execution("x1", "a", 1)
    };
    s.insert_execution(finished.clone()).await.unwrap();
    assert_eq!(s.get_execution("x1").await.unwrap(), Some(finished));
    let ids = |list: Vec<ExecutionRecord>| list.into_iter().map(|x| x.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.list_executions(None, 10).await.unwrap()),
        ["x3", "x2", "x1"]
    );
    assert_eq!(
        ids(s.list_executions(Some("a"), 10).await.unwrap()),
        ["x3", "x1"]
    );
    assert_eq!(ids(s.list_executions(None, 1).await.unwrap()), ["x3"]);
    assert!(s.get_execution("none").await.unwrap().is_none());
}

/// An agent's program may hold NUL; recording it must not fail the run.
async fn text_with_nul_is_stored_not_refused(t: TestStore) {
    let s = t.store();
    let x = ExecutionRecord {
        code: "return '\0'".into(),
        error: Some("bad \0 byte".into()),
        logs: vec!["\0".into()],
        result: Some(serde_json::json!("\0")),
        ..execution("nul", "a", 1)
    };
    s.insert_execution(x).await.unwrap();
    let stored = s.get_execution("nul").await.unwrap().unwrap();
    assert!(stored.code.starts_with("return '"));
    assert_eq!(stored.logs, ["\0"], "JSON keeps it escaped");
    assert_eq!(stored.result, Some(serde_json::json!("\0")));
    s.append_event(event("x", 1, "{\"s\":\"\\u0000\"}"), LogBounds::default())
        .await
        .unwrap();
}

/// Every node schedules the sweeps; each interval, one of them runs each.
async fn a_periodic_job_runs_once_per_interval_across_processes(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.claim_job("sweep", &format!("node-{i}"), 60_000, 1_000)
                .await
                .unwrap()
        }));
    }
    let mut claimed = 0;
    for task in tasks {
        claimed += usize::from(task.await.unwrap());
    }
    assert_eq!(claimed, 1, "one claimer per interval");
    let s = &stores[0];
    assert!(!s.claim_job("sweep", "late", 60_000, 60_999).await.unwrap());
    assert!(s.claim_job("sweep", "next", 60_000, 61_000).await.unwrap());
    // Jobs are independent.
    assert!(s.claim_job("gc", "next", 60_000, 61_000).await.unwrap());
}
