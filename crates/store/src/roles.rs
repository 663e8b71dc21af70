//! The storage seam: one trait per role, implemented by both backends.
//!
//! A crate asks for the role it uses ([`SessionStore`] for the session
//! lifecycle, [`ConnectionStore`] for credentials, …); [`Store`] is all of
//! them, for the wiring that hands one store to everything. Every method is
//! a single logical operation that is atomic on its own; callers never hold
//! a transaction open across awaits.

use async_trait::async_trait;

use crate::paging::PageRequest;
use crate::records::*;
use crate::{PolicyAction, StoreResult};

/// A change another process committed, pushed by stores that can
/// ([`NodeStore::subscribe`]). A notice may be lost; [`Notice::Lagged`] says so,
/// and a reader then re-checks what it watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The org's integrations changed: its catalog version moved.
    Catalog { org_id: String },
    /// A decision was posted for this paused execution.
    Decision { execution_id: String },
    /// The session's holder logged events that found no stream on its own
    /// node: a GET stream elsewhere may take them.
    Events { session_id: String },
    /// The session's tool list changed: its GET streams elsewhere send
    /// `notifications/tools/list_changed`.
    ListChanged { session_id: String },
    /// The session was terminated: its GET streams end everywhere.
    SessionGone { session_id: String },
    /// Notices may have been missed (a reconnect, a reader behind).
    Lagged,
}

/// Accounts, their orgs (a personal org belongs to its account alone, SPEC §4)
/// and the API tokens that act for them.
#[async_trait]
pub trait AccountStore: Send + Sync + 'static {
    /// Finds or creates the account for `email` and its org, and makes the
    /// account a member. Without `org` (or with the account's own email) it
    /// is the account's personal org, which it owns alone; any other name
    /// is a shared org. A name with an `@` is some account's personal org,
    /// so naming another account's is [`StoreError::ForeignPersonalOrg`],
    /// whether that account exists yet or not.
    async fn ensure_account(&self, email: &str, org: Option<&str>) -> StoreResult<Principal>;

    async fn insert_token(&self, token: TokenRecord) -> StoreResult<()>;

    async fn find_token(&self, id: &str) -> StoreResult<Option<TokenRecord>>;

    /// A number that moves whenever a token is revoked, changed or deleted
    /// or a policy changes (a new token needs no move: nothing cached
    /// names it), in any
    /// process on this store, by the time the change is visible to reads
    /// (SQLite: the same transaction; Postgres: its notification, sent at
    /// commit). A token or policy read after the revision was `r` may be
    /// reused while the revision is still `r`. None when the store cannot
    /// tell at the moment (Postgres while its notice connection is down):
    /// callers then read through. Cheap: no round trip.
    fn access_revision(&self) -> Option<u64> {
        None
    }

    /// The org's API tokens, newest first, revoked and expired ones
    /// included (a caller shows their state); OAuth access tokens are not
    /// listed (their grants are). A record holds the secret's hash only.
    async fn list_tokens(&self, org_id: &str) -> StoreResult<Vec<TokenRecord>>;

    /// Marks the token revoked; returns false when no such token exists.
    async fn revoke_token(&self, id: &str, at_ms: i64) -> StoreResult<bool>;

    /// The id of the org with this name (or id).
    async fn find_org(&self, name: &str) -> StoreResult<Option<String>>;

    /// Every org as (id, name).
    async fn list_orgs(&self) -> StoreResult<Vec<(String, String)>>;

    /// The orgs `account_id` belongs to, as (id, name), by name.
    async fn account_orgs(&self, account_id: &str) -> StoreResult<Vec<(String, String)>>;

    /// Who acts in the org when nobody is named: its owner (a personal
    /// org), else its earliest member (accounts made within one ms are
    /// ordered by id). None for an org without members.
    async fn org_account(&self, org_id: &str) -> StoreResult<Option<Principal>>;
}

