//! The audit trail and approvals at the engine seam (SPEC §9, §13): every
//! tool call's row says what decided it (the policy rule, the approval and
//! who gave it), its wait apart from its duration, its argument names and
//! never their values; paused executions are listed with their pending
//! call; a decision on an execution that no longer waits says why; and a
//! run paused by one process is decided from another at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_call::{Action, CallContext};
use executor_catalog::{Catalog, StaticCatalog};
use executor_catalog::{ToolEntry, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess};
use executor_engine::{CoreTool, Decider, Engine, EngineConfig};
use executor_store::testing::TestStore;
use executor_store::{
    ApprovalChannel, ApprovalDecision, PageRequest, PolicyAction, PolicyRecord, Store,
    ToolCallFilter, ToolCallOutcome, ToolCallRecord,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Answers with its arguments.
struct Echo;

impl ToolInvoker for Echo {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            Ok(ToolSuccess {
                data: call.args,
                http: None,
                held: None,
            })
        })
    }
}

struct World {
    engine: Arc<Engine>,
    store: Arc<dyn Store>,
    /// Removed when the world is dropped.
    _db: TestStore,
}

fn engine_on(store: Arc<dyn Store>) -> Arc<Engine> {
    let invoker = Arc::new(Echo);
    let entry = |name: &str, requires_approval: bool| ToolEntry {
        path: format!("t.{name}").into(),
        description: None,
        input_schema: None,
        output_schema: None,
        definitions: None,
        requires_approval,
        invoker: invoker.clone(),
        slot: 0,
    };
    let catalog = Arc::new(Catalog::new(vec![
        entry("echo", false),
        entry("approve", true),
    ]));
    Arc::new(Engine::with_catalogs(
        store,
        EngineConfig::default(),
        Arc::new(StaticCatalog(catalog)),
    ))
}

/// A world on the store `EXECUTOR_TEST_STORE` names (`name` is only for
/// reading a failure).
async fn world(_name: &str) -> World {
    let db = TestStore::from_env().await;
    let store = db.store();
    World {
        engine: engine_on(store.clone()),
        store,
        _db: db,
    }
}

/// A caller in an MCP session (an agent), or at a shell (no session).
async fn ctx(store: &Arc<dyn Store>, email: &str, session: Option<&str>) -> CallContext {
    CallContext {
        principal: store.ensure_account(email, None).await.unwrap(),
        session_id: session.map(str::to_string),
        approval: Default::default(),
        holder: None,
    }
}

async fn execute(engine: &Engine, ctx: &CallContext, code: &str) -> Value {
    engine
        .call_tool(ctx, CoreTool::Execute, &json!({ "code": code }))
        .await
        .into_result()
}

