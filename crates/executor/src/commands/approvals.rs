//! `executor approvals list`: the calls waiting for a human's decision
//! (`executor resume` decides one).

use executor_ops::Operations;

use super::{readable_time, resolve_actor};
use crate::AnyResult;
use crate::cli::ActorArg;

/// Longest argument preview a line shows, in characters.
const PREVIEW_CHARS: usize = 80;

pub(crate) async fn list(ops: &Operations, org: &ActorArg) -> AnyResult<()> {
    let actor = resolve_actor(ops, org).await?;
    let pending = ops.pending_approvals(&actor).await?;
    if pending.is_empty() {
        eprintln!("no calls wait for a decision");
    }
    for p in &pending {
        // The pretty-printed arguments on one line.
        let args: String = p
            .args_preview
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(PREVIEW_CHARS)
            .collect();
        println!(
            "{}\t{}\tpaused {}\texpires {}\t{}",
            p.execution_id,
            p.tool_path,
            readable_time(p.paused_at_ms),
            readable_time(p.expires_at_ms),
            args,
        );
    }
    if !pending.is_empty() {
        eprintln!("decide one with `executor resume EXECUTION_ID --action accept|decline|cancel`");
    }
    Ok(())
}
