//! What a call of one of the engine's tools came to, as the engine reports
//! it to `mcp`.

use executor_call::ApprovalRequest;
use serde_json::Value;

/// What a call of one of the engine's tools came to. The engine says what
/// happened; `mcp` renders it for the request's transport (the paused
/// envelope in model mode, `input_required` on 2026-07-28).
#[derive(Debug, Clone)]
pub enum ToolOutcome {
    /// The tool answered: a run that finished (or failed: `isError`), a
    /// refusal, the skills text. Its `CallToolResult` (SPEC §5).
    Answered(Value),
    /// The run waits for a human to decide one of its calls (SPEC §9).
    Paused(PausedCall),
}

/// A run paused at a call that waits for approval.
#[derive(Debug, Clone)]
pub struct PausedCall {
    /// What to ask the human: the call, its arguments cut at the preview
    /// length.
    pub request: ApprovalRequest,
    /// The paused envelope (SPEC §9): model mode's answer, which names the
    /// execution for the `resume` tool.
    pub envelope: Value,
}

impl ToolOutcome {
    /// The `CallToolResult` model mode answers: the answer, or the paused
    /// envelope.
    pub fn into_result(self) -> Value {
        match self {
            ToolOutcome::Answered(result) => result,
            ToolOutcome::Paused(paused) => paused.envelope,
        }
    }
}
