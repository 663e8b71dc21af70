//! `executor integrations …`: flags into operations, results onto the
//! terminal.

use executor_ops::{
    AddIntegration as Add, GraphqlSchemaSource, IntegrationAdded, IntegrationSummary, McpEndpoint,
    OpError, Operations, UpdateIntegration, document_source,
};
use executor_upstream::HttpTransport;

use super::resolve_actor;
use crate::AnyResult;
use crate::cli::{ActorArg, AddIntegration, IntegrationsCommand};

pub(crate) async fn integrations(ops: &Operations, command: IntegrationsCommand) -> AnyResult<()> {
    match command {
        IntegrationsCommand::Add(add) => {
            let (input, local_network, actor) = add_input(add)?;
            let actor = resolve_actor(ops, &actor).await?;
            let namespace = input.namespace().to_string();
            let mut progress = progress_printer(namespace);
            let added = ops
                .add_integration(&actor, input, local_network, &mut progress)
                .await;
            print_added(added?);
            Ok(())
        }
        IntegrationsCommand::List { org } => {
            let actor = resolve_actor(ops, &org).await?;
            let listed = ops.list_integrations(&actor).await?;
            print_list(&listed);
            Ok(())
        }
        IntegrationsCommand::Refresh {
            namespace,
            local_network,
            org,
        } => {
            let actor = resolve_actor(ops, &org).await?;
            let mut progress = progress_printer(namespace.clone());
            let refreshed = ops
                .refresh_integration(&actor, &namespace, local_network.allowed, &mut progress)
                .await;
            print_added(refreshed?);
            Ok(())
        }
        IntegrationsCommand::Update {
            namespace,
            base_url,
            local_network,
            org,
        } => {
            let actor = resolve_actor(ops, &org).await?;
            if base_url.is_none() {
                return Err("nothing to change: give --base-url".into());
            }
            let update = UpdateIntegration { base_url };
            let mut progress = progress_printer(namespace.clone());
            let updated = ops
                .update_integration(
                    &actor,
                    &namespace,
                    update,
                    local_network.allowed,
                    &mut progress,
                )
                .await;
            print_added(updated?);
            Ok(())
        }
        IntegrationsCommand::Remove { namespace, org } => {
            let actor = resolve_actor(ops, &org).await?;
            ops.remove_integration(&actor, &namespace).await?;
            Ok(())
        }
    }
}

/// The operation's input from `integrations add`'s flags, with the
/// local-network flag and who it acts for.
fn add_input(add: AddIntegration) -> AnyResult<(Add, bool, ActorArg)> {
    Ok(match add {
        AddIntegration::Openapi {
            spec,
            local_network,
            namespace,
            base_url,
            org,
        } => (
            Add::OpenApi {
                namespace,
                spec: document_source(&spec),
                base_url,
            },
            local_network.allowed,
            org,
        ),
        AddIntegration::Graphql {
            endpoint,
            schema,
            local_network,
            namespace,
            org,
        } => (
            Add::Graphql {
                namespace,
                endpoint,
                schema: schema.map_or(GraphqlSchemaSource::Introspect, GraphqlSchemaSource::Path),
            },
            local_network.allowed,
            org,
        ),
        AddIntegration::Mcp {
            url,
            transport,
            command,
            args,
            env,
            local_network,
            namespace,
            org,
        } => {
            let endpoint = match (url, command) {
                (Some(url), _) => McpEndpoint::Http {
                    url,
                    transport: transport.parse::<HttpTransport>()?,
                },
                (None, Some(command)) => McpEndpoint::Stdio {
                    command,
                    args,
                    env: parse_env(&env)?,
                },
                (None, None) => return Err("give --url or --command".into()),
            };
            (
                Add::Mcp {
                    namespace,
                    endpoint,
                },
                local_network.allowed,
                org,
            )
        }
    })
}

/// Redraws `importing NS: done/total` on a terminal at most every 2%, so a
/// 10k-operation spec stays cheap; a log file gets the final count only.
fn progress_printer(namespace: String) -> impl FnMut(usize, usize) + Send {
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut shown = 0usize;
    move |done, total| {
        let step = total.div_ceil(50);
        if total > 0 && (done == total || (interactive && done >= shown + step)) {
            shown = done;
            eprint!("\rimporting {namespace}: {done}/{total} operations");
            if done == total {
                eprintln!();
            }
        }
    }
}

fn print_added(added: IntegrationAdded) {
    for warning in &added.warnings {
        eprintln!("warning: {warning}");
    }
    let i = &added.integration;
    let seconds = added.elapsed_ms as f64 / 1000.0;
    if added.needs_login {
        println!(
            "{}: stored; the server asks for an OAuth login, so its tools appear once it is \
             done: run `executor connections login {}`",
            i.namespace, i.namespace
        );
        return;
    }
    let place = match i.kind.as_str() {
        "openapi" => format!(
            "base URL: {}",
            i.base_url.as_deref().unwrap_or("none: pass --base-url")
        ),
        "graphql" => format!("endpoint: {}", i.base_url.as_deref().unwrap_or("")),
        _ => format!("server: {}", i.source),
    };
    println!(
        "{}: {} tools in {seconds:.2} s ({place})",
        i.namespace, i.tool_count
    );
}

/// A line per integration, under a header on a terminal; a sentence when
/// there is none (on stderr when the output goes to a script, so that it
/// reads no rows).
fn print_list(listed: &[IntegrationSummary]) {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    if listed.is_empty() {
        let note =
            "no integrations yet: add one with `executor integrations add openapi|graphql|mcp`";
        if terminal {
            println!("{note}");
        } else {
            eprintln!("{note}");
        }
        return;
    }
    if terminal {
        println!("NAMESPACE\tKIND\tTOOLS\tBASE URL\tSOURCE\tSTATUS");
    }
    for i in listed {
        println!(
            "{}\t{}\t{} tools\t{}\t{}\t{}",
            i.namespace,
            i.kind,
            i.tool_count,
            i.base_url.as_deref().unwrap_or("(no base URL)"),
            i.source,
            i.status,
        );
    }
}

/// `NAME=value` pairs of `--env`.
fn parse_env(pairs: &[String]) -> Result<Vec<(String, String)>, OpError> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
            _ => Err(OpError::invalid(
                "env",
                format!("--env {pair:?} is not NAME=value"),
            )),
        })
        .collect()
}
