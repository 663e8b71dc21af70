//! The engine: the three MCP tools (`execute`, `skills`, `resume`), how their
//! results are rendered, and the execution records.
//!
//! The engine is transport-agnostic: it takes a [`CallContext`] (who is
//! calling, from which session) and tool arguments as JSON, and returns an
//! MCP `CallToolResult` as JSON. Sessions and the wire layer sit above it.

mod admission;
mod budget;
pub mod catalog;
mod core_tools;
mod describe;
mod envelope;
pub mod execution;
mod invoke;
mod metrics;
mod normalize;
pub mod policy;
pub mod schema;
pub mod search;
mod skills;
mod tools;
mod validate;

pub use admission::{Refused, ShareLimits};
pub use budget::{HostBudget, HostHold, release_freed_memory};
pub use catalog::{
    Catalog, IntegrationSummary, ToolEntry, ToolError, ToolGroup, ToolInvocation, ToolInvoker,
    ToolResult, ToolSuccess,
};
pub use core_tools::entries as core_tool_entries;
pub use envelope::{MAX_EMITTED_TEXT_CHARS, MAX_RESULT_TEXT_CHARS, internal_error_id};
pub use execution::{Action, ApprovalPrompt, ApprovalRequest, is_paused};
pub use metrics::EngineMetrics;
pub use normalize::normalize;
pub use schema::{Definitions, SchemaInterner, SchemaText, ToolSchema, schema_text};
pub use tools::{CatalogSource, Engine, EngineConfig, StaticCatalog, ToolCallError};

use executor_store::Principal;

/// Who is calling a tool and from where.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub principal: Principal,
    /// None for sessionless (2026-07-28) requests and the CLI.
    pub session_id: Option<String>,
}
