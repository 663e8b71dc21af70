//! The QuickJS sandbox: runs one agent program in a fresh context on a
//! dedicated thread, with a compute deadline, a memory cap and a stack cap.
//!
//! The sandbox knows nothing of MCP or tools: it takes normalised JavaScript
//! (an async function body) and returns a [`RunOutcome`]. Threads come from a
//! [`Pool`] that grows on demand, so a CPU-bound script never delays others
//! and never runs on an async worker thread.

mod pool;
mod run;

pub use pool::Pool;

use std::time::Duration;

/// Limits for one execution (SPEC §6, §12).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Sandbox compute time before the run is interrupted.
    pub timeout: Duration,
    pub memory_bytes: usize,
    pub stack_bytes: usize,
    pub max_log_bytes: usize,
    pub max_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(300),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_log_bytes: 1024 * 1024,
            max_result_bytes: 1024 * 1024,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The program returned. `value` is `None` for `undefined`/`null` (and
    /// values JSON drops, like functions); `is_string` marks a string result,
    /// which is rendered verbatim.
    Completed {
        value: Option<serde_json::Value>,
        logs: Vec<String>,
    },
    /// The program threw, failed to compile, or hit a limit. `message` is
    /// safe to show to the agent.
    Failed { message: String, logs: Vec<String> },
}

impl RunOutcome {
    pub fn logs(&self) -> &[String] {
        match self {
            RunOutcome::Completed { logs, .. } | RunOutcome::Failed { logs, .. } => logs,
        }
    }
}

/// A failure of the sandbox machinery itself (not of the agent's program).
/// The detail goes to the server log only.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox runtime could not be created: {0}")]
    Runtime(String),
    #[error("sandbox worker stopped without an answer")]
    WorkerLost,
    #[error("sandbox engine error: {0}")]
    Engine(String),
}
