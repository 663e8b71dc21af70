//! Fair share, bounds and approvals at the engine seam (`Engine::call_tool`),
//! SPEC §4, §9, §12: one org saturating its share — with busy loops, slow
//! tool calls or paused approvals — never holds another org's `execute`;
//! the wall clock stops runs that wait too long on tools; two approvals of
//! one `Promise.all` are decided each on its own, in model mode, in native
//! mode and after a restart; a run that waited for a human flushes its
//! record whatever call started it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_call::{Action, ApprovalPrompt, ApprovalRequest, CallContext, Reply};
use executor_catalog::{Catalog, StaticCatalog};
use executor_catalog::{ToolEntry, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess};
use executor_engine::{CoreTool, Engine, EngineConfig, QueueLimits, ShareLimits, ToolOutcome};
use executor_sandbox::Limits;
use executor_store::testing::TestStore;
use executor_store::{ExecutionFilter, PageRequest, Store};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// `t.slow` sleeps `ms`; `t.approve` needs approval; both record their args.
struct Recording {
    seen: Arc<Mutex<Vec<Value>>>,
}

impl ToolInvoker for Recording {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let seen = self.seen.clone();
        Box::pin(async move {
            seen.lock().unwrap().push(call.args.clone());
            if let Some(ms) = call.args.get("ms").and_then(Value::as_u64) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
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
    seen: Arc<Mutex<Vec<Value>>>,
    /// Removed when the world is dropped.
    _db: TestStore,
}

fn catalog(seen: &Arc<Mutex<Vec<Value>>>) -> Arc<Catalog> {
    let invoker = Arc::new(Recording { seen: seen.clone() });
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
    Arc::new(Catalog::new(vec![
        entry("slow", false),
        entry("approve", true),
    ]))
}

fn engine_on(
    store: Arc<dyn Store>,
    seen: &Arc<Mutex<Vec<Value>>>,
    config: EngineConfig,
) -> Arc<Engine> {
    Arc::new(Engine::with_catalogs(
        store,
        config,
        Arc::new(StaticCatalog(catalog(seen))),
    ))
}

/// A world on the store `EXECUTOR_TEST_STORE` names (`name` is only for
/// reading a failure).
async fn world(_name: &str, config: EngineConfig) -> World {
    let db = TestStore::from_env().await;
    let store = db.store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    World {
        engine: engine_on(store.clone(), &seen, config),
        store,
        seen,
        _db: db,
    }
}

fn config(running: usize, per_org: usize) -> EngineConfig {
    EngineConfig {
        share: ShareLimits::new(running, per_org),
        ..EngineConfig::default()
    }
}

async fn ctx(store: &Arc<dyn Store>, email: &str) -> CallContext {
    CallContext {
        principal: store.ensure_account(email, None).await.unwrap(),
        session_id: None,
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

/// Waits until `org` has `running` executions running (and `paused` paused).
async fn until_counts(engine: &Engine, org: &str, running: usize, paused: usize) {
    for _ in 0..200 {
        if engine.executions_of_org(org) == (running, paused) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{org} never reached ({running}, {paused}): {:?}",
        engine.executions_of_org(org)
    );
}

const BUSY: &str = "const t = Date.now(); while (Date.now() - t < 2000) {} return 'a'";
const SLOW_CALL: &str = "return (await tools.t.slow({ ms: 2000 })).data.ms";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_org_at_its_share_never_holds_another_org() {
    for (how, code) in [("busy loops", BUSY), ("slow tool calls", SLOW_CALL)] {
        let w = world(&format!("share-{}", how.len()), config(4, 2)).await;
        let a = ctx(&w.store, "a@example.com").await;
        let b = ctx(&w.store, "b@example.com").await;
        let held: Vec<_> = (0..2)
            .map(|_| {
                let (engine, a) = (w.engine.clone(), a.clone());
                tokio::spawn(async move { execute(&engine, &a, code).await })
            })
            .collect();
        until_counts(&w.engine, &a.principal.org_id, 2, 0).await;
        // A's next run waits its turn in A's queue.
        let queued = {
            let (engine, a) = (w.engine.clone(), a.clone());
            tokio::spawn(async move { execute(&engine, &a, "return 1").await })
        };
        // B's run answers while A's are still running and one waits.
        let answered = execute(&w.engine, &b, "return 'b'").await;
        assert_eq!(
            answered["structuredContent"]["result"], "b",
            "{how}: {answered}"
        );
        assert!(
            held.iter().all(|h| !h.is_finished()) && !queued.is_finished(),
            "{how}: A's runs are still going, and the third still waits"
        );
        for h in held {
            assert_eq!(h.await.unwrap()["isError"], Value::Null, "{how}");
        }
        // Its turn came when a slot of A's was given back.
        let served = queued.await.unwrap();
        assert_eq!(served["structuredContent"]["result"], 1, "{how}: {served}");
        // The slots come back.
        assert_eq!(w.engine.executions_of_org(&a.principal.org_id), (0, 0));
        assert_eq!(
            execute(&w.engine, &a, "return 2").await["structuredContent"]["result"],
            2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_executions_hold_no_slot() {
    let w = world("share-paused", config(4, 2)).await;
    let a = ctx(&w.store, "a@example.com").await;
    let b = ctx(&w.store, "b@example.com").await;
    let org = a.principal.org_id.clone();
    let first = paused_id(
        &execute(
            &w.engine,
            &a,
            "return (await tools.t.approve({ n: 1 })).data",
        )
        .await,
    );
    let second = paused_id(
        &execute(
            &w.engine,
            &a,
            "return (await tools.t.approve({ n: 2 })).data",
        )
        .await,
    );
    until_counts(&w.engine, &org, 0, 2).await;
    // With two runs paused, A still runs two more, and B runs too.
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (engine, a) = (w.engine.clone(), a.clone());
            tokio::spawn(async move { execute(&engine, &a, BUSY).await })
        })
        .collect();
    until_counts(&w.engine, &org, 2, 2).await;
    assert_eq!(
        execute(&w.engine, &b, "return 'b'").await["structuredContent"]["result"],
        "b"
    );
    for h in held {
        assert_eq!(h.await.unwrap()["structuredContent"]["result"], "a");
    }
    // A third approval of A's cannot wait: the paused bound is its share.
    let third = execute(
        &w.engine,
        &a,
        "try { await tools.t.approve({ n: 3 }) } catch (e) { return e.message }",
    )
    .await;
    assert!(
        third["structuredContent"]["result"]
            .as_str()
            .unwrap()
            .contains("waiting for approval"),
        "{third}"
    );
    // Resuming takes a slot back; the runs finish and release everything.
    assert_eq!(
        resume(&w.engine, &a, &first, "accept").await["structuredContent"]["result"],
        json!({"n": 1})
    );
    assert_eq!(
        resume(&w.engine, &a, &second, "accept").await["structuredContent"]["result"],
        json!({"n": 2})
    );
    assert_eq!(w.engine.executions_of_org(&org), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_clock_stops_long_runs_but_not_approval_waits() {
    let w = world(
        "wall-clock",
        EngineConfig {
            wall_clock: Duration::from_millis(600),
            limits: Limits {
                timeout: Duration::from_secs(60),
                ..Limits::default()
            },
            ..EngineConfig::default()
        },
    )
    .await;
    let a = ctx(&w.store, "a@example.com").await;
    for code in [
        SLOW_CALL,
        "for (;;) {}",
        "await new Promise(r => setTimeout(r, 30_000))",
    ] {
        let out = execute(&w.engine, &a, code).await;
        assert_eq!(out["isError"], true, "{code}: {out}");
        assert!(
            text(&out).contains("more than 0.6 s of wall-clock time"),
            "{code}: {out}"
        );
    }
    // Time spent waiting for the human does not count.
    let id = paused_id(
        &execute(
            &w.engine,
            &a,
            "return (await tools.t.approve({ n: 1 })).data",
        )
        .await,
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let out = resume(&w.engine, &a, &id, "accept").await;
    assert_eq!(out["structuredContent"]["result"], json!({"n": 1}), "{out}");
}

const BOTH: &str = "const r = await Promise.allSettled([tools.t.approve({ n: 1 }), tools.t.approve({ n: 2 })]);\
                    return r.map(x => x.status === 'fulfilled' ? x.value.data.n : 'declined');";

/// Decides each pause by the `n` it shows: `accept` takes n = 1, declines n = 2.
fn action_for(paused: &Value) -> &'static str {
    match paused["structuredContent"]["interaction"]["args"]["n"].as_u64() {
        Some(1) => "accept",
        _ => "decline",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_of_one_promise_all_are_decided_each_on_its_own() {
    let w = world("two-approvals", EngineConfig::default()).await;
    let a = ctx(&w.store, "a@example.com").await;
    // Model mode: each pause names its own call; each decision reaches it.
    let mut out = execute(&w.engine, &a, BOTH).await;
    let id = paused_id(&out);
    let mut shown = Vec::new();
    while out["structuredContent"]["status"] == "waiting_for_interaction" {
        shown.push(out["structuredContent"]["interaction"]["args"]["n"].clone());
        out = resume(&w.engine, &a, &id, action_for(&out)).await;
    }
    shown.sort_by_key(|n| n.as_u64());
    assert_eq!(shown, [json!(1), json!(2)]);
    assert_eq!(
        out["structuredContent"]["result"],
        json!([1, "declined"]),
        "{out}"
    );
    assert_eq!(*w.seen.lock().unwrap(), [json!({"n": 1})]);
}

/// Answers inline, by the arguments in the message.
struct ByArgs;

impl ApprovalPrompt for ByArgs {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Option<Action>> {
        let accept = request.message.contains("\"n\": 1");
        Box::pin(async move {
            Some(if accept {
                Action::Accept
            } else {
                Action::Decline
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_in_native_mode() {
    let w = world("two-native", EngineConfig::default()).await;
    let a = ctx(&w.store, "a@example.com").await;
    let out = w
        .engine
        .call_tool_asking(
            &a,
            CoreTool::Execute,
            &json!({ "code": BOTH }),
            Some(&ByArgs),
            Reply::Direct,
            None,
        )
        .await
        .into_result();
    assert_eq!(
        out["structuredContent"]["result"],
        json!([1, "declined"]),
        "{out}"
    );
    assert_eq!(*w.seen.lock().unwrap(), [json!({"n": 1})]);
}

/// `execute` answered as the wire answers on an SSE stream.
async fn logged(
    engine: &Engine,
    ctx: &CallContext,
    code: &str,
    prompt: Option<&dyn ApprovalPrompt>,
) -> Value {
    engine
        .call_tool_asking(
            ctx,
            CoreTool::Execute,
            &json!({ "code": code }),
            prompt,
            Reply::Logged,
            None,
        )
        .await
        .into_result()
}

/// `executor_execution_records_total` by durability: (flushed, with_answer).
fn records_written(engine: &Engine) -> (u64, u64) {
    let mut registry = prometheus_client::registry::Registry::default();
    engine.register_metrics(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
    let count = |durability: &str| {
        let series = format!("executor_execution_records_total{{durability=\"{durability}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {series}in {text}"))
    };
    (count("flushed"), count("with_answer"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_waited_for_a_human_flushes_its_record_though_its_answer_is_logged() {
    let w = world("record-durability", EngineConfig::default()).await;
    let a = ctx(&w.store, "a@example.com").await;
    // Never paused: the logged answer's flushed write carries its record.
    logged(&w.engine, &a, "return 1;", None).await;
    assert_eq!(records_written(&w.engine), (0, 1));
    // Paused for a human (asked through the client here): a run that
    // paused may answer another caller, or none, so its record flushes.
    let out = logged(&w.engine, &a, BOTH, Some(&ByArgs)).await;
    assert_eq!(
        out["structuredContent"]["result"],
        json!([1, "declined"]),
        "{out}"
    );
    assert_eq!(records_written(&w.engine), (1, 1));
    // A direct answer always flushes.
    execute(&w.engine, &a, "return 2;").await;
    assert_eq!(records_written(&w.engine), (2, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_across_a_restart() {
    let w = world("two-restart", EngineConfig::default()).await;
    let a = ctx(&w.store, "a@example.com").await;
    // The first pause is decided before the restart, the second after.
    let first = execute(&w.engine, &a, BOTH).await;
    let id = paused_id(&first);
    let first_action = action_for(&first);
    let second = resume(&w.engine, &a, &id, first_action).await;
    assert_eq!(paused_id(&second), id);
    let second_action = action_for(&second);
    assert_ne!(first_action, second_action);
    // A new engine on the same store: the run is replayed up to the pause.
    let restarted = engine_on(w.store.clone(), &w.seen, EngineConfig::default());
    let out = resume(&restarted, &a, &id, second_action).await;
    assert_eq!(
        out["structuredContent"]["result"],
        json!([1, "declined"]),
        "{out}"
    );
    // The accepted call reached the tool exactly once, with its own arguments.
    assert_eq!(*w.seen.lock().unwrap(), [json!({"n": 1})]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_tool_path_is_refused_before_it_is_stored() {
    let w = world("long-path", EngineConfig::default()).await;
    let a = ctx(&w.store, "a@example.com").await;
    let out = execute(
        &w.engine,
        &a,
        "try { await tools['x'.repeat(600)]({}) } catch (e) { return e.message }",
    )
    .await;
    let message = out["structuredContent"]["result"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        message,
        "a tool path is at most 512 bytes; this one has 600"
    );
    let records = w
        .store
        .list_executions(
            Some(&a.principal.org_id),
            &ExecutionFilter::default(),
            &PageRequest::first(10),
        )
        .await
        .unwrap();
    // A listing leaves the tool calls out; the record holds them.
    let full = w
        .store
        .get_execution(&records[0].id)
        .await
        .unwrap()
        .expect("the record");
    let record = serde_json::to_string(&full.tool_calls).unwrap();
    assert!(!record.contains("xxxxxxxxxx"), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_preview_is_cut_at_the_configured_length() {
    let config = EngineConfig {
        max_approval_preview_chars: 20,
        ..EngineConfig::default()
    };
    let w = world("preview", config).await;
    let a = ctx(&w.store, "a@example.com").await;
    let long = "x".repeat(100);
    let code = format!("return (await tools.t.approve({{ note: '{long}' }})).data");
    let outcome = w
        .engine
        .call_tool(&a, CoreTool::Execute, &json!({ "code": code }))
        .await;
    let ToolOutcome::Paused(paused_call) = outcome else {
        panic!("the call waits for approval: {outcome:?}");
    };
    let request = paused_call.request;
    let paused = paused_call.envelope;
    let id = paused_id(&paused);
    let pretty = serde_json::to_string_pretty(&json!({ "note": long })).unwrap();
    let cut: String = pretty.chars().take(20).collect();
    let preview = format!("Arguments:\n{cut}\n… (arguments truncated)\n");
    assert!(text(&paused).contains(&preview), "{}", text(&paused));
    // The structured arguments stay whole; the inline prompt is cut alike.
    assert_eq!(
        paused["structuredContent"]["interaction"]["args"]["note"],
        long
    );
    assert!(
        request
            .message
            .ends_with(&format!("{cut}\n… (arguments truncated)")),
        "{}",
        request.message
    );
    resume(&w.engine, &a, &id, "decline").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_beside_other_work_is_not_a_pause() {
    let w = world(
        "not-a-pause",
        EngineConfig {
            wall_clock: Duration::from_millis(700),
            ..EngineConfig::default()
        },
    )
    .await;
    let a = ctx(&w.store, "a@example.com").await;
    let org = a.principal.org_id.clone();
    // One approval left pending while slow calls go on: the run still
    // counts as running, and its wall clock runs.
    let engine = w.engine.clone();
    let code = "tools.t.approve({ n: 1 }).catch(() => {}); \
                for (let i = 0; i < 10; i++) await tools.t.slow({ ms: 300 }); return 'done'";
    let run = tokio::spawn({
        let a = a.clone();
        async move {
            engine
                .call_tool(&a, CoreTool::Execute, &json!({ "code": code }))
                .await
                .into_result()
        }
    });
    // The pause envelope comes first; the program goes on behind it.
    let paused = run.await.unwrap();
    let id = paused_id(&paused);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(
        w.engine.executions_of_org(&org),
        (1, 0),
        "running, not paused"
    );
    let out = resume(&w.engine, &a, &id, "decline").await;
    assert!(text(&out).contains("wall-clock"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_journal_bound_resumes_here_but_not_after_a_restart() {
    let config = || EngineConfig {
        max_journal_bytes: 400,
        ..EngineConfig::default()
    };
    let w = world("journal-bound", config()).await;
    let a = ctx(&w.store, "a@example.com").await;
    // 600 bytes of answers before the pause: past the 400-byte journal.
    let code = "await tools.t.slow({ ms: 0, pad: 'x'.repeat(600) });\
                return (await tools.t.approve({ n: 1 })).data.n";
    // In the same process the paused run goes on as usual.
    let id = paused_id(&execute(&w.engine, &a, code).await);
    let out = resume(&w.engine, &a, &id, "accept").await;
    assert_eq!(out["structuredContent"]["result"], 1, "{out}");
    // After a restart it cannot be replayed, and resume says why.
    let id = paused_id(&execute(&w.engine, &a, code).await);
    let restarted = engine_on(w.store.clone(), &w.seen, config());
    let out = resume(&restarted, &a, &id, "accept").await;
    assert_eq!(out["isError"], true, "{out}");
    assert_eq!(out["structuredContent"]["status"], "execution_expired");
    assert!(text(&out).contains("--max-journal-bytes"), "{out}");
}

/// Past its queue's bounds an org's execute is refused at once, with a
/// message that says why; with no room to queue, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_queue_an_org_is_refused_with_a_clear_error() {
    let w = world(
        "queue-bounds",
        EngineConfig {
            queue: QueueLimits {
                max_queued: 0,
                max_wait: Duration::from_secs(30),
            },
            ..config(4, 1)
        },
    )
    .await;
    let a = ctx(&w.store, "a@example.com").await;
    let held = {
        let (engine, a) = (w.engine.clone(), a.clone());
        tokio::spawn(async move { execute(&engine, &a, BUSY).await })
    };
    until_counts(&w.engine, &a.principal.org_id, 1, 0).await;
    let refused = execute(&w.engine, &a, "return 1").await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        text(&refused).contains(
            "already has 1 executions running, its share of this server, and 0 more waiting"
        ),
        "{refused}"
    );
    assert_eq!(held.await.unwrap()["isError"], Value::Null);
}
