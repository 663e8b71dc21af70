//! The engine: the three MCP tools (`execute`, `skills`, `resume`), how their
//! results are rendered, and the execution records. The tools it calls come
//! from `executor-catalog`.
//!
//! The engine is transport-agnostic: it takes an `executor_call::CallContext`
//! (who is calling, from which session), a [`CoreTool`] and its arguments as
//! JSON, and reports what the call came to as a [`ToolOutcome`] (answered,
//! or paused for a human), which `mcp` renders. The execution lifecycle is
//! `lifecycle.rs`; read it first. Sessions and the wire layer sit above.

mod admission;
mod core_tools;
mod describe;
mod engine;
mod envelope;
pub mod execution;
mod invoke;
mod lifecycle;
mod metrics;
mod normalize;
mod outcome;
pub mod policy;
mod policy_cache;
mod runner;
mod skills;

pub use admission::{QueueLimits, QueueTotals, Refused, ShareLimits};
pub use core_tools::entries as core_tool_entries;
pub use describe::ToolDescription;
pub use engine::{CoreTool, Engine, EngineConfig, Overload, ToolCallError};
pub use envelope::{MAX_EMITTED_TEXT_CHARS, MAX_RESULT_TEXT_CHARS, internal_error_id};
pub use execution::{Decider, ExecutionState, PendingApproval};
/// How a session's approvals reach the human; it shapes its tool list.
pub use executor_store::ElicitationMode;
pub use invoke::{MAX_ARG_NAME_BYTES, MAX_ARG_NAMES, arg_names, outcome_of_code};
pub use metrics::EngineMetrics;
pub use normalize::normalize;
pub use outcome::{PausedCall, ToolOutcome};
