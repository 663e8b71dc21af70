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
    an_org_is_acted_for_by_its_owner_else_its_earliest_member,
    the_access_revision_moves_with_every_token_and_policy_change,
    hardening_personal_orgs_belong_to_their_account,
    one_account_and_one_org_when_first_logins_race,
    tokens_are_found_and_revoked_once,
    sessions_round_trip_and_activity_only_moves_forward,
    terminating_a_session_drops_its_events,
    retention_removes_only_untouched_sessions_and_their_events,
    event_log_keeps_the_newest_within_bounds,
    undelivered_events_are_taken_once,
    undelivered_events_of_streams_in_transit_are_left,
    undelivered_events_are_taken_once_by_racing_takers,
    replayed_events_go_once_their_stream_is_quiet,
    flush_returns_once_queued_writes_are_committed,
    policies_keep_dense_positions_under_racing_writers,
    integrations_carry_their_revision_and_documents,
    racing_integration_writes_get_distinct_revisions,
    connections_round_trip_in_namespace_order,
    one_refresh_lease_across_two_handles,
    tokens_are_saved_only_at_the_generation_read,
    a_refresher_past_its_lease_neither_spends_nor_saves_over_the_next,
    a_pending_login_is_taken_once_and_never_after_expiry,
    a_posted_decision_is_taken_exactly_once,
    racing_takers_get_a_posted_decision_once,
    executions_round_trip_and_list_newest_first,
    a_deferred_record_is_committed_when_written,
    text_with_nul_is_stored_not_refused,
    a_periodic_job_runs_once_per_interval_across_processes,
    a_session_has_one_holder_and_each_claim_fences_the_last,
    racing_claimers_get_one_lease,
    concurrent_claims_each_get_their_own_answer,
    a_lapsed_node_claims_nothing_until_it_registers_again,
    a_shared_bound_is_granted_across_live_nodes_and_never_over,
    a_log_over_its_bound_gives_up_delivered_events_first_and_tells_waiting_clients,
    released_and_retired_sessions_are_claimed_at_once,
    a_paused_run_has_one_holder_and_a_stale_one_cannot_write,
    a_released_run_is_claimed_at_once_while_its_releaser_lives,
    batched_session_writes_sharing_rows_never_deadlock,
    concurrent_writes_each_get_their_own_answer,
    tool_calls_are_written_with_their_record_and_filtered,
    tool_call_pages_are_stable_under_concurrent_inserts,
    executions_are_filtered_and_paged_newest_first,
    paused_executions_are_listed_per_org,
    retention_removes_old_finished_executions_and_their_calls,
    history_is_trimmed_oldest_first_per_org_and_a_paused_record_stays,
    delivered_events_are_trimmed_oldest_first_and_undelivered_ones_stay,
    tokens_are_listed_per_org_newest_first,
    sessions_are_listed_by_last_activity,
    policies_move_and_update_keeping_dense_positions,
    an_older_records_tool_calls_read_as_an_empty_list,
    a_code_is_taken_once_and_a_replay_revokes_what_it_issued,
    a_code_replayed_before_its_exchange_makes_no_grant,
    an_unknown_or_expired_code_is_unknown_and_used_up,
    racing_takers_of_a_code_get_one_fresh_take,
    a_refresh_token_rotates_with_a_grace_and_a_reuse_revokes_the_grant,
    refresh_is_refused_to_another_client_a_revoked_grant_and_a_lapsed_token,
    concurrent_refreshes_of_one_token_within_the_grace_all_issue,
    deleting_a_client_revokes_its_grants_and_stops_its_exchanges,
    oauth_gc_deletes_what_has_lapsed_and_keeps_the_rest,
    a_metadata_document_client_is_saved_again_and_never_takes_another_clients_id,
    a_login_link_is_redeemed_once_before_its_deadline,
    console_sessions_are_found_touched_switched_and_collected,
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
        tool_calls: vec![tool_call(id, org, 0, "a.b", started)],
        started_at_ms: started,
        duration_ms: 3,
    }
}

fn tool_call(execution: &str, org: &str, index: usize, path: &str, started: i64) -> ToolCallRecord {
    ToolCallRecord {
        id: format!("{execution}.{index}"),
        org_id: org.into(),
        execution_id: execution.into(),
        session_id: Some("s".into()),
        account_id: "acc".into(),
        tool_path: path.into(),
        outcome: ToolCallOutcome::Ok,
        error_code: None,
        policy_action: Some(PolicyAction::RequireApproval),
        policy_rule: Some("pol_1".into()),
        approval: Some(ApprovalDecision::Approved),
        decided_by: Some("acc_2".into()),
        decided_via: Some(ApprovalChannel::Console),
        approval_wait_ms: 40,
        arg_names: vec!["a".into(), "b".into()],
        started_at_ms: started,
        duration_ms: 2,
    }
}

/// Every page of a list, following the key of each page's last row.
async fn all_pages<T, F, Fut>(limit: u32, key: impl Fn(&T) -> PageKey, mut read: F) -> Vec<T>
where
    F: FnMut(PageRequest) -> Fut,
    Fut: std::future::Future<Output = StoreResult<Vec<T>>>,
{
    let mut all = Vec::new();
    let mut page = PageRequest::first(limit);
    loop {
        let rows = read(page.clone()).await.unwrap();
        let full = rows.len() == limit as usize;
        let last = rows.last().map(&key);
        all.extend(rows);
        match last {
            Some(last) if full => page.after = Some(last),
            _ => return all,
        }
    }
}

fn call_key(call: &ToolCallRecord) -> PageKey {
    PageKey {
        started_at_ms: call.started_at_ms,
        id: call.id.clone(),
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

/// Issue 37: the CLI acts for an org without naming an account: its owner
/// (a personal org), else its earliest member.
async fn an_org_is_acted_for_by_its_owner_else_its_earliest_member(t: TestStore) {
    let s = t.store();
    let first = s
        .ensure_account("first@example.com", Some("team"))
        .await
        .unwrap();
    // Creation times are in ms; accounts made within one are ordered by id.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = s
        .ensure_account("second@example.com", Some("team"))
        .await
        .unwrap();
    assert_eq!(first.org_id, second.org_id);
    assert_eq!(s.org_account(&first.org_id).await.unwrap(), Some(first));
    let personal = s.ensure_account("second@example.com", None).await.unwrap();
    assert_eq!(
        s.org_account(&personal.org_id).await.unwrap(),
        Some(personal)
    );
    assert_eq!(s.org_account("org_nobody").await.unwrap(), None);
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
        grant_id: None,
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
    s.insert_session(record.clone(), "node_test").await.unwrap();
    assert_eq!(s.get_session("sess_1").await.unwrap(), Some(record));
    s.touch_sessions(vec![
        touch("sess_1", 3_000),
        touch("sess_1", 2_000),
        touch("sess_gone", 9_000),
    ])
    .await
    .unwrap();
    s.touch_sessions(vec![touch("sess_1", 1_500)])
        .await
        .unwrap();
    s.touch_sessions(Vec::new()).await.unwrap();
    // A holder whose epoch is not the session's (it lost the lease to a
    // claim) touches nothing.
    s.touch_sessions(vec![SessionTouch {
        epoch: FIRST_EPOCH + 1,
        ..touch("sess_1", 8_000)
    }])
    .await
    .unwrap();
    let touched = s.get_session("sess_1").await.unwrap().unwrap();
    assert_eq!(touched.last_activity_at_ms, 3_000);
    assert!(s.get_session("sess_gone").await.unwrap().is_none());
}

async fn terminating_a_session_drops_its_events(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("term@t.test", None).await.unwrap();
    s.insert_session(session("s", &owner, 1), "node_test")
        .await
        .unwrap();
    s.append_event(event("x", 1, "{}"), LogBounds::default(), None)
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
    s.insert_session(session("old", &owner, 1_000), "node_test")
        .await
        .unwrap();
    s.insert_session(session("recent", &owner, 5_000), "node_test")
        .await
        .unwrap();
    s.append_event(
        EventRecord {
            session_id: "old".into(),
            ..event("x", 1, "{}")
        },
        LogBounds::default(),
        None,
    )
    .await
    .unwrap();
    s.touch_sessions(vec![touch("old", 2_000)]).await.unwrap();
    assert_eq!(s.gc_sessions(3_000).await.unwrap(), 1);
    assert!(s.get_session("old").await.unwrap().is_none());
    assert!(s.get_session("recent").await.unwrap().is_some());
    assert!(s.events_after("old", "x", 0).await.unwrap().is_empty());
    // Saved execution states follow the same retention.
    s.save_execution_state("exec_old", "org", "{}".into(), None)
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
        s.append_event(event("x", seq, "{}"), bounds, None)
            .await
            .unwrap();
    }
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [3, 4, 5]);
    assert_eq!(seqs(&s.events_after("s", "x", 4).await.unwrap()), [5]);
    // A single event larger than the byte bound is still kept (never evict the newest).
    let big = "x".repeat(2000);
    s.append_event(event("x", 6, &big), bounds, None)
        .await
        .unwrap();
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [6]);
    // The byte bound counts bytes: three events of 400 two-byte
    // characters (800 bytes each) do not fit in 1024 bytes together.
    let wide = "é".repeat(400);
    for seq in 7..=9 {
        s.append_event(event("x", seq, &wide), bounds, None)
            .await
            .unwrap();
    }
    let kept = s.events_after("s", "x", 0).await.unwrap();
    assert_eq!(seqs(&kept), [9]);
    assert_eq!(kept[0].data, wide);
    // Other streams are untouched by this one's bounds.
    s.append_event(event("y", 1, "{}"), bounds, None)
        .await
        .unwrap();
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
            None,
        )
        .await
        .unwrap();
    }
    s.mark_delivered("s", "a", 1).await.unwrap();
    let taken = s.take_undelivered("s", &[]).await.unwrap();
    let data: Vec<&str> = taken.iter().map(|e| e.data.as_str()).collect();
    assert_eq!(data, ["2", "3"], "oldest first");
    assert!(taken.iter().all(|e| e.undelivered));
    assert!(s.take_undelivered("s", &[]).await.unwrap().is_empty());
    // Replay still finds them, now delivered.
    let replay = s.events_after("s", "a", 0).await.unwrap();
    assert!(replay.iter().all(|e| !e.undelivered));
}

/// Events of the streams a taker names (POST streams still writing them)
/// are neither returned nor taken; a later take gets them.
async fn undelivered_events_of_streams_in_transit_are_left(t: TestStore) {
    let s = t.store();
    for (stream, seq, at) in [("a", 1, 1), ("p", 1, 2), ("b", 1, 3), ("q", 1, 4)] {
        s.append_event(
            EventRecord {
                created_at_ms: at,
                ..event(stream, seq, "{}")
            },
            LogBounds::default(),
            None,
        )
        .await
        .unwrap();
    }
    let streams = |events: &[EventRecord]| -> Vec<String> {
        events.iter().map(|e| e.stream_id.clone()).collect()
    };
    let in_transit = ["p".to_string(), "q".to_string()];
    let taken = s.take_undelivered("s", &in_transit).await.unwrap();
    assert_eq!(streams(&taken), ["a", "b"]);
    let taken = s.take_undelivered("s", &["q".to_string()]).await.unwrap();
    assert_eq!(
        streams(&taken),
        ["p"],
        "left undelivered, taken once no longer named"
    );
    let taken = s.take_undelivered("s", &[]).await.unwrap();
    assert_eq!(streams(&taken), ["q"]);
    assert!(s.take_undelivered("s", &[]).await.unwrap().is_empty());
}