/// An org's policy rules, in the order they are matched (SPEC §9).
#[async_trait]
pub trait PolicyStore: Send + Sync + 'static {
    /// Inserts a rule at `position` (clamped to the end), shifting later ones.
    async fn add_policy(&self, policy: PolicyRecord) -> StoreResult<PolicyRecord>;

    /// The org's rules in position order.
    async fn list_policies(&self, org_id: &str) -> StoreResult<Vec<PolicyRecord>>;

    async fn remove_policy(&self, org_id: &str, id: &str) -> StoreResult<bool>;

    /// Moves a rule to `position` (clamped to the org's rules), shifting
    /// those between; positions stay dense. False when no such rule.
    async fn move_policy(&self, org_id: &str, id: &str, position: i64) -> StoreResult<bool>;

    /// Changes a rule's pattern and action in place (its position stays);
    /// None when no such rule.
    async fn update_policy(
        &self,
        org_id: &str,
        id: &str,
        pattern: String,
        action: PolicyAction,
    ) -> StoreResult<Option<PolicyRecord>>;
}

/// MCP session records and the per-stream SSE event log (SPEC §3).
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Inserts a new session held by `holder` at [`FIRST_EPOCH`].
    async fn insert_session(&self, session: SessionRecord, holder: &str) -> StoreResult<()>;

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>>;

    /// The org's sessions, terminated ones included, by last activity,
    /// newest first; the page key is (`last_activity_at_ms`, id). A
    /// session's activity moves, so a session active between two pages may
    /// be listed twice or not at all: the order is by a moving time.
    async fn list_sessions(
        &self,
        org_id: &str,
        page: &PageRequest,
    ) -> StoreResult<Vec<SessionRecord>>;

    /// Records activity for sessions (batched by the caller), each only
    /// while its epoch is the one given: no claim since, so a holder that
    /// lost a session touches nothing.
    async fn touch_sessions(&self, touches: Vec<SessionTouch>) -> StoreResult<()>;

    /// Marks the session terminated and drops its event log.
    async fn terminate_session(&self, id: &str, at_ms: i64) -> StoreResult<()>;

    /// The sessions terminated at or after `since_ms` (at most
    /// [`MAX_TERMINATED_LISTED`]): how a server learns of terminations by
    /// a process that cannot notify it (the CLI on SQLite), or whose
    /// notice was lost.
    async fn sessions_terminated_since(&self, since_ms: i64) -> StoreResult<Vec<String>>;

    /// Deletes session records (and their events) untouched since `before_ms`.
    async fn gc_sessions(&self, before_ms: i64) -> StoreResult<u64>;

    /// Appends one event; prunes the stream to the newest `keep_events`
    /// events and `keep_bytes` bytes (never evicting the newest). With a
    /// fence, only while it still holds the session
    /// ([`StoreError::Fenced`] otherwise).
    async fn append_event(
        &self,
        event: EventRecord,
        bounds: LogBounds,
        fence: Option<&Fence>,
    ) -> StoreResult<()>;

    async fn mark_delivered(&self, session_id: &str, stream_id: &str, seq: i64) -> StoreResult<()>;

    /// Events of one stream after `after_seq`, oldest first.
    async fn events_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: i64,
    ) -> StoreResult<Vec<EventRecord>>;

    /// Undelivered events of the session, oldest first, marked delivered;
    /// events of the streams in `except` (on their way to their own
    /// connection) are left undelivered.
    async fn take_undelivered(
        &self,
        session_id: &str,
        except: &[String],
    ) -> StoreResult<Vec<EventRecord>>;

    /// Deletes the delivered events of every stream whose newest event was
    /// created before `before_ms` (its replay window has lapsed); undelivered
    /// events stay. Returns how many were deleted.
    async fn delete_replayed_events(&self, before_ms: i64) -> StoreResult<u64>;

    /// Bytes the delivered events hold, in all (undelivered ones are not
    /// counted: they are never dropped to make room).
    async fn delivered_event_bytes(&self) -> StoreResult<u64>;

    /// Deletes the oldest delivered events until at least `bytes` are
    /// freed (or none is left); undelivered events stay.
    async fn trim_delivered_events(&self, bytes: u64) -> StoreResult<Trimmed>;

    /// Bytes of the SSE log (delivered and undelivered) per session that
    /// has any, with its org.
    async fn event_bytes_by_session(&self) -> StoreResult<Vec<SessionEventBytes>>;

    /// Frees at least `bytes` of the log of `scope`'s sessions (or all it
    /// holds): the oldest delivered events first; then, oldest first, the
    /// undelivered ones — each replaced by what `dropped` makes of it (an
    /// answer: an error answer to its request), or deleted when it makes
    /// nothing. An answer is never dropped without its client being told.
    async fn trim_events(
        &self,
        scope: EventScope<'_>,
        bytes: u64,
        dropped: DroppedAnswer,
    ) -> StoreResult<TrimmedEvents>;
}

