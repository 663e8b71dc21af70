//! The `execute` corpus (tests/corpus/execute.json), at the engine level.
//! The same cases run through the MCP server with the official SDK client
//! in tests/e2e/codemode.test.mjs.

use std::time::Duration;

use executor_call::CallContext;
use executor_engine::{CoreTool, Engine, EngineConfig};
use executor_sandbox::Limits;
use executor_store::testing::TestStore;
use serde_json::Value;

const CORPUS: &str = include_str!("../../../tests/corpus/execute.json");

/// Holds where every key of `expected` (recursively, for objects)
/// equals the value at the same place in `actual`.
fn partial_match(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| partial_match(v, av))),
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(ev, av)| partial_match(ev, av))
        }
        _ => expected == actual,
    }
}

fn all_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn check(case: &Value, result: &Value) -> Result<(), String> {
    if let Some(expect) = case.get("expect") {
        return if expect == result {
            Ok(())
        } else {
            Err(format!("expected {expect}\n     got {result}"))
        };
    }
    let m = case
        .get("expectMatch")
        .ok_or("case has neither expect nor expectMatch")?;
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(want) = m.get("isError").and_then(Value::as_bool)
        && want != is_error
    {
        return Err(format!("isError: expected {want}, got {result}"));
    }
    let text = all_text(result);
    for needle in m
        .get("textIncludes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let needle = needle.as_str().unwrap_or_default();
        if !text.contains(needle) {
            return Err(format!("text lacks {needle:?}: {text:.300}"));
        }
    }
    let logs = result["structuredContent"]["logs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for needle in m
        .get("logsIncludes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let needle = needle.as_str().unwrap_or_default();
        if !logs
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains(needle)))
        {
            return Err(format!("logs lack {needle:?}: {logs:?}"));
        }
    }
    if let Some(structured) = m.get("structured")
        && !partial_match(structured, &result["structuredContent"])
    {
        return Err(format!(
            "structuredContent: expected ⊇ {structured}, got {}",
            result["structuredContent"]
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_case_renders_exactly() {
    let cases: Vec<Value> = serde_json::from_str(CORPUS).expect("corpus is JSON");
    assert!(cases.len() >= 60, "the corpus has {} cases", cases.len());
    let db = TestStore::from_env().await;
    let store = db.store();
    let principal = store
        .ensure_account("corpus@example.com", None)
        .await
        .expect("account");
    let config = EngineConfig {
        // The same limit the e2e run uses (--execution-timeout 2000).
        limits: Limits {
            timeout: Duration::from_millis(2000),
            ..Limits::default()
        },
        ..EngineConfig::default()
    };
    let engine = Engine::new(store, config);
    let ctx = CallContext {
        principal,
        session_id: None,
        approval: Default::default(),
        holder: None,
    };
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let code = case["code"].as_str().unwrap_or_default();
        let result = engine
            .call_tool(
                &ctx,
                CoreTool::Execute,
                &serde_json::json!({ "code": code }),
            )
            .await
            .into_result();
        if let Err(why) = check(case, &result) {
            failures.push(format!("{name}: {why}"));
        }
    }
    drop(db);
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