/// Two nodes serving GET streams of one session: each event goes to one.
async fn undelivered_events_are_taken_once_by_racing_takers(t: TestStore) {
    let stores = [t.store(), t.reopen().await];
    for seq in 1..=40 {
        stores[0]
            .append_event(event("x", seq, "{}"), LogBounds::default(), None)
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            s.take_undelivered("s", &[]).await.unwrap()
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
        s.append_event(event(stream, seq, "{}"), LogBounds::default(), None)
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
    s.append_event(event("x", 1, "{}"), LogBounds::default(), None)
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

/// What caches of tokens and policies rely on: a change made through one
/// handle (a CLI command, another node) moves the revision another handle
/// reports — on SQLite by the time the change is readable, on Postgres once
/// its notification arrives — and other writes do not move it.
async fn the_access_revision_moves_with_every_token_and_policy_change(t: TestStore) {
    let writer = t.store();
    let watcher = t.reopen().await;
    let at_once = matches!(t, TestStore::Sqlite(..));
    let mut revision = moved(&watcher, None, at_once).await;
    let owner = writer.ensure_account("rev@t.test", None).await.unwrap();
    let quiet = watcher.access_revision();
    assert_eq!(quiet, Some(revision), "an account is not an access change");
    writer
        .insert_token(TokenRecord {
            id: "tok_rev".into(),
            secret_hash: vec![1],
            principal: owner.clone(),
            created_at_ms: 1,
            expires_at_ms: None,
            revoked_at_ms: None,
            grant_id: None,
        })
        .await
        .unwrap();
    // A new token needs no move (nothing cached names it): an OAuth
    // client's refreshes must not make every server re-read every token.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        watcher.access_revision(),
        Some(revision),
        "a new token moves nothing"
    );
    assert!(writer.revoke_token("tok_rev", 2).await.unwrap());
    revision = moved(&watcher, Some(revision), at_once).await;
    let policy = writer
        .add_policy(PolicyRecord {
            id: "pol_rev".into(),
            org_id: owner.org_id.clone(),
            pattern: "ns.tool".into(),
            action: PolicyAction::Block,
            position: 0,
            created_at_ms: 3,
        })
        .await
        .unwrap();
    revision = moved(&watcher, Some(revision), at_once).await;
    assert!(
        writer
            .remove_policy(&owner.org_id, &policy.id)
            .await
            .unwrap()
    );
    moved(&watcher, Some(revision), at_once).await;
}

/// The watcher's revision once it differs from `before` (None: once it is
/// known at all); `at_once` allows no wait.
async fn moved(watcher: &std::sync::Arc<dyn Store>, before: Option<u64>, at_once: bool) -> u64 {
    for _ in 0..500 {
        if let Some(now) = watcher.access_revision()
            && Some(now) != before
        {
            return now;
        }
        assert!(!at_once, "the revision stood still at {before:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the revision stood still at {before:?} for 5 s");
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
    // Real time: a store may keep the lease on its own clock (Postgres
    // does, so that nodes with skewed clocks agree), keeping the span.
    let now = now_ms();
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
                    now + 300,
                    now,
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
    assert!(
        !second
            .lease_connection("org", "api", generation, "early", now + 60_000, now_ms())
            .await
            .unwrap(),
        "a running lease is not taken"
    );
    // A lapsed lease can be taken again; a moved generation cannot.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let later = now_ms();
    assert!(
        second
            .lease_connection("org", "api", generation, "late", later + 60_000, later)
            .await
            .unwrap()
    );
    assert!(
        !first
            .lease_connection("org", "api", generation + 1, "x", later + 60_000, later)
            .await
            .unwrap()
    );
    // Given back, it is free at once.
    first
        .release_connection_lease("org", "api", "late")
        .await
        .unwrap();
    let later = now_ms();
    assert!(
        first
            .lease_connection("org", "api", generation, "next", later + 60_000, later)
            .await
            .unwrap()
    );
}

async fn tokens_are_saved_only_at_the_generation_read(t: TestStore) {
    let s = t.store();
    s.set_connection(oauth_connection("v1:a")).await.unwrap();
    let read = s.get_connection("org", "api").await.unwrap().unwrap();
    assert!(
        s.save_connection_if(oauth_connection("v1:b"), read.generation, None)
            .await
            .unwrap()
    );
    // A second refresher that read the same generation loses.
    assert!(
        !s.save_connection_if(oauth_connection("v1:c"), read.generation, None)
            .await
            .unwrap()
    );
    let now = s.get_connection("org", "api").await.unwrap().unwrap();
    assert_eq!(now.secret, "v1:b");
    assert_eq!(now.generation, read.generation + 1);
    // A login (set_connection) moves the generation too.
    s.set_connection(oauth_connection("v1:d")).await.unwrap();
    assert!(
        !s.save_connection_if(oauth_connection("v1:e"), now.generation, None)
            .await
            .unwrap()
    );
}

/// SPEC §10: the refresh lease fences the refresher that took it. One
/// stalled past its lease learns it before it spends the refresh token,
/// and cannot save over the refresher that took the lease next; with no
/// next one, its save (tokens the server already issued) still lands.
/// Activity as the session's first holder writes it.
fn touch(id: &str, at_ms: i64) -> SessionTouch {
    SessionTouch {
        id: id.into(),
        epoch: FIRST_EPOCH,
        at_ms,
    }
}

async fn a_refresher_past_its_lease_neither_spends_nor_saves_over_the_next(t: TestStore) {
    let s = t.store();
    s.set_connection(oauth_connection("v1:a")).await.unwrap();
    let g = s
        .get_connection("org", "api")
        .await
        .unwrap()
        .unwrap()
        .generation;
    let short = |span: i64| {
        let now = now_ms();
        (now + span, now)
    };
    let (until, now) = short(150);
    assert!(
        s.lease_connection("org", "api", g, "lease-a", until, now)
            .await
            .unwrap()
    );
    assert!(
        s.holds_connection_lease("org", "api", g, "lease-a")
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        !s.holds_connection_lease("org", "api", g, "lease-a")
            .await
            .unwrap(),
        "a lapsed lease is not held"
    );
    // Lapsed and not taken: the stalled refresher's tokens still land.
    let (until, now) = short(150);
    assert!(
        s.lease_connection("org", "api", g, "lease-b", until, now)
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        s.save_connection_if(oauth_connection("v1:b"), g, Some("lease-b"))
            .await
            .unwrap()
    );
    // Taken by the next refresher: the stalled one neither holds it nor saves.
    let g = g + 1;
    let (until, now) = short(150);
    assert!(
        s.lease_connection("org", "api", g, "lease-c", until, now)
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (until, now) = short(60_000);
    assert!(
        s.lease_connection("org", "api", g, "lease-d", until, now)
            .await
            .unwrap()
    );
    assert!(
        !s.holds_connection_lease("org", "api", g, "lease-c")
            .await
            .unwrap()
    );
    assert!(
        s.holds_connection_lease("org", "api", g, "lease-d")
            .await
            .unwrap()
    );
    assert!(
        !s.save_connection_if(oauth_connection("v1:c"), g, Some("lease-c"))
            .await
            .unwrap(),
        "a stale refresher saved over the next one's lease"
    );
    assert!(
        s.save_connection_if(oauth_connection("v1:d"), g, Some("lease-d"))
            .await
            .unwrap()
    );
    let now = s.get_connection("org", "api").await.unwrap().unwrap();
    assert_eq!(now.secret, "v1:d");
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
    s.save_execution_state("exec_x", "org", "{}".into(), None)
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
    s.save_execution_state("exec_x", "org", "{\"journal\":[1]}".into(), None)
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
        .save_execution_state("exec_r", "org", "{}".into(), None)
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
    let all = ExecutionFilter::default();
    assert_eq!(
        ids(s
            .list_executions(None, &all, &PageRequest::first(10))
            .await
            .unwrap()),
        ["x3", "x2", "x1"]
    );
    assert_eq!(
        ids(s
            .list_executions(Some("a"), &all, &PageRequest::first(10))
            .await
            .unwrap()),
        ["x3", "x1"]
    );
    assert_eq!(
        ids(s
            .list_executions(None, &all, &PageRequest::first(1))
            .await
            .unwrap()),
        ["x3"]
    );
    assert!(s.get_execution("none").await.unwrap().is_none());
}

/// `insert_execution_deferred` returns once the record is committed: read
/// back at once, listed, and replaced by a later write of its run.
async fn a_deferred_record_is_committed_when_written(t: TestStore) {
    let s = t.store();
    s.insert_execution_deferred(execution("d1", "a", 1))
        .await
        .unwrap();
    assert_eq!(
        s.get_execution("d1").await.unwrap(),
        Some(execution("d1", "a", 1))
    );
    s.sync().await.unwrap();
    let finished = ExecutionRecord {
        status: ExecutionStatus::Error,
        error: Some("late".into()),
        ..execution("d1", "a", 1)
    };
    s.insert_execution(finished.clone()).await.unwrap();
    assert_eq!(s.get_execution("d1").await.unwrap(), Some(finished));
    let listed = s
        .list_executions(
            Some("a"),
            &ExecutionFilter::default(),
            &PageRequest::first(10),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
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
    s.append_event(
        event("x", 1, "{\"s\":\"\\u0000\"}"),
        LogBounds::default(),
        None,
    )
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

const MINUTE: i64 = 60_000;

fn fence(node: &str, epoch: i64) -> Fence {
    Fence {
        node: node.into(),
        epoch,
    }
}

fn claimed_epoch(claim: SessionClaim) -> i64 {
    match claim {
        SessionClaim::Claimed { fence, .. } => fence.epoch,
        other => panic!("expected a claim, got {other:?}"),
    }
}

fn held_by(claim: SessionClaim) -> NodeRecord {
    match claim {
        SessionClaim::Held { holder, .. } => holder,
        other => panic!("expected the session held elsewhere, got {other:?}"),
    }
}

async fn a_session_has_one_holder_and_each_claim_fences_the_last(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("lease@l.test", None).await.unwrap();
    s.register_node("node_a", Some("http://a"), MINUTE)
        .await
        .unwrap();
    s.register_node("node_b", Some("http://b"), MINUTE)
        .await
        .unwrap();
    s.insert_session(session("s", &owner, 1), "node_a")
        .await
        .unwrap();
    // The creator holds it at the first epoch and writes as its holder.
    s.append_event(
        event("x", 1, "{}"),
        LogBounds::default(),
        Some(&fence("node_a", FIRST_EPOCH)),
    )
    .await
    .unwrap();
    let holder = held_by(s.claim_session("s", "node_b").await.unwrap());
    assert_eq!(
        holder,
        NodeRecord {
            id: "node_a".into(),
            url: Some("http://a".into())
        }
    );
    // Claiming again (a restore on the same node) moves the epoch on, and
    // the old epoch's writes are refused from then on.
    assert_eq!(
        claimed_epoch(s.claim_session("s", "node_a").await.unwrap()),
        FIRST_EPOCH + 1
    );
    let stale = s
        .append_event(
            event("x", 2, "{}"),
            LogBounds::default(),
            Some(&fence("node_a", FIRST_EPOCH)),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    // Evicted, node A loses the session to B, and A's current fence is stale.
    s.evict_node("node_a").await.unwrap();
    let epoch_b = claimed_epoch(s.claim_session("s", "node_b").await.unwrap());
    assert_eq!(epoch_b, FIRST_EPOCH + 2);
    let stale = s
        .append_event(
            event("x", 3, "{}"),
            LogBounds::default(),
            Some(&fence("node_a", FIRST_EPOCH + 1)),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    s.append_event(
        event("x", 3, "{}"),
        LogBounds::default(),
        Some(&fence("node_b", epoch_b)),
    )
    .await
    .unwrap();
    let logged: Vec<i64> = s
        .events_after("s", "x", 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(logged, vec![1, 3], "no refused write was logged");
    // A registered again, it sees B holding the session.
    s.register_node("node_a", Some("http://a"), MINUTE)
        .await
        .unwrap();
    assert_eq!(
        held_by(s.claim_session("s", "node_a").await.unwrap()).id,
        "node_b"
    );
    assert_eq!(
        s.claim_session("nope", "node_a").await.unwrap(),
        SessionClaim::NotFound
    );
    s.terminate_session("s", 5).await.unwrap();
    assert_eq!(
        s.claim_session("s", "node_a").await.unwrap(),
        SessionClaim::Terminated
    );
}

/// Activity touches and lease releases are batches over many session rows,
/// and concurrent batches share rows (a mass disposal beside the activity
/// flush). Postgres plans a batch by its size: a few ids are looked up in
/// the order given, many are matched while scanning the table in its
/// physical order; with rows stored against id order, two batches would
/// lock shared rows in opposite orders. The store must lock them in one
/// order and never fail a batch with a deadlock.
async fn batched_session_writes_sharing_rows_never_deadlock(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("batch@l.test", None).await.unwrap();
    s.register_node("node_a", None, MINUTE).await.unwrap();
    let ids: Vec<String> = (0..600).rev().map(|i| format!("s{i:04}")).collect();
    for id in &ids {
        s.insert_session(session(id, &owner, 1), "node_a")
            .await
            .unwrap();
    }
    let writers = (0..6)
        .map(|w| {
            let s = s.clone();
            let ids = ids.clone();
            tokio::spawn(async move {
                for round in 0..40i64 {
                    let batch: Vec<String> = if w < 3 {
                        ids.clone()
                    } else {
                        ids.iter()
                            .skip(((round * 7 + w) % 60) as usize)
                            .step_by(60)
                            .cloned()
                            .collect()
                    };
                    if w == 0 && round % 8 == 7 {
                        // Matches nothing (the epoch is not the session's), but
                        // is planned and scans like a real release.
                        let release = batch.into_iter().map(|id| (id, FIRST_EPOCH + 99)).collect();
                        s.release_sessions("node_a", release).await?;
                    } else {
                        let touches = batch.iter().map(|id| touch(id, 10 + round)).collect();
                        s.touch_sessions(touches).await?;
                    }
                }
                s.flush().await
            })
        })
        .collect::<Vec<_>>();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let last = s.get_session("s0000").await.unwrap().unwrap();
    assert_eq!(last.last_activity_at_ms, 49, "the latest touch wins");
}

async fn racing_claimers_get_one_lease(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("race@l.test", None).await.unwrap();
    // Created by a node that never registered: free for any live node.
    s.insert_session(session("s", &owner, 1), "node_gone")
        .await
        .unwrap();
    let nodes: Vec<String> = (0..8).map(|i| format!("node_{i}")).collect();
    for node in &nodes {
        s.register_node(node, None, MINUTE).await.unwrap();
    }
    let claims = nodes
        .iter()
        .map(|node| {
            let s = s.clone();
            let node = node.clone();
            tokio::spawn(async move { (node.clone(), s.claim_session("s", &node).await.unwrap()) })
        })
        .collect::<Vec<_>>();
    let mut winners = Vec::new();
    let mut seen_holders = BTreeSet::new();
    for claim in claims {
        let (node, outcome) = claim.await.unwrap();
        match outcome {
            SessionClaim::Claimed { fence, .. } => winners.push((node, fence.epoch)),
            SessionClaim::Held { holder, .. } => {
                seen_holders.insert(holder.id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "one claimer wins: {winners:?}");
    let (winner, epoch) = &winners[0];
    assert_eq!(*epoch, FIRST_EPOCH + 1);
    assert_eq!(
        seen_holders,
        BTreeSet::from([winner.clone()]),
        "the losers see the winner"
    );
}

/// Claims of many sessions at once: each caller gets its own session's
/// answer, and only the claimed sessions change (written for the grouped
/// claims tried in issue 13, step 8; kept for the claims as they are).
async fn concurrent_claims_each_get_their_own_answer(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("many@l.test", None).await.unwrap();
    for node in ["node_a", "node_b"] {
        s.register_node(node, None, MINUTE).await.unwrap();
    }
    let mut asks: Vec<(String, &str, &str)> = Vec::new();
    for i in 0..16 {
        // Free (its creator never registered), ours, another live node's,
        // ended, unknown; and a free one claimed by a node that never
        // registered.
        let free = format!("free{i:02}");
        s.insert_session(session(&free, &owner, 1), "node_gone")
            .await
            .unwrap();
        asks.push((free, "node_a", "claimed"));
        let ours = format!("ours{i:02}");
        s.insert_session(session(&ours, &owner, 1), "node_a")
            .await
            .unwrap();
        asks.push((ours, "node_a", "claimed"));
        let theirs = format!("theirs{i:02}");
        s.insert_session(session(&theirs, &owner, 1), "node_b")
            .await
            .unwrap();
        asks.push((theirs, "node_a", "held"));
        let ended = format!("ended{i:02}");
        s.insert_session(session(&ended, &owner, 1), "node_gone")
            .await
            .unwrap();
        s.terminate_session(&ended, 2).await.unwrap();
        asks.push((ended, "node_a", "terminated"));
        asks.push((format!("unknown{i:02}"), "node_a", "not found"));
        let lapsed = format!("lapsed{i:02}");
        s.insert_session(session(&lapsed, &owner, 1), "node_gone")
            .await
            .unwrap();
        asks.push((lapsed, "node_x", "lapsed"));
    }
    let claims: Vec<_> = asks
        .iter()
        .map(|(id, node, _)| {
            let (s, id, node) = (s.clone(), id.clone(), node.to_string());
            tokio::spawn(async move { s.claim_session(&id, &node).await.unwrap() })
        })
        .collect();
    for ((id, node, expected), claim) in asks.iter().zip(claims) {
        let answer = match claim.await.unwrap() {
            SessionClaim::Claimed { record, fence } => {
                assert_eq!(&record.id, id);
                assert_eq!(fence.node, *node);
                assert_eq!(fence.epoch, FIRST_EPOCH + 1, "{id}");
                "claimed"
            }
            SessionClaim::Held { record, holder } => {
                assert_eq!(&record.id, id);
                assert_eq!(holder.id, "node_b");
                "held"
            }
            SessionClaim::Terminated => "terminated",
            SessionClaim::NotFound => "not found",
            SessionClaim::Lapsed => "lapsed",
        };
        assert_eq!(answer, *expected, "{id} claimed by {node}");
    }
    // What was claimed is held by its claimer now; nothing else moved.
    for (id, node, expected) in &asks {
        if *expected != "claimed" {
            // Ended stays ended; anything else was neither claimed nor
            // fenced: node_b claims it now at the first epoch after the
            // one it was created with (its own session included).
            let expected = match s.get_session(id).await.unwrap() {
                None => SessionClaim::NotFound,
                Some(_) if id.starts_with("ended") => SessionClaim::Terminated,
                Some(record) => SessionClaim::Claimed {
                    record,
                    fence: Fence {
                        node: "node_b".into(),
                        epoch: FIRST_EPOCH + 1,
                    },
                },
            };
            assert_eq!(
                s.claim_session(id, "node_b").await.unwrap(),
                expected,
                "{id} unchanged by the others' claims"
            );
            continue;
        }
        assert_eq!(
            s.claim_session(id, "node_b").await.unwrap(),
            SessionClaim::Held {
                record: s.get_session(id).await.unwrap().unwrap(),
                holder: NodeRecord {
                    id: node.to_string(),
                    url: None,
                },
            },
        );
    }
}

async fn a_lapsed_node_claims_nothing_until_it_registers_again(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("lapse@l.test", None).await.unwrap();
    s.insert_session(session("s", &owner, 1), "node_x")
        .await
        .unwrap();
    assert_eq!(
        s.claim_session("s", "node_a").await.unwrap(),
        SessionClaim::Lapsed,
        "never registered"
    );
    s.register_node("node_a", None, 1).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    assert!(
        !s.heartbeat_node("node_a", MINUTE).await.unwrap(),
        "its lease ran out"
    );
    assert_eq!(
        s.claim_session("s", "node_a").await.unwrap(),
        SessionClaim::Lapsed
    );
    s.register_node("node_a", None, MINUTE).await.unwrap();
    assert!(s.heartbeat_node("node_a", MINUTE).await.unwrap());
    assert_eq!(
        claimed_epoch(s.claim_session("s", "node_a").await.unwrap()),
        FIRST_EPOCH + 1
    );
}

async fn released_and_retired_sessions_are_claimed_at_once(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("release@l.test", None).await.unwrap();
    for node in ["node_a", "node_b", "node_c"] {
        s.register_node(node, None, MINUTE).await.unwrap();
    }
    for id in ["s1", "s2"] {
        s.insert_session(session(id, &owner, 1), "node_a")
            .await
            .unwrap();
    }
    assert_eq!(
        held_by(s.claim_session("s1", "node_b").await.unwrap()).id,
        "node_a"
    );
    s.release_sessions("node_a", vec![("s1".into(), FIRST_EPOCH)])
        .await
        .unwrap();
    let epoch = claimed_epoch(s.claim_session("s1", "node_b").await.unwrap());
    assert_eq!(epoch, FIRST_EPOCH + 1);
    // A late release by the old holder leaves the new one alone.
    s.release_sessions("node_a", vec![("s1".into(), FIRST_EPOCH)])
        .await
        .unwrap();
    assert_eq!(
        held_by(s.claim_session("s1", "node_c").await.unwrap()).id,
        "node_b"
    );
    // A node leaving on purpose lets its sessions go before its lease ends.
    assert_eq!(
        held_by(s.claim_session("s2", "node_c").await.unwrap()).id,
        "node_a"
    );
    s.retire_node("node_a").await.unwrap();
    assert_eq!(
        claimed_epoch(s.claim_session("s2", "node_c").await.unwrap()),
        FIRST_EPOCH + 1
    );
    assert!(
        !s.heartbeat_node("node_a", MINUTE).await.unwrap(),
        "a retired node is gone"
    );
}

async fn a_paused_run_has_one_holder_and_a_stale_one_cannot_write(t: TestStore) {
    let s = t.store();
    for node in ["node_a", "node_b"] {
        s.register_node(node, Some("http://n"), MINUTE)
            .await
            .unwrap();
    }
    // The first save as holder makes node A the run's holder.
    let a = fence("node_a", FIRST_EPOCH);
    s.save_execution_state("exec_l", "org", "{\"v\":1}".into(), Some(&a))
        .await
        .unwrap();
    s.save_execution_state("exec_l", "org", "{\"v\":2}".into(), Some(&a))
        .await
        .unwrap();
    match s.claim_execution("exec_l", "node_b").await.unwrap() {
        ExecutionClaim::Held { holder } => assert_eq!(holder.id, "node_a"),
        other => panic!("expected node A to hold the run, got {other:?}"),
    }
    s.advance_execution("exec_l", &a, 3).await.unwrap();
    s.advance_execution("exec_l", &a, 2).await.unwrap();
    // A is gone: B takes the run over, and learns which calls A started.
    s.evict_node("node_a").await.unwrap();
    let b = match s.claim_execution("exec_l", "node_b").await.unwrap() {
        ExecutionClaim::Claimed { fence, calling } => {
            assert_eq!(calling, 3, "the highest call A started");
            assert_eq!(fence, self::fence("node_b", FIRST_EPOCH + 1));
            fence
        }
        other => panic!("expected a takeover, got {other:?}"),
    };
    // A, stale, can neither save nor start a call.
    let stale = s
        .save_execution_state("exec_l", "org", "{\"v\":3}".into(), Some(&a))
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    let stale = s.advance_execution("exec_l", &a, 4).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(
        s.load_execution_state("exec_l").await.unwrap().as_deref(),
        Some("{\"v\":2}")
    );
    s.save_execution_state("exec_l", "org", "{\"v\":4}".into(), Some(&b))
        .await
        .unwrap();
    assert_eq!(
        s.claim_execution("exec_none", "node_b").await.unwrap(),
        ExecutionClaim::NotFound
    );
    assert_eq!(
        s.claim_execution("exec_l", "node_c").await.unwrap(),
        ExecutionClaim::Lapsed
    );
}

/// Many executions finishing at once: their records, fenced responses and
/// delivery marks arrive together (Postgres writes such rows in groups,
/// one statement each). Every caller is answered for its own row — a stale
/// fence fails only its own append, one run's two records both land —
/// and each answer holds once it is given.
async fn concurrent_writes_each_get_their_own_answer(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("group@l.test", None).await.unwrap();
    s.register_node("node_a", None, MINUTE).await.unwrap();
    let ids: Vec<String> = (0..48).map(|i| format!("g{i:02}")).collect();
    for id in &ids {
        s.insert_session(session(id, &owner, 1), "node_a")
            .await
            .unwrap();
    }
    // Every fourth session was restored again since: the first epoch's
    // fence is stale there.
    let restored = |i: usize| i.is_multiple_of(4);
    for (i, id) in ids.iter().enumerate() {
        if restored(i) {
            claimed_epoch(s.claim_session(id, "node_a").await.unwrap());
        }
    }
    let writes = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let s = s.clone();
            let id = id.clone();
            tokio::spawn(async move {
                // Runs 0 and 1 share an id (a paused run written again).
                let run = format!("run{}", i.max(1));
                let record = ExecutionRecord {
                    session_id: Some(id.clone()),
                    started_at_ms: i as i64,
                    ..execution(&run, "org", i as i64)
                };
                s.insert_execution(record).await.unwrap();
                let appended = s
                    .append_event(
                        EventRecord {
                            session_id: id.clone(),
                            ..event("r", 1, &format!("{{\"n\":{i}}}"))
                        },
                        LogBounds::default(),
                        Some(&fence("node_a", FIRST_EPOCH)),
                    )
                    .await;
                if appended.is_ok() {
                    s.mark_delivered(&id, "r", 1).await.unwrap();
                }
                (i, appended)
            })
        })
        .collect::<Vec<_>>();
    for write in writes {
        let (i, appended) = write.await.unwrap();
        match appended {
            Ok(()) => assert!(!restored(i), "session {i}'s stale fence was let through"),
            Err(StoreError::Fenced { id }) => {
                assert!(restored(i), "session {i} was refused: {id}");
                assert_eq!(id, ids[i]);
            }
            Err(e) => panic!("session {i}: {e}"),
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let logged = s.events_after(id, "r", 0).await.unwrap();
        if restored(i) {
            assert!(logged.is_empty(), "a refused event of {id} was logged");
        } else {
            assert_eq!(logged.len(), 1, "{id}");
            assert_eq!(logged[0].data, format!("{{\"n\":{i}}}"));
            assert!(!logged[0].undelivered, "{id}'s mark was lost");
        }
        assert!(s.take_undelivered(id, &[]).await.unwrap().is_empty());
        let run = format!("run{}", i.max(1));
        assert!(s.get_execution(&run).await.unwrap().is_some(), "{run}");
    }
    let listed = s
        .list_executions(
            Some("org"),
            &ExecutionFilter::default(),
            &PageRequest::first(100),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 47);
    // One event written twice at once (the same key from two callers):
    // both are answered Ok and one row stays, as when they go in turn
    // (in one Postgres group the statement is refused for the row written
    // twice, and the group is written again row by row).
    let twice = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| !restored(*i))
        .flat_map(|(i, id)| [(i, id.clone()), (i, id.clone())])
        .map(|(i, id)| {
            let s = s.clone();
            tokio::spawn(async move {
                let again = EventRecord {
                    session_id: id,
                    ..event("twice", 1, &format!("{i}"))
                };
                s.append_event(
                    again,
                    LogBounds::default(),
                    Some(&fence("node_a", FIRST_EPOCH)),
                )
                .await
            })
        })
        .collect::<Vec<_>>();
    for write in twice {
        write.await.unwrap().unwrap();
    }
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| !restored(*i)) {
        let logged = s.events_after(id, "twice", 0).await.unwrap();
        assert_eq!(seqs(&logged), [1], "{id}");
        assert_eq!(logged[0].data, i.to_string());
    }
}

async fn tool_calls_are_written_with_their_record_and_filtered(t: TestStore) {
    let s = t.store();
    let mut x1 = execution("x1", "a", 10);
    x1.tool_calls = vec![
        tool_call("x1", "a", 0, "github.issues.create", 10),
        ToolCallRecord {
            outcome: ToolCallOutcome::Blocked,
            error_code: Some("tool_blocked".into()),
            ..tool_call("x1", "a", 1, "github.repos.delete", 11)
        },
        ToolCallRecord {
            session_id: None,
            ..tool_call("x1", "a", 2, "slack.post", 12)
        },
    ];
    s.insert_execution(x1.clone()).await.unwrap();
    // Another org's calls, with the same paths.
    s.insert_execution_deferred(execution("y1", "b", 13))
        .await
        .unwrap();
    assert_eq!(s.get_execution("x1").await.unwrap(), Some(x1.clone()));
    let page = PageRequest::first(50);
    let list = |filter: ToolCallFilter, org: &'static str| {
        let s = s.clone();
        let page = page.clone();
        async move {
            s.list_tool_calls(org, &filter, &page)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        }
    };
    let everything = s
        .list_tool_calls("a", &ToolCallFilter::default(), &page)
        .await
        .unwrap();
    assert_eq!(
        everything,
        x1.tool_calls.iter().rev().cloned().collect::<Vec<_>>(),
        "newest first, every field as written"
    );
    let cases: [(ToolCallFilter, &[&str]); 9] = [
        (
            ToolCallFilter {
                tool: Some("github.".into()),
                ..Default::default()
            },
            &["x1.1", "x1.0"],
        ),
        (
            ToolCallFilter {
                tool: Some("github.issues.create".into()),
                ..Default::default()
            },
            &["x1.0"],
        ),
        (
            ToolCallFilter {
                tool: Some("github".into()),
                ..Default::default()
            },
            &[],
        ),
        (
            ToolCallFilter {
                outcome: Some(ToolCallOutcome::Blocked),
                ..Default::default()
            },
            &["x1.1"],
        ),
        (
            ToolCallFilter {
                session_id: Some("s".into()),
                ..Default::default()
            },
            &["x1.1", "x1.0"],
        ),
        (
            ToolCallFilter {
                execution_id: Some("y1".into()),
                ..Default::default()
            },
            &[],
        ),
        (
            ToolCallFilter {
                since_ms: Some(11),
                ..Default::default()
            },
            &["x1.2", "x1.1"],
        ),
        (
            ToolCallFilter {
                until_ms: Some(11),
                ..Default::default()
            },
            &["x1.0"],
        ),
        (
            ToolCallFilter {
                tool: Some("slack.".into()),
                since_ms: Some(10),
                until_ms: Some(13),
                outcome: Some(ToolCallOutcome::Ok),
                execution_id: Some("x1".into()),
                session_id: None,
            },
            &["x1.2"],
        ),
    ];
    for (filter, expected) in cases {
        assert_eq!(list(filter.clone(), "a").await, expected, "{filter:?}");
    }
    // Tenancy: org b sees its own call only, whatever the filter.
    assert_eq!(list(ToolCallFilter::default(), "b").await, ["y1.0"]);
    assert!(
        list(
            ToolCallFilter {
                execution_id: Some("x1".into()),
                ..Default::default()
            },
            "b"
        )
        .await
        .is_empty()
    );
    // Written again (the paused run settled): its calls are replaced.
    let mut settled = x1.clone();
    settled.tool_calls = vec![tool_call("x1", "a", 0, "github.issues.create", 10)];
    s.insert_execution(settled).await.unwrap();
    assert_eq!(list(ToolCallFilter::default(), "a").await, ["x1.0"]);
}

async fn tool_call_pages_are_stable_under_concurrent_inserts(t: TestStore) {
    let s = t.store();
    let record = |n: i64| {
        let id = format!("x{n:03}");
        let mut x = execution(&id, "a", n);
        // Two calls in the same millisecond: the id orders them.
        x.tool_calls = vec![
            tool_call(&id, "a", 0, "ns.t", n * 10),
            tool_call(&id, "a", 1, "ns.t", n * 10),
        ];
        x
    };
    for n in 1..=20 {
        s.insert_execution(record(n)).await.unwrap();
    }
    let filter = ToolCallFilter::default();
    let first = s
        .list_tool_calls("a", &filter, &PageRequest::first(7))
        .await
        .unwrap();
    assert_eq!(first.len(), 7);
    // Newer rows arrive (and one at the very time of page one's last row,
    // with a greater id) while the reader is between pages.
    for n in 21..=30 {
        s.insert_execution(record(n)).await.unwrap();
    }
    let mut rest = Vec::new();
    let mut after = first.last().map(call_key);
    while let Some(key) = after {
        let page = s
            .list_tool_calls(
                "a",
                &filter,
                &PageRequest {
                    limit: 7,
                    after: Some(key),
                },
            )
            .await
            .unwrap();
        after = (page.len() == 7)
            .then(|| page.last().map(call_key))
            .flatten();
        rest.extend(page);
    }
    let read: Vec<String> = first.iter().chain(&rest).map(|c| c.id.clone()).collect();
    let expected: Vec<String> = (1..=20)
        .rev()
        .flat_map(|n| [format!("x{n:03}.1"), format!("x{n:03}.0")])
        .collect();
    assert_eq!(
        read, expected,
        "no duplicates, no gaps among the older rows"
    );
    // Following every page from the start now gives all 60.
    let all = all_pages(9, call_key, |page| {
        let s = s.clone();
        let filter = filter.clone();
        async move { s.list_tool_calls("a", &filter, &page).await }
    })
    .await;
    assert_eq!(all.len(), 60);
    let unique: HashSet<_> = all.iter().map(|c| c.id.clone()).collect();
    assert_eq!(unique.len(), 60);
}

async fn executions_are_filtered_and_paged_newest_first(t: TestStore) {
    let s = t.store();
    for n in 0..12i64 {
        let mut x = execution(
            &format!("x{n:02}"),
            if n % 3 == 2 { "b" } else { "a" },
            n / 2,
        );
        if n % 4 == 0 {
            x.status = ExecutionStatus::Error;
        }
        if n % 5 == 0 {
            x.session_id = Some("s5".into());
        }
        s.insert_execution(x).await.unwrap();
    }
    let key = |x: &ExecutionRecord| PageKey {
        started_at_ms: x.started_at_ms,
        id: x.id.clone(),
    };
    let ids = |list: Vec<ExecutionRecord>| list.into_iter().map(|x| x.id).collect::<Vec<_>>();
    let read = |org: Option<&'static str>, filter: ExecutionFilter| {
        let s = s.clone();
        async move {
            all_pages(3, key, |page| {
                let (s, filter) = (s.clone(), filter.clone());
                async move { s.list_executions(org, &filter, &page).await }
            })
            .await
        }
    };
    assert_eq!(
        ids(read(Some("a"), ExecutionFilter::default()).await),
        ["x10", "x09", "x07", "x06", "x04", "x03", "x01", "x00"]
    );
    assert_eq!(read(None, ExecutionFilter::default()).await.len(), 12);
    assert_eq!(
        ids(read(
            Some("a"),
            ExecutionFilter {
                status: Some(ExecutionStatus::Error),
                ..Default::default()
            }
        )
        .await),
        ["x04", "x00"]
    );
    assert_eq!(
        ids(read(
            Some("a"),
            ExecutionFilter {
                session_id: Some("s5".into()),
                ..Default::default()
            }
        )
        .await),
        ["x10", "x00"]
    );
    assert_eq!(
        ids(read(
            Some("a"),
            ExecutionFilter {
                since_ms: Some(2),
                until_ms: Some(4),
                ..Default::default()
            }
        )
        .await),
        ["x07", "x06", "x04"]
    );
    // A page after a key of equal time holds only the smaller ids.
    let after = s
        .list_executions(
            Some("a"),
            &ExecutionFilter::default(),
            &PageRequest {
                limit: 10,
                after: Some(PageKey {
                    started_at_ms: 3,
                    id: "x07".into(),
                }),
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(after), ["x06", "x04", "x03", "x01", "x00"]);
}

async fn paused_executions_are_listed_per_org(t: TestStore) {
    let s = t.store();
    let paused = |id: &str, org: &str| ExecutionRecord {
        status: ExecutionStatus::WaitingForInteraction,
        tool_calls: Vec::new(),
        ..execution(id, org, 1)
    };
    s.insert_execution(paused("p1", "a")).await.unwrap();
    s.save_execution_state("p1", "a", "{\"p\":1}".into(), None)
        .await
        .unwrap();
    s.insert_execution(paused("p2", "b")).await.unwrap();
    s.save_execution_state("p2", "b", "{}".into(), None)
        .await
        .unwrap();
    // Settled: its state stays (for repeats) but it waits no more.
    s.save_execution_state("p3", "a", "{}".into(), None)
        .await
        .unwrap();
    s.insert_execution(execution("p3", "a", 1)).await.unwrap();
    let listed = s.list_paused_executions("a").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].id.as_str(),
            listed[0].org_id.as_str(),
            listed[0].state.as_str()
        ),
        ("p1", "a", "{\"p\":1}")
    );
    assert!(listed[0].updated_at_ms > 0);
    assert_eq!(s.list_paused_executions("b").await.unwrap()[0].id, "p2");
    assert!(s.list_paused_executions("c").await.unwrap().is_empty());
}

async fn retention_removes_old_finished_executions_and_their_calls(t: TestStore) {
    let s = t.store();
    s.insert_execution(execution("old", "a", 10)).await.unwrap();
    s.insert_execution(execution("new", "a", 100))
        .await
        .unwrap();
    insert_paused(&s, execution("paused", "a", 10)).await;
    // Paused, but its saved state is gone: nothing can resume it.
    let abandoned = ExecutionRecord {
        status: ExecutionStatus::WaitingForInteraction,
        ..execution("abandoned", "a", 10)
    };
    s.insert_execution(abandoned).await.unwrap();
    assert_eq!(s.gc_executions(50).await.unwrap(), 2);
    assert!(s.get_execution("old").await.unwrap().is_none());
    assert!(s.get_execution("abandoned").await.unwrap().is_none());
    assert!(s.get_execution("new").await.unwrap().is_some());
    assert!(s.get_execution("paused").await.unwrap().is_some());
    assert!(s.load_execution_state("paused").await.unwrap().is_some());
    let calls = calls_of(&s, "a").await;
    assert_eq!(calls, ["new", "paused"]);
    assert_eq!(s.gc_executions(50).await.unwrap(), 0);
}

/// The executions whose tool calls `org` has, newest call first.
async fn calls_of(s: &std::sync::Arc<dyn Store>, org: &str) -> Vec<String> {
    s.list_tool_calls(org, &ToolCallFilter::default(), &PageRequest::first(10))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.execution_id)
        .collect()
}

/// `record`, stored as a paused run with its saved state.
async fn insert_paused(s: &std::sync::Arc<dyn Store>, record: ExecutionRecord) {
    let (id, org) = (record.id.clone(), record.org_id.clone());
    let paused = ExecutionRecord {
        status: ExecutionStatus::WaitingForInteraction,
        ..record
    };
    s.insert_execution(paused).await.unwrap();
    s.save_execution_state(&id, &org, "{}".into(), None)
        .await
        .unwrap();
}

/// A record of about 1 KiB: its code is the bulk.
fn sized_execution(id: &str, org: &str, started: i64) -> ExecutionRecord {
    ExecutionRecord {
        code: "x".repeat(1024),
        ..execution(id, org, started)
    }
}

async fn history_is_trimmed_oldest_first_per_org_and_a_paused_record_stays(t: TestStore) {
    let s = t.store();
    for (id, org, at) in [
        ("a1", "a", 1),
        ("a2", "a", 2),
        ("a3", "a", 3),
        ("b1", "b", 1),
    ] {
        s.insert_execution(sized_execution(id, org, at))
            .await
            .unwrap();
    }
    insert_paused(&s, sized_execution("a0", "a", 0)).await;
    let mut by_org = s.history_bytes_by_org().await.unwrap();
    by_org.sort();
    let (a, b) = (by_org[0].1, by_org[1].1);
    assert_eq!(by_org[0].0, "a");
    assert!(a > 4 * 1024 && b > 1024 && b < 2 * 1024, "{by_org:?}");
    // 1.5 KiB to free from org a: its two oldest finished records go (the
    // first alone is not enough); the paused one, the newest and b's stay.
    let trimmed = s.trim_history(Some("a"), 1536).await.unwrap();
    assert_eq!(trimmed.rows, 2);
    assert!(trimmed.bytes >= 2 * 1024, "{trimmed:?}");
    for (id, kept) in [
        ("a0", true),
        ("a1", false),
        ("a2", false),
        ("a3", true),
        ("b1", true),
    ] {
        assert_eq!(s.get_execution(id).await.unwrap().is_some(), kept, "{id}");
    }
    let calls = calls_of(&s, "a").await;
    assert_eq!(
        calls,
        ["a3", "a0"],
        "the trimmed records' calls went with them"
    );
    // Across orgs, oldest first: b1 (at 1) before a3 (at 3).
    assert_eq!(s.trim_history(None, 1).await.unwrap().rows, 1);
    assert!(s.get_execution("b1").await.unwrap().is_none());
    assert!(s.get_execution("a3").await.unwrap().is_some());
    assert_eq!(
        s.trim_history(Some("none"), 1 << 20).await.unwrap(),
        Trimmed::default()
    );
}

async fn delivered_events_are_trimmed_oldest_first_and_undelivered_ones_stay(t: TestStore) {
    let s = t.store();
    let data = "y".repeat(1000);
    for seq in 1..=4 {
        s.append_event(event("x", seq, &data), LogBounds::default(), None)
            .await
            .unwrap();
        if seq != 1 {
            s.mark_delivered("s", "x", seq).await.unwrap();
        }
    }
    s.flush().await.unwrap();
    assert_eq!(s.delivered_event_bytes().await.unwrap(), 3000);
    // 1,500 bytes to free: the two oldest delivered go; the undelivered
    // first one stays whatever its age.
    let trimmed = s.trim_delivered_events(1500).await.unwrap();
    assert_eq!(
        trimmed,
        Trimmed {
            rows: 2,
            bytes: 2000
        }
    );
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [1, 4]);
    assert_eq!(s.delivered_event_bytes().await.unwrap(), 1000);
    assert_eq!(s.trim_delivered_events(1 << 20).await.unwrap().rows, 1);
    assert_eq!(seqs(&s.events_after("s", "x", 0).await.unwrap()), [1]);
}

async fn tokens_are_listed_per_org_newest_first(t: TestStore) {
    let s = t.store();
    let a = s.ensure_account("list@t.test", None).await.unwrap();
    let b = s.ensure_account("other@t.test", None).await.unwrap();
    let token = |id: &str, owner: &Principal, created: i64| TokenRecord {
        id: id.into(),
        secret_hash: vec![7; 32],
        principal: owner.clone(),
        created_at_ms: created,
        expires_at_ms: (created == 2).then_some(3),
        revoked_at_ms: None,
        grant_id: None,
    };
    for (id, owner, created) in [("t1", &a, 1), ("t2", &a, 2), ("t3", &b, 3), ("t4", &a, 4)] {
        s.insert_token(token(id, owner, created)).await.unwrap();
    }
    assert!(s.revoke_token("t4", 5).await.unwrap());
    let listed = s.list_tokens(&a.org_id).await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["t4", "t2", "t1"], "revoked and expired ones included");
    assert_eq!(listed[0].revoked_at_ms, Some(5));
    assert_eq!(listed[1].expires_at_ms, Some(3));
    assert!(listed.iter().all(|t| t.principal.org_id == a.org_id));
    assert_eq!(s.list_tokens(&b.org_id).await.unwrap().len(), 1);
    assert!(s.list_tokens("org_none").await.unwrap().is_empty());
}

async fn sessions_are_listed_by_last_activity(t: TestStore) {
    let s = t.store();
    let a = s.ensure_account("sl@s.test", None).await.unwrap();
    let b = s.ensure_account("sl2@s.test", None).await.unwrap();
    for (id, owner, at) in [
        ("s1", &a, 1_000),
        ("s2", &a, 2_000),
        ("s3", &b, 3_000),
        ("s4", &a, 2_000),
    ] {
        s.insert_session(session(id, owner, at), "node_test")
            .await
            .unwrap();
    }
    s.touch_sessions(vec![touch("s1", 5_000)]).await.unwrap();
    s.terminate_session("s2", 6_000).await.unwrap();
    let key = |x: &SessionRecord| PageKey {
        started_at_ms: x.last_activity_at_ms,
        id: x.id.clone(),
    };
    let listed = all_pages(1, key, |page| {
        let (s, org) = (s.clone(), a.org_id.clone());
        async move { s.list_sessions(&org, &page).await }
    })
    .await;
    let ids: Vec<&str> = listed.iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, ["s1", "s4", "s2"]);
    assert!(listed[2].terminated_at_ms.is_some());
    let other = s
        .list_sessions(&b.org_id, &PageRequest::first(10))
        .await
        .unwrap();
    assert_eq!(other.len(), 1);
}