/// Most sessions [`SessionStore::sessions_terminated_since`] returns.
pub const MAX_TERMINATED_LISTED: u32 = 1000;

/// The announcement of the public URL the last server started on the
/// store completes OAuth logins at (`<url>/oauth/callback`).
pub const PUBLIC_URL_ANNOUNCEMENT: &str = "public_url";

/// This process among the others on the store (SPEC §10): node leases,
/// session leases, periodic jobs that run once across nodes, and notices.
/// Lease times are the store's clock (Postgres: the database's), so nodes
/// whose clocks differ agree on who is alive.
#[async_trait]
pub trait NodeStore: Send + Sync + 'static {
    // Lease times are the store's clock (Postgres: the database's), so nodes
    // whose clocks differ agree on who is alive.
    /// Registers `id` (again) as alive for `ttl_ms`, reachable at `url`.
    async fn register_node(&self, id: &str, url: Option<&str>, ttl_ms: i64) -> StoreResult<()>;

    /// Extends a live node's lease by `ttl_ms`; false when it had lapsed
    /// (or was evicted): the node then stops acting as any session's holder.
    async fn heartbeat_node(&self, id: &str, ttl_ms: i64) -> StoreResult<bool>;

    /// Ends another node's lease at once (it refused a connection), so its
    /// sessions can be claimed without waiting for its lease to run out.
    async fn evict_node(&self, id: &str) -> StoreResult<()>;

    /// Whether the node's lease runs now.
    async fn node_alive(&self, id: &str) -> StoreResult<bool>;

    /// A node leaving on purpose: its sessions are released and its row is
    /// gone, so peers claim them at once.
    async fn retire_node(&self, id: &str) -> StoreResult<()>;

    /// Makes `node` the session's holder, with a new epoch, unless a live
    /// node other than `node` holds it. One conditional write: of racing
    /// claimers one wins.
    async fn claim_session(&self, id: &str, node: &str) -> StoreResult<SessionClaim>;

    /// Whether `fence` still holds the session: the row names its node at
    /// its epoch and that node is alive by the store's clock. What a
    /// holder asks before it acts for a session (an upstream call): a node
    /// stopped past its lease, or evicted, learns it here (SPEC §10).
    async fn holds_session(&self, id: &str, fence: &Fence) -> StoreResult<bool>;

    /// The same for a paused run's lease (`execution_states`).
    async fn holds_execution(&self, id: &str, fence: &Fence) -> StoreResult<bool>;

    /// Gives up the leases of sessions whose runtimes `node` disposed; a
    /// session claimed by another node since is left alone.
    async fn release_sessions(&self, node: &str, sessions: Vec<(String, i64)>) -> StoreResult<()>;

    /// Grants `node` up to `want` units of the bound `key` of `share`, as
    /// many as `limit` leaves beside what other live nodes hold of it (a
    /// node whose lease lapsed holds nothing); returns the grant `node`
    /// holds now, which replaces its earlier one. One write, serialised
    /// per bound: of two nodes asking for the last unit, one gets it.
    async fn claim_share(
        &self,
        node: &str,
        share: &str,
        key: &str,
        want: i64,
        limit: i64,
    ) -> StoreResult<i64>;

    /// Sets what `node` holds of each `(share, key)` to the number given
    /// (units it gives back; 0 drops the row).
    async fn set_shares(&self, node: &str, grants: Vec<(String, String, i64)>) -> StoreResult<()>;

    /// Sends a notice to every process on the store (Postgres: `NOTIFY`);
    /// nothing where the store cannot push.
    async fn publish(&self, _notice: Notice) -> StoreResult<()> {
        Ok(())
    }

    /// Claims one run of the periodic job `name` for `holder`: true for one
    /// caller per `every_ms` among all processes on this store, so a sweep
    /// every node schedules runs once per interval, not once per node. One
    /// conditional write; `now_ms` is the caller's clock.
    async fn claim_job(
        &self,
        name: &str,
        holder: &str,
        every_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool>;

    /// Records what a server says of itself under `name` (the last
    /// writer wins), e.g. [`PUBLIC_URL_ANNOUNCEMENT`].
    async fn announce(&self, name: &str, value: &str) -> StoreResult<()>;

    /// What was last announced under `name`, if anything.
    async fn announced(&self, name: &str) -> StoreResult<Option<String>>;

    /// Changes other processes commit, as they happen (SPEC §10): on
    /// Postgres through `LISTEN/NOTIFY`. None where the store cannot push
    /// (SQLite: every process polls, as before). A reader keeps a slow poll
    /// either way, since notices can be lost.
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<Notice>> {
        None
    }
}

