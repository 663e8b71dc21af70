//! Plain records that cross the storage seam.

use serde::{Deserialize, Serialize};

use crate::kinds::{
    ApprovalChannel, ApprovalDecision, CredentialKind, ElicitationMode, ExecutionStatus,
    IntegrationKind, PolicyAction, ToolCallOutcome, UnknownValue,
};

/// Who a request acts for: an account inside an org.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Principal {
    pub account_id: String,
    pub org_id: String,
}

#[derive(Debug, Clone)]
pub struct TokenRecord {
    pub id: String,
    /// SHA-256 of the token's secret part; the secret itself is never stored.
    pub secret_hash: Vec<u8>,
    pub principal: Principal,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    /// Set on an OAuth access token: the grant it was issued under
    /// ([`OAuthGrantRecord`]). Such a token is valid at `/mcp` only, and
    /// revoking the grant revokes it. None on an API token.
    pub grant_id: Option<String>,
}

impl TokenRecord {
    /// Whether this is an OAuth access token rather than an API token.
    pub fn is_oauth(&self) -> bool {
        self.grant_id.is_some()
    }
}

/// The durable part of an MCP session (SPEC §3).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub id: String,
    pub owner: Principal,
    pub protocol_version: String,
    /// `clientInfo` from initialize, as JSON.
    pub client_info: serde_json::Value,
    /// `capabilities` from initialize, as JSON.
    pub client_capabilities: serde_json::Value,
    pub elicitation_mode: ElicitationMode,
    pub created_at_ms: i64,
    pub last_activity_at_ms: i64,
    pub terminated_at_ms: Option<i64>,
}

/// A node's proof that it holds a session's lease (SPEC §10): the node and
/// the epoch its claim gave the session. Every write a node makes as the
/// session's holder carries it, and the store refuses one whose epoch is no
/// longer the session's ([`crate::StoreError::Fenced`]): a node that lost
/// the lease cannot write as the holder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    pub node: String,
    pub epoch: i64,
}

/// A session's last activity, written by the node that held it at `epoch`
/// ([`crate::SessionStore::touch_sessions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTouch {
    pub id: String,
    pub epoch: i64,
    pub at_ms: i64,
}

/// The epoch of a session's lease when the node that created it holds it.
pub const FIRST_EPOCH: i64 = 1;

/// A node serving sessions on a shared store, as another node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub id: String,
    /// Where other nodes reach it (`--node-url`); None for a process that
    /// serves no HTTP (a CLI command).
    pub url: Option<String>,
}

/// What [`crate::Store::claim_session`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionClaim {
    /// The caller holds the session now, with this fence.
    Claimed {
        record: SessionRecord,
        fence: Fence,
    },
    /// Another node holds the session and is alive.
    Held {
        record: SessionRecord,
        holder: NodeRecord,
    },
    NotFound,
    Terminated,
    /// The caller's own node is not alive on the store (never registered,
    /// or its lease lapsed): it must register again before it claims.
    Lapsed,
}

/// What [`crate::Store::claim_execution`] found for a paused execution.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecutionClaim {
    /// The caller holds the run now. `calling` is the highest call index a
    /// holder started after a resume (-1: none): a replay answers calls up
    /// to it that have no journaled answer as in doubt.
    Claimed {
        fence: Fence,
        calling: i64,
    },
    /// Another live node holds the run (it is in that node's memory).
    Held {
        holder: NodeRecord,
    },
    NotFound,
    /// The caller's own node is not alive on the store.
    Lapsed,
}

/// One SSE event of a session's stream, in the durable log.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub session_id: String,
    pub stream_id: String,
    pub seq: i64,
    /// The JSON-RPC message as sent.
    pub data: String,
    /// True until the event is known to have been handed to a socket.
    pub undelivered: bool,
    pub created_at_ms: i64,
}

/// The SSE log one session holds, for the per-session and per-org bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEventBytes {
    pub session_id: String,
    pub org_id: String,
    pub bytes: u64,
}

/// Whose events a trim of the SSE log is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventScope<'a> {
    Session(&'a str),
    Org(&'a str),
}

/// What a trim of one session's or org's log did: delivered events
/// deleted (`deleted`), and undelivered ones given up — an answer replaced
/// by an error answer to its request, anything else deleted (`dropped`,
/// of which `answers` were answers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrimmedEvents {
    pub deleted: Trimmed,
    pub dropped: Trimmed,
    pub answers: u64,
}

