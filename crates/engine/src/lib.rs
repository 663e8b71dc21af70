//! The engine: the three MCP tools (`execute`, `skills`, `resume`), how their
//! results are rendered, and the execution records. The tools it calls come
//! from `executor-catalog`.
//!
//! The engine is transport-agnostic: it takes a [`CallContext`] (who is
//! calling, from which session) and tool arguments as JSON, and returns an
//! MCP `CallToolResult` as JSON. Sessions and the wire layer sit above it.

mod admission;
mod core_tools;
mod engine;
mod envelope;
pub mod execution;
mod invoke;
mod lifecycle;
mod metrics;
mod normalize;
pub mod policy;
mod policy_cache;
mod runner;
mod skills;

pub use admission::{Refused, ShareLimits};
// The catalog types the engine's API speaks in, for its callers, and the
// allocator trim sessions use after disposing runtimes.
pub use core_tools::entries as core_tool_entries;
pub use engine::{CoreTool, Engine, EngineConfig, ToolCallError};
pub use envelope::{MAX_EMITTED_TEXT_CHARS, MAX_RESULT_TEXT_CHARS, internal_error_id};
pub use execution::{Action, ApprovalPrompt, ApprovalRequest, ExecutionState, Reply};
pub use executor_catalog::{
    CallContext, Catalog, CatalogSource, StaticCatalog, release_freed_memory,
};
pub use lifecycle::{PausedCall, ToolOutcome};
pub use metrics::EngineMetrics;
pub use normalize::normalize;
