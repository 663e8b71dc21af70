//! Durable state behind one trait per role (`roles.rs`): accounts and
//! tokens, policies, sessions and their SSE event log, nodes and leases,
//! executions and their tool calls (the audit trail), the catalog,
//! connections, the built-in authorization server's clients and grants,
//! browser sign-in. [`Store`] is all of them; a crate asks for the role it
//! uses. Two backends implement every role:
//! [`SqliteStore`], the embedded default (`sqlite/`), and [`PgStore`], a
//! store several nodes share (`postgres/`), each role in a file of its
//! own. What does not depend on the SQL dialect lives once, above them:
//! the org rule of `ensure_account` (`orgs.rs`), the column lists
//! (`columns.rs`), lease refusals (`leases.rs`), the node lease (`node.rs`),
//! the OAuth lapse rules (`oauth.rs`).
//! Nothing above this crate writes SQL or knows which database it talks to.
//! Read `roles.rs` first.

mod checkpointer;
mod columns;
mod error;
mod kinds;
mod leases;
mod listing;
mod node;
mod oauth;
mod orgs;
mod packed;
mod paging;
mod postgres;
mod preflight;
mod records;
mod revision_cache;
mod roles;
pub mod secrets;
mod shares;
mod sqlite;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod tokens;
mod wal_probe;
mod writer;

pub use error::{DatabaseError, StoreError, StoreResult};
pub use kinds::{
    ApprovalChannel, ApprovalDecision, CredentialKind, ElicitationMode, ExecutionStatus,
    IntegrationKind, PolicyAction, ToolCallOutcome, UnknownValue,
};
pub use node::{NODE_LEASE, NodeLease, Renewal};
pub use paging::{BadCursor, MAX_PAGE_LIMIT, PageKey, PageRequest};
pub use postgres::{ImportReport, PgOptions, PgStore, redact as redact_database_url};
pub use preflight::Refusal;
pub use records::*;
pub use revision_cache::RevisionCache;
pub use roles::{
    AccountStore, CatalogStore, ConnectionStore, ExecutionStore, MAX_OAUTH_LISTED,
    MAX_PAUSED_LISTED, MAX_TERMINATED_LISTED, NodeStore, Notice, OAuthStore,
    PUBLIC_URL_ANNOUNCEMENT, PolicyStore, SessionStore, SignInStore, Store, ToolCallStore,
    next_notice, now_ms,
};
pub use shares::{SHARE_LINGER, Share, Shares};
pub use sqlite::{SqliteStore, StoreOptions};
pub use writer::MAX_QUEUED_WRITES;
