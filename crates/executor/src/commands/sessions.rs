//! `executor sessions …`: the org's MCP sessions, and ending one.

use executor_ops::{Operations, PageAsk};

use super::{readable_time, resolve_actor};
use crate::AnyResult;
use crate::cli::SessionsCommand;

pub(crate) async fn sessions(ops: &Operations, command: SessionsCommand) -> AnyResult<()> {
    match command {
        SessionsCommand::List { limit, org } => {
            let actor = resolve_actor(ops, &org).await?;
            let page = PageAsk {
                limit,
                cursor: None,
            };
            let listed = ops.list_sessions(&actor, &page).await?;
            if listed.items.is_empty() {
                eprintln!("no sessions");
            }
            for s in &listed.items {
                let state = if s.terminated_at_ms.is_some() {
                    "terminated"
                } else {
                    "open"
                };
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    s.id,
                    s.client_name.as_deref().unwrap_or("-"),
                    s.protocol_version,
                    readable_time(s.last_activity_at_ms),
                    state,
                );
            }
            if listed.next_cursor.is_some() {
                eprintln!("more sessions follow: raise --limit (at most 200)");
            }
            Ok(())
        }
        SessionsCommand::Terminate { id, org } => {
            let actor = resolve_actor(ops, &org).await?;
            ops.terminate_session(&actor, &id).await?;
            Ok(())
        }
    }
}