/// Execution records, and the saved state of paused runs with their
/// lease (SPEC §9, §10).
#[async_trait]
pub trait ExecutionStore: Send + Sync + 'static {
    /// Returns once every write this process has committed is durable:
    /// the barrier for a caller that wrote with
    /// [`ExecutionStore::insert_execution_deferred`] and answers without a flushed
    /// write of its own (Postgres: one write transaction, whose flush
    /// covers every commit before it; SQLite: nothing, its commits are as
    /// durable as they get when they return).
    async fn sync(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Saves the resumable state of a paused execution (opaque JSON). With
    /// a fence, as the run's holder: the first save makes the fence's node
    /// the holder; a later one is refused ([`StoreError::Fenced`]) once
    /// another node claimed the run.
    async fn save_execution_state(
        &self,
        id: &str,
        org_id: &str,
        state: String,
        fence: Option<&Fence>,
    ) -> StoreResult<()>;

    /// Makes `node` the holder of a paused execution, with a new epoch,
    /// unless another live node holds it (SPEC §10: the run is replayed on
    /// one node, never two).
    async fn claim_execution(&self, id: &str, node: &str) -> StoreResult<ExecutionClaim>;

    /// Records that the holder starts call `index` of a run it holds: the
    /// fenced write every tool call of a resumed run makes before it leaves
    /// for the integration ([`StoreError::Fenced`] once another node claimed
    /// the run).
    async fn advance_execution(&self, id: &str, fence: &Fence, index: i64) -> StoreResult<()>;

    /// Gives up the hold `fence` has on a paused run (its holder becomes
    /// nobody), so that any process claims it at once: a process that
    /// neither renews its node lease nor takes posted decisions (a one-shot
    /// command) releases a run it paused. Nothing when the fence no longer
    /// holds it.
    async fn release_execution(&self, id: &str, fence: &Fence) -> StoreResult<()>;

    async fn load_execution_state(&self, id: &str) -> StoreResult<Option<String>>;

    /// Posts a decision for a paused execution from outside the process
    /// that runs it (`executor resume`). False when the execution is
    /// unknown or a decision is already posted.
    async fn post_execution_decision(&self, id: &str, action: &str) -> StoreResult<bool>;

    /// Takes the posted decision, if any: exactly one caller gets it.
    async fn take_execution_decision(&self, id: &str) -> StoreResult<Option<String>>;

    /// Commits the record, durable when this returns, with its tool calls
    /// (the record's `tool_calls`, as rows of [`ToolCallStore`]) in the
    /// same transaction, so the two are never apart; a record written
    /// again (a paused run that settled) replaces its calls.
    async fn insert_execution(&self, record: ExecutionRecord) -> StoreResult<()>;

    /// Commits the record (visible to every reader when this returns) but
    /// may return before it is durable: the next flushed write this
    /// process commits makes it durable, as [`ExecutionStore::sync`] does. For a
    /// caller whose answer goes out only after such a write — an answer
    /// logged to the session's event log. Postgres writes WAL in order, so
    /// a flush up to a later commit covers this one; SQLite has one kind
    /// of commit.
    async fn insert_execution_deferred(&self, record: ExecutionRecord) -> StoreResult<()> {
        self.insert_execution(record).await
    }

    /// The executions of one org (every org: None), newest first by
    /// (started_at, id); the page key is (`started_at_ms`, id). Listed
    /// records leave out their result, logs and tool calls (empty): a
    /// listing shows summaries; `get_execution` reads a whole record.
    async fn list_executions(
        &self,
        org_id: Option<&str>,
        filter: &ExecutionFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ExecutionRecord>>;

    /// The saved states of the org's paused executions (those with a state
    /// row and a record still `waiting_for_interaction`), most recently
    /// saved first, at most [`MAX_PAUSED_LISTED`].
    async fn list_paused_executions(&self, org_id: &str) -> StoreResult<Vec<PausedExecutionRow>>;

    /// Deletes the records of finished executions (completed or error)
    /// started before `before_ms`, with their tool calls and any settled
    /// saved state; a paused one's record and state stay. Returns how many
    /// records were deleted.
    async fn gc_executions(&self, before_ms: i64) -> StoreResult<u64>;

    /// Bytes the execution records hold (code, result, error, logs and the
    /// calls' summary), by org.
    async fn history_bytes_by_org(&self) -> StoreResult<Vec<(String, u64)>>;

    /// Deletes the oldest records of `org_id` (of every org when None) that
    /// [`ExecutionStore::gc_executions`] could delete, with their tool
    /// calls, until at least `bytes` are freed (or none is left); a paused
    /// execution's record stays.
    async fn trim_history(&self, org_id: Option<&str>, bytes: u64) -> StoreResult<Trimmed>;

    async fn get_execution(&self, id: &str) -> StoreResult<Option<ExecutionRecord>>;
}

/// Most paused executions [`ExecutionStore::list_paused_executions`] lists.
pub const MAX_PAUSED_LISTED: u32 = 500;

/// The audit trail of tool calls (SPEC §13). Rows are written with their
/// execution's record ([`ExecutionStore::insert_execution`]); this role
/// reads them.
#[async_trait]
pub trait ToolCallStore: Send + Sync + 'static {
    /// The org's tool calls matching `filter`, newest first by
    /// (started_at, id); the page key is (`started_at_ms`, id).
    async fn list_tool_calls(
        &self,
        org_id: &str,
        filter: &ToolCallFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ToolCallRecord>>;
}

/// An org's integrations and its catalog version (SPEC §8).
#[async_trait]
pub trait CatalogStore: Send + Sync + 'static {
    /// Adds or replaces an integration and bumps the org's catalog version.
    async fn upsert_integration(&self, integration: IntegrationRecord) -> StoreResult<()>;

    /// The org's integrations, sorted by namespace; `document` is empty
    /// unless `with_documents`.
    async fn list_integrations(
        &self,
        org_id: &str,
        with_documents: bool,
    ) -> StoreResult<Vec<IntegrationRecord>>;

    async fn remove_integration(&self, org_id: &str, namespace: &str) -> StoreResult<bool>;

    /// The document of one integration at `revision`, with its stored
    /// search index; None when the record is gone or was written again
    /// since.
    async fn integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
    ) -> StoreResult<Option<IntegrationDocument>>;

    /// Replaces the document of the record at `revision` with an equivalent
    /// one (an upgrade of its stored format), without changing its revision
    /// or the catalog version; false when the record changed meanwhile.
    async fn replace_integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        document: String,
    ) -> StoreResult<bool>;

    /// Stores the search index of the record at `revision` (built by the
    /// server because none fitted), without changing its revision or the
    /// catalog version; false when the record changed meanwhile.
    async fn replace_search_index(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        search_index: Vec<u8>,
    ) -> StoreResult<bool>;

    /// Grows whenever the org's integrations change (0 before any), and
    /// never goes back: a catalog built at a version holds at least what
    /// that version names.
    async fn catalog_version(&self, org_id: &str) -> StoreResult<i64>;

    /// The catalog version as committed now, never a kept one: what an
    /// execution reads, so an integration another process added is
    /// callable on the very next execution (Postgres keeps versions until
    /// the change's notice arrives, which may be just after).
    async fn committed_catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        self.catalog_version(org_id).await
    }
}

