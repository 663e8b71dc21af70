//! The one error every operation returns: what went wrong in words a
//! person can act on, the kind of failure (which each surface renders its
//! own way: an exit status, an HTTP status), a stable code, and the input
//! field at fault when there is one.

use executor_store::StoreError;

/// What kind of failure an [`OpError`] is; the HTTP API maps each to one
/// status, the CLI to a non-zero exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is wrong; [`OpError::field`] names where.
    Invalid,
    /// The thing named does not exist in the caller's org (another org's
    /// ids land here too: they are never said to exist).
    NotFound,
    /// The request is valid but the state refuses it (already decided,
    /// already exists).
    Conflict,
    /// This surface may not do it (a stdio command over the API on a
    /// server that runs none, a file path over the API).
    Forbidden,
    /// What the input points at cannot be used: the API document could
    /// not be fetched or is not one, the upstream MCP server did not
    /// answer. Said apart from [`ErrorKind::Invalid`], which the input's
    /// shape alone shows.
    Upstream,
    /// The gateway cannot do it now (the store is down, no secret key).
    Unavailable,
    /// A fault of ours; the message says no more than that, the log does.
    Internal,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct OpError {
    pub kind: ErrorKind,
    /// Stable, machine-readable: `invalid_input`, `not_found`, …
    pub code: &'static str,
    /// The input field at fault (API field names, camelCase).
    pub field: Option<&'static str>,
    pub message: String,
}

pub type OpResult<T> = Result<T, OpError>;

impl OpError {
    fn new(kind: ErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        OpError {
            kind,
            code,
            field: None,
            message: message.into(),
        }
    }

    /// `field` holds a value the operation cannot use.
    pub fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        OpError {
            field: Some(field),
            ..Self::new(ErrorKind::Invalid, "invalid_input", message)
        }
    }

    /// `what` (e.g. `integration "github"`) is not in the caller's org.
    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::NotFound, "not_found", format!("no {what}"))
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, code, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, "forbidden", message)
    }

    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Upstream, "upstream_error", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, "unavailable", message)
    }

    /// A fault of ours: `detail` goes to the log, never to the caller.
    pub fn internal(context: &str, detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "{context}");
        Self::new(
            ErrorKind::Internal,
            "internal_error",
            format!("{context}; the server log has the details"),
        )
    }
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            // Refusals the store words for the operator.
            StoreError::ForeignPersonalOrg { .. } => OpError::conflict("refused", e.to_string()),
            StoreError::Invalid(message) => OpError::invalid("body", message),
            StoreError::NotFound(what) => OpError::not_found(what),
            StoreError::Busy | StoreError::Full => OpError::unavailable(e.to_string()),
            other => OpError::internal("the store failed", other),
        }
    }
}
