//! Who is calling a tool, and from where.

use executor_store::Principal;

/// Who is calling a tool and from where.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub principal: Principal,
    /// None for sessionless (2026-07-28) requests and the CLI.
    pub session_id: Option<String>,
}
