//! Who is calling a tool, and from where.

use executor_store::Principal;

/// Who is calling a tool and from where.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub principal: Principal,
    /// None for sessionless (2026-07-28) requests and the CLI.
    pub session_id: Option<String>,
    /// Whether a call that needs approval waits for a human.
    pub approval: ApprovalMode,
}

/// Whether a call that needs approval (SPEC §9) waits for a human.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    /// It pauses until someone decides (every agent's call).
    #[default]
    AskAHuman,
    /// The caller is the operator calling one tool by name (the management
    /// API's `tools/call`, SPEC §13): the approval counts as given, by the
    /// caller; `block` still applies.
    GivenByCaller,
    /// It pauses until someone decides in the console (a session opened
    /// with `elicitation_mode=console`, SPEC §14): the agent's `resume`
    /// does not decide, it waits for that decision.
    InConsole,
}
