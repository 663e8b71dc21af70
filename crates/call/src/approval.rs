//! How a human decides a call that waits for approval (SPEC §9), and how a
//! call's answer leaves the server (SPEC §10).

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the human decided about one pending call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Accept,
    Decline,
    Cancel,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
        }
    }
}

/// An action word that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAction(String);

impl std::fmt::Display for UnknownAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "action must be accept, decline or cancel, not {:?}",
            self.0
        )
    }
}

impl std::error::Error for UnknownAction {}

impl std::str::FromStr for Action {
    type Err = UnknownAction;
    fn from_str(s: &str) -> Result<Self, UnknownAction> {
        match s {
            "accept" => Ok(Action::Accept),
            "decline" => Ok(Action::Decline),
            "cancel" => Ok(Action::Cancel),
            other => Err(UnknownAction(other.to_string())),
        }
    }
}

/// A pending approval as the human is asked about it, inline (native
/// elicitation, `input_required`) rather than through the `resume` tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub execution_id: String,
    /// `Approve <address>?` with the arguments, cut at the preview length.
    pub message: String,
}

impl ApprovalRequest {
    /// The request about a call of `address` with `args`, the arguments
    /// shown as pretty JSON cut at `max_preview_chars` characters, and the
    /// integration's `question` when it asked one.
    pub fn new(
        execution_id: &str,
        address: &str,
        args: &Value,
        question: Option<&str>,
        max_preview_chars: usize,
    ) -> Self {
        let preview = args_preview(args, max_preview_chars);
        let asks = question
            .map(|question| format!("\n\nThe integration asks: {question}"))
            .unwrap_or_default();
        ApprovalRequest {
            execution_id: execution_id.to_string(),
            message: format!("Approve {address}?{asks}\n\nArguments:\n{preview}"),
        }
    }
}

/// The arguments as pretty JSON, cut at `max_chars` characters.
pub fn args_preview(args: &Value, max_chars: usize) -> String {
    let args_text = serde_json::to_string_pretty(args).unwrap_or_default();
    let preview: String = args_text.chars().take(max_chars).collect();
    if preview.len() < args_text.len() {
        format!("{preview}\n… (arguments truncated)")
    } else {
        preview
    }
}

/// Asks the human about a pending call inline (native elicitation mode).
/// `None` means nobody could answer (the client failed or went away): the
/// call is then cancelled. The transport that can reach the client
/// implements this; the engine only waits on it, bounded by the window.
pub trait ApprovalPrompt: Send + Sync {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Option<Action>>;
}

/// How a call's answer leaves the server, which decides how its execution
/// record becomes durable. SPEC §10: the record is committed before the
/// result is returned — and durable, so that a database crash after the
/// agent saw a result cannot lose its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Sent as it is (a JSON body, the CLI): the record is flushed before
    /// the call answers.
    Direct,
    /// Written to the session's event log, by a flushed write, before it
    /// is sent. The record of a run that never paused (its answer goes to
    /// this call and no other) then commits without waiting for its flush
    /// (`ExecutionStore::insert_execution_deferred`): the answer's write
    /// flushes it. The caller owes an `ExecutionStore::sync` before it
    /// sends the answer any way but that write.
    Logged,
}
