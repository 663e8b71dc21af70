//! `executor mcp`: MCP over stdio, for clients that spawn a process.

use std::sync::Arc;

use executor_mcp::McpServer;
use executor_store::Store;

use super::{resolve_actor, say_who_acts};
use crate::AnyResult;
use crate::cli::{GlobalOpts, StdioOpts};
use crate::wiring::{SHELL, operations_of, wire_engine};

pub(crate) async fn serve(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: StdioOpts,
) -> AnyResult<()> {
    let wired = wire_engine(store.clone(), global, &opts.engine, None)?;
    let ops = operations_of(store, &wired, &opts.engine, SHELL, None, None);
    let principal = resolve_actor(&ops, &opts.actor).await?;
    say_who_acts(&ops, &principal).await;
    let engine = wired.engine;
    // Like `serve`, so that `executor resume` reaches runs paused here.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let decisions = tokio::spawn(engine.clone().apply_posted_decisions(stopped));
    let server = Arc::new(McpServer::new(engine));
    let served = executor_wire::stdio::serve_stdio(server, principal).await;
    stop.send_replace(true);
    let _ = decisions.await;
    Ok(served?)
}