async fn policies_move_and_update_keeping_dense_positions(t: TestStore) {
    let s = t.store();
    for i in 0..5 {
        s.add_policy(PolicyRecord {
            id: format!("p{i}"),
            org_id: "org".into(),
            pattern: format!("ns.t{i}"),
            action: PolicyAction::Allow,
            position: i,
            created_at_ms: i,
        })
        .await
        .unwrap();
    }
    let order = || async {
        s.list_policies("org")
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.id, p.position))
            .collect::<Vec<_>>()
    };
    let ids = |list: Vec<(String, i64)>| {
        assert!(
            list.iter().enumerate().all(|(i, (_, p))| *p == i as i64),
            "dense: {list:?}"
        );
        list.into_iter().map(|(id, _)| id).collect::<Vec<_>>()
    };
    assert!(s.move_policy("org", "p4", 1).await.unwrap());
    assert_eq!(ids(order().await), ["p0", "p4", "p1", "p2", "p3"]);
    assert!(s.move_policy("org", "p0", 99).await.unwrap());
    assert_eq!(ids(order().await), ["p4", "p1", "p2", "p3", "p0"]);
    assert!(s.move_policy("org", "p2", -3).await.unwrap());
    assert_eq!(ids(order().await), ["p2", "p4", "p1", "p3", "p0"]);
    assert!(s.move_policy("org", "p1", 2).await.unwrap());
    assert_eq!(ids(order().await), ["p2", "p4", "p1", "p3", "p0"]);
    assert!(!s.move_policy("org", "none", 0).await.unwrap());
    assert!(!s.move_policy("other", "p1", 0).await.unwrap());
    let updated = s
        .update_policy("org", "p3", "ns.*".into(), PolicyAction::Block)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (updated.pattern.as_str(), updated.action, updated.position),
        ("ns.*", PolicyAction::Block, 3)
    );
    assert_eq!(
        s.list_policies("org").await.unwrap()[3].action,
        PolicyAction::Block
    );
    assert!(
        s.update_policy("other", "p3", "x".into(), PolicyAction::Allow)
            .await
            .unwrap()
            .is_none()
    );
}

