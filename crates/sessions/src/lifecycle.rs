//! The session lifecycle, in one place.
//!
//! A session is in one of these states:
//!
//! ```text
//!              initialize                    request (single-flight build)
//!   (none) ───────────────► Live ◄────────────────────────────── Dormant
//!                             │  idle timeout (reaper)             ▲
//!                             └────────────────────────────────────┘
//!   Live | Dormant ── DELETE, or an operator's `end` ──► Terminated
//!                                       (record kept, 404 "terminated")
//!   Dormant ── retention GC ──► (none)
//!   Dormant, held by another live node ── request ──► HeldElsewhere
//! ```
//!
//! A Dormant session whose lease this node kept is *parked*: its next
//! request here builds the runtime with no store write, as a live one is
//! served (see [`SessionsConfig::lease_kept`]).
//!
//! Termination marks the record, then lets the session go from this node
//! (runtime, parked lease, streams) and publishes `SessionGone`, on which
//! every other node does the same (`maintenance.rs`). A store that cannot
//! push (SQLite) carries no notice to another process: a server there
//! lets go at once only of what it terminated itself, and of a session
//! another process terminated once it next claims it from the store (after
//! its runtime went idle and its parked lease was released).
//!
//! Several nodes may share one store (SPEC §10). A runtime is built only by
//! the node that claims the session's lease (`Store::claim_session`: a new
//! epoch, refused while another live node holds it); its writes as the
//! holder carry that fence. A request for a session another live node holds
//! gets [`AcquireError::HeldElsewhere`], and the wire hands it to that node
//! (or serves a GET here from the log, `remote.rs`). Disposal parks the
//! lease, and the reaper releases it once it has been parked for
//! `lease_kept`; a node whose own lease lapsed disposes every runtime it
//! holds and forgets what it parked.
//!
//! `Dormant` is a durable record with no runtime; `Building` is the short
//! window in which exactly one task restores it while any number of
//! requests wait for that one result. The map below is the only place a
//! runtime is created, stored or disposed. The leases this node keeps for
//! disposed runtimes are `parking.rs`'s; the loop that ticks the reaper,
//! renews this node's lease and sweeps the store is `maintenance.rs`.
//!
//! Limits (SPEC §12): an (account, org) may hold at most
//! `max_sessions_per_principal` live sessions — runtimes in memory, the
//! `Live` and `Building` boxes above — and may create at most as many within
//! one idle timeout. Dormant records do not count: they cost a row, not
//! memory, and a client that never sends DELETE leaves one behind per run
//! for the retention period. Both `initialize` and a restore are refused
//! over the cap, with an error for that caller only.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use executor_mcp::{McpServer, ProtocolVersion};
use executor_store::{
    ElicitationMode, FIRST_EPOCH, Fence, LogBounds, NODE_LEASE, NodeLease, Notice, Principal,
    SessionClaim, SessionRecord, SessionTouch, Share, Shares, Store, StoreError, now_ms,
};
use futures::FutureExt;
use futures::future::Shared;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::history::HistoryBounds;
use serde_json::Value;

use crate::parking::{LEASE_KEPT, Parking, release_leases};
use crate::remote::{RemoteListen, RemoteListeners};
use crate::runtime::{HolderLease, Lease, Runtime};
use crate::streams::{OutboundStream, SLOW_READER_BYTES, StreamLimit};

#[derive(Debug, Clone)]
pub struct SessionsConfig {
    pub idle_timeout: Duration,
    pub paused_idle_timeout: Duration,
    /// How long a runtime with a request in flight or a stream open is kept
    /// without other activity (see [`BUSY_CEILING`]).
    pub busy_ceiling: Duration,
    /// Records untouched this long are garbage-collected.
    pub retention: Duration,
    /// Finished execution records (and their tool calls) older than this
    /// are garbage-collected (see [`EXECUTION_RETENTION`]).
    pub execution_retention: Duration,
    /// Live sessions (runtimes in memory) one (account, org) may hold, and
    /// sessions it may create within one idle timeout.
    pub max_sessions_per_principal: usize,
    /// Standalone GET streams one session may hold open at once; also the
    /// `subscriptions/listen` streams of one (account, org) at 2026-07-28.
    pub max_get_streams_per_session: usize,
    /// How long the delivered events of a POST stream stay in the log after
    /// its last event; replay cannot need them afterwards.
    pub replay_window: Duration,
    /// How much of each stream the event log keeps for replay (SPEC §12:
    /// 64 events / 2 MiB); older events of the stream are dropped.
    pub sse_replay: LogBounds,
    /// Unflushed bytes a GET stream may queue before it is cut off (see
    /// [`SLOW_READER_BYTES`]).
    pub slow_reader_bytes: usize,
    /// Where other nodes on the store reach this one (`--node-url`); None
    /// for a process that serves no HTTP.
    pub node_url: Option<String>,
    /// This node's lease on the store (see [`NODE_LEASE`]).
    pub node_lease: Duration,
    /// How long this node keeps the lease of a session whose runtime it
    /// disposed (see [`LEASE_KEPT`]); zero releases it at disposal.
    pub lease_kept: Duration,
    /// What the store keeps of past work, in bytes (see `history.rs`).
    pub history: HistoryBounds,
}

