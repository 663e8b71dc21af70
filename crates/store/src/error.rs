//! What the storage layer can fail with. Messages are for the server log
//! and the operator; the wire layer never shows them to a client.

use std::fmt;
use std::sync::Arc;

use crate::Refusal;

/// Errors from the storage layer. Messages are for the server log; the wire
/// layer never shows them to a client.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[source] DatabaseError),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("invalid input: {0}")]
    Invalid(String),
    /// `--org` named another account's personal org (SPEC §4: a personal
    /// org belongs to its account alone). The text is the operator's message.
    #[error(
        "the org {org:?} is the personal org of the account {org}, and a personal org \
         belongs to its account alone: name a shared org (without '@') or use that \
         account's own token"
    )]
    ForeignPersonalOrg { org: String },
    /// The store failed a start check; the text is the operator's message.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// More writes are queued than the writer takes (SPEC §12): the caller
    /// answers 503 with `Retry-After` rather than queue without bound.
    #[error("the store is busy: too many writes are queued")]
    Busy,
    /// A write as the holder of a session or a paused execution carried an
    /// epoch that is no longer its own: another node claimed it since (SPEC
    /// §10). The caller stops acting as the holder.
    #[error("{id} moved to another node")]
    Fenced { id: String },
    /// The disk under the store is full (SQLite's `SQLITE_FULL`,
    /// Postgres's `disk_full`): nothing of the write was kept, what was
    /// written before stays, and writes succeed again once space returns.
    /// Callers answer with this cause rather than an internal error.
    #[error("the store's disk is full")]
    Full,
}

impl StoreError {
    /// A database failure of the store's own making (a stopped writer, a
    /// row that should be there), with no driver error behind it.
    pub fn database(message: impl Into<String>) -> Self {
        StoreError::Database(DatabaseError {
            message: message.into(),
            source: None,
        })
    }

    /// A database failure described by `message`, caused by `source`.
    pub fn database_caused(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Database(DatabaseError::caused(message, source))
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) {
            return StoreError::Full;
        }
        StoreError::database_caused(e.to_string(), e)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A failure of the database or of the store's machinery around it: the
/// text the log shows, and the driver's error (or other cause) kept as its
/// source, so a caller can still inspect it. Cloneable, because one failed
/// group commit answers every caller in the group.
#[derive(Debug, Clone)]
pub struct DatabaseError {
    /// The whole story for the log: the driver's message, and for Postgres
    /// the server's message and SQLSTATE (its own `Display` says only "db
    /// error").
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl DatabaseError {
    /// A failure described by `message`, caused by `source`.
    pub(crate) fn caused(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        DatabaseError {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The log's text, without the "database error:" prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