/// A record written by an earlier release kept its tool calls in another
/// shape: it reads (and lists) with an empty list, not an error.
async fn an_older_records_tool_calls_read_as_an_empty_list(t: TestStore) {
    let s = t.store();
    s.insert_execution(execution("old", "a", 1)).await.unwrap();
    let old_shape = r#"[{"path":"a.b","outcome":"ok","startedAtMs":0,"durationMs":1.5}]"#;
    match &t {
        TestStore::Sqlite(_, dir) => {
            let conn = rusqlite::Connection::open(dir.path().join("executor.db")).unwrap();
            conn.execute(
                "UPDATE executions SET tool_calls = ?1 WHERE id = 'old'",
                [old_shape],
            )
            .unwrap();
        }
        TestStore::Postgres(_, db) => {
            db.raw()
                .await
                .execute(
                    "UPDATE executions SET tool_calls = $1 WHERE id = 'old'",
                    &[&old_shape],
                )
                .await
                .unwrap();
        }
    }
    let read = s.get_execution("old").await.unwrap().unwrap();
    assert!(read.tool_calls.is_empty());
    assert_eq!(read.code, "return 1");
    let listed = s
        .list_executions(
            Some("a"),
            &ExecutionFilter::default(),
            &PageRequest::first(5),
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    // As JSON (`executions show`), too.
    let json = serde_json::json!({"id": "old", "session_id": null, "account_id": "acc",
        "org_id": "a", "code": "", "status": "completed", "result": null, "error": null,
        "logs": [], "tool_calls": serde_json::from_str::<serde_json::Value>(old_shape).unwrap(),
        "started_at_ms": 1, "duration_ms": 1});
    let parsed: ExecutionRecord = serde_json::from_value(json).unwrap();
    assert!(parsed.tool_calls.is_empty());
}

/// A one-shot process lets a run it paused go (`release_execution`):
/// another claims it at once, though the releaser's node is alive; a stale
/// fence releases nothing.
async fn a_released_run_is_claimed_at_once_while_its_releaser_lives(t: TestStore) {
    let s = t.store();
    for node in ["node_a", "node_b"] {
        s.register_node(node, None, MINUTE).await.unwrap();
    }
    let a = fence("node_a", FIRST_EPOCH);
    s.save_execution_state("exec_r", "org", "{}".into(), Some(&a))
        .await
        .unwrap();
    s.release_execution("exec_r", &fence("node_a", FIRST_EPOCH + 5))
        .await
        .unwrap();
    assert!(matches!(
        s.claim_execution("exec_r", "node_b").await.unwrap(),
        ExecutionClaim::Held { .. }
    ));
    s.release_execution("exec_r", &a).await.unwrap();
    match s.claim_execution("exec_r", "node_b").await.unwrap() {
        ExecutionClaim::Claimed { fence, .. } => assert_eq!(fence.node, "node_b"),
        other => panic!("expected a claim, got {other:?}"),
    }
}

// The built-in authorization server (OAuthStore) and browser sign-in
// (SignInStore).

const DAY: i64 = 24 * 60 * MINUTE;
/// The grace a rotated refresh token keeps (SPEC §4: 60 s).
const GRACE: i64 = MINUTE;

fn oauth_client(id: &str, origin: OAuthClientOrigin, created: i64) -> OAuthClientRecord {
    OAuthClientRecord {
        id: id.into(),
        secret_hash: (origin == OAuthClientOrigin::Preregistered).then(|| vec![3; 32]),
        auth_method: "none".into(),
        redirect_uris: vec!["http://127.0.0.1:9/cb".into(), "https://app.test/cb".into()],
        client_name: Some("Test \"client\"".into()),
        origin,
        created_at_ms: created,
        last_used_at_ms: None,
    }
}

fn code_hash(tag: &str) -> Vec<u8> {
    executor_store::tokens::hash(&format!("code:{tag}"))
}

fn oauth_code(tag: &str, client: &str, owner: &Principal, created: i64) -> OAuthCodeRecord {
    OAuthCodeRecord {
        code_hash: code_hash(tag),
        client_id: client.into(),
        redirect_uri: "https://app.test/cb".into(),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        resource: "https://executor.test/mcp".into(),
        scope: "mcp".into(),
        principal: owner.clone(),
        created_at_ms: created,
        expires_at_ms: created + MINUTE,
    }
}

fn oauth_grant(id: &str, client: &str, owner: &Principal, at: i64) -> OAuthGrantRecord {
    OAuthGrantRecord {
        id: id.into(),
        client_id: client.into(),
        principal: owner.clone(),
        scope: "mcp".into(),
        resource: "https://executor.test/mcp".into(),
        redirect_uri: "https://app.test/cb".into(),
        created_at_ms: at,
        last_used_at_ms: at,
        expires_at_ms: at + 30 * DAY,
        revoked_at_ms: None,
    }
}

fn refresh_hash(tag: &str) -> Vec<u8> {
    executor_store::tokens::hash(&format!("refresh:{tag}"))
}

/// What one exchange or refresh issues: access token `oat_<tag>` (an hour)
/// and refresh token `<tag>` (30 days).
fn issued(tag: &str, at: i64) -> IssuedTokens {
    IssuedTokens {
        access_id: format!("oat_{tag}"),
        access_hash: executor_store::tokens::hash(&format!("access:{tag}")),
        access_expires_at_ms: at + 60 * MINUTE,
        refresh_hash: refresh_hash(tag),
        refresh_expires_at_ms: at + 30 * DAY,
        issued_at_ms: at,
    }
}

fn refresh_use(tag: &str, client: &str, at: i64) -> RefreshUse {
    RefreshUse {
        token_hash: refresh_hash(tag),
        client_id: client.into(),
        at_ms: at,
        grace_ms: GRACE,
    }
}

/// A grant made the way `/token` makes one: a code stored, taken fresh and
/// exchanged at `at`, issuing `tokens_tag`.
async fn exchanged(s: &dyn Store, grant: OAuthGrantRecord, tokens_tag: &str) -> OAuthGrantRecord {
    let at = grant.created_at_ms;
    let code = oauth_code(&grant.id, &grant.client_id, &grant.principal, at);
    s.insert_oauth_code(code.clone()).await.unwrap();
    assert_eq!(
        s.take_oauth_code(&code.code_hash, at).await.unwrap(),
        CodeTake::Fresh(code.clone())
    );
    assert!(
        s.create_oauth_grant(&code.code_hash, grant.clone(), issued(tokens_tag, at))
            .await
            .unwrap()
    );
    grant
}

async fn revoked_at(s: &dyn Store, token: &str) -> Option<i64> {
    s.find_token(token)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{token} is gone"))
        .revoked_at_ms
}

/// A code is taken fresh once; its exchange writes the grant with its first
/// tokens (the access token a row of `tokens`, with its grant); presenting
/// it again revokes the grant and that token, which moves the access
/// revision, and makes the grant's refresh token worthless.
async fn a_code_is_taken_once_and_a_replay_revokes_what_it_issued(t: TestStore) {
    let s = t.store();
    let watcher = t.reopen().await;
    let at_once = matches!(t, TestStore::Sqlite(..));
    let owner = s.ensure_account("code@o.test", None).await.unwrap();
    let client = oauth_client("cl_code", OAuthClientOrigin::Registered, 1_000);
    s.insert_oauth_client(client.clone()).await.unwrap();
    assert_eq!(
        s.find_oauth_client("cl_code").await.unwrap(),
        Some(client.clone())
    );
    let at = 10_000;
    let code = oauth_code("c1", "cl_code", &owner, at);
    s.insert_oauth_code(code.clone()).await.unwrap();
    let revision = moved(&watcher, None, at_once).await;

    assert_eq!(
        s.take_oauth_code(&code.code_hash, at + 1).await.unwrap(),
        CodeTake::Fresh(code.clone())
    );
    let grant = oauth_grant("gr_code", "cl_code", &owner, at + 2);
    assert!(
        s.create_oauth_grant(&code.code_hash, grant.clone(), issued("c1", at + 2))
            .await
            .unwrap()
    );
    assert_eq!(
        s.find_oauth_grant("gr_code").await.unwrap(),
        Some(grant.clone())
    );
    let access = s.find_token("oat_c1").await.unwrap().unwrap();
    assert_eq!(access.grant_id.as_deref(), Some("gr_code"));
    assert!(access.is_oauth());
    assert_eq!(access.principal, owner);
    assert_eq!(access.secret_hash, issued("c1", at + 2).access_hash);
    assert_eq!(
        (
            access.created_at_ms,
            access.expires_at_ms,
            access.revoked_at_ms
        ),
        (at + 2, Some(at + 2 + 60 * MINUTE), None)
    );
    assert_eq!(
        s.grant_of_refresh_token(&refresh_hash("c1")).await.unwrap(),
        Some("gr_code".into())
    );
    assert_eq!(
        s.find_oauth_client("cl_code")
            .await
            .unwrap()
            .unwrap()
            .last_used_at_ms,
        Some(at + 2),
        "an exchange marks its client used"
    );
    // Issuing moves no revision (nothing cached names a new token).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        watcher.access_revision(),
        Some(revision),
        "issuing moves nothing"
    );

    assert_eq!(
        s.take_oauth_code(&code.code_hash, at + 3).await.unwrap(),
        CodeTake::Replayed
    );
    assert_eq!(
        s.find_oauth_grant("gr_code")
            .await
            .unwrap()
            .unwrap()
            .revoked_at_ms,
        Some(at + 3)
    );
    assert_eq!(revoked_at(s.as_ref(), "oat_c1").await, Some(at + 3));
    moved(&watcher, Some(revision), at_once).await;
    // Again: still a replay; the first revocation's time stays.
    assert_eq!(
        s.take_oauth_code(&code.code_hash, at + 4).await.unwrap(),
        CodeTake::Replayed
    );
    assert_eq!(revoked_at(s.as_ref(), "oat_c1").await, Some(at + 3));
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("c1", "cl_code", at + 5), issued("c2", at + 5))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid)
    );
    assert!(s.find_token("oat_c2").await.unwrap().is_none());
}