/// Default retention of finished execution records and their tool calls,
/// the audit trail (SPEC §13: retained like execution records): a month,
/// like session records.
pub const EXECUTION_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default cap on live sessions per (account, org) (SPEC §12).
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 1_000;
/// Default cap on open GET streams per session (SPEC §12).
pub const MAX_GET_STREAMS_PER_SESSION: usize = 8;
/// Default replay window of a finished POST stream's events (SPEC §12).
pub const REPLAY_WINDOW: Duration = Duration::from_secs(5 * 60);
/// Default keep-alive ceiling of a runtime with a request in flight or a
/// stream open (SPEC §3, §12): longer than a GET stream lives before its
/// rotation (30 min), so only a lease that is never released reaches it.
pub const BUSY_CEILING: Duration = Duration::from_secs(35 * 60);

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            idle_timeout: Duration::from_secs(300),
            paused_idle_timeout: Duration::from_secs(540),
            busy_ceiling: BUSY_CEILING,
            retention: Duration::from_secs(30 * 24 * 3600),
            execution_retention: EXECUTION_RETENTION,
            max_sessions_per_principal: MAX_SESSIONS_PER_PRINCIPAL,
            max_get_streams_per_session: MAX_GET_STREAMS_PER_SESSION,
            replay_window: REPLAY_WINDOW,
            sse_replay: LogBounds::DEFAULT,
            slow_reader_bytes: SLOW_READER_BYTES,
            node_url: None,
            node_lease: NODE_LEASE,
            lease_kept: LEASE_KEPT,
            history: HistoryBounds::default(),
        }
    }
}

/// Why a request could not get a session's runtime. Each maps to one wire
/// answer (SPEC §2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AcquireError {
    #[error("Session not found")]
    NotFound,
    #[error("Session terminated, please reconnect")]
    Terminated,
    #[error("MCP session does not belong to the current bearer")]
    Forbidden,
    /// The store failed; the detail is logged, never shown.
    #[error("session store unavailable")]
    Unavailable,
    /// The disk under the store is full: nothing was written; the same
    /// request succeeds once space returns.
    #[error("the server's storage is full; retry later")]
    StoreFull,
    /// The session's owner holds the most live sessions allowed, or created
    /// that many within one idle timeout (SPEC §12).
    #[error(
        "Too many live sessions for this account and org (limit {0}): end unused sessions with DELETE or let idle ones expire"
    )]
    SessionLimit(usize),
    /// Another live node holds the session (SPEC §10): the request is
    /// that node's to serve. The caller owns the session.
    #[error("the session is held by another node")]
    HeldElsewhere(Box<Holder>),
}

/// What a request answers when the store failed it: the store's full
/// disk by its name (the client may retry once space returns), anything
/// else as unavailable; the detail goes to the log.
fn store_failed(what: &str, e: StoreError) -> AcquireError {
    tracing::error!(error = %e, "{what}");
    match e {
        StoreError::Full => AcquireError::StoreFull,
        _ => AcquireError::Unavailable,
    }
}

/// The node holding a session, for a request this node hands over.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub node_id: String,
    /// None for a node that serves no HTTP (a CLI command).
    pub url: Option<String>,
    /// The session's owner, checked here before anything is handed over.
    pub owner: Principal,
}

/// Counters for `/metrics` (SPEC §11), as `prometheus-client` metrics:
/// counting is an atomic add where it happens, and
/// [`SessionsMetrics::register`] hands them to the registry `/metrics`
/// encodes.
#[derive(Debug)]
pub struct SessionsMetrics {
    pub created: Counter,
    pub restored: Counter,
    pub disposed: Counter,
    /// Restores started, successful or not. Not exported: tests read it to
    /// see that concurrent requests share one restore.
    pub builds: AtomicU64,
    /// How long each successful restore took, in seconds. It has only the
    /// implicit `+Inf` bucket: what it adds to the exposition is the
    /// `executor_session_restore_seconds_sum` and `_count` series of before.
    pub restore_seconds: Histogram,
    /// Session leases this node claimed (restores, takeovers).
    pub claims: Counter,
    /// Requests this node handed to a session's holder (counted by the wire).
    pub forwarded: Counter,
    /// Writes refused because this node's lease had moved on.
    pub fenced_writes: Counter,
    /// What the history bounds deleted (`history.rs`): execution records
    /// and delivered events, and their bytes.
    pub trimmed_records: Counter,
    pub trimmed_record_bytes: Counter,
    pub trimmed_events: Counter,
    pub trimmed_event_bytes: Counter,
    /// Undelivered events given up to keep a session's or org's log under
    /// its bound, and the answers among them (each replaced by an error
    /// answer to its request).
    pub dropped_events: Counter,
    pub dropped_answers: Counter,
}

impl Default for SessionsMetrics {
    fn default() -> Self {
        SessionsMetrics {
            created: Counter::default(),
            restored: Counter::default(),
            disposed: Counter::default(),
            builds: AtomicU64::new(0),
            restore_seconds: Histogram::new(std::iter::empty::<f64>()),
            claims: Counter::default(),
            forwarded: Counter::default(),
            fenced_writes: Counter::default(),
            trimmed_records: Counter::default(),
            trimmed_record_bytes: Counter::default(),
            trimmed_events: Counter::default(),
            trimmed_event_bytes: Counter::default(),
            dropped_events: Counter::default(),
            dropped_answers: Counter::default(),
        }
    }
}

