//! `executor executions …` and `executor resume`: execution history, and
//! a paused execution decided from a shell.

use std::sync::Arc;
use std::time::Duration;

use executor_call::Action;
use executor_store::{ExecutionFilter, PageRequest, Store};

use super::tools::{first_line, print_result};
use crate::AnyResult;
use crate::cli::{EngineOpts, ExecutionsCommand, GlobalOpts};
use crate::wiring::engine;

pub(crate) async fn executions(store: &dyn Store, command: ExecutionsCommand) -> AnyResult<()> {
    match command {
        ExecutionsCommand::List { limit } => {
            let newest = PageRequest::first(limit);
            for x in store
                .list_executions(None, &ExecutionFilter::default(), &newest)
                .await?
            {
                println!(
                    "{}\t{}\t{} ms\t{}",
                    x.id,
                    x.status,
                    x.duration_ms,
                    first_line(&x.code)
                );
            }
            Ok(())
        }
        ExecutionsCommand::Show { id } => {
            let x = store.get_execution(&id).await?.ok_or("no such execution")?;
            println!("{}", serde_json::to_string_pretty(&x)?);
            Ok(())
        }
    }
}

/// Posts the decision for the server holding the run, and prints the
/// outcome; with no server taking it within `wait` seconds, replays the
/// run here and applies it.
pub(crate) async fn resume(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    execution_id: &str,
    action: &str,
    wait: u64,
    opts: &EngineOpts,
) -> AnyResult<()> {
    let engine = engine(store, global, opts)?;
    let action: Action = action.parse()?;
    let result = engine
        .resume_from_outside(execution_id, action, Duration::from_secs(wait))
        .await;
    print_result(result)
}