/// A replay between a code's take and its exchange: the exchange writes
/// nothing at all.
async fn a_code_replayed_before_its_exchange_makes_no_grant(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("race@o.test", None).await.unwrap();
    s.insert_oauth_client(oauth_client("cl_r", OAuthClientOrigin::Registered, 1))
        .await
        .unwrap();
    let code = oauth_code("r1", "cl_r", &owner, 100);
    s.insert_oauth_code(code.clone()).await.unwrap();
    assert!(matches!(
        s.take_oauth_code(&code.code_hash, 101).await.unwrap(),
        CodeTake::Fresh(_)
    ));
    assert_eq!(
        s.take_oauth_code(&code.code_hash, 102).await.unwrap(),
        CodeTake::Replayed
    );
    let grant = oauth_grant("gr_r", "cl_r", &owner, 103);
    assert!(
        !s.create_oauth_grant(&code.code_hash, grant, issued("r1", 103))
            .await
            .unwrap()
    );
    assert!(s.find_oauth_grant("gr_r").await.unwrap().is_none());
    assert!(s.find_token("oat_r1").await.unwrap().is_none());
    assert!(
        s.grant_of_refresh_token(&refresh_hash("r1"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(s.list_oauth_grants(&owner.org_id).await.unwrap().is_empty());
    assert_eq!(
        s.find_oauth_client("cl_r")
            .await
            .unwrap()
            .unwrap()
            .last_used_at_ms,
        None,
        "nothing written, the client's use included"
    );
    // A code nobody stored makes no grant either.
    assert!(
        !s.create_oauth_grant(
            &code_hash("none"),
            oauth_grant("gr_none", "cl_r", &owner, 104),
            issued("none", 104)
        )
        .await
        .unwrap()
    );
    assert!(s.find_oauth_grant("gr_none").await.unwrap().is_none());
}

/// A code nobody issued, or presented at or past its deadline, is Unknown;
/// the late one is used up all the same.
async fn an_unknown_or_expired_code_is_unknown_and_used_up(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("late@o.test", None).await.unwrap();
    s.insert_oauth_client(oauth_client("cl_l", OAuthClientOrigin::Registered, 1))
        .await
        .unwrap();
    assert_eq!(
        s.take_oauth_code(&code_hash("nobody"), 5).await.unwrap(),
        CodeTake::Unknown
    );
    let code = oauth_code("l1", "cl_l", &owner, 100);
    s.insert_oauth_code(code.clone()).await.unwrap();
    assert_eq!(
        s.take_oauth_code(&code.code_hash, code.expires_at_ms)
            .await
            .unwrap(),
        CodeTake::Unknown,
        "at its deadline"
    );
    assert!(
        !matches!(
            s.take_oauth_code(&code.code_hash, 101).await.unwrap(),
            CodeTake::Fresh(_)
        ),
        "used up by the late presentation"
    );
}

/// Racing presentations of one code: exactly one is Fresh, every other
/// one a replay.
async fn racing_takers_of_a_code_get_one_fresh_take(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("takers@o.test", None).await.unwrap();
    let code = oauth_code("race", "cl_race", &owner, 100);
    s.insert_oauth_code(code.clone()).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (s, hash) = (s.clone(), code.code_hash.clone());
        tasks.push(tokio::spawn(async move {
            s.take_oauth_code(&hash, 101 + i).await
        }));
    }
    let mut fresh = 0;
    for task in tasks {
        match task.await.unwrap().unwrap() {
            CodeTake::Fresh(taken) => {
                assert_eq!(taken, code);
                fresh += 1;
            }
            CodeTake::Replayed => {}
            CodeTake::Unknown => panic!("a stored code in time is known"),
        }
    }
    assert_eq!(fresh, 1);
}

/// Rotation: a refresh marks its token rotated and issues a new pair; the
/// rotated token still issues within the grace (both issued tokens then
/// work); used after the grace it revokes the grant and every token issued
/// under it.
async fn a_refresh_token_rotates_with_a_grace_and_a_reuse_revokes_the_grant(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("rot@o.test", None).await.unwrap();
    s.insert_oauth_client(oauth_client("cl_rot", OAuthClientOrigin::Registered, 1))
        .await
        .unwrap();
    let t0 = 1_000_000;
    let grant = exchanged(
        s.as_ref(),
        oauth_grant("gr_rot", "cl_rot", &owner, t0),
        "r0",
    )
    .await;

    let t1 = t0 + 10 * MINUTE;
    let refreshed = s
        .refresh_oauth_grant(refresh_use("r0", "cl_rot", t1), issued("r1", t1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        refreshed,
        OAuthGrantRecord {
            last_used_at_ms: t1,
            ..grant.clone()
        }
    );
    assert_eq!(s.find_oauth_grant("gr_rot").await.unwrap(), Some(refreshed));
    let access = s.find_token("oat_r1").await.unwrap().unwrap();
    assert_eq!(access.grant_id.as_deref(), Some("gr_rot"));
    assert_eq!(access.expires_at_ms, Some(t1 + 60 * MINUTE));
    assert_eq!(revoked_at(s.as_ref(), "oat_r0").await, None);
    // Within the grace: a concurrent refresh of the same token issues too.
    let t2 = t1 + GRACE;
    assert!(
        s.refresh_oauth_grant(refresh_use("r0", "cl_rot", t2), issued("r2", t2))
            .await
            .unwrap()
            .is_ok()
    );
    // Both new refresh tokens work.
    let t3 = t2 + MINUTE;
    for (used, new) in [("r1", "r3"), ("r2", "r4")] {
        assert_eq!(
            s.grant_of_refresh_token(&refresh_hash(used)).await.unwrap(),
            Some("gr_rot".into())
        );
        assert!(
            s.refresh_oauth_grant(refresh_use(used, "cl_rot", t3), issued(new, t3))
                .await
                .unwrap()
                .is_ok(),
            "{used}"
        );
    }
    assert_eq!(
        s.find_oauth_client("cl_rot")
            .await
            .unwrap()
            .unwrap()
            .last_used_at_ms,
        Some(t3),
        "a refresh marks the client used"
    );
    // Past the grace: a stolen token, or a replay — the grant goes.
    let t4 = t1 + GRACE + 1;
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("r0", "cl_rot", t4), issued("r5", t4))
            .await
            .unwrap(),
        Err(RefreshRefusal::Reused)
    );
    assert!(s.find_token("oat_r5").await.unwrap().is_none());
    assert_eq!(
        s.find_oauth_grant("gr_rot")
            .await
            .unwrap()
            .unwrap()
            .revoked_at_ms,
        Some(t4)
    );
    for token in ["oat_r0", "oat_r1", "oat_r2", "oat_r3", "oat_r4"] {
        assert_eq!(revoked_at(s.as_ref(), token).await, Some(t4), "{token}");
    }
    // Even a token never used is worthless now.
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("r3", "cl_rot", t4 + 1), issued("r6", t4 + 1))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid)
    );
}