impl SessionsMetrics {
    /// Registers the sessions' `/metrics` series: `live` runtimes in memory,
    /// read by the caller at scrape time, then the counters.
    ///
    /// Counters are named without `_total`: the encoder appends it (and the
    /// registry refuses a counter named with it in debug builds), so the
    /// exposed names stay `executor_sessions_created_total` and so on.
    pub fn register(&self, registry: &mut Registry, live: usize) {
        registry.register(
            "executor_sessions_live",
            "Session runtimes in memory now",
            ConstGauge::new(live),
        );
        registry.register(
            "executor_sessions_created",
            "Sessions created",
            self.created.clone(),
        );
        registry.register(
            "executor_sessions_restored",
            "Session runtimes restored from the store",
            self.restored.clone(),
        );
        registry.register(
            "executor_sessions_disposed",
            "Session runtimes disposed by the idle reaper",
            self.disposed.clone(),
        );
        registry.register(
            "executor_session_restore_seconds",
            "Time taken to restore session runtimes, in seconds",
            self.restore_seconds.clone(),
        );
        registry.register(
            "executor_session_claims",
            "Session leases this node claimed",
            self.claims.clone(),
        );
        registry.register(
            "executor_forwarded",
            "Requests handed to the node holding their session",
            self.forwarded.clone(),
        );
        registry.register(
            "executor_fenced_writes",
            "Writes refused because the session moved to another node",
            self.fenced_writes.clone(),
        );
        registry.register(
            "executor_history_trimmed_records",
            "Execution records deleted to keep the store under --max-history-bytes or --max-org-history-bytes",
            self.trimmed_records.clone(),
        );
        registry.register(
            "executor_history_trimmed_record_bytes",
            "Bytes of the execution records deleted to keep the store under its bounds",
            self.trimmed_record_bytes.clone(),
        );
        registry.register(
            "executor_history_trimmed_events",
            "Delivered SSE events deleted to keep the event log under --max-event-log-bytes",
            self.trimmed_events.clone(),
        );
        registry.register(
            "executor_history_trimmed_event_bytes",
            "Bytes of the delivered SSE events deleted to keep the event log under its bound",
            self.trimmed_event_bytes.clone(),
        );
        registry.register(
            "executor_history_dropped_events",
            "Undelivered SSE events given up to keep a session's or org's event log under its bound",
            self.dropped_events.clone(),
        );
        registry.register(
            "executor_history_dropped_answers",
            "Undelivered answers replaced by an error answer to their request (the client is told) to keep a session's or org's event log under its bound",
            self.dropped_answers.clone(),
        );
    }
}

type BuildFuture = Shared<Pin<Box<dyn Future<Output = Result<(), AcquireError>> + Send>>>;

pub(crate) enum Slot {
    /// Exactly one restore is running; requests wait on this future. The
    /// number tells this build from a later one of the same session
    /// (shutdown clears the map while builds run).
    Building(BuildFuture, u64),
    Live(Arc<Runtime>),
}

/// What one (account, org) holds, for the session cap.
struct Usage {
    /// Runtimes in memory or being restored.
    live: usize,
    /// When the current creation window began, and sessions created in it.
    window_started: Instant,
    created: usize,
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) server: Arc<McpServer>,
    pub(crate) config: SessionsConfig,
    slots: Mutex<HashMap<String, Slot>>,
    /// Per-(account, org) counts behind the session cap. A std lock: held
    /// for one map update, never across an await, and never together with
    /// `slots`.
    usage: Mutex<HashMap<Principal, Usage>>,
    /// The leases of disposed runtimes this node kept, and its lapses.
    parking: Parking,
    /// Numbers the builds (`Slot::Building`).
    next_build: AtomicU64,
    pub(crate) metrics: SessionsMetrics,
    /// Turns true once shutdown begins: standalone GET streams end and
    /// `/healthz` answers 503, while in-flight requests finish.
    draining: tokio::sync::watch::Sender<bool>,
    /// This process as a node on the store: its id holds session leases
    /// and the periodic jobs it claims.
    pub(crate) node: Arc<NodeLease>,
    /// GET streams here of sessions other nodes hold.
    pub(crate) remote: RemoteListeners,
    /// This node's grants of the bounds the cluster shares: live sessions
    /// per principal and GET streams per session here, running executions
    /// in the engine.
    pub(crate) shares: Arc<Shares>,
    /// The sessionless revision's listen streams, by org.
    pub(crate) subscriptions: Arc<crate::subscriptions::Subscriptions>,
}

/// The one entry point to sessions. Cheap to clone.
#[derive(Clone)]
pub struct Sessions {
    pub(crate) inner: Arc<Inner>,
}

