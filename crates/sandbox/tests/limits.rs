//! The sandbox's limits, isolation, tool proxy and emit, at the engine level.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_sandbox::{AgentError, HostBridge, Limits, Pool, RunOutcome};
use futures::future::BoxFuture;
use serde_json::{Value, json};

fn pool(timeout_ms: u64) -> Pool {
    Pool::new(
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            ..Limits::default()
        },
        8,
    )
}

async fn run(p: &Pool, code: &str) -> RunOutcome {
    p.run(code.into(), Some(Arc::new(Echo)))
        .await
        .expect("sandbox works")
}

async fn value(p: &Pool, code: &str) -> Option<Value> {
    let out = run(p, code).await;
    out.result
        .unwrap_or_else(|e| panic!("{code:?} failed: {e}"))
}

async fn failure(p: &Pool, code: &str) -> String {
    match run(p, code).await.result {
        Err(message) => message,
        Ok(v) => panic!("{code:?} should fail, returned {v:?}"),
    }
}

/// Answers `echo.*` with its input after a pause, `slow` after 600 ms,
/// and refuses `refuse`.
struct Echo;

impl HostBridge for Echo {
    fn call(&self, path: String, args: Value) -> BoxFuture<'static, Result<Value, AgentError>> {
        Box::pin(async move {
            match path.as_str() {
                "refuse" => Err(AgentError::new("refused by the host")),
                "slow" => {
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    Ok(json!({"ok": true, "data": "slow"}))
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok(json!({"ok": true, "data": {"path": path, "args": args}}))
                }
            }
        })
    }
}

#[tokio::test]
async fn returns_values_and_logs() {
    let p = pool(5_000);
    let out = run(
        &p,
        "console.log('a', {b: 1}); console.warn(2); return {x: [1, 'y']};",
    )
    .await;
    assert_eq!(out.result, Ok(Some(json!({"x": [1, "y"]}))));
    assert_eq!(
        out.logs,
        vec!["[log] a {\"b\":1}".to_string(), "[warn] 2".to_string()]
    );
    assert_eq!(value(&p, "1 + 2;").await, None);
}

#[tokio::test]
async fn an_infinite_loop_times_out_and_cannot_catch_it() {
    let p = pool(300);
    let msg = failure(
        &p,
        "try { while (true) {} } catch (e) { return 'caught'; } finally { while (true) {} }",
    )
    .await;
    assert_eq!(msg, "execution timed out after 300 ms");
}

#[tokio::test]
async fn catastrophic_regex_and_huge_sorts_end_only_their_run() {
    let p = pool(500);
    let msg = failure(&p, "return /^(a+)+$/.test('a'.repeat(40) + 'b');").await;
    assert_eq!(msg, "execution timed out after 500 ms");
    let p = pool(20_000);
    let v = value(&p, "const a = Array.from({length: 1e6}, (_, i) => (i * 7919) % 1e6); a.sort((x, y) => x - y); return a[10];").await;
    assert_eq!(v, Some(json!(10)));
}

#[tokio::test]
async fn memory_and_stack_bombs_end_only_their_run() {
    let p = pool(10_000);
    let msg = failure(
        &p,
        "const a = []; while (true) a.push(new Array(1e5).fill(7));",
    )
    .await;
    assert!(msg.contains("out of memory"), "{msg}");
    let msg = failure(&p, "function f() { return f() + 1; } return f();").await;
    assert!(msg.to_lowercase().contains("stack"), "{msg}");
    assert_eq!(value(&p, "return 1;").await, Some(json!(1)));
}

