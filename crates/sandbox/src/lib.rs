//! The QuickJS sandbox: runs one agent program in a fresh context on a
//! dedicated thread, with a compute deadline, a memory cap and a stack cap.
//!
//! The sandbox knows nothing of MCP or catalogs: it takes normalised
//! JavaScript (an async function body) and a [`HostBridge`] that answers
//! `tools.<path>(args)` calls, and returns a [`RunOutcome`]. Threads come
//! from a [`Pool`], so a script never runs on an async worker thread.

mod pool;
mod run;

pub use pool::{BACKSTOP_GRACE, Pool, QUEUED_PER_THREAD};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Limits for one execution (SPEC §6, §12).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Sandbox compute time before the run is interrupted. The clock stops
    /// while a tool call is in flight.
    pub timeout: Duration,
    pub memory_bytes: usize,
    pub stack_bytes: usize,
    pub max_log_bytes: usize,
    pub max_result_bytes: usize,
    /// Tool calls one run may have unanswered at once (SPEC §12).
    pub max_calls_in_flight: usize,
    /// Tool calls one run may make in all (SPEC §12).
    pub max_calls: usize,
    /// How long the host waits past the compute deadline before it abandons
    /// a run whose interrupt never fired (see [`BACKSTOP_GRACE`]).
    pub backstop_grace: Duration,
    /// Runs that may wait for a sandbox thread, in all; past it a run is
    /// refused with [`SandboxError::Busy`]. `None`: [`QUEUED_PER_THREAD`]
    /// per thread of the pool's ceiling.
    pub max_queued_jobs: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(300),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_log_bytes: 1024 * 1024,
            max_result_bytes: 1024 * 1024,
            max_calls_in_flight: 32,
            max_calls: 10_000,
            backstop_grace: BACKSTOP_GRACE,
            max_queued_jobs: None,
        }
    }
}

/// A message meant for the agent: the program sees it as a thrown
/// `Error`'s message. Whoever makes one sees to it that it names no secret
/// and nothing internal (those go to the server log, with their source).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AgentError(String);

impl AgentError {
    pub fn new(message: impl Into<String>) -> Self {
        AgentError(message.into())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for AgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AgentError {}

/// The message reads as text: `error.contains(..)`, `&*error`.
impl std::ops::Deref for AgentError {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for AgentError {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// What the host does for `tools.<path>(args)`. `Ok(value)` resolves the
/// call's promise with the value; `Err(message)` rejects it with an `Error`
/// carrying the message (for misuse and declined approvals only: ordinary
/// tool failures resolve to `{ok: false, error}`).
pub trait HostBridge: Send + Sync + 'static {
    fn call(&self, path: String, args: Value) -> BoxFuture<'static, Result<Value, AgentError>>;

    /// [`HostBridge::call`], with something the sandbox keeps alive until it
    /// has taken the answer into its own heap: room the answer holds in a
    /// host memory budget, so that answers queued for a busy program stay
    /// counted. The default keeps nothing.
    fn call_held(&self, path: String, args: Value) -> BoxFuture<'static, HeldAnswer> {
        let call = self.call(path, args);
        Box::pin(async move { (call.await, None) })
    }
}

/// An answer and what must live until the sandbox has taken it.
pub type HeldAnswer = (
    Result<Value, AgentError>,
    Option<Box<dyn std::any::Any + Send>>,
);

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// `Ok(None)` for `undefined`/`null` (and values JSON drops, like
    /// functions); `Err` with an agent-facing message when the program threw,
    /// failed to compile or hit a limit.
    pub result: Result<Option<Value>, String>,
    pub logs: Vec<String>,
    /// Values passed to `emit`, in order, as JSON.
    pub emitted: Vec<Value>,
}

impl RunOutcome {
    pub fn failed(message: impl Into<String>) -> Self {
        RunOutcome {
            result: Err(message.into()),
            logs: Vec::new(),
            emitted: Vec::new(),
        }
    }
}

/// Asks a run to end early: the host's wall-clock cap, which the sandbox
/// cannot see (it stops its own clock while tool calls are in flight).
/// Compute is interrupted, waits for tool calls end, the calls still in
/// flight are aborted, and the run fails with the given message.
#[derive(Clone, Default)]
pub struct Stop(Arc<StopState>);

#[derive(Default)]
struct StopState {
    requested: AtomicBool,
    message: Mutex<String>,
}

impl Stop {
    pub fn request(&self, message: impl Into<String>) {
        if let Ok(mut m) = self.0.message.lock() {
            *m = message.into();
        }
        self.0.requested.store(true, Ordering::Release);
    }

    pub fn is_requested(&self) -> bool {
        self.0.requested.load(Ordering::Acquire)
    }

    pub(crate) fn message(&self) -> String {
        self.0
            .message
            .lock()
            .map(|m| m.clone())
            .unwrap_or_else(|_| "the execution was stopped".into())
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
    /// More runs are queued than the pool takes; the caller should retry.
    #[error("the sandbox queue is full")]
    Busy,
}
