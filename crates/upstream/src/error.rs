//! Why a session with an upstream could not be opened: the one error of
//! every transport (`connect.rs`, `sse.rs`) and of the pool that leases
//! sessions.

/// Why a session could not be opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// 401/403 with an OAuth challenge (the `WWW-Authenticate` text): a
    /// login is needed (SPEC §8), or the token of one must be renewed.
    NeedsLogin(Option<String>),
    /// The server refused the credential without a challenge.
    Refused(String),
    /// It could not be started or reached, or did not speak MCP.
    Unavailable(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NeedsLogin(_) => f.write_str("the server asks for an OAuth login"),
            OpenError::Refused(why) | OpenError::Unavailable(why) => f.write_str(why),
        }
    }
}
