//! Upstream MCP servers as an integration kind (SPEC §8): a server over
//! streamable HTTP or as a child process on stdio, put behind the gateway.
//! Its tools are listed at `add` (`sync.rs`) and stored under normalised
//! names (`naming.rs`, `stored.rs`); calls go through sessions pooled per
//! (org, integration) (`pool.rs`) that rmcp's client runs (`connect.rs`),
//! a stdio server in a supervised child (`stdio.rs`) whose `--env` values
//! are sealed at rest (`env.rs`); results come back as
//! `{content, structuredContent}` (`invoker.rs`), after any questions the
//! upstream asks on the way (`input_required`, `questions.rs`).
//!
//! Named `upstream` so that it is never mistaken for `executor-mcp`, our
//! own server's side of the protocol.

mod connect;
mod env;
mod error;
mod http;
mod invoker;
mod kind;
mod naming;
mod pool;
mod questions;
mod sse;
mod stdio;
mod stored;
mod sync;

pub use connect::OPEN_TIMEOUT;
pub use env::{EnvSecrets, seal_env};
pub use invoker::{CONNECTION_MISSING, INTEGRATION_UNAVAILABLE, MCP_TOOL_ERROR, stdio_refused};
pub use kind::UpstreamKind;
pub use naming::{catalog_names, normalise};
pub use pool::{UpstreamSettings, Upstreams};
pub use stored::{
    Endpoint, FORMAT, HttpTransport, State, UpstreamTool, load, login_resource, store,
    store_needing_login,
};
pub use sync::{Discovery, discover};

#[cfg(test)]
mod tests;