/// Another client's token, an unknown or lapsed one, and one of a revoked
/// or lapsed grant issue nothing and revoke nothing. OAuth access tokens
/// are not API tokens: `list_tokens` leaves them out.
async fn refresh_is_refused_to_another_client_a_revoked_grant_and_a_lapsed_token(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("ref@o.test", None).await.unwrap();
    for id in ["cl_a", "cl_b"] {
        s.insert_oauth_client(oauth_client(id, OAuthClientOrigin::Registered, 1))
            .await
            .unwrap();
    }
    let t0 = 50 * DAY;
    // A long grant: its refresh tokens lapse before it does.
    let long = OAuthGrantRecord {
        expires_at_ms: t0 + 90 * DAY,
        ..oauth_grant("gr_a", "cl_a", &owner, t0)
    };
    exchanged(s.as_ref(), long, "a0").await;
    let t1 = t0 + MINUTE;
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("a0", "cl_b", t1), issued("b1", t1))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid),
        "another client's"
    );
    assert!(s.find_token("oat_b1").await.unwrap().is_none());
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("nobody", "cl_a", t1), issued("n1", t1))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid),
        "unknown"
    );
    // The other client's attempt neither rotated nor revoked anything.
    assert!(
        s.refresh_oauth_grant(refresh_use("a0", "cl_a", t1), issued("a1", t1))
            .await
            .unwrap()
            .is_ok()
    );
    assert!(
        s.refresh_oauth_grant(
            refresh_use("a1", "cl_a", t1 + 5 * MINUTE),
            issued("a2", t1 + 5 * MINUTE)
        )
        .await
        .unwrap()
        .is_ok()
    );

    // A refresh token at its deadline.
    let lapsed_at = t1 + 5 * MINUTE + 30 * DAY;
    assert_eq!(
        s.refresh_oauth_grant(
            refresh_use("a2", "cl_a", lapsed_at),
            issued("a3", lapsed_at)
        )
        .await
        .unwrap(),
        Err(RefreshRefusal::Invalid),
        "a lapsed refresh token"
    );
    // A grant at its deadline, whatever its refresh tokens say.
    let short = OAuthGrantRecord {
        expires_at_ms: t0 + DAY,
        ..oauth_grant("gr_short", "cl_a", &owner, t0)
    };
    exchanged(s.as_ref(), short, "s0").await;
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("s0", "cl_a", t0 + DAY), issued("s1", t0 + DAY))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid),
        "a lapsed grant"
    );
    assert_eq!(
        s.find_oauth_grant("gr_short")
            .await
            .unwrap()
            .unwrap()
            .revoked_at_ms,
        None,
        "refused, not revoked"
    );

    // A revoked grant: its tokens are revoked, its refresh tokens refused.
    let t2 = t1 + 10 * MINUTE;
    assert!(s.revoke_oauth_grant("gr_a", t2).await.unwrap());
    assert!(s.revoke_oauth_grant("gr_a", t2 + 1).await.unwrap());
    assert!(!s.revoke_oauth_grant("gr_none", t2).await.unwrap());
    let grant = s.find_oauth_grant("gr_a").await.unwrap().unwrap();
    assert_eq!(
        grant.revoked_at_ms,
        Some(t2),
        "the first revocation's time stays"
    );
    assert!(!grant.is_current(t2));
    for token in ["oat_a0", "oat_a1", "oat_a2"] {
        assert_eq!(revoked_at(s.as_ref(), token).await, Some(t2), "{token}");
    }
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("a2", "cl_a", t2 + 1), issued("a4", t2 + 1))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid),
        "a revoked grant's"
    );

    // API tokens are listed; the grants' access tokens are not.
    s.insert_token(executor_store::tokens::mint(owner.clone(), t0, None).record)
        .await
        .unwrap();
    let listed = s.list_tokens(&owner.org_id).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(!listed[0].is_oauth());
    assert!(s.find_token("oat_a0").await.unwrap().unwrap().is_oauth());
}