/// What an undelivered event is replaced by when its session's or org's
/// log is over its bound: an error answer to the same request, for an
/// answer (so the client waiting for it is told); None for anything else,
/// which is deleted. Made above the store (`executor_mcp::dropped_answer`):
/// JSON-RPC shapes live with the protocol.
pub type DroppedAnswer = std::sync::Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What a trim deleted: rows, and the bytes they held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trimmed {
    pub rows: u64,
    pub bytes: u64,
}

/// How much of a stream the event log keeps.
#[derive(Debug, Clone, Copy)]
pub struct LogBounds {
    pub max_events: u32,
    pub max_bytes: u64,
}

impl LogBounds {
    /// SPEC §12's replay per stream: enough for a request's elicitations
    /// and its answer, and a stream that lost its reader holds no more.
    pub const DEFAULT: LogBounds = LogBounds {
        max_events: 64,
        max_bytes: 2 * 1024 * 1024,
    };
}

impl Default for LogBounds {
    fn default() -> Self {
        LogBounds::DEFAULT
    }
}

/// One run of the `execute` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionRecord {
    pub id: String,
    pub session_id: Option<String>,
    pub account_id: String,
    pub org_id: String,
    pub code: String,
    pub status: ExecutionStatus,
    /// The returned value, as JSON.
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    pub logs: Vec<String>,
    /// The run's tool calls, in the order it made them. Also rows of their
    /// own (`tool_calls`, written in the record's transaction), which the
    /// audit trail lists. A record written by an earlier release kept
    /// another shape here: it reads as an empty list.
    #[serde(default, deserialize_with = "lenient_tool_calls")]
    pub tool_calls: Vec<ToolCallRecord>,
    pub started_at_ms: i64,
    pub duration_ms: i64,
}

/// One tool call of an execution, as the audit trail keeps it (SPEC §13):
/// who made it, what decided it, how it ended. Never an argument's value:
/// only the names of the top-level arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// `<execution id>.<call index>`.
    pub id: String,
    pub org_id: String,
    pub execution_id: String,
    pub session_id: Option<String>,
    pub account_id: String,
    pub tool_path: String,
    pub outcome: ToolCallOutcome,
    /// Why it was not ok: a SPEC §7 code, or for a call that threw, the
    /// decline's reason (`declined`, `cancelled`, `approval_timeout`).
    pub error_code: Option<String>,
    /// The policy action that applied (a rule's, or the tool's default);
    /// None when no policy was consulted (a helper, a tool not found, an
    /// answer replayed from the journal).
    pub policy_action: Option<PolicyAction>,
    /// The id of the rule that decided it; None for the tool's default.
    pub policy_rule: Option<String>,
    /// None when no approval was asked.
    pub approval: Option<ApprovalDecision>,
    /// The account that decided, when known.
    pub decided_by: Option<String>,
    /// How it was decided; None when no approval was asked, or in a record
    /// written before this was kept.
    #[serde(default)]
    pub decided_via: Option<ApprovalChannel>,
    /// How long the call waited for a human (0 when it did not).
    pub approval_wait_ms: i64,
    /// The top-level argument names, sorted and bounded; never values.
    pub arg_names: Vec<String>,
    pub started_at_ms: i64,
    /// The call's own time, the approval wait excluded.
    pub duration_ms: i64,
}

/// Which tool calls [`crate::ToolCallStore::list_tool_calls`] lists; every
/// field set narrows the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCallFilter {
    /// An exact tool path, or a prefix ending in `.` (`github.`: every
    /// tool under it).
    pub tool: Option<String>,
    pub outcome: Option<ToolCallOutcome>,
    pub session_id: Option<String>,
    pub execution_id: Option<String>,
    /// Calls started at or after this time.
    pub since_ms: Option<i64>,
    /// Calls started before this time.
    pub until_ms: Option<i64>,
}

impl ToolCallFilter {
    /// The tool filter as SQL reads it: (exact path, prefix).
    pub(crate) fn tool_match(&self) -> (Option<&str>, Option<&str>) {
        match self.tool.as_deref() {
            Some(prefix) if prefix.ends_with('.') => (None, Some(prefix)),
            exact => (exact, None),
        }
    }
}

/// Where a started login stands ([`crate::ConnectionStore::pending_login_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLoginState {
    pub expires_at_ms: i64,
    /// Its callback has come (the code is being or was exchanged).
    pub taken: bool,
    /// How it ended (JSON), once settled.
    pub outcome: Option<String>,
}

