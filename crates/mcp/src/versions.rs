//! Protocol versions (SPEC §2): the revisions of the MCP specification this
//! server speaks, parsed once where they come in (a header, `initialize`,
//! a stored session) and matched on as [`ProtocolVersion`] afterwards.

use std::fmt;
use std::str::FromStr;

/// A revision of the MCP specification this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    /// The sessionless revision: no `mcp-session-id`, `server/discover`.
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every revision we speak, newest first.
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
    ];

    /// The sessionless revision.
    pub const SESSIONLESS: ProtocolVersion = ProtocolVersion::V2026_07_28;

    /// What `initialize` answers when the client asks for a revision we do
    /// not speak with sessions.
    pub const NEWEST_SESSION_BASED: ProtocolVersion = ProtocolVersion::V2025_11_25;

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// 2026-07-28: requests carry what a session held; no server→client
    /// requests.
    pub fn is_sessionless(self) -> bool {
        self == ProtocolVersion::SESSIONLESS
    }

    /// JSON-RPC batches exist in 2025-03-26 only.
    pub fn allows_batches(self) -> bool {
        self == ProtocolVersion::V2025_03_26
    }

    /// Elicitation arrived with 2025-06-18.
    pub fn has_elicitation(self) -> bool {
        self != ProtocolVersion::V2025_03_26
    }

    /// `elicitation/create`'s `mode` arrived with 2025-11-25; 2025-06-18
    /// clients reject unknown shapes.
    pub fn names_elicitation_mode(self) -> bool {
        self != ProtocolVersion::V2025_06_18
    }

    /// `initialize` negotiation: echo the client's session-based version
    /// when we speak it, else answer with the newest session-based one.
    pub fn negotiate(requested: Option<&str>) -> ProtocolVersion {
        match requested.map(str::parse) {
            Some(Ok(version)) if !ProtocolVersion::is_sessionless(version) => version,
            _ => ProtocolVersion::NEWEST_SESSION_BASED,
        }
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version string this server does not speak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedVersion(pub String);

impl fmt::Display for UnsupportedVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Unsupported protocol version: {}", self.0)
    }
}

impl std::error::Error for UnsupportedVersion {}

impl FromStr for ProtocolVersion {
    type Err = UnsupportedVersion;
    fn from_str(text: &str) -> Result<Self, UnsupportedVersion> {
        ProtocolVersion::ALL
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| UnsupportedVersion(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_falls_back_to_newest() {
        let negotiate = |v| ProtocolVersion::negotiate(v).as_str();
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2024-11-05")), "2025-11-25");
        assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn every_version_reads_back_from_its_text() {
        for version in ProtocolVersion::ALL {
            assert_eq!(version.as_str().parse(), Ok(version));
        }
        assert!("2024-11-05".parse::<ProtocolVersion>().is_err());
    }
}