impl Sessions {
    pub fn new(store: Arc<dyn Store>, server: Arc<McpServer>, config: SessionsConfig) -> Self {
        let node = Arc::new(NodeLease::new(config.node_url.clone(), config.node_lease));
        // The paused runs in the engine's memory are this node's too, and
        // its running executions count against the cluster's bounds.
        server.engine().attach_node(node.clone());
        let shares = Shares::new(store.clone(), node.clone());
        server.engine().share_with(shares.clone());
        Sessions {
            inner: Arc::new(Inner {
                store,
                server,
                slots: Mutex::new(HashMap::new()),
                usage: Mutex::new(HashMap::new()),
                parking: Parking::new(config.lease_kept, config.node_url.is_some()),
                next_build: AtomicU64::new(0),
                metrics: SessionsMetrics::default(),
                draining: tokio::sync::watch::channel(false).0,
                node,
                remote: RemoteListeners::default(),
                shares,
                subscriptions: Arc::default(),
                config,
            }),
        }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn server(&self) -> &Arc<McpServer> {
        &self.inner.server
    }

    pub fn metrics(&self) -> &SessionsMetrics {
        &self.inner.metrics
    }

    /// Begins shutdown (SPEC §11): standalone GET streams end; requests in
    /// flight, and their POST streams, run to their answer. Runtimes are
    /// disposed afterwards by [`Sessions::dispose_all`].
    pub fn drain(&self) {
        self.inner.draining.send_replace(true);
    }

    pub fn is_draining(&self) -> bool {
        *self.inner.draining.borrow()
    }

    /// A receiver that turns true when shutdown begins.
    pub fn draining(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.draining.subscribe()
    }

    /// A new stream of the lease's session whose events the log keeps
    /// within the configured replay bounds, written as its holder.
    pub fn outbound_stream(&self, lease: &Lease, stream_id: String) -> OutboundStream {
        OutboundStream::new(self.inner.store.clone(), lease.id(), stream_id, 0)
            .with_bounds(self.inner.config.sse_replay)
            .fenced(lease.fence().clone())
    }

    /// This node's id on the store.
    pub fn node_id(&self) -> &str {
        self.inner.node.id()
    }

    /// This node's lease on the store.
    pub fn node_lease(&self) -> Duration {
        self.inner.config.node_lease
    }

    /// Where this node is reached by its peers.
    pub fn node_url(&self) -> Option<&str> {
        self.inner.node.url()
    }

    /// Runtimes in memory now.
    pub fn live_count(&self) -> usize {
        self.slots()
            .values()
            .filter(|s| matches!(s, Slot::Live(_)))
            .count()
    }

    pub(crate) fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A poisoned lock only means a panic elsewhere while it was held; the
        // map itself is always consistent (every mutation is one call).
        self.inner.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn usage(&self) -> MutexGuard<'_, HashMap<Principal, Usage>> {
        self.inner.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one more runtime of `owner` against the cap (and, when
    /// `creating`, one more session created in the window), or refuses.
    /// The live cap holds across the nodes: past this node's grant of the
    /// owner's sessions it asks the store for more (twice what it holds,
    /// so that a client opening many asks a few times, not each time).
    async fn reserve(
        &self,
        owner: &Principal,
        creating: bool,
    ) -> Result<Reservation, AcquireError> {
        let limit = self.inner.config.max_sessions_per_principal;
        let key = principal_key(owner);
        loop {
            let (live, want) = match self.reserve_within_grant(owner, &key, creating)? {
                Ok(reservation) => return Ok(reservation),
                Err(live) => (live, (live + 1).max(live * 2).min(limit)),
            };
            // A grant past `live` makes room (another request of this node
            // may take it first: then ask for more); none means the other
            // nodes hold the rest of the bound.
            let granted = self
                .inner
                .shares
                .ask(Share::PrincipalSessions, &key, want, limit)
                .await
                .map_err(|e| {
                    store_failed("could not ask the store for a principal's sessions", e)
                })?;
            if granted <= live {
                return Err(AcquireError::SessionLimit(limit));
            }
        }
    }

    /// The reservation, a refusal, or (inner `Err`) the owner's live count
    /// when this node's grant is used up.
    fn reserve_within_grant(
        &self,
        owner: &Principal,
        key: &str,
        creating: bool,
    ) -> Result<Result<Reservation, usize>, AcquireError> {
        let limit = self.inner.config.max_sessions_per_principal;
        // A session that is not deleted stays live for at least the idle
        // timeout; creating more than the cap within one means sessions are
        // being made and deleted in a loop.
        let window = self.inner.config.idle_timeout;
        let mut usage = self.usage();
        let u = usage.entry(owner.clone()).or_insert_with(|| Usage {
            live: 0,
            window_started: Instant::now(),
            created: 0,
        });
        if u.window_started.elapsed() >= window {
            u.window_started = Instant::now();
            u.created = 0;
        }
        if u.live >= limit || (creating && u.created >= limit) {
            return Err(AcquireError::SessionLimit(limit));
        }
        let shares = &self.inner.shares;
        if u.live >= shares.granted(Share::PrincipalSessions, key) {
            return Ok(Err(u.live));
        }
        u.live += 1;
        if creating {
            u.created += 1;
        }
        shares.using(Share::PrincipalSessions, key, u.live);
        Ok(Ok(Reservation {
            sessions: self.clone(),
            owner: Some(owner.clone()),
        }))
    }

    /// A runtime of `owner` left the map.
    fn release(&self, owner: &Principal) {
        if let Some(u) = self.usage().get_mut(owner) {
            u.live = u.live.saturating_sub(1);
            self.inner
                .shares
                .using(Share::PrincipalSessions, &principal_key(owner), u.live);
        }
    }

    /// Room across the nodes for one more GET stream of `session_id`: how
    /// many this node may have open, asking the store when the ones open
    /// here already use its grant. The streams open here are counted fresh
    /// before each give-back (`count_streams`).
    pub async fn get_stream_room(&self, session_id: &str) -> Result<usize, AcquireError> {
        let limit = self.inner.config.max_get_streams_per_session;
        let shares = &self.inner.shares;
        let open = self.open_get_streams(session_id);
        shares.using(Share::SessionStreams, session_id, open);
        let granted = shares.granted(Share::SessionStreams, session_id);
        if granted > open {
            return Ok(granted);
        }
        shares
            .ask(Share::SessionStreams, session_id, open + 1, limit)
            .await
            .map_err(|e| store_failed("could not ask the store for a session's streams", e))
    }

    /// GET streams of `session_id` open on this node (as its holder or
    /// fed from the log).
    fn open_get_streams(&self, session_id: &str) -> usize {
        let held = match self.slots().get(session_id) {
            Some(Slot::Live(rt)) => rt.open_listeners(),
            _ => 0,
        };
        held + self.inner.remote.open(session_id)
    }

    /// Tells the grants how many GET streams each session has open here,
    /// then gives back what went unused (every `SHARE_LINGER`).
    pub(crate) async fn give_back_shares(&self) {
        let shares = &self.inner.shares;
        for session_id in shares.keys(Share::SessionStreams) {
            shares.using(
                Share::SessionStreams,
                &session_id,
                self.open_get_streams(&session_id),
            );
        }
        shares.give_back().await;
    }

    /// Creates a session for `owner` (the `initialize` path). The durable
    /// record is written before this returns, so before the response.
    pub async fn create(
        &self,
        owner: Principal,
        protocol_version: ProtocolVersion,
        client_info: Value,
        client_capabilities: Value,
        elicitation_mode: ElicitationMode,
    ) -> Result<Lease, AcquireError> {
        let reservation = self.reserve(&owner, true).await?;
        self.ensure_node().await?;
        let now = now_ms();
        let record = SessionRecord {
            id: executor_store::tokens::random_id(24),
            owner,
            protocol_version: protocol_version.as_str().to_string(),
            client_info,
            client_capabilities,
            elicitation_mode,
            created_at_ms: now,
            last_activity_at_ms: now,
            terminated_at_ms: None,
        };
        let node = self.inner.node.id().to_string();
        self.inner
            .store
            .insert_session(record.clone(), &node)
            .await
            .map_err(|e| store_failed("could not persist new session", e))?;
        let fence = Fence {
            node,
            epoch: FIRST_EPOCH,
        };
        let runtime = Arc::new(self.build_runtime(record, fence).await);
        self.inner.metrics.created.inc();
        let mut slots = self.slots();
        slots.insert(runtime.id().to_string(), Slot::Live(runtime.clone()));
        reservation.keep();
        Ok(Lease::new(runtime))
    }

    /// THE entry point for every request that carries a session id: look
    /// up, check the owner, return the live runtime — building it, exactly
    /// once however many requests arrive together, if it is not in memory.
    pub async fn acquire(
        &self,
        session_id: &str,
        caller: &Principal,
    ) -> Result<Lease, AcquireError> {
        // Past its local deadline this node may have lost every lease it
        // held: none of its runtimes may serve until it claims again.
        if self.inner.node.is_registered() && !self.inner.node.valid() {
            self.lapse_locally();
        }
        loop {
            let pending = {
                let mut slots = self.slots();
                match slots.get(session_id) {
                    Some(Slot::Live(rt)) => {
                        if rt.record.owner != *caller {
                            return Err(AcquireError::Forbidden);
                        }
                        // Taken under the lock: the reaper cannot dispose a
                        // runtime between this check and the lease.
                        return Ok(Lease::new(rt.clone()));
                    }
                    Some(Slot::Building(build, _)) => build.clone(),
                    None => {
                        let number = self.inner.next_build.fetch_add(1, Ordering::Relaxed);
                        let build = self.start_build(session_id.to_string(), number);
                        slots.insert(
                            session_id.to_string(),
                            Slot::Building(build.clone(), number),
                        );
                        build
                    }
                }
            };
            // All waiters share the one build; on success they loop back and
            // take the Live path (with its owner check) under the lock.
            match pending.await {
                Err(AcquireError::HeldElsewhere(holder)) if holder.owner != *caller => {
                    return Err(AcquireError::Forbidden);
                }
                other => other?,
            }
        }
    }

    /// Spawns the restore as its own task, so a request that gives up
    /// waiting never cancels a build other requests depend on.
    fn start_build(&self, session_id: String, number: u64) -> BuildFuture {
        let this = self.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let result = this.restore(&session_id).await;
            let mut slots = this.slots();
            // Shutdown cleared the map meanwhile (and a later build of the
            // session may be under way): the slot is not this build's.
            let own = matches!(slots.get(&session_id), Some(Slot::Building(_, n)) if *n == number);
            let current = this.inner.parking.lapses();
            match result {
                Ok((runtime, lapses)) if !own || current != lapses => {
                    // This node forgot its leases meanwhile: the lease this
                    // runtime was built on may be another node's by now.
                    if own {
                        slots.remove(&session_id);
                    }
                    drop(slots);
                    runtime.dispose();
                    this.release(&runtime.record.owner);
                    Err(AcquireError::Unavailable)
                }
                Ok((runtime, _)) => {
                    tracing::debug!(session = %session_id, micros = started.elapsed().as_micros() as u64, "restored session runtime");
                    slots.insert(session_id, Slot::Live(Arc::new(runtime)));
                    let m = &this.inner.metrics;
                    m.restored.inc();
                    m.restore_seconds.observe(started.elapsed().as_secs_f64());
                    Ok(())
                }
                Err(e) => {
                    // Leave nothing half-built: the next request starts afresh.
                    if own {
                        slots.remove(&session_id);
                    }
                    Err(e)
                }
            }
        });
        let joined: Pin<Box<dyn Future<Output = Result<(), AcquireError>> + Send>> =
            Box::pin(async move {
                task.await.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "session restore task failed");
                    Err(AcquireError::Unavailable)
                })
            });
        joined.shared()
    }

    /// Builds the session's runtime on its parked lease, or on a lease
    /// claimed now; also returns the count of this node's lapses when it
    /// got the lease (a lapse since then voids it).
    async fn restore(&self, session_id: &str) -> Result<(Runtime, u64), AcquireError> {
        self.inner.metrics.builds.fetch_add(1, Ordering::Relaxed);
        let (parked, lapses) = self.inner.parking.take(session_id);
        if let Some(parked) = parked {
            // Ours as a live runtime is: acquire checked this node's own
            // lease, a peer claims it only once that lease lapsed on the
            // store (or after evicting this node when a hand-over here was
            // refused), and the writes of a runtime built on a lease that
            // moved are fenced, as a live runtime's are.
            let reservation = match self.reserve(&parked.record.owner, false).await {
                Ok(r) => r,
                Err(e) => {
                    release_leases(
                        &self.inner.store,
                        self.inner.node.id(),
                        vec![(session_id.to_string(), parked.fence.epoch)],
                    );
                    return Err(e);
                }
            };
            let runtime = self.build_runtime(parked.record, parked.fence).await;
            reservation.keep();
            return Ok((runtime, lapses));
        }
        let (record, fence) = match self.claim(session_id).await? {
            SessionClaim::Claimed { record, fence } => (record, fence),
            SessionClaim::Held { record, holder } => {
                return Err(AcquireError::HeldElsewhere(Box::new(Holder {
                    node_id: holder.id,
                    url: holder.url,
                    owner: record.owner,
                })));
            }
            SessionClaim::NotFound => return Err(AcquireError::NotFound),
            SessionClaim::Terminated => return Err(AcquireError::Terminated),
            // `claim` registers and asks again; a second lapse is an outage.
            SessionClaim::Lapsed => return Err(AcquireError::Unavailable),
        };
        self.inner.metrics.claims.inc();
        // After the claim: a lapse within it (`claim` registers again) is
        // behind this lease.
        let lapses = self.inner.parking.lapses();
        let reservation = match self.reserve(&record.owner, false).await {
            Ok(r) => r,
            Err(e) => {
                release_leases(
                    &self.inner.store,
                    self.inner.node.id(),
                    vec![(record.id.clone(), fence.epoch)],
                );
                return Err(e);
            }
        };
        let runtime = self.build_runtime(record, fence).await;
        // The caller inserts the runtime as `Live` without awaiting.
        reservation.keep();
        Ok((runtime, lapses))
    }

    /// Claims the session's lease for this node, registering the node
    /// first when the store says it is not alive.
    async fn claim(&self, session_id: &str) -> Result<SessionClaim, AcquireError> {
        let unavailable = |e: StoreError| store_failed("could not claim a session", e);
        let store = &self.inner.store;
        let node = &self.inner.node;
        let claim = store
            .claim_session(session_id, node.id())
            .await
            .map_err(unavailable)?;
        if claim != SessionClaim::Lapsed {
            return Ok(claim);
        }
        // Not alive on the store: never registered, or lapsed (stopped,
        // evicted). What this node held may be held elsewhere by now.
        if node.is_registered() {
            self.lapse_locally();
        }
        node.register(store.as_ref()).await.map_err(unavailable)?;
        store
            .claim_session(session_id, node.id())
            .await
            .map_err(unavailable)
    }

    /// Registers this node unless it is alive by its own clock.
    async fn ensure_node(&self) -> Result<(), AcquireError> {
        let node = &self.inner.node;
        if node.valid() {
            return Ok(());
        }
        if node.is_registered() {
            self.lapse_locally();
        }
        node.register(self.inner.store.as_ref()).await.map_err(|e| {
            tracing::error!(error = %e, "could not register this node on the store");
            AcquireError::Unavailable
        })
    }

    async fn build_runtime(&self, record: SessionRecord, fence: Fence) -> Runtime {
        // Read before the tool list is built, so a change made meanwhile is
        // still picked up by the next refresh.
        let version = self
            .inner
            .store
            .catalog_version(&record.owner.org_id)
            .await
            .unwrap_or(-1);
        let tools = self
            .inner
            .server
            .build_tool_list(&record.owner.org_id, record.elicitation_mode)
            .await;
        let config = &self.inner.config;
        let lease = HolderLease {
            store: self.inner.store.clone(),
            node: self.inner.node.clone(),
        };
        let runtime = Runtime::new(
            record,
            fence,
            lease,
            tools,
            config.max_get_streams_per_session,
            config.slow_reader_bytes,
        );
        runtime.set_catalog_version(version);
        runtime
    }

    /// Disposes every runtime without a write: this node's lease lapsed
    /// (or may have), so another node may hold any of them by now.
    pub(crate) fn lapse_locally(&self) {
        self.inner.parking.lapse();
        // Builds under way stay: each sees the lapse count move and drops
        // a runtime whose lease it got before (see `start_build`).
        let mut live: Vec<Arc<Runtime>> = Vec::new();
        self.slots().retain(|_, s| match s {
            Slot::Live(rt) => {
                live.push(rt.clone());
                false
            }
            Slot::Building(..) => true,
        });
        if !live.is_empty() {
            tracing::warn!(
                node = self.inner.node.id(),
                runtimes = live.len(),
                "this node's lease on the store lapsed; disposing its session runtimes"
            );
        }
        for rt in &live {
            rt.dispose();
            self.release(&rt.record.owner);
        }
    }

    /// A write as the holder of `runtime`'s session was fenced: another
    /// node holds it now. The runtime goes (its streams end); the next
    /// request for the session is handed to the new holder.
    pub fn fenced(&self, runtime: &Arc<Runtime>) {
        self.inner.metrics.fenced_writes.inc();
        let mut slots = self.slots();
        // Its lease, if the reaper parked it meanwhile (a newer one of the
        // session is left alone).
        self.inner
            .parking
            .remove_fenced(runtime.id(), runtime.fence());
        if let Some(Slot::Live(current)) = slots.get(runtime.id())
            && Arc::ptr_eq(current, runtime)
        {
            slots.remove(runtime.id());
            drop(slots);
            runtime.dispose();
            self.release(&runtime.record.owner);
        }
    }

    /// Opens a GET stream here for a session another node holds (see
    /// `remote.rs`), if this node's `room` for them allows; the caller
    /// checked the owner ([`Holder::owner`]).
    pub fn listen_elsewhere(
        &self,
        session_id: &str,
        stream_id: String,
        room: usize,
    ) -> Result<RemoteListen, StreamLimit> {
        let c = &self.inner.config;
        self.inner.remote.add(
            session_id,
            stream_id,
            c.max_get_streams_per_session,
            room,
            c.slow_reader_bytes,
        )
    }

    /// An event of the session was logged that no stream here took: a GET
    /// stream of it on another node (or this one's remote streams) may.
    pub fn events_waiting(&self, session_id: &str) {
        let this = self.clone();
        let session_id = session_id.to_string();
        tokio::spawn(async move {
            let notice = Notice::Events {
                session_id: session_id.clone(),
            };
            if let Err(e) = this.inner.store.publish(notice).await {
                tracing::warn!(error = %e, "could not announce waiting events");
            }
            this.feed_remote(&session_id).await;
        });
    }

    /// Writes the session's undelivered events to its GET streams here.
    pub(crate) async fn feed_remote(&self, session_id: &str) {
        self.inner
            .remote
            .feed(&self.inner.store, session_id, self.inner.config.sse_replay)
            .await;
    }

    /// DELETE: terminates the session for its owner.
    pub async fn terminate(
        &self,
        session_id: &str,
        caller: &Principal,
    ) -> Result<(), AcquireError> {
        // Going through acquire applies the same lookup and owner check.
        let lease = self.acquire(session_id, caller).await?;
        self.terminate_lease(lease).await
    }

    /// DELETE of a session whose runtime the caller holds a lease on (the
    /// owner checked by [`Sessions::acquire`]).
    pub async fn terminate_lease(&self, lease: Lease) -> Result<(), AcquireError> {
        let session_id = lease.id().to_string();
        let ended = self.end(&session_id).await;
        drop(lease);
        ended.map_err(|e| {
            tracing::error!(error = %e, "could not terminate session");
            AcquireError::Unavailable
        })
    }

    /// Ends a session wherever it lives, for whoever may (its owner's
    /// DELETE, through [`Sessions::terminate_lease`]; an operator of its
    /// org, through the management API, which checked the org): the record
    /// is marked terminated, the session goes from this node at once (see
    /// `forget_terminated`), and `SessionGone` tells the other
    /// nodes, which do the same. Never builds a runtime: a dormant session,
    /// or one another node holds, is ended without one.
    pub async fn end(&self, session_id: &str) -> Result<(), StoreError> {
        self.inner
            .store
            .terminate_session(session_id, now_ms())
            .await?;
        self.forget_terminated(session_id);
        let gone = Notice::SessionGone {
            session_id: session_id.to_string(),
        };
        if let Err(e) = self.inner.store.publish(gone).await {
            tracing::warn!(error = %e, "could not announce a terminated session");
        }
        Ok(())
    }

    /// The session was terminated (here, or on another node: its
    /// `SessionGone` notice): its runtime here is disposed (its GET streams
    /// end), its parked lease forgotten and its streams of a session held
    /// elsewhere ended, so its next request here claims it from the store
    /// and is told it is terminated. A restore under way is dropped from
    /// the map, so the build discards its runtime (its waiters get 503;
    /// their retry, 404).
    pub(crate) fn forget_terminated(&self, session_id: &str) {
        let removed = self.slots().remove(session_id);
        if let Some(Slot::Live(rt)) = removed {
            rt.dispose();
            self.release(&rt.record.owner);
        }
        self.inner.parking.remove(session_id);
        self.inner.remote.end(session_id);
    }

    /// Disposes idle runtimes; returns how many. Called by the reaper.
    pub fn dispose_idle(&self) -> usize {
        let lapses = self.inner.parking.lapses();
        let now = now_ms();
        let c = &self.inner.config;
        let mut disposed = Vec::new();
        let released = {
            let mut slots = self.slots();
            slots.retain(|_, slot| {
                let Slot::Live(rt) = slot else { return true };
                let idle_for = now.saturating_sub(rt.last_activity_ms());
                let past = |limit: Duration| idle_for >= limit.as_millis() as i64;
                // Cheapest checks first: the paused-execution scan runs only
                // for a runtime that is otherwise due.
                let due = if rt.in_flight() > 0 {
                    past(c.busy_ceiling)
                } else {
                    past(c.idle_timeout)
                        && (past(c.paused_idle_timeout)
                            || !self.inner.server.engine().has_paused_in_session(rt.id()))
                };
                if due {
                    disposed.push(rt.clone());
                    false
                } else {
                    true
                }
            });
            // A burst of sessions should not pin its peak map size forever.
            if slots.capacity() > 64 && slots.len() < slots.capacity() / 4 {
                slots.shrink_to_fit();
            }
            // Parked before the slots are unlocked: a request for one of
            // them then finds its parked lease, never a gap in which it
            // claims anew and the old fence is parked after it.
            self.inner.parking.park(
                disposed
                    .iter()
                    .map(|rt| (rt.record.clone(), rt.fence().clone())),
                lapses,
            )
        };
        let touches: Vec<SessionTouch> = disposed.iter().map(|rt| rt.activity()).collect();
        // Released, a quiet session's next request is served where it lands.
        release_leases(&self.inner.store, self.inner.node.id(), released);
        for rt in &disposed {
            tracing::debug!(session = rt.id(), "disposed idle session runtime");
            rt.dispose();
            self.release(&rt.record.owner);
        }
        let window = self.inner.config.idle_timeout;
        self.usage()
            .retain(|_, u| u.live > 0 || u.window_started.elapsed() < window);
        let count = disposed.len();
        drop(disposed);
        self.inner.metrics.disposed.inc_by(count as u64);
        if count > 0 {
            executor_call::release_freed_memory();
            let store = self.inner.store.clone();
            tokio::spawn(async move {
                if let Err(e) = store.touch_sessions(touches).await {
                    tracing::warn!(error = %e, "could not record session activity");
                }
            });
        }
        count
    }

    /// Disposes every runtime (shutdown): open streams end, records stay,
    /// and the node leaves the store so its peers claim its sessions at once.
    pub async fn dispose_all(&self) {
        self.inner.remote.end_all();
        // Released with the node's retirement below.
        self.inner.parking.clear();
        let live: Vec<Arc<Runtime>> = self
            .slots()
            .drain()
            .filter_map(|(_, s)| match s {
                Slot::Live(rt) => Some(rt),
                Slot::Building(..) => None,
            })
            .collect();
        for rt in &live {
            rt.dispose();
            self.release(&rt.record.owner);
        }
        let touches = live.iter().map(|rt| rt.activity()).collect();
        if let Err(e) = self.inner.store.touch_sessions(touches).await {
            tracing::warn!(error = %e, "could not record session activity");
        }
        if self.inner.node.is_registered()
            && let Err(e) = self.inner.store.retire_node(self.inner.node.id()).await
        {
            tracing::warn!(error = %e, "could not release this node's sessions");
        }
    }
}

