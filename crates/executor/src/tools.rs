//! `executor call` and `executor tools search`: a tool called as a one-line
//! program, and the catalog searched, from the command line.

use executor_engine::Engine;

use crate::AnyResult;

/// Runs `tools.<path>(input)` as a one-line program and prints the result.
pub(crate) async fn call_tool(
    engine: &Engine,
    principal: executor_store::Principal,
    path: &str,
    input: &str,
) -> AnyResult<()> {
    let input: serde_json::Value =
        serde_json::from_str(input).map_err(|e| format!("the input is not JSON: {e}"))?;
    if !input.is_object() {
        return Err("the input must be a JSON object".into());
    }
    // Bracket access keeps any segment a valid property name.
    let accessor: String = path
        .split('.')
        .map(|segment| format!("[{}]", serde_json::Value::from(segment)))
        .collect();
    let code = format!("return await tools{accessor}({input});");
    let ctx = executor_engine::CallContext {
        principal,
        session_id: None,
    };
    let result = engine
        .call_tool(&ctx, "execute", &serde_json::json!({ "code": code }))
        .await?;
    print_result(&result)
}

/// Prints a `CallToolResult`'s text; fails when it is an error.
pub(crate) fn print_result(result: &serde_json::Value) -> AnyResult<()> {
    let text = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    println!("{text}");
    let failed = result
        .get("isError")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
        || result.pointer("/structuredContent/result/ok") == Some(&serde_json::Value::Bool(false));
    if failed {
        Err("the call failed".into())
    } else {
        Ok(())
    }
}

pub(crate) fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    line.chars().take(60).collect()
}
