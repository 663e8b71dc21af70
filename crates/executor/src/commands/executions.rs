//! `executor executions …` and `executor resume`: execution history, and
//! a paused execution decided from a shell.

use std::time::Duration;

use executor_ops::{CallResult, ListExecutions, Operations};

use super::tools::print_result;
use crate::AnyResult;
use crate::cli::ExecutionsCommand;

pub(crate) async fn executions(ops: &Operations, command: ExecutionsCommand) -> AnyResult<()> {
    match command {
        ExecutionsCommand::List { limit } => {
            let listed = ops.list_executions(None, &ListExecutions { limit }).await?;
            for x in listed {
                println!(
                    "{}\t{}\t{} ms\t{}",
                    x.id, x.status, x.duration_ms, x.code_preview
                );
            }
            Ok(())
        }
        ExecutionsCommand::Show { id } => {
            let x = ops.get_execution(None, &id).await?;
            println!("{}", serde_json::to_string_pretty(&x)?);
            Ok(())
        }
    }
}

/// Posts the decision for the server holding the run, and prints the
/// outcome; with no server taking it within `wait` seconds, replays the
/// run here and applies it.
pub(crate) async fn resume(
    ops: &Operations,
    execution_id: &str,
    action: &str,
    wait: u64,
) -> AnyResult<()> {
    let result: CallResult = ops
        .resume_execution(None, execution_id, action, Duration::from_secs(wait))
        .await?;
    print_result(result)
}