/// The credentials of an org's integrations, and OAuth logins in flight
/// (SPEC §9).
#[async_trait]
pub trait ConnectionStore: Send + Sync + 'static {
    /// Sets the credential of one integration (`secret` is sealed or a reference).
    async fn set_connection(&self, connection: ConnectionRecord) -> StoreResult<()>;

    async fn list_connections(&self, org_id: &str) -> StoreResult<Vec<ConnectionRecord>>;

    /// One connection, read on every tool call of its integration.
    async fn get_connection(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> StoreResult<Option<ConnectionRecord>>;

    async fn remove_connection(&self, org_id: &str, namespace: &str) -> StoreResult<bool>;

    /// Saves new tokens for an `oauth` connection (`secret`, `oauth`,
    /// `updated_at_ms`) only while its generation is still `generation`
    /// and, with a `lease`, while no other refresher holds a lease that
    /// still runs (a refresher stalled past its lease never saves over the
    /// next one's); moves the generation on and releases any lease. False
    /// when another writer moved it first, another lease runs, or the row
    /// is gone.
    async fn save_connection_if(
        &self,
        connection: ConnectionRecord,
        generation: i64,
        lease: Option<&str>,
    ) -> StoreResult<bool>;

    /// Whether `lease` is the connection's refresh lease at `generation`
    /// and still runs (by the store's clock): what a refresher asks right
    /// before it spends the refresh token.
    async fn holds_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        lease: &str,
    ) -> StoreResult<bool>;

    /// Takes the refresh lease of a connection at `generation` for
    /// `holder` until `until_ms`: true when taken, false when the
    /// generation moved or another holder's lease runs past `now_ms`. One
    /// conditional write, so it is atomic across processes on one store.
    async fn lease_connection(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        holder: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool>;

    /// Gives a lease back without saving (the refresh failed).
    async fn release_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        holder: &str,
    ) -> StoreResult<()>;

    /// Stores a started login; expired rows are dropped on the way.
    async fn insert_pending_login(&self, login: PendingLoginRecord) -> StoreResult<()>;

    /// Takes a started login for its callback: exactly one caller gets an
    /// unexpired row; later callers (a replayed callback) get None.
    async fn take_pending_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> StoreResult<Option<PendingLoginRecord>>;

    /// Records how a login ended (JSON for the process that started it).
    async fn settle_pending_login(&self, state_hash: &str, outcome: String) -> StoreResult<()>;

    /// How a login ended: None while the row is unknown, Some(None) while
    /// it waits, Some(Some(outcome)) once settled.
    async fn pending_login_outcome(&self, state_hash: &str) -> StoreResult<Option<Option<String>>>;

    /// A started login as its org sees it: None unless the row is the
    /// org's, for `namespace`.
    async fn pending_login_of(
        &self,
        org_id: &str,
        namespace: &str,
        state_hash: &str,
    ) -> StoreResult<Option<PendingLoginState>>;
}
/// The built-in authorization server's state (SPEC §4): clients, codes,
/// grants and their refresh tokens. Access tokens are rows of the tokens
/// table with a `grant_id` ([`TokenRecord::grant_id`]), so that `/mcp`
/// checks them exactly as it checks API tokens, through the same cache and
/// access revision; revoking a grant revokes them, which moves the
/// revision at once on every node.
#[async_trait]
pub trait OAuthStore: Send + Sync + 'static {
    async fn insert_oauth_client(&self, client: OAuthClientRecord) -> StoreResult<()>;

    async fn find_oauth_client(&self, id: &str) -> StoreResult<Option<OAuthClientRecord>>;

    /// Saves what a client ID metadata document says (its origin is
    /// [`OAuthClientOrigin::MetadataDocument`]): inserted, or its redirect
    /// URIs and name replaced, its creation and last use kept. False, and
    /// nothing written, when the id belongs to a client of another origin.
    async fn save_metadata_client(&self, client: OAuthClientRecord) -> StoreResult<bool>;

    /// Every client, newest first (at most [`MAX_OAUTH_LISTED`]).
    async fn list_oauth_clients(&self) -> StoreResult<Vec<OAuthClientRecord>>;

    /// Deletes the client and revokes its grants (and so their tokens);
    /// false when there was no such client.
    async fn delete_oauth_client(&self, id: &str, at_ms: i64) -> StoreResult<bool>;

    async fn insert_oauth_code(&self, code: OAuthCodeRecord) -> StoreResult<()>;

    /// Presents a code: marks it used, atomically, and says what it was
    /// ([`CodeTake`]). A second presentation revokes what the first one
    /// issued.
    async fn take_oauth_code(&self, code_hash: &[u8], at_ms: i64) -> StoreResult<CodeTake>;

    /// Writes the grant a fresh code's exchange made, with its first tokens,
    /// in one transaction, and records the grant on the code; also marks
    /// the client used. False (and nothing written) when the code was
    /// replayed in the meantime.
    async fn create_oauth_grant(
        &self,
        code_hash: &[u8],
        grant: OAuthGrantRecord,
        tokens: IssuedTokens,
    ) -> StoreResult<bool>;

    /// Rotates a refresh token and issues `tokens` under its grant, in one
    /// transaction: a token not rotated yet is marked rotated; one rotated
    /// within `grace_ms` still issues (concurrent refreshes); one rotated
    /// earlier revokes the grant ([`RefreshRefusal::Reused`]). Marks the
    /// grant and its client used.
    async fn refresh_oauth_grant(
        &self,
        refresh: RefreshUse,
        tokens: IssuedTokens,
    ) -> StoreResult<Result<OAuthGrantRecord, RefreshRefusal>>;

    /// The grant a refresh token (by hash) was issued under, for `/revoke`.
    async fn grant_of_refresh_token(&self, token_hash: &[u8]) -> StoreResult<Option<String>>;

    async fn find_oauth_grant(&self, id: &str) -> StoreResult<Option<OAuthGrantRecord>>;

    /// The org's grants, newest first, revoked ones included (at most
    /// [`MAX_OAUTH_LISTED`]).
    async fn list_oauth_grants(&self, org_id: &str) -> StoreResult<Vec<OAuthGrantRecord>>;

    /// Revokes the grant and every token issued under it; false when there
    /// was no such grant.
    async fn revoke_oauth_grant(&self, id: &str, at_ms: i64) -> StoreResult<bool>;

    /// Deletes what has lapsed by `now_ms`: codes past their deadline,
    /// registered clients unused 7 days after registration or 90 days
    /// after their last use (their grants revoked), refresh tokens past
    /// their deadline, access tokens of grants a day past theirs, and
    /// revoked or lapsed grants a day later. Returns the rows deleted.
    async fn gc_oauth(&self, now_ms: i64) -> StoreResult<u64>;
}

