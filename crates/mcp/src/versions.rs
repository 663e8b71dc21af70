//! Protocol versions (SPEC §2).

/// The sessionless revision: no `mcp-session-id`, `server/discover`.
pub const SESSIONLESS: &str = "2026-07-28";

/// Session-based revisions, newest first.
pub const SESSION_BASED: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Every revision we speak, newest first.
pub const ALL: [&str; 4] = [SESSIONLESS, "2025-11-25", "2025-06-18", "2025-03-26"];

/// The only revision that allows JSON-RPC batches.
pub const BATCHING: &str = "2025-03-26";

pub fn is_supported(version: &str) -> bool {
    ALL.contains(&version)
}

/// `initialize` negotiation: echo the client's session-based version when
/// we support it, else answer with the newest session-based one.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| SESSION_BASED.iter().find(|v| **v == r).copied())
        .unwrap_or(SESSION_BASED[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_falls_back_to_newest() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(Some(SESSIONLESS)), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }
}