/// The key of an (account, org)'s sessions in the cluster's bounds.
fn principal_key(owner: &Principal) -> String {
    format!("{}/{}", owner.account_id, owner.org_id)
}

/// A runtime counted against its owner's cap before it is in the map.
/// Dropped without [`Reservation::keep`] (the store failed, the build task
/// died), it gives the count back.
struct Reservation {
    sessions: Sessions,
    owner: Option<Principal>,
}

impl Reservation {
    /// The runtime is in the map now; its removal releases the count.
    fn keep(mut self) {
        self.owner = None;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.take() {
            self.sessions.release(&owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::prometheus_text::encode;

    #[test]
    fn sessions_series_keep_their_names() {
        let metrics = SessionsMetrics::default();
        metrics.created.inc_by(3);
        metrics.restored.inc();
        metrics.disposed.inc_by(2);
        metrics.restore_seconds.observe(0.25);
        let mut registry = Registry::default();
        metrics.register(&mut registry, 4);
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        let expected = [
            "# TYPE executor_sessions_live gauge",
            "executor_sessions_live 4",
            "# TYPE executor_sessions_created_total counter",
            "executor_sessions_created_total 3",
            "# TYPE executor_sessions_restored_total counter",
            "executor_sessions_restored_total 1",
            "# TYPE executor_sessions_disposed_total counter",
            "executor_sessions_disposed_total 2",
            "executor_session_restore_seconds_sum 0.25",
            "executor_session_restore_seconds_count 1",
        ];
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing from:\n{text}"
            );
        }
    }
}
