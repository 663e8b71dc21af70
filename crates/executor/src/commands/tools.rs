//! `executor call` and `executor tools search`: a tool called as a one-line
//! program, and the catalog searched, from the command line.

use std::sync::Arc;

use executor_call::CallContext;
use executor_catalog::CatalogSource;
use executor_engine::{CoreTool, ToolOutcome};
use executor_outbound::HttpConfig;
use executor_store::Store;
use executor_upstream::UpstreamSettings;

use super::{resolve_actor, resolve_org, say_who_acts};
use crate::AnyResult;
use crate::cli::{ActorArg, EngineOpts, GlobalOpts, ToolsCommand};
use crate::wiring::{engine, outbound, store_catalogs};

/// `executor tools search`: the org's tools ranked for a query.
pub(crate) async fn tools(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    command: ToolsCommand,
) -> AnyResult<()> {
    let ToolsCommand::Search { query, limit, org } = command;
    let org_id = resolve_org(store.as_ref(), &org).await?;
    let outbound = outbound(store.clone(), global, HttpConfig::default())?;
    let catalogs = store_catalogs(store.clone(), &outbound, UpstreamSettings::default());
    let catalog = catalogs.catalog(&org_id).await;
    for (tool, score) in catalog.search(&query, None).into_iter().take(limit) {
        let description = tool
            .description
            .as_deref()
            .map(first_line)
            .unwrap_or_default();
        println!("{:>7.2}\t{}\t{}", score, tool.path, description);
    }
    Ok(())
}

/// `executor call`: runs `tools.<path>(input)` as a one-line program, as
/// the command's actor, and prints the result.
pub(crate) async fn call(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    path: &str,
    input: &str,
    actor: &ActorArg,
    opts: &EngineOpts,
) -> AnyResult<()> {
    let principal = resolve_actor(store.as_ref(), actor).await?;
    say_who_acts(store.as_ref(), &principal).await;
    let engine = engine(store, global, opts)?;
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
    let ctx = CallContext {
        principal,
        session_id: None,
    };
    let outcome = engine
        .call_tool(
            &ctx,
            CoreTool::Execute,
            &serde_json::json!({ "code": code }),
        )
        .await;
    print_result(outcome)
}

/// Prints what a call came to: its `CallToolResult`'s text (a paused call's
/// envelope names the execution); fails when it is an error.
pub(crate) fn print_result(outcome: ToolOutcome) -> AnyResult<()> {
    let result = outcome.into_result();
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
