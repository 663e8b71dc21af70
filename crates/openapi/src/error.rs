//! Why a document could not be imported at all. Problems with single
//! operations are warnings, not errors.

/// An import that produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("invalid namespace {0:?}: use a letter followed by letters, digits or _ (at most 64)")]
    InvalidNamespace(String),
    #[error("the document is {size} bytes; the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("the document is neither JSON nor YAML: {0}")]
    Parse(String),
    #[error("not an OpenAPI document: {0}")]
    NotOpenApi(String),
    #[error("unsupported OpenAPI version {0:?} (2.0, 3.0 and 3.1 are supported)")]
    UnsupportedVersion(String),
}