/// Racing refreshes of one token (a client's parallel requests) within the
/// grace: every one issues, and every token they issued is the grant's.
async fn concurrent_refreshes_of_one_token_within_the_grace_all_issue(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("conc@o.test", None).await.unwrap();
    s.insert_oauth_client(oauth_client("cl_c", OAuthClientOrigin::Registered, 1))
        .await
        .unwrap();
    let t0 = 2_000_000;
    exchanged(s.as_ref(), oauth_grant("gr_c", "cl_c", &owner, t0), "c0").await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let at = t0 + 1_000 + i;
            s.refresh_oauth_grant(
                refresh_use("c0", "cl_c", at),
                issued(&format!("c{}", i + 1), at),
            )
            .await
        }));
    }
    for task in tasks {
        let answer = task.await.unwrap().unwrap();
        assert!(answer.is_ok(), "{answer:?}");
    }
    for i in 1..=8 {
        let access = s.find_token(&format!("oat_c{i}")).await.unwrap().unwrap();
        assert_eq!(access.grant_id.as_deref(), Some("gr_c"));
        assert_eq!(access.revoked_at_ms, None);
        assert_eq!(
            s.grant_of_refresh_token(&refresh_hash(&format!("c{i}")))
                .await
                .unwrap(),
            Some("gr_c".into())
        );
    }
    assert!(
        s.find_oauth_grant("gr_c")
            .await
            .unwrap()
            .unwrap()
            .is_current(t0 + 2_000)
    );
    // The grace counts from the first rotation.
    let late = t0 + 1_000 + GRACE + 8;
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("c0", "cl_c", late), issued("c9", late))
            .await
            .unwrap(),
        Err(RefreshRefusal::Reused)
    );
}

/// Deleting a client revokes every grant it holds (in any org) and their
/// tokens, and leaves other clients' alone; a code it was issued before
/// then makes no grant. Lists are newest first.
async fn deleting_a_client_revokes_its_grants_and_stops_its_exchanges(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("del@o.test", None).await.unwrap();
    let team = s
        .ensure_account("del@o.test", Some("del-team"))
        .await
        .unwrap();
    s.insert_oauth_client(oauth_client("cl_x", OAuthClientOrigin::Registered, 10))
        .await
        .unwrap();
    s.insert_oauth_client(oauth_client("cl_y", OAuthClientOrigin::Preregistered, 20))
        .await
        .unwrap();
    let ids = |clients: Vec<OAuthClientRecord>| -> Vec<String> {
        clients.into_iter().map(|c| c.id).collect()
    };
    assert_eq!(ids(s.list_oauth_clients().await.unwrap()), ["cl_y", "cl_x"]);
    exchanged(s.as_ref(), oauth_grant("gr_x1", "cl_x", &owner, 100), "x1").await;
    exchanged(s.as_ref(), oauth_grant("gr_x2", "cl_x", &team, 200), "x2").await;
    exchanged(s.as_ref(), oauth_grant("gr_y1", "cl_y", &owner, 300), "y1").await;
    let listed: Vec<String> = s
        .list_oauth_grants(&owner.org_id)
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.id)
        .collect();
    assert_eq!(listed, ["gr_y1", "gr_x1"], "the org's, newest first");
    let pending = oauth_code("x3", "cl_x", &owner, 400);
    s.insert_oauth_code(pending.clone()).await.unwrap();
    assert!(matches!(
        s.take_oauth_code(&pending.code_hash, 401).await.unwrap(),
        CodeTake::Fresh(_)
    ));

    assert!(s.delete_oauth_client("cl_x", 500).await.unwrap());
    assert!(!s.delete_oauth_client("cl_x", 600).await.unwrap());
    assert!(s.find_oauth_client("cl_x").await.unwrap().is_none());
    assert_eq!(ids(s.list_oauth_clients().await.unwrap()), ["cl_y"]);
    for (grant, token) in [("gr_x1", "oat_x1"), ("gr_x2", "oat_x2")] {
        let found = s.find_oauth_grant(grant).await.unwrap().unwrap();
        assert_eq!(found.revoked_at_ms, Some(500), "{grant}");
        assert_eq!(revoked_at(s.as_ref(), token).await, Some(500), "{token}");
    }
    assert_eq!(
        s.find_oauth_grant("gr_y1")
            .await
            .unwrap()
            .unwrap()
            .revoked_at_ms,
        None
    );
    assert_eq!(revoked_at(s.as_ref(), "oat_y1").await, None);
    assert_eq!(
        s.list_oauth_grants(&owner.org_id).await.unwrap().len(),
        2,
        "revoked grants are listed"
    );
    assert!(
        !s.create_oauth_grant(
            &pending.code_hash,
            oauth_grant("gr_x3", "cl_x", &owner, 700),
            issued("x3", 700)
        )
        .await
        .unwrap(),
        "the client is gone"
    );
    assert!(s.find_oauth_grant("gr_x3").await.unwrap().is_none());
    assert!(s.find_token("oat_x3").await.unwrap().is_none());
    assert_eq!(
        s.refresh_oauth_grant(refresh_use("x1", "cl_x", 800), issued("x4", 800))
            .await
            .unwrap(),
        Err(RefreshRefusal::Invalid)
    );
}

/// `save_metadata_client`: a document fetched again replaces the redirect
/// URIs and name and keeps the creation and last use; an id that a
/// registered or preregistered client holds is never overwritten.
async fn a_metadata_document_client_is_saved_again_and_never_takes_another_clients_id(
    t: TestStore,
) {
    let s = t.store();
    let url = "https://app.test/oauth/client.json";
    let first = OAuthClientRecord {
        secret_hash: Some(vec![1; 32]),
        auth_method: "client_secret_basic".into(),
        ..oauth_client(url, OAuthClientOrigin::MetadataDocument, 10)
    };
    assert!(s.save_metadata_client(first).await.unwrap());
    let saved = s.find_oauth_client(url).await.unwrap().unwrap();
    assert_eq!(saved.origin, OAuthClientOrigin::MetadataDocument);
    assert_eq!(saved.secret_hash, None, "always a public client");
    assert_eq!(saved.auth_method, "none");
    assert_eq!(saved.created_at_ms, 10);

    let again = OAuthClientRecord {
        redirect_uris: vec!["https://app.test/new-cb".into()],
        client_name: None,
        created_at_ms: 99,
        ..oauth_client(url, OAuthClientOrigin::MetadataDocument, 99)
    };
    assert!(s.save_metadata_client(again).await.unwrap());
    let saved = s.find_oauth_client(url).await.unwrap().unwrap();
    assert_eq!(
        saved.redirect_uris,
        vec!["https://app.test/new-cb".to_string()]
    );
    assert_eq!(saved.client_name, None);
    assert_eq!(saved.created_at_ms, 10, "created when first saved");

    s.insert_oauth_client(oauth_client(
        "https://taken.test/c",
        OAuthClientOrigin::Registered,
        5,
    ))
    .await
    .unwrap();
    let squatter = OAuthClientRecord {
        redirect_uris: vec!["https://evil.test/cb".into()],
        ..oauth_client(
            "https://taken.test/c",
            OAuthClientOrigin::MetadataDocument,
            6,
        )
    };
    assert!(!s.save_metadata_client(squatter).await.unwrap());
    let kept = s
        .find_oauth_client("https://taken.test/c")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.origin, OAuthClientOrigin::Registered);
    assert!(
        !kept
            .redirect_uris
            .contains(&"https://evil.test/cb".to_string())
    );
}

/// `gc_oauth`: lapsed codes; registered clients unused 7 days after
/// registration or 90 days after their last use (their grants revoked, not
/// yet deleted), never preregistered ones; lapsed refresh tokens; access
/// tokens a day past their deadline; grants a day past their revocation
/// or deadline, with their refresh tokens. What is younger stays.
async fn oauth_gc_deletes_what_has_lapsed_and_keeps_the_rest(t: TestStore) {
    use OAuthClientOrigin::{MetadataDocument, Preregistered, Registered};
    let s = t.store();
    let owner = s.ensure_account("gc@o.test", None).await.unwrap();
    let now = 1_000 * DAY;
    for (id, origin, created) in [
        ("reg_unused", Registered, now - 8 * DAY),
        ("https://doc.test/unused", MetadataDocument, now - 8 * DAY),
        ("https://doc.test/new", MetadataDocument, now - 2 * DAY),
        ("reg_new", Registered, now - 2 * DAY),
        ("pre_unused", Preregistered, now - 100 * DAY),
        ("reg_used", Registered, now - 20 * DAY),
        ("reg_idle", Registered, now - 200 * DAY),
        ("pre_other", Preregistered, now - 200 * DAY),
    ] {
        s.insert_oauth_client(oauth_client(id, origin, created))
            .await
            .unwrap();
    }
    // Used 10 days ago: kept; its access token (an hour) is deleted, its
    // refresh token (30 days) kept.
    exchanged(
        s.as_ref(),
        oauth_grant("gr_used", "reg_used", &owner, now - 10 * DAY),
        "u0",
    )
    .await;
    // Last used 91 days ago: deleted, its grant revoked.
    let idle = OAuthGrantRecord {
        expires_at_ms: now + 100 * DAY,
        ..oauth_grant("gr_idle", "reg_idle", &owner, now - 91 * DAY)
    };
    exchanged(s.as_ref(), idle, "i0").await;
    // Revoked two days ago: deleted with its refresh token.
    exchanged(
        s.as_ref(),
        oauth_grant("gr_old", "pre_other", &owner, now - 3 * DAY),
        "o0",
    )
    .await;
    assert!(s.revoke_oauth_grant("gr_old", now - 2 * DAY).await.unwrap());
    // A code past its deadline, and one still in time.
    s.insert_oauth_code(oauth_code("late", "reg_new", &owner, now - MINUTE))
        .await
        .unwrap();
    s.insert_oauth_code(oauth_code("fresh", "reg_new", &owner, now))
        .await
        .unwrap();
    // An API token long expired is not the collector's.
    let mut api = executor_store::tokens::mint(owner.clone(), 1, Some(2)).record;
    api.id = "api_old".into();
    s.insert_token(api).await.unwrap();

    // Codes: 3 exchanged + "late"; clients: reg_unused, reg_idle and the
    // unused document's; refresh tokens: i0 (lapsed), o0 (its grant
    // revoked); access tokens: u0, i0, o0; grants: gr_old.
    assert_eq!(s.gc_oauth(now).await.unwrap(), 4 + 3 + 2 + 3 + 1);

    for (id, kept) in [
        ("reg_unused", false),
        ("https://doc.test/unused", false),
        ("https://doc.test/new", true),
        ("reg_new", true),
        ("pre_unused", true),
        ("reg_used", true),
        ("reg_idle", false),
        ("pre_other", true),
    ] {
        assert_eq!(
            s.find_oauth_client(id).await.unwrap().is_some(),
            kept,
            "{id}"
        );
    }
    assert_eq!(
        s.find_oauth_grant("gr_idle")
            .await
            .unwrap()
            .unwrap()
            .revoked_at_ms,
        Some(now),
        "a deleted client's grant is revoked"
    );
    assert!(s.find_oauth_grant("gr_old").await.unwrap().is_none());
    assert!(s.find_oauth_grant("gr_used").await.unwrap().is_some());
    for token in ["oat_u0", "oat_i0", "oat_o0"] {
        assert!(s.find_token(token).await.unwrap().is_none(), "{token}");
    }
    assert!(s.find_token("api_old").await.unwrap().is_some());
    assert_eq!(
        s.grant_of_refresh_token(&refresh_hash("u0")).await.unwrap(),
        Some("gr_used".into())
    );
    for gone in ["i0", "o0"] {
        assert!(
            s.grant_of_refresh_token(&refresh_hash(gone))
                .await
                .unwrap()
                .is_none(),
            "{gone}"
        );
    }
    assert!(matches!(
        s.take_oauth_code(&code_hash("fresh"), now).await.unwrap(),
        CodeTake::Fresh(_)
    ));
    assert_eq!(
        s.take_oauth_code(&code_hash("late"), now - MINUTE)
            .await
            .unwrap(),
        CodeTake::Unknown,
        "deleted"
    );

    assert_eq!(s.gc_oauth(now).await.unwrap(), 0, "nothing more");
    // Two days on: the revoked grant of the deleted client goes, and the
    // code still in time then has lapsed.
    assert_eq!(s.gc_oauth(now + 2 * DAY).await.unwrap(), 2);
    assert!(s.find_oauth_grant("gr_idle").await.unwrap().is_none());
    assert!(s.find_oauth_client("reg_new").await.unwrap().is_some());
}