/// Which executions [`crate::ExecutionStore::list_executions`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionFilter {
    pub status: Option<ExecutionStatus>,
    pub session_id: Option<String>,
    /// Executions started at or after this time.
    pub since_ms: Option<i64>,
    /// Executions started before this time.
    pub until_ms: Option<i64>,
}

/// The saved state of a paused execution, as
/// [`crate::ExecutionStore::list_paused_executions`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PausedExecutionRow {
    pub id: String,
    pub org_id: String,
    /// Opaque JSON the engine wrote and parses.
    pub state: String,
    pub updated_at_ms: i64,
}

/// Reads a stored list of tool calls; another shape (an earlier
/// release's) is an empty list, not a failed read.
pub(crate) fn tool_calls_from_json(text: &str) -> Vec<ToolCallRecord> {
    serde_json::from_str(text).unwrap_or_default()
}

fn lenient_tool_calls<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ToolCallRecord>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

/// A policy rule as stored; the engine validates `pattern`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRecord {
    pub id: String,
    pub org_id: String,
    pub pattern: String,
    pub action: PolicyAction,
    /// 0-based; the first matching rule by position wins.
    pub position: i64,
    #[serde(rename = "createdAtMs")]
    pub created_at_ms: i64,
}

/// An integration as stored: where it came from and what it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntegrationRecord {
    pub org_id: String,
    pub namespace: String,
    /// An [`IntegrationKind`]'s word, kept as text: see
    /// [`IntegrationRecord::integration_kind`].
    pub kind: String,
    /// The spec's path or URL, for `integrations refresh`.
    pub source: String,
    pub base_url: Option<String>,
    pub tool_count: i64,
    /// The imported integration, as JSON (its kind's own format).
    pub document: String,
    pub updated_at_ms: i64,
    /// Set by the store on every write of the record (the org's catalog
    /// version after it); ignored on upsert.
    pub revision: i64,
    /// The search index of the record's tools, in the catalog's own bytes,
    /// stored beside it on upsert so that the server need not build it
    /// (None: it builds it). Read by [`crate::Store::integration_document`]
    /// only.
    #[serde(skip)]
    pub search_index: Option<Vec<u8>>,
}

/// One integration's stored document and the search index stored beside
/// it (see [`IntegrationRecord::search_index`]).
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrationDocument {
    pub document: String,
    pub search_index: Option<Vec<u8>>,
}

/// The credential of one integration. `secret` is never plaintext: it is
/// sealed with the data dir's key (`v1:…`) or a reference (`env://NAME`).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionRecord {
    pub org_id: String,
    pub namespace: String,
    pub kind: CredentialKind,
    /// The user name of a `basic` credential.
    pub username: Option<String>,
    pub secret: String,
    pub updated_at_ms: i64,
    /// The non-secret part of an `oauth` connection (its endpoints, client,
    /// scopes, expiry and state: JSON that executor-oauth owns); None for
    /// the other kinds.
    pub oauth: Option<String>,
    /// Grows with every write of the connection. A token refresh saves its
    /// tokens only where the generation is still the one it read, so two
    /// refreshers (two processes on one data dir) never overwrite each
    /// other's grant. Ignored by `set_connection`, which moves it.
    pub generation: i64,
}

/// An OAuth login between its authorization URL and its callback. `state`
/// itself is never stored: the row is found by its SHA-256 (hex).
#[derive(Clone, PartialEq)]
pub struct PendingLoginRecord {
    pub state_hash: String,
    pub org_id: String,
    pub namespace: String,
    /// Sealed: the PKCE verifier and the client secret, if any.
    pub sealed: String,
    /// Non-secret JSON: redirect URI, endpoints, client, scopes, resource.
    pub request: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

impl std::fmt::Debug for PendingLoginRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLoginRecord")
            .field("org_id", &self.org_id)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl IntegrationRecord {
    /// The record's kind; an error for a kind this release does not know
    /// (written by a newer one), which the caller reports.
    pub fn integration_kind(&self) -> Result<IntegrationKind, UnknownValue> {
        self.kind.parse()
    }
}

impl std::fmt::Debug for ConnectionRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionRecord")
            .field("org_id", &self.org_id)
            .field("namespace", &self.namespace)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// How an OAuth client came to be known (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthClientOrigin {
    /// Dynamic registration (RFC 7591): anyone may make one; deleted when
    /// unused (7 days after registration, 90 days after its last use).
    Registered,
    /// `executor oauth clients add`: kept until deleted.
    Preregistered,
    /// A client ID metadata document: the id is the document's https URL,
    /// and the record is the last good copy of what it said; deleted when
    /// unused, like a registered client.
    MetadataDocument,
}

