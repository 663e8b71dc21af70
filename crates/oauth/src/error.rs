//! What can go wrong with an OAuth connection, in words an operator or an
//! agent can act on. No variant carries a token, a secret or a raw body.

use executor_catalog::ToolError;

/// SPEC §7's code for a grant a person must renew.
pub const OAUTH_REAUTH_REQUIRED: &str = "oauth_reauth_required";

#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    /// Metadata is missing, contradictory or names another resource.
    #[error("{0}")]
    Discovery(String),
    /// The authorization or token endpoint could not be reached, or
    /// answered something that is not OAuth (retryable).
    #[error("{0}")]
    Unreachable(String),
    /// The authorization server refused: `error` is its RFC 6749 code.
    #[error("the authorization server refused: {error}{}", description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    /// Something the operator must supply or change.
    #[error("{0}")]
    Setup(String),
    /// The stored grant cannot be read or written.
    #[error("{0}")]
    Stored(String),
}

impl OAuthError {
    /// The authorization server's error code, when it refused.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            OAuthError::Refused { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The command that renews a grant.
pub fn login_command(namespace: &str) -> String {
    format!("executor connections login {namespace}")
}

/// A call's answer for a grant that needs a person.
pub fn reauth_required(namespace: &str, why: &str) -> ToolError {
    ToolError::new(
        OAUTH_REAUTH_REQUIRED,
        format!(
            "the OAuth connection of {namespace} needs a new login ({why}); an operator can run `{}`",
            login_command(namespace)
        ),
    )
}

/// A call's answer when a token could not be obtained for a reason that may pass.
pub fn token_unavailable(namespace: &str, error: &OAuthError) -> ToolError {
    let mut e = ToolError::new(
        "upstream_http_error",
        format!("could not obtain an access token for {namespace}: {error}"),
    );
    e.retryable = Some(true);
    e
}