/// The most clients or grants one list returns.
pub const MAX_OAUTH_LISTED: usize = 1000;

/// Browser sign-in (SPEC §14): one-time login links and the sessions of
/// signed-in browsers, both kept as hashes of their secrets.
#[async_trait]
pub trait SignInStore: Send + Sync + 'static {
    async fn insert_login_link(&self, link: LoginLinkRecord) -> StoreResult<()>;

    /// Uses a link once: its principal when it exists, is unused and is
    /// before its deadline at `at_ms`; it is used up either way.
    async fn redeem_login_link(
        &self,
        link_hash: &[u8],
        at_ms: i64,
    ) -> StoreResult<Option<Principal>>;

    async fn insert_console_session(&self, session: ConsoleSessionRecord) -> StoreResult<()>;

    async fn find_console_session(
        &self,
        session_hash: &[u8],
    ) -> StoreResult<Option<ConsoleSessionRecord>>;

    /// Records activity (the idle timeout counts from it).
    async fn touch_console_session(&self, session_hash: &[u8], at_ms: i64) -> StoreResult<()>;

    /// Switches the session to another of its account's orgs.
    async fn set_console_session_org(&self, session_hash: &[u8], org_id: &str)
    -> StoreResult<bool>;

    /// Signs the browser out.
    async fn delete_console_session(&self, session_hash: &[u8]) -> StoreResult<bool>;

    /// Deletes login links past their deadline and sessions last seen
    /// before `idle_before_ms`; returns the rows deleted.
    async fn gc_sign_in(&self, now_ms: i64, idle_before_ms: i64) -> StoreResult<u64>;
}