impl OAuthClientOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthClientOrigin::Registered => "registered",
            OAuthClientOrigin::Preregistered => "preregistered",
            OAuthClientOrigin::MetadataDocument => "metadata_document",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "registered" => Some(OAuthClientOrigin::Registered),
            "preregistered" => Some(OAuthClientOrigin::Preregistered),
            "metadata_document" => Some(OAuthClientOrigin::MetadataDocument),
            _ => None,
        }
    }
}

/// A client of the built-in authorization server. Clients are the
/// server's, not an org's: a grant ties one to an org.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClientRecord {
    pub id: String,
    /// SHA-256 of the client secret, for a confidential client.
    pub secret_hash: Option<Vec<u8>>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub redirect_uris: Vec<String>,
    /// As the client gave it: unverified.
    pub client_name: Option<String>,
    pub origin: OAuthClientOrigin,
    pub created_at_ms: i64,
    /// When a token was last issued to it.
    pub last_used_at_ms: Option<i64>,
}

/// An authorization code, kept hashed until it is exchanged (single use,
/// SPEC §4): everything the exchange must match is bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthCodeRecord {
    /// SHA-256 of the code.
    pub code_hash: Vec<u8>,
    pub client_id: String,
    pub redirect_uri: String,
    /// The PKCE S256 challenge.
    pub code_challenge: String,
    pub resource: String,
    /// Space-separated scopes granted.
    pub scope: String,
    pub principal: Principal,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

/// What presenting a code found. A code is marked used by the first
/// presentation, whatever follows.
// Taken once per code exchange and matched at once: the size of the
// fresh variant costs nothing worth a box in every caller's pattern.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum CodeTake {
    /// First use, in time: the code's bindings, for the caller to check.
    Fresh(OAuthCodeRecord),
    /// Used before: the grant issued from it (if any) is now revoked, and
    /// one not yet issued will not be ([`OAuthStore::create_oauth_grant`]).
    Replayed,
    /// No such code, or past its deadline.
    Unknown,
}

/// Consent given to a client, for one (account, org): its tokens act as
/// that principal at `/mcp` (SPEC §4).
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthGrantRecord {
    pub id: String,
    pub client_id: String,
    pub principal: Principal,
    /// Space-separated scopes.
    pub scope: String,
    pub resource: String,
    /// The redirect URI the consent was given for (its host is shown).
    pub redirect_uri: String,
    pub created_at_ms: i64,
    pub last_used_at_ms: i64,
    /// The grant lapses then, whatever its refresh tokens say.
    pub expires_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

impl OAuthGrantRecord {
    pub fn is_current(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms > now_ms
    }
}

/// The tokens one exchange or refresh issues, hashed. The access token is
/// written as a [`TokenRecord`] of the grant's principal, with its
/// `grant_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedTokens {
    pub access_id: String,
    pub access_hash: Vec<u8>,
    pub access_expires_at_ms: i64,
    pub refresh_hash: Vec<u8>,
    pub refresh_expires_at_ms: i64,
    pub issued_at_ms: i64,
}

/// A refresh token presented at `/token`.
#[derive(Debug, Clone, PartialEq)]
pub struct RefreshUse {
    pub token_hash: Vec<u8>,
    /// The client presenting it: a token of another client's grant is
    /// refused.
    pub client_id: String,
    pub at_ms: i64,
    /// How long a rotated refresh token is still accepted (concurrent
    /// refreshes from one client, SPEC §4: 60 s).
    pub grace_ms: i64,
}

/// Why a refresh token issued nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshRefusal {
    /// Unknown, lapsed, another client's, or its grant is revoked or lapsed.
    Invalid,
    /// Rotated longer ago than the grace: its grant is now revoked.
    Reused,
}

/// A one-time sign-in link (`executor console login-link`, SPEC §14).
#[derive(Debug, Clone, PartialEq)]
pub struct LoginLinkRecord {
    /// SHA-256 of the link's secret.
    pub link_hash: Vec<u8>,
    pub principal: Principal,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
}

/// A signed-in browser (SPEC §14), found by the hash of its cookie.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsoleSessionRecord {
    /// SHA-256 of the cookie's secret.
    pub session_hash: Vec<u8>,
    pub principal: Principal,
    pub created_at_ms: i64,
    pub last_seen_at_ms: i64,
    /// The API token pasted to sign in, if one was: the session lasts only
    /// while that token is current (a revoked token signs its browsers
    /// out). None for a login link's session.
    pub token_id: Option<String>,
}