async fn resume(engine: &Engine, ctx: &CallContext, id: &str, action: &str) -> Value {
    engine
        .call_tool(
            ctx,
            CoreTool::Resume,
            &json!({ "executionId": id, "action": action }),
        )
        .await
        .into_result()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn paused_id(result: &Value) -> String {
    assert_eq!(
        result["structuredContent"]["status"], "waiting_for_interaction",
        "{result}"
    );
    result["structuredContent"]["executionId"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn calls(store: &Arc<dyn Store>, org: &str) -> Vec<ToolCallRecord> {
    store
        .list_tool_calls(org, &ToolCallFilter::default(), &PageRequest::first(50))
        .await
        .unwrap()
}

async fn add_policy(
    store: &Arc<dyn Store>,
    org: &str,
    id: &str,
    pattern: &str,
    action: PolicyAction,
) {
    store
        .add_policy(PolicyRecord {
            id: id.into(),
            org_id: org.into(),
            pattern: pattern.into(),
            action,
            position: 0,
            created_at_ms: 1,
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_blocked_by_a_policy_records_blocked_and_its_rule() {
    let w = world("blocked").await;
    let a = ctx(&w.store, "a@example.com", Some("sess_1")).await;
    let org = a.principal.org_id.clone();
    add_policy(&w.store, &org, "pol_block", "t.echo", PolicyAction::Block).await;
    let out = execute(
        &w.engine,
        &a,
        "const r = await tools.t.echo({ secret: 'hunter2' }); return r.error.code",
    )
    .await;
    assert_eq!(out["structuredContent"]["result"], "tool_blocked", "{out}");
    let listed = calls(&w.store, &org).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let call = &listed[0];
    assert_eq!(call.outcome, ToolCallOutcome::Blocked);
    assert_eq!(call.error_code.as_deref(), Some("tool_blocked"));
    assert_eq!(call.policy_action, Some(PolicyAction::Block));
    assert_eq!(call.policy_rule.as_deref(), Some("pol_block"));
    assert_eq!(call.approval, None);
    assert_eq!(call.arg_names, ["secret"]);
    assert_eq!(call.session_id.as_deref(), Some("sess_1"));
    assert_eq!(call.account_id, a.principal.account_id);
    assert!(call.id.ends_with(".0") && call.id.starts_with(&call.execution_id));
    // The record holds the same row, and no value anywhere.
    let record = w
        .store
        .get_execution(&call.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.tool_calls, listed);
    assert!(!serde_json::to_string(&listed).unwrap().contains("hunter2"));
    // Filtered by outcome, it is found; by another, not.
    let blocked = ToolCallFilter {
        outcome: Some(ToolCallOutcome::Blocked),
        ..Default::default()
    };
    let found = w
        .store
        .list_tool_calls(&org, &blocked, &PageRequest::first(5))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_records_who_decided_and_its_wait_apart() {
    let w = world("approved").await;
    let a = ctx(&w.store, "a@example.com", Some("sess_1")).await;
    let org = a.principal.org_id.clone();
    add_policy(
        &w.store,
        &org,
        "pol_ask",
        "t.*",
        PolicyAction::RequireApproval,
    )
    .await;
    let out = execute(
        &w.engine,
        &a,
        "const r = await tools.t.echo({ note: 'zebra-value', n: 1 }); \
         let d = 'none'; try { await tools.t.approve({ x: 1 }) } catch (e) { d = 'declined' } \
         return [r.data.n, d]",
    )
    .await;
    let id = paused_id(&out);
    // Pending approvals list it, with its call and the rule that asked.
    let pending = w.engine.pending_approvals(&org).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].execution_id, id);
    assert_eq!(pending[0].tool_path, "t.echo");
    assert!(pending[0].args_preview.contains("zebra-value"));
    assert_eq!(pending[0].policy_rule.as_deref(), Some("pol_ask"));
    assert_eq!(pending[0].session_id.as_deref(), Some("sess_1"));
    assert!(pending[0].paused_at_ms <= pending[0].expires_at_ms);
    let other = ctx(&w.store, "b@example.com", None).await;
    assert!(
        w.engine
            .pending_approvals(&other.principal.org_id)
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let next = resume(&w.engine, &a, &id, "accept").await;
    assert_eq!(paused_id(&next), id, "the second call waits: {next}");
    let out = resume(&w.engine, &a, &id, "decline").await;
    assert_eq!(
        out["structuredContent"]["result"],
        json!([1, "declined"]),
        "{out}"
    );
    assert!(w.engine.pending_approvals(&org).await.unwrap().is_empty());

    let mut listed = calls(&w.store, &org).await;
    listed.sort_by(|x, y| x.id.cmp(&y.id));
    let [approved, declined] = &listed[..] else {
        panic!("two calls: {listed:?}");
    };
    assert_eq!(approved.outcome, ToolCallOutcome::Ok);
    assert_eq!(approved.approval, Some(ApprovalDecision::Approved));
    assert_eq!(
        approved.decided_by.as_deref(),
        Some(a.principal.account_id.as_str())
    );
    assert_eq!(approved.decided_via, Some(ApprovalChannel::Resume));
    assert_eq!(approved.policy_action, Some(PolicyAction::RequireApproval));
    assert_eq!(approved.policy_rule.as_deref(), Some("pol_ask"));
    assert!(approved.approval_wait_ms >= 400, "{approved:?}");
    assert!(
        approved.duration_ms < 300,
        "the wait is not in the duration: {approved:?}"
    );
    assert_eq!(approved.arg_names, ["n", "note"]);
    assert_eq!(declined.outcome, ToolCallOutcome::Declined);
    assert_eq!(declined.error_code.as_deref(), Some("declined"));
    assert_eq!(declined.approval, Some(ApprovalDecision::Declined));
    assert_eq!(
        declined.decided_by.as_deref(),
        Some(a.principal.account_id.as_str())
    );
    let record = serde_json::to_string(&listed).unwrap();
    assert!(!record.contains("zebra-value"), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_on_an_execution_that_no_longer_waits_says_why() {
    let w = world("decided").await;
    let a = ctx(&w.store, "a@example.com", Some("sess_1")).await;
    let id = paused_id(&execute(&w.engine, &a, "return (await tools.t.approve({})).data").await);
    let done = resume(&w.engine, &a, &id, "accept").await;
    assert_eq!(done["structuredContent"]["result"], json!({}), "{done}");
    // The same decision again: the same answer (SPEC §9, idempotent).
    assert_eq!(resume(&w.engine, &a, &id, "accept").await, done);
    // Another one: refused, naming the decision given.
    for engine in [&w.engine, &engine_on(w.store.clone())] {
        let again = resume(engine, &a, &id, "decline").await;
        assert_eq!(again["isError"], true);
        assert_eq!(
            again["structuredContent"]["status"],
            "execution_already_settled"
        );
        assert!(
            text(&again).contains(&format!(
                "Execution {id} was already decided (approved) and has already been settled"
            )),
            "{again}"
        );
    }
    let outside = engine_on(w.store.clone())
        .resume_from_outside(&id, Action::Decline, Duration::ZERO, shell())
        .await
        .into_result();
    assert!(
        text(&outside).contains("was already decided (approved)"),
        "{outside}"
    );
    // An execution that never waited has finished: nothing to decide.
    let plain = execute(&w.engine, &a, "return 1").await;
    assert_eq!(plain["structuredContent"]["result"], 1);
    let records = w
        .store
        .list_executions(
            Some(&a.principal.org_id),
            &Default::default(),
            &PageRequest::first(1),
        )
        .await
        .unwrap();
    let finished = &records[0].id;
    let refused = resume(&w.engine, &a, finished, "accept").await;
    assert!(
        text(&refused).contains(&format!("Execution {finished} has finished")),
        "{refused}"
    );
    let outside = w
        .engine
        .resume_from_outside(finished, Action::Accept, Duration::ZERO, shell())
        .await
        .into_result();
    assert!(text(&outside).contains("has finished"), "{outside}");
    // Another org's caller is not told it exists.
    let b = ctx(&w.store, "b@example.com", Some("sess_2")).await;
    let hidden = resume(&w.engine, &b, finished, "accept").await;
    assert!(text(&hidden).contains("was not found"), "{hidden}");
}

/// Regression (issue 37): `executor resume ID --wait 0` with no server took
/// 3–10 s: the `executor call` that paused the run had made its node the
/// run's holder and exited, and the resume waited for that node's lease
/// to lapse before it could claim the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_37_a_run_paused_by_one_command_is_resumed_by_the_next_at_once() {
    let w = world("shell").await;
    let a = ctx(&w.store, "a@example.com", None).await;
    // `executor call`: no MCP session, so the text says what to run.
    let out = execute(
        &w.engine,
        &a,
        "return (await tools.t.approve({ n: 7 })).data",
    )
    .await;
    let id = paused_id(&out);
    assert!(
        text(&out).contains(&format!("executor resume {id} --action accept")),
        "{out}"
    );
    assert!(!text(&out).contains("`resume` tool"), "{out}");
    // `executor resume`: another process (an engine of its own).
    let started = Instant::now();
    let done = engine_on(w.store.clone())
        .resume_from_outside(&id, Action::Accept, Duration::ZERO, shell())
        .await
        .into_result();
    assert_eq!(
        done["structuredContent"]["result"],
        json!({"n": 7}),
        "{done}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "applied at once, not after the pausing node's lease: {:?}",
        started.elapsed()
    );
    // Decided from a shell that named nobody: how, not who.
    let listed = calls(&w.store, &a.principal.org_id).await;
    assert_eq!(listed[0].approval, Some(ApprovalDecision::Approved));
    assert_eq!(listed[0].decided_by, None);
    assert_eq!(listed[0].decided_via, Some(ApprovalChannel::Cli));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_applies_a_decision_from_a_shell_as_soon_as_it_is_posted() {
    let w = world("server").await;
    let a = ctx(&w.store, "a@example.com", Some("sess_1")).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(w.engine.clone().apply_posted_decisions(stopped));
    tokio::time::sleep(Duration::from_millis(50)).await;
    // An agent with no session (stdio, sessionless HTTP) in a process that
    // holds its runs is still told to call the `resume` tool.
    let sessionless = ctx(&w.store, "a@example.com", None).await;
    let out = execute(
        &w.engine,
        &sessionless,
        "return (await tools.t.approve({})).data",
    )
    .await;
    assert!(text(&out).contains("`resume` tool"), "{out}");
    let out = execute(
        &w.engine,
        &a,
        "return (await tools.t.approve({ n: 8 })).data",
    )
    .await;
    let id = paused_id(&out);
    assert!(text(&out).contains("`resume` tool"), "{out}");
    let started = Instant::now();
    let done = engine_on(w.store.clone())
        .resume_from_outside(
            &id,
            Action::Accept,
            Duration::from_secs(5),
            Decider::new(Some("acc_console".into()), ApprovalChannel::Console),
        )
        .await
        .into_result();
    assert_eq!(
        done["structuredContent"]["result"],
        json!({"n": 8}),
        "{done}"
    );
    // Posted through the store, the decision kept who and how.
    let listed = calls(&w.store, &a.principal.org_id).await;
    let call = listed
        .iter()
        .find(|c| c.execution_id == id)
        .expect("the call");
    assert_eq!(call.decided_by.as_deref(), Some("acc_console"));
    assert_eq!(call.decided_via, Some(ApprovalChannel::Console));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "returned once the run settled: {:?}",
        started.elapsed()
    );
    let _ = stop.send(true);
    server.await.unwrap();
}

/// A decision from a shell that names nobody (`executor resume`).
fn shell() -> Decider {
    Decider::new(None, ApprovalChannel::Cli)
}

/// A console-mode caller (SPEC §14, `elicitation_mode=console`): its
/// `resume` decides nothing — even one that says accept — and answers
/// once someone decides elsewhere; with nobody deciding, it stops waiting
/// at the approval window (plus the holder's grace) with the expired
/// refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_mode_resume_waits_for_the_decision_made_elsewhere() {
    let db = TestStore::from_env().await;
    let store = db.store();
    let config = EngineConfig {
        approval_window: Duration::from_secs(1),
        console_approvals_url: Some("https://x.example/console/approvals/".into()),
        ..EngineConfig::default()
    };
    let engine = Arc::new(Engine::with_catalogs(
        store.clone(),
        config,
        Arc::new(StaticCatalog(Arc::new(Catalog::new(vec![ToolEntry {
            path: "t.approve".into(),
            description: None,
            input_schema: None,
            output_schema: None,
            definitions: None,
            requires_approval: true,
            invoker: Arc::new(Echo),
            slot: 0,
        }])))),
    ));
    let a = CallContext {
        approval: executor_call::ApprovalMode::InConsole,
        ..ctx(&store, "a@example.com", Some("sess_c")).await
    };
    let code = "return (await tools.t.approve({ x: 1 })).data.x";

    let paused = execute(&engine, &a, code).await;
    let id = paused_id(&paused);
    assert_eq!(
        paused["structuredContent"]["approvalUrl"],
        format!("https://x.example/console/approvals/{id}")
    );
    assert!(
        text(&paused).contains("waits for their decision"),
        "{paused}"
    );
    // Decided from outside (the console) while the agent's resume waits.
    let waiting = tokio::spawn({
        let (engine, a, id) = (engine.clone(), a.clone(), id.clone());
        async move { resume(&engine, &a, &id, "decline").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "resume decides nothing and waits");
    let console = Decider::new(
        Some(a.principal.account_id.clone()),
        ApprovalChannel::Console,
    );
    engine
        .resume_from_outside(&id, Action::Accept, Duration::ZERO, console)
        .await;
    let answered = waiting.await.unwrap();
    assert_eq!(
        answered["structuredContent"]["status"], "completed",
        "{answered}"
    );
    assert_eq!(
        answered["structuredContent"]["result"], 1,
        "the console's accept, not the agent's decline"
    );

    // Nobody decides: the wait ends with the window.
    let paused = execute(&engine, &a, code).await;
    let id = paused_id(&paused);
    let started = Instant::now();
    let expired = resume(&engine, &a, &id, "accept").await;
    assert_eq!(
        expired["structuredContent"]["status"], "execution_expired",
        "{expired}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "it waited for the window"
    );
    drop(engine);
    drop(db);
}