/// A login link signs in once, before its deadline; a late one is used up
/// all the same; expired links are collected.
async fn a_login_link_is_redeemed_once_before_its_deadline(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("link@o.test", None).await.unwrap();
    let link = |tag: &str, created: i64| LoginLinkRecord {
        link_hash: executor_store::tokens::hash(&format!("link:{tag}")),
        principal: owner.clone(),
        created_at_ms: created,
        expires_at_ms: created + 10 * MINUTE,
    };
    let (early, late) = (link("early", 1_000), link("late", 1_000));
    s.insert_login_link(early.clone()).await.unwrap();
    s.insert_login_link(late.clone()).await.unwrap();
    assert_eq!(
        s.redeem_login_link(&early.link_hash, 2_000).await.unwrap(),
        Some(owner.clone())
    );
    assert_eq!(
        s.redeem_login_link(&early.link_hash, 2_001).await.unwrap(),
        None,
        "once"
    );
    assert_eq!(
        s.redeem_login_link(&late.link_hash, late.expires_at_ms)
            .await
            .unwrap(),
        None,
        "at its deadline"
    );
    assert_eq!(
        s.redeem_login_link(&late.link_hash, 2_000).await.unwrap(),
        None,
        "used up by the late try"
    );
    assert_eq!(
        s.redeem_login_link(&executor_store::tokens::hash("link:none"), 2_000)
            .await
            .unwrap(),
        None
    );
    let pending = link("pending", 5_000);
    s.insert_login_link(pending.clone()).await.unwrap();
    assert_eq!(
        s.gc_sign_in(late.expires_at_ms, 0).await.unwrap(),
        2,
        "the two past their deadline"
    );
    assert_eq!(
        s.redeem_login_link(&pending.link_hash, 6_000)
            .await
            .unwrap(),
        Some(owner)
    );
}

/// A console session is found by its hash, its activity only moves
/// forward, it switches only to its account's orgs, and it ends by sign-out
/// or by idling past the collector's bound.
async fn console_sessions_are_found_touched_switched_and_collected(t: TestStore) {
    let s = t.store();
    let owner = s.ensure_account("cs@o.test", None).await.unwrap();
    let team = s
        .ensure_account("cs@o.test", Some("cs-team"))
        .await
        .unwrap();
    let stranger = s.ensure_account("else@o.test", None).await.unwrap();
    let session = |tag: &str, at: i64| ConsoleSessionRecord {
        session_hash: executor_store::tokens::hash(&format!("cookie:{tag}")),
        principal: owner.clone(),
        created_at_ms: at,
        last_seen_at_ms: at,
        token_id: None,
    };
    let (a, b) = (session("a", 100), session("b", 100));
    s.insert_console_session(a.clone()).await.unwrap();
    s.insert_console_session(b.clone()).await.unwrap();
    assert_eq!(
        s.find_console_session(&a.session_hash).await.unwrap(),
        Some(a.clone())
    );
    assert!(
        s.find_console_session(&executor_store::tokens::hash("cookie:none"))
            .await
            .unwrap()
            .is_none()
    );
    s.touch_console_session(&a.session_hash, 150).await.unwrap();
    s.touch_console_session(&a.session_hash, 120).await.unwrap();
    let found = s
        .find_console_session(&a.session_hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.last_seen_at_ms, 150, "activity only moves forward");
    assert_eq!(found.created_at_ms, 100);

    assert!(
        s.set_console_session_org(&a.session_hash, &team.org_id)
            .await
            .unwrap()
    );
    let found = s
        .find_console_session(&a.session_hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.principal, team, "the same account, in the team");
    assert!(
        !s.set_console_session_org(&a.session_hash, &stranger.org_id)
            .await
            .unwrap(),
        "not one of its account's orgs"
    );
    assert_eq!(
        s.find_console_session(&a.session_hash)
            .await
            .unwrap()
            .unwrap()
            .principal,
        team
    );
    assert!(
        !s.set_console_session_org(&executor_store::tokens::hash("cookie:none"), &team.org_id)
            .await
            .unwrap()
    );

    // Idle since 100, before the bound of 140: signed out; `a` was seen at 150.
    assert_eq!(s.gc_sign_in(0, 140).await.unwrap(), 1);
    assert!(
        s.find_console_session(&b.session_hash)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.find_console_session(&a.session_hash)
            .await
            .unwrap()
            .is_some()
    );
    assert!(s.delete_console_session(&a.session_hash).await.unwrap());
    assert!(!s.delete_console_session(&a.session_hash).await.unwrap());
    assert!(
        s.find_console_session(&a.session_hash)
            .await
            .unwrap()
            .is_none()
    );
}

/// Issue 41 §2: what nodes hold of a bound never sums past it; a node
/// whose lease lapsed holds nothing, and a registration drops its grants.
async fn a_shared_bound_is_granted_across_live_nodes_and_never_over(t: TestStore) {
    let s = t.store();
    for node in ["node_a", "node_b"] {
        s.register_node(node, None, MINUTE).await.unwrap();
    }
    let claim = |node: &'static str, want: i64| {
        let s = s.clone();
        async move {
            s.claim_share(node, "org_running", "org1", want, 4)
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("node_a", 3).await, 3);
    assert_eq!(claim("node_b", 3).await, 1, "only what a leaves");
    assert_eq!(
        s.claim_share("node_b", "org_running", "org2", 4, 4)
            .await
            .unwrap(),
        4,
        "another key is another bound"
    );
    // a gives units back: b may take them.
    s.set_shares("node_a", vec![("org_running".into(), "org1".into(), 1)])
        .await
        .unwrap();
    assert_eq!(claim("node_b", 3).await, 3);
    assert_eq!(
        claim("node_a", 2).await,
        1,
        "a grant may shrink to what is left"
    );
    // Racing askers: the grants never sum past the bound.
    for round in 0..10 {
        let key = format!("race{round}");
        let (a, b) = tokio::join!(
            s.claim_share("node_a", "org_running", &key, 3, 4),
            s.claim_share("node_b", "org_running", &key, 3, 4),
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a + b, 4, "round {round}: a {a}, b {b}");
    }
    s.set_shares("node_a", vec![("org_running".into(), "org1".into(), 0)])
        .await
        .unwrap();
    s.set_shares("node_b", vec![("org_running".into(), "org1".into(), 0)])
        .await
        .unwrap();
    // Re-taken in order: each grant is at most what the other left.
    assert_eq!(claim("node_a", 4).await, 4);
    assert_eq!(claim("node_b", 1).await, 0, "a holds the whole bound");
    // a's lease ends: it holds nothing any more.
    s.evict_node("node_a").await.unwrap();
    assert_eq!(claim("node_b", 4).await, 4);
    // a registers again: its old grant does not come back.
    s.register_node("node_a", None, MINUTE).await.unwrap();
    assert_eq!(claim("node_a", 4).await, 0);
    s.set_shares("node_b", vec![("org_running".into(), "org1".into(), 2)])
        .await
        .unwrap();
    assert_eq!(claim("node_a", 4).await, 2);
}

/// Issue 41 §5: a session's (or org's) event log over its bound gives up
/// its oldest delivered events first, then its oldest undelivered ones; an
/// undelivered answer is replaced by an error answer to its request, so
/// the client waiting for it is told, never left waiting.
async fn a_log_over_its_bound_gives_up_delivered_events_first_and_tells_waiting_clients(
    t: TestStore,
) {
    let s = t.store();
    let a = s.ensure_account("log-a@e.test", None).await.unwrap();
    let b = s.ensure_account("log-b@e.test", None).await.unwrap();
    s.insert_session(session("s1", &a, 1), "node_x")
        .await
        .unwrap();
    s.insert_session(session("s2", &b, 1), "node_x")
        .await
        .unwrap();
    let answer = |id: i64| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"text": "x".repeat(1000)}})
            .to_string()
    };
    let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "y".repeat(1000)}})
        .to_string();
    for (session, stream, data, undelivered, at) in [
        ("s1", "p1", answer(1), false, 1),
        ("s1", "p2", answer(2), true, 2),
        ("s1", "p3", note.clone(), true, 3),
        ("s1", "p4", answer(4), true, 4),
        ("s2", "p1", answer(1), false, 1),
    ] {
        s.append_event(
            EventRecord {
                session_id: session.into(),
                stream_id: stream.into(),
                seq: 0,
                data,
                undelivered,
                created_at_ms: at,
            },
            LogBounds::default(),
            None,
        )
        .await
        .unwrap();
    }
    let mut sizes = s.event_bytes_by_session().await.unwrap();
    sizes.sort_by(|x, y| x.session_id.cmp(&y.session_id));
    assert_eq!(
        sizes
            .iter()
            .map(|x| (x.session_id.as_str(), x.org_id.as_str()))
            .collect::<Vec<_>>(),
        [("s1", a.org_id.as_str()), ("s2", b.org_id.as_str())]
    );
    assert!(sizes[0].bytes > 4000 && sizes[1].bytes > 1000, "{sizes:?}");

    // 1,500 bytes of s1: its delivered event, then its oldest undelivered
    // answer, replaced (what replaces it is made above the store: here an
    // error answer as the MCP layer makes one).
    let why = "dropped: over its bound";
    let dropped: DroppedAnswer = std::sync::Arc::new(move |data: &str| {
        let message: serde_json::Value = serde_json::from_str(data).ok()?;
        message.get("result").or(message.get("error"))?;
        Some(serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32000, "message": why}}).to_string())
    });
    let trimmed = s
        .trim_events(EventScope::Session("s1"), 1500, dropped.clone())
        .await
        .unwrap();
    assert_eq!(
        (trimmed.deleted.rows, trimmed.dropped.rows, trimmed.answers),
        (1, 1, 1)
    );
    assert!(s.events_after("s1", "p1", -1).await.unwrap().is_empty());
    let told = s.events_after("s1", "p2", -1).await.unwrap();
    let told: serde_json::Value = serde_json::from_str(&told[0].data).unwrap();
    assert_eq!(told["id"], 2);
    assert_eq!(told["error"]["message"], why);
    assert!(told.get("result").is_none());
    assert_eq!(s.events_after("s1", "p3", -1).await.unwrap()[0].data, note);
    assert_eq!(
        s.events_after("s1", "p4", -1).await.unwrap()[0].data,
        answer(4)
    );
    assert_eq!(
        s.events_after("s2", "p1", -1).await.unwrap().len(),
        1,
        "another session's log stays"
    );

    // All of it: the notification goes, the last answer is replaced, the
    // one replaced before stays as it is.
    let trimmed = s
        .trim_events(EventScope::Session("s1"), 1 << 20, dropped.clone())
        .await
        .unwrap();
    assert_eq!((trimmed.dropped.rows, trimmed.answers), (2, 1));
    assert!(s.events_after("s1", "p3", -1).await.unwrap().is_empty());
    let told = s.events_after("s1", "p4", -1).await.unwrap();
    assert!(told[0].data.contains(why) && told[0].undelivered);
    assert_eq!(
        s.take_undelivered("s1", &[]).await.unwrap().len(),
        2,
        "both told, both still to be delivered"
    );

    // An org's scope is its sessions only.
    let trimmed = s
        .trim_events(EventScope::Org(&b.org_id), 10, dropped)
        .await
        .unwrap();
    assert_eq!(trimmed.deleted.rows, 1);
    assert!(s.events_after("s2", "p1", -1).await.unwrap().is_empty());
}
