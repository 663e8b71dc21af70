//! A call that did not succeed, in SPEC §7's terms: a code the agent can act
//! on, a message, and the upstream's status and (bounded) error body.

use std::error::Error as StdError;
use std::fmt;

use executor_catalog::ToolError;
use serde_json::Value;

/// SPEC §7 error codes this module produces.
pub const INVALID_TOOL_ARGUMENTS: &str = "invalid_tool_arguments";
pub const CONNECTION_REJECTED: &str = "connection_rejected";
pub const UPSTREAM_HTTP_ERROR: &str = "upstream_http_error";
pub const UPSTREAM_TIMEOUT: &str = "upstream_timeout";

/// A call that did not succeed, as SPEC §7's `error` object.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpFailure {
    pub code: &'static str,
    pub message: String,
    pub status: Option<u16>,
    /// The upstream error body (bounded), when there is one.
    pub details: Option<Value>,
    pub retryable: Option<bool>,
    /// The `WWW-Authenticate` challenge of a 401/403, for the connection's
    /// source (an OAuth connection refreshes or asks for a login); never
    /// shown to the agent.
    pub www_authenticate: Option<String>,
}

impl HttpFailure {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        HttpFailure {
            code,
            message: message.into(),
            status: None,
            details: None,
            retryable: None,
            www_authenticate: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        HttpFailure::new(INVALID_TOOL_ARGUMENTS, message)
    }

    pub fn upstream(message: impl Into<String>, retryable: bool) -> Self {
        HttpFailure {
            retryable: Some(retryable),
            ..HttpFailure::new(UPSTREAM_HTTP_ERROR, message)
        }
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        HttpFailure {
            retryable: Some(true),
            ..HttpFailure::new(UPSTREAM_TIMEOUT, message)
        }
    }

    pub fn local_network(host: &str) -> Self {
        HttpFailure::upstream(
            format!(
                "the request to {host} was refused: the address is on a local network; \
                 the operator can allow it with --allow-local-network"
            ),
            false,
        )
    }
}

impl fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl StdError for HttpFailure {}

/// The call's error as the agent sees it: the challenge stays behind (it
/// was for the credential's source).
impl From<HttpFailure> for ToolError {
    fn from(failure: HttpFailure) -> Self {
        ToolError {
            code: failure.code,
            message: failure.message,
            status: failure.status,
            details: failure.details,
            retryable: failure.retryable,
        }
    }
}
