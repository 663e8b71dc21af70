//! The operations layer (SPEC §13): every change and read an operator
//! makes, typed — input, output, [`OpError`] — and shared by every
//! surface: the CLI parses flags and prints what an operation returns, the
//! HTTP API decodes JSON and renders it, the console calls the API. One
//! code path per operation, so a change through any surface is the same
//! change, visible to the others at once (it is in the store when the
//! operation returns).
//!
//! An operation acts for an [`Actor`] (a principal: an account in an org)
//! and touches that org's rows only; another org's ids are "not found".
//! What a surface may do beyond that (read a server file, start a command,
//! reach the local network) is its [`Surface`].

mod approvals;
mod connection_test;
mod connections;
mod error;
mod executions;
mod identity;
mod integrations;
mod logins;
mod oauth;
mod paging;
mod policies;
mod sessions;
mod tokens;
mod tool_calls;
mod tools;

use std::sync::Arc;

use executor_catalog::CatalogSource;
use executor_engine::Engine;
use executor_integrations::{Credentials, Kinds};
use executor_outbound::HttpConfig;
use executor_store::Store;
use executor_store::secrets::SecretKey;

pub use approvals::PendingApproval;
pub use connection_test::ConnectionTest;
pub use connections::{ConnectionStatus, CredentialInput, MIN_SECRET_CHARS, SetConnection};
pub use error::{ErrorKind, OpError, OpResult};
pub use executions::{CallResult, ExecutionDetail, ExecutionSummary, ListExecutions};
/// Whether a tool call that needs approval waits for a human.
pub use executor_call::ApprovalMode;
/// How an MCP server over HTTP is spoken to (an input of [`McpEndpoint`]).
pub use executor_upstream::HttpTransport;
pub use identity::{ActorChoice, LOCAL_OPERATOR, OrgInfo};
pub use integrations::{
    AddIntegration, DocumentSource, GraphqlSchemaSource, IntegrationAdded, IntegrationState,
    IntegrationSummary, MAX_SPEC_BYTES, McpEndpoint, Progress, UpdateIntegration, document_source,
};
pub use logins::{
    CallbackParams, LoginCallback, LoginFinished, LoginFlow, LoginStarted, LoginState, StartLogin,
};
pub use oauth::{ClientAdded, ClientInfo, GrantInfo};
pub use paging::{Listed, MAX_PAGE, PageAsk};
pub use policies::{MAX_PREVIEWED_TOOLS, NewPolicy, PatternPreview, Policy, PolicyEvaluation};
pub use sessions::{SessionControl, SessionFuture, SessionInfo};
pub use tokens::{MintedToken, NewToken, TokenInfo, TokenRevoked};
pub use tool_calls::{ToolCall, ToolCallQuery};
pub use tools::{ToolDescription, ToolHit};

/// Who an operation acts for: an account, in an org.
pub type Actor = executor_store::Principal;

/// What a surface may make the gateway do besides the org's own rows.
#[derive(Debug, Clone, Copy)]
pub struct Surface {
    /// Fetch documents from (and let an import reach) loopback and private
    /// addresses. The CLI: its `--local-network` flag; the API: the
    /// server's `--allow-local-network`.
    pub allow_local_network: bool,
    /// Read an API description or schema from a file path. The CLI only: a
    /// path over HTTP would read the server's files.
    pub may_read_files: bool,
    /// Add an MCP server started as a command. The CLI always; the API
    /// only on a server that runs stdio integrations at all.
    pub may_start_commands: bool,
}

/// What the operations work with. Built once per process by the binary.
pub struct Parts {
    pub store: Arc<dyn Store>,
    /// The kinds that import and index integrations (and say whether a
    /// stored one can be served).
    pub kinds: Kinds,
    /// The org's connections; with the key when this process may open them.
    pub credentials: Arc<Credentials>,
    /// The key connection secrets are sealed with, when loaded.
    pub key: Option<Arc<SecretKey>>,
    /// The org catalogs the engine calls (search and describe read them).
    pub catalogs: Arc<dyn CatalogSource>,
    /// Runs code; absent for a command that never does.
    pub engine: Option<Arc<Engine>>,
    /// Ends sessions in a server's memory; absent in a process that serves
    /// none, which ends them in the store alone (see `sessions.rs`).
    pub sessions: Option<Arc<dyn SessionControl>>,
    /// The outbound HTTP defaults of this process.
    pub http: HttpConfig,
    pub surface: Surface,
    /// Where OAuth logins started here come back: a server's own
    /// `/oauth/callback`; None where a caller must name one.
    pub login_callback: Option<LoginCallback>,
}

/// Every operation, as methods; cheap to share behind an `Arc`.
pub struct Operations {
    parts: Parts,
}

impl Operations {
    pub fn new(parts: Parts) -> Self {
        Operations { parts }
    }

    pub fn store(&self) -> &dyn Store {
        self.parts.store.as_ref()
    }

    pub fn surface(&self) -> Surface {
        self.parts.surface
    }

    fn engine(&self) -> OpResult<&Arc<Engine>> {
        self.parts
            .engine
            .as_ref()
            .ok_or_else(|| OpError::unavailable("this surface does not run code"))
    }

    fn key(&self) -> OpResult<&SecretKey> {
        self.parts.key.as_deref().ok_or_else(|| {
            OpError::unavailable(
                "connection secrets cannot be sealed here: the secret key is not loaded",
            )
        })
    }

    /// The HTTP client settings of one operation that fetches something.
    fn http_config(&self, allow_local_network: bool) -> HttpConfig {
        HttpConfig {
            allow_local_network,
            ..self.parts.http.clone()
        }
    }
}