/// Every role, for the wiring that opens one store and hands it to every
/// layer, plus what only the whole store can promise.
#[async_trait]
pub trait Store:
    AccountStore
    + PolicyStore
    + SessionStore
    + NodeStore
    + ExecutionStore
    + ToolCallStore
    + CatalogStore
    + ConnectionStore
    + OAuthStore
    + SignInStore
{
    /// Returns once every write queued before the call is committed
    /// (fire-and-forget ones included). `serve` awaits it last, so that
    /// nothing queued is lost when the process exits.
    async fn flush(&self) -> StoreResult<()>;

    /// Whether the store's writes are backed up to their bound now (SPEC
    /// §12): a new request would only wait, then be refused as busy. The
    /// transports answer 503 `Retry-After` before they take one on.
    fn writes_backed_up(&self) -> bool {
        false
    }
}
/// The next notice of an optional subscription; never, without one. A
/// closed channel counts as lost notices once, then as no subscription.
pub async fn next_notice(notices: &mut Option<tokio::sync::broadcast::Receiver<Notice>>) -> Notice {
    use tokio::sync::broadcast::error::RecvError;
    let Some(receiver) = notices else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(notice) => notice,
        Err(RecvError::Lagged(_)) => Notice::Lagged,
        Err(RecvError::Closed) => {
            *notices = None;
            Notice::Lagged
        }
    }
}

/// Current wall-clock time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