#[tokio::test]
async fn no_state_leaks_between_runs() {
    let p = pool(5_000);
    value(
        &p,
        "globalThis.secret = 42; Object.prototype.polluted = true; return 1;",
    )
    .await;
    for _ in 0..4 {
        let v = value(&p, "return [typeof secret, ({}).polluted === undefined];").await;
        assert_eq!(v, Some(json!(["undefined", true])));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_run_does_not_wait_for_a_busy_one() {
    let p = pool(3_000);
    let slow = {
        let p = p.clone();
        tokio::spawn(async move { failure(&p, "while (true) {}").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    assert_eq!(value(&p, "return 'fast';").await, Some(json!("fast")));
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "fast run waited {:?}",
        started.elapsed()
    );
    assert!(slow.await.unwrap().contains("timed out"));
}

#[tokio::test]
async fn timers_fetch_and_unsettled_promises() {
    let p = pool(5_000);
    let v = value(&p, "let n = 0; const id = setTimeout(() => n = 99, 5); clearTimeout(id); await new Promise(r => setTimeout(r, 20)); return n;").await;
    assert_eq!(v, Some(json!(0)));
    assert_eq!(
        failure(&p, "return fetch('https://example.com')").await,
        "fetch is disabled: call APIs through tools.*"
    );
    assert!(
        failure(&p, "await new Promise(() => {});")
            .await
            .contains("never settle")
    );
}

#[tokio::test]
async fn unserialisable_results_say_why() {
    let p = pool(5_000);
    assert_eq!(
        failure(&p, "const o = {}; o.self = o; return o;").await,
        "result is not JSON-serialisable: circular structure"
    );
    assert_eq!(
        failure(&p, "return 1n;").await,
        "result is not JSON-serialisable: BigInt value"
    );
    assert_eq!(failure(&p, "throw {code: 7};").await, "{\"code\":7}");
}

#[tokio::test]
async fn the_tools_proxy_calls_the_host_with_the_first_argument() {
    let p = pool(5_000);
    let v = value(
        &p,
        "return await tools.github.issues.list({ owner: 'a' }, 'ignored');",
    )
    .await;
    assert_eq!(
        v,
        Some(json!({"ok": true, "data": {"path": "github.issues.list", "args": {"owner": "a"}}}))
    );
    let v = value(&p, "const [a, b] = await Promise.all([tools.x.a(1), tools.x.b()]); return [a.data.args, b.data.args];").await;
    assert_eq!(v, Some(json!([1, {}])));
    assert_eq!(
        failure(&p, "return await tools.refuse({});").await,
        "refused by the host"
    );
}

#[tokio::test]
async fn the_tools_proxy_is_not_thenable_nor_enumerable_nor_writable() {
    let p = pool(5_000);
    assert_eq!(
        value(
            &p,
            "return [typeof tools.then, typeof tools.a.b.then, (await tools) === tools];"
        )
        .await,
        Some(json!(["undefined", "undefined", true]))
    );
    for code in [
        "return Object.keys(tools);",
        "return {...tools};",
        "for (const k in tools) {}",
        "return Reflect.ownKeys(tools.github);",
    ] {
        let msg = failure(&p, code).await;
        assert!(msg.contains("tools.search"), "{code}: {msg}");
    }
    assert!(failure(&p, "tools.x = 1;").await.contains("read-only"));
    // The global itself cannot be replaced (strict mode makes that a throw).
    let msg = failure(&p, "globalThis.tools = null;").await;
    assert!(msg.contains("TypeError"), "{msg}");
    let v = value(&p, "return Object.getPrototypeOf(tools) === null;").await;
    assert_eq!(v, Some(json!(true)));
}

#[tokio::test]
async fn escapes_reach_nothing_of_the_host() {
    let p = pool(5_000);
    let v = value(&p, "const g = (function(){}).constructor.constructor('return this')(); return [typeof g.process, typeof g.require, typeof g.std, typeof g.os, typeof g.Deno];").await;
    assert_eq!(
        v,
        Some(json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ]))
    );
    let v = value(&p, "const c = tools.a.constructor; return typeof c;").await;
    assert_eq!(
        v,
        Some(json!("function")),
        "constructor is just another lazy path"
    );
}

#[tokio::test]
async fn the_compute_clock_stops_while_a_tool_call_is_in_flight() {
    let p = pool(300);
    // Three 600 ms calls in sequence: 1.8 s of waiting against a 300 ms budget.
    let v = value(
        &p,
        "for (let i = 0; i < 3; i++) await tools.slow(); return 'done';",
    )
    .await;
    assert_eq!(v, Some(json!("done")));
}

#[tokio::test]
async fn emitted_values_are_kept_in_order_as_json() {
    let p = pool(5_000);
    let out = run(
        &p,
        "const o = {a: 1}; emit(o); o.a = 2; emit('text'); emit(undefined); return 5;",
    )
    .await;
    assert_eq!(out.result, Ok(Some(json!(5))));
    assert_eq!(
        out.emitted,
        vec![json!({"a": 1}), json!("text"), Value::Null]
    );
    let out = run(&p, "emit('before'); throw new Error('after');").await;
    assert_eq!(out.result, Err("after".into()));
    assert_eq!(out.emitted, vec![json!("before")]);
}

#[tokio::test]
async fn emitted_values_get_the_results_checks() {
    let p = Pool::new(
        Limits {
            max_result_bytes: 1000,
            ..Limits::default()
        },
        2,
    );
    let big = failure(&p, "emit('x'.repeat(600)); emit('y'.repeat(600)); return 1").await;
    assert!(big.starts_with("emitted values are too large"), "{big}");
    let deep = failure(
        &p,
        "let v = 1; for (let i = 0; i < 200; i++) v = [v]; emit(v); return 1",
    )
    .await;
    assert!(
        deep.starts_with("emit: result is nested more than"),
        "{deep}"
    );
    let fine = run(&p, "emit('\\ud800'); emit({ a: 1 }); return 2").await;
    assert_eq!(fine.result, Ok(Some(json!(2))));
    assert_eq!(fine.emitted, [json!("\u{fffd}"), json!({ "a": 1 })]);
}

/// Counts calls that started and that ran to their end; `hang` never
/// answers, `boom` panics while the call is made.
#[derive(Default)]
struct Counting {
    started: std::sync::atomic::AtomicUsize,
    finished: Arc<std::sync::atomic::AtomicUsize>,
}

impl HostBridge for Counting {
    fn call(&self, path: String, _args: Value) -> BoxFuture<'static, Result<Value, AgentError>> {
        use std::sync::atomic::Ordering;
        if path == "boom" {
            panic!("a bridge that panics");
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        let finished = self.finished.clone();
        Box::pin(async move {
            let wait = if path == "hang" { 3_600_000 } else { 300 };
            tokio::time::sleep(Duration::from_millis(wait)).await;
            finished.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"ok": true}))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_are_bounded_in_flight_and_in_all() {
    use std::sync::atomic::Ordering;
    let p = Pool::new(
        Limits {
            max_calls_in_flight: 4,
            max_calls: 10,
            ..Limits::default()
        },
        2,
    );
    let bridge = Arc::new(Counting::default());
    // Five at once: the fifth is refused without leaving the sandbox.
    let out = p
        .run(
            "const r = await Promise.allSettled([1,2,3,4,5].map(() => tools.x())); \
             return r.map(x => x.status === 'fulfilled' ? 'ok' : x.reason.message);"
                .into(),
            Some(bridge.clone()),
        )
        .await
        .unwrap();
    let results = out.result.unwrap().unwrap();
    let results = results.as_array().unwrap();
    assert_eq!(
        results[..4],
        [json!("ok"), json!("ok"), json!("ok"), json!("ok")]
    );
    assert!(
        results[4]
            .as_str()
            .unwrap()
            .contains("4 tool calls are already in flight"),
        "{results:?}"
    );
    assert_eq!(bridge.started.load(Ordering::SeqCst), 4);
    // Sequential calls past the total are refused.
    let out = p
        .run(
            "let n = 0; try { for (;;) { await tools.x(); n++; } } catch (e) { return [n, e.message]; }".into(),
            Some(bridge.clone()),
        )
        .await
        .unwrap();
    let [n, message] = out
        .result
        .unwrap()
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
        .try_into()
        .unwrap();
    assert_eq!(n, json!(10));
    assert!(
        message.as_str().unwrap().contains("made 10 tool calls"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_still_in_flight_are_cancelled_when_the_run_ends() {
    use std::sync::atomic::Ordering;
    let p = pool(5_000);
    let bridge = Arc::new(Counting::default());
    // The program returns without awaiting its calls.
    let out = p
        .run(
            "tools.x(); tools.x(); tools.hang(); return 1;".into(),
            Some(bridge.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.result, Ok(Some(json!(1))));
    assert_eq!(bridge.started.load(Ordering::SeqCst), 3);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        bridge.finished.load(Ordering::SeqCst),
        0,
        "no call ran on after the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_request_ends_compute_and_waits() {
    let p = pool(60_000);
    for code in [
        "for (;;) {}",
        "await tools.hang()",
        "await new Promise(r => setTimeout(r, 50_000))",
    ] {
        let stop = executor_sandbox::Stop::default();
        let started = Instant::now();
        let stopper = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            stopper.request("the execution ran past its wall-clock limit");
        });
        let out = p
            .run_until(code.into(), Some(Arc::new(Counting::default())), stop)
            .await
            .unwrap();
        assert_eq!(
            out.result,
            Err("the execution ran past its wall-clock limit".into()),
            "{code}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{code}: {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_job_whose_requester_left_never_runs() {
    use std::sync::atomic::Ordering;
    // One thread, busy with a long run; a second run is queued, then its
    // requester gives up.
    let p = Pool::new(Limits::default(), 1);
    let bridge = Arc::new(Counting::default());
    let busy = {
        let p = p.clone();
        tokio::spawn(async move {
            p.run(
                "const t = Date.now(); while (Date.now() - t < 800) {} return 1".into(),
                None,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let abandoned = tokio::time::timeout(
        Duration::from_millis(100),
        p.run("await tools.x(); return 2".into(), Some(bridge.clone())),
    )
    .await;
    assert!(abandoned.is_err(), "the second run waited for the thread");
    assert_eq!(busy.await.unwrap().unwrap().result, Ok(Some(json!(1))));
    // The next run proves the thread moved past the abandoned job.
    assert_eq!(
        p.run("return 3".into(), None).await.unwrap().result,
        Ok(Some(json!(3)))
    );
    assert_eq!(
        bridge.started.load(Ordering::SeqCst),
        0,
        "the abandoned program never ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_instead_of_growing() {
    let p = Pool::new(Limits::default(), 1);
    let long = "const t = Date.now(); while (Date.now() - t < 500) {} return 1";
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.run(long.into(), None).await })
        })
        .collect();
    let mut busy = 0;
    for run in runs {
        match run.await.unwrap() {
            Ok(out) => assert_eq!(out.result, Ok(Some(json!(1)))),
            Err(executor_sandbox::SandboxError::Busy) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(busy > 0, "some runs must be refused as busy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_queue_bound_replaces_the_per_thread_one() {
    // One thread would queue 4 by default; 8 runs fit in a total of 16.
    let limits = Limits {
        max_queued_jobs: Some(16),
        ..Limits::default()
    };
    let p = Pool::new(limits, 1);
    let short = "const t = Date.now(); while (Date.now() - t < 50) {} return 1";
    let runs: Vec<_> = (0..8)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.run(short.into(), None).await })
        })
        .collect();
    for run in runs {
        let out = run.await.unwrap().expect("no run is refused");
        assert_eq!(out.result, Ok(Some(json!(1))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_costs_one_run_and_the_runtime_is_replaced() {
    let p = Pool::new(Limits::default(), 1);
    let bridge = Arc::new(Counting::default());
    let out = p
        .run("await tools.boom()".into(), Some(bridge.clone()))
        .await
        .unwrap();
    let message = out.result.unwrap_err();
    assert!(
        message.contains("the host failed while making this tool call"),
        "{message}"
    );
    for _ in 0..3 {
        let out = p
            .run(
                "await tools.x(); return 'fine'".into(),
                Some(bridge.clone()),
            )
            .await
            .unwrap();
        assert_eq!(out.result, Ok(Some(json!("fine"))));
    }
}

/// Answers at once, with a keep-alive that counts itself while alive.
struct Holding {
    alive: Arc<std::sync::atomic::AtomicUsize>,
}

struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl HostBridge for Holding {
    fn call(&self, _path: String, _args: Value) -> BoxFuture<'static, Result<Value, AgentError>> {
        Box::pin(async { Ok(json!({"ok": true})) })
    }

    fn call_held(
        &self,
        _path: String,
        _args: Value,
    ) -> BoxFuture<'static, executor_sandbox::HeldAnswer> {
        self.alive.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let keep = Counted(self.alive.clone());
        Box::pin(async move {
            let keep: Box<dyn std::any::Any + Send> = Box::new(keep);
            (Ok(json!({"ok": true})), Some(keep))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_answer_holds_lives_until_the_program_takes_it() {
    use std::sync::atomic::Ordering;
    let p = pool(5_000);
    let alive = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bridge = Arc::new(Holding {
        alive: alive.clone(),
    });
    // The answer arrives at once, but the program is busy for 600 ms.
    let run = {
        let p = p.clone();
        tokio::spawn(async move {
            p.run(
                "const r = tools.x(); const t = Date.now(); while (Date.now() - t < 600) {} return (await r).ok"
                    .into(),
                Some(bridge),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        alive.load(Ordering::SeqCst),
        1,
        "held while the answer waits"
    );
    assert_eq!(run.await.unwrap().unwrap().result, Ok(Some(json!(true))));
    assert_eq!(alive.load(Ordering::SeqCst), 0, "released once taken");
}
