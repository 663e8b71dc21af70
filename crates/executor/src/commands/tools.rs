//! `executor call`, `executor tools search|describe` and `executor
//! integrations tools`: a tool called as a one-line program, and the
//! catalog searched, described and listed, from the command line.

use executor_ops::{ApprovalMode, CallResult, Operations};

use super::{resolve_actor, say_who_acts};
use crate::AnyResult;
use crate::cli::{ActorArg, ToolsCommand};

/// `executor tools …`: the org's tools ranked for a query, or one
/// described.
pub(crate) async fn tools(ops: &Operations, command: ToolsCommand) -> AnyResult<()> {
    match command {
        ToolsCommand::Search { query, limit, org } => {
            let actor = resolve_actor(ops, &org).await?;
            for hit in ops.search_tools(&actor, &query, None, limit).await? {
                let description = hit
                    .description
                    .as_deref()
                    .map(first_line)
                    .unwrap_or_default();
                println!(
                    "{:>7.2}\t{}\t{}",
                    hit.score.unwrap_or_default(),
                    hit.path,
                    description
                );
            }
        }
        ToolsCommand::Describe { path, org } => {
            let actor = resolve_actor(ops, &org).await?;
            let tool = ops.describe_tool(&actor, &path).await?;
            println!("{}", tool.path);
            if let Some(description) = &tool.description {
                println!("{}", description.trim());
            }
            let approval = if tool.requires_approval { "yes" } else { "no" };
            println!("requires approval by default: {approval}");
            println!();
            println!("{}", tool.type_script);
        }
    }
    Ok(())
}

/// `executor integrations tools`: an integration's tools, by path.
pub(crate) async fn integration_tools(
    ops: &Operations,
    namespace: &str,
    org: &ActorArg,
) -> AnyResult<()> {
    let actor = resolve_actor(ops, org).await?;
    for tool in ops.integration_tools(&actor, namespace).await? {
        let approval = if tool.requires_approval {
            "approval"
        } else {
            "-"
        };
        let description = tool
            .description
            .as_deref()
            .map(first_line)
            .unwrap_or_default();
        println!("{}\t{approval}\t{description}", tool.path);
    }
    Ok(())
}

/// `executor call`: runs `tools.<path>(input)` as a one-line program, as
/// the command's actor, and prints the result.
pub(crate) async fn call(
    ops: &Operations,
    path: &str,
    input: &str,
    actor: &ActorArg,
) -> AnyResult<()> {
    let principal = resolve_actor(ops, actor).await?;
    say_who_acts(ops, &principal).await;
    let input: serde_json::Value =
        serde_json::from_str(input).map_err(|e| format!("the input is not JSON: {e}"))?;
    print_result(
        ops.call_tool(&principal, path, &input, ApprovalMode::AskAHuman)
            .await?,
    )
}

/// Prints what a call came to (a paused call's text names the execution);
/// fails when it is an error.
pub(crate) fn print_result(result: CallResult) -> AnyResult<()> {
    println!("{}", result.text);
    if result.is_error {
        Err("the call failed".into())
    } else {
        Ok(())
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    line.chars().take(60).collect()
}
