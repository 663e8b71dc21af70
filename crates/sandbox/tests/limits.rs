//! The sandbox's limits and isolation, at the engine level.

use std::time::{Duration, Instant};

use executor_sandbox::{Limits, Pool, RunOutcome};
use serde_json::json;

fn pool(timeout_ms: u64) -> Pool {
    Pool::new(
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            ..Limits::default()
        },
        8,
    )
}

fn failed(outcome: RunOutcome) -> String {
    match outcome {
        RunOutcome::Failed { message, .. } => message,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn returns_values_and_logs() {
    let p = pool(5_000);
    let out = p
        .run("console.log('a', {b: 1}); console.warn(2); return {x: [1, 'y']};".into())
        .await
        .unwrap();
    assert_eq!(
        out,
        RunOutcome::Completed {
            value: Some(json!({"x": [1, "y"]})),
            logs: vec!["[log] a {\"b\":1}".into(), "[warn] 2".into()],
        }
    );
    let none = p.run("1 + 2;".into()).await.unwrap();
    assert_eq!(
        none,
        RunOutcome::Completed {
            value: None,
            logs: vec![]
        }
    );
}

#[tokio::test]
async fn an_infinite_loop_times_out_and_cannot_catch_it() {
    let p = pool(300);
    let msg = failed(
        p.run(
            "try { while (true) {} } catch (e) { return 'caught'; } finally { while (true) {} }"
                .into(),
        )
        .await
        .unwrap(),
    );
    assert_eq!(msg, "execution timed out after 300 ms");
}

#[tokio::test]
async fn memory_and_stack_bombs_end_only_their_run() {
    let p = pool(10_000);
    let msg = failed(
        p.run("const a = []; while (true) a.push(new Array(1e5).fill(7));".into())
            .await
            .unwrap(),
    );
    assert!(msg.contains("out of memory"), "{msg}");
    let msg = failed(
        p.run("function f() { return f() + 1; } return f();".into())
            .await
            .unwrap(),
    );
    assert!(msg.to_lowercase().contains("stack"), "{msg}");
    // The same threads serve the next run normally.
    let ok = p.run("return 1;".into()).await.unwrap();
    assert_eq!(
        ok,
        RunOutcome::Completed {
            value: Some(json!(1)),
            logs: vec![]
        }
    );
}

#[tokio::test]
async fn no_state_leaks_between_runs() {
    let p = pool(5_000);
    p.run("globalThis.secret = 42; Object.prototype.polluted = true; return 1;".into())
        .await
        .unwrap();
    for _ in 0..4 {
        let out = p
            .run("return [typeof secret, ({}).polluted === undefined];".into())
            .await
            .unwrap();
        assert_eq!(
            out,
            RunOutcome::Completed {
                value: Some(json!(["undefined", true])),
                logs: vec![]
            }
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_run_does_not_wait_for_a_busy_one() {
    let p = pool(3_000);
    let slow = {
        let p = p.clone();
        tokio::spawn(async move { p.run("while (true) {}".into()).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let fast = p.run("return 'fast';".into()).await.unwrap();
    assert_eq!(
        fast,
        RunOutcome::Completed {
            value: Some(json!("fast")),
            logs: vec![]
        }
    );
    assert!(
        started.elapsed() < Duration::from_millis(2_000),
        "fast run waited {:?}",
        started.elapsed()
    );
    assert!(failed(slow.await.unwrap().unwrap()).contains("timed out"));
}

#[tokio::test]
async fn timers_fetch_and_unsettled_promises() {
    let p = pool(5_000);
    let out = p.run("let n = 0; const id = setTimeout(() => n = 99, 5); clearTimeout(id); await new Promise(r => setTimeout(r, 20)); return n;".into()).await.unwrap();
    assert_eq!(
        out,
        RunOutcome::Completed {
            value: Some(json!(0)),
            logs: vec![]
        }
    );
    assert_eq!(
        failed(
            p.run("return fetch('https://example.com')".into())
                .await
                .unwrap()
        ),
        "fetch is disabled: call APIs through tools.*"
    );
    assert!(
        failed(p.run("await new Promise(() => {});".into()).await.unwrap())
            .contains("never settle")
    );
}

#[tokio::test]
async fn unserialisable_results_say_why() {
    let p = pool(5_000);
    assert_eq!(
        failed(
            p.run("const o = {}; o.self = o; return o;".into())
                .await
                .unwrap()
        ),
        "result is not JSON-serialisable: circular structure"
    );
    assert_eq!(
        failed(p.run("return 1n;".into()).await.unwrap()),
        "result is not JSON-serialisable: BigInt value"
    );
    let thrown = failed(p.run("throw {code: 7};".into()).await.unwrap());
    assert_eq!(thrown, "{\"code\":7}");
}
