//! What a live session holds in memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use executor_call::{ApprovalMode, CallContext, Hold, Holder};
use executor_mcp::{ProtocolVersion, ToolList};
use executor_store::{
    ElicitationMode, Fence, NodeLease, SessionRecord, SessionTouch, Store, now_ms,
};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::streams::{Listener, ListenerRegistry, SseEvent, StreamLimit};

/// What a runtime's [`Holder`] asks: this node's lease on the store, as
/// of the registration the session's lease was taken under.
pub(crate) struct HolderLease {
    pub store: Arc<dyn Store>,
    pub node: Arc<NodeLease>,
}

impl HolderLease {
    /// The question every outbound call and write of the session's runs
    /// asks first (SPEC §10): locally, whether this node is alive by its
    /// own clock under the registration the lease was taken in (a node
    /// stopped past its lease fails here on waking); then the store,
    /// whether the session's row still names this node at this epoch with
    /// its lease running (a node evicted by a peer, or whose lease another
    /// node's claim moved on, fails there). A runtime disposed for being
    /// idle or terminated still holds: its runs go on as before.
    fn holder(self, id: &str, fence: &Fence) -> Holder {
        let registration = self.node.registrations();
        let node = self.node.clone();
        let local = move || node.valid() && node.registrations() == registration;
        let (id, fence, store) = (id.to_string(), fence.clone(), self.store);
        Holder::new(local, move || {
            let (store, id, fence) = (store.clone(), id.clone(), fence.clone());
            Box::pin(async move { Hold::answered(store.holds_session(&id, &fence).await) })
        })
    }
}

/// The in-memory half of a session: built from the durable record on
/// demand, thrown away when idle.
pub struct Runtime {
    pub record: SessionRecord,
    pub ctx: CallContext,
    /// The record's protocol version, parsed once when the runtime is
    /// built (a version this release no longer speaks reads as the newest
    /// session-based one, as `initialize` would have negotiated).
    protocol_version: ProtocolVersion,
    /// This node's lease on the session: every write as its holder
    /// carries it (SPEC §10).
    fence: Fence,
    /// The `tools/list` snapshot, with the `execute` description built from
    /// the integration inventory; replaced when the org's catalog changes.
    tools: RwLock<Arc<ToolList>>,
    /// The org catalog version `tools` was built against.
    catalog_version: AtomicI64,
    last_activity_ms: AtomicI64,
    in_flight: AtomicUsize,
    listeners: Mutex<ListenerRegistry>,
    /// POST streams whose bodies are open here, by stream id: their events
    /// are on their way to their own connection, so a GET's replay leaves
    /// them undelivered (see [`PostStream`]).
    posting: Mutex<Vec<String>>,
    /// Held shared by a GET from its look at `posting` until its take of
    /// the undelivered events is done, and exclusively by a POST stream
    /// joining `posting`: a stream is either in the GET's list or logs
    /// nothing before the take.
    replay_gate: tokio::sync::RwLock<()>,
    /// Most GET streams open at once (SPEC §12).
    max_listeners: usize,
    /// Unflushed bytes a GET stream may queue before it is cut off.
    slow_reader_bytes: usize,
    /// Server-initiated requests (elicitation) waiting for the client's
    /// response, by JSON-encoded request id.
    awaiting_client: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Flips to true when the runtime is disposed; open streams end.
    disposed: watch::Sender<bool>,
}

impl Runtime {
    pub(crate) fn new(
        record: SessionRecord,
        fence: Fence,
        lease: HolderLease,
        tools: Arc<ToolList>,
        max_listeners: usize,
        slow_reader_bytes: usize,
    ) -> Self {
        let holder = lease.holder(&record.id, &fence);
        let ctx = CallContext {
            principal: record.owner.clone(),
            session_id: Some(record.id.clone()),
            approval: match record.elicitation_mode {
                ElicitationMode::Console => ApprovalMode::InConsole,
                ElicitationMode::Model | ElicitationMode::Native => ApprovalMode::AskAHuman,
            },
            holder: Some(holder),
        };
        let protocol_version = ProtocolVersion::negotiate(Some(&record.protocol_version));
        Runtime {
            record,
            ctx,
            protocol_version,
            fence,
            tools: RwLock::new(tools),
            catalog_version: AtomicI64::new(-1),
            last_activity_ms: AtomicI64::new(now_ms()),
            in_flight: AtomicUsize::new(0),
            listeners: Mutex::new(ListenerRegistry::default()),
            posting: Mutex::new(Vec::new()),
            replay_gate: tokio::sync::RwLock::new(()),
            max_listeners,
            slow_reader_bytes,
            awaiting_client: Mutex::new(HashMap::new()),
            disposed: watch::channel(false).0,
        }
    }

    pub fn id(&self) -> &str {
        &self.record.id
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// The session's last activity, written only at this lease's epoch.
    pub(crate) fn activity(&self) -> SessionTouch {
        SessionTouch {
            id: self.record.id.clone(),
            epoch: self.fence.epoch,
            at_ms: self.last_activity_ms(),
        }
    }

    pub fn protocol_version(&self) -> ProtocolVersion {
        self.protocol_version
    }

    pub fn tools(&self) -> Arc<ToolList> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    pub(crate) fn catalog_version(&self) -> i64 {
        self.catalog_version.load(Ordering::Acquire)
    }

    pub(crate) fn set_catalog_version(&self, version: i64) {
        self.catalog_version.store(version, Ordering::Release);
    }

    /// Swaps in a new tool list; true when it differs from the old one.
    pub(crate) fn replace_tools(&self, tools: Arc<ToolList>) -> bool {
        match self.tools.write() {
            Ok(mut current) if *current != tools => {
                *current = tools;
                true
            }
            _ => false,
        }
    }

    /// Sends a server notification to every open GET stream.
    pub(crate) fn notify_listeners(&self, message: &Value) {
        if let Ok(mut l) = self.listeners.lock() {
            l.broadcast(&message.to_string());
        }
    }

    pub fn native_elicitation(&self) -> bool {
        self.record.elicitation_mode == ElicitationMode::Native
    }

    pub fn elicitation_mode(&self) -> ElicitationMode {
        self.record.elicitation_mode
    }

    pub(crate) fn touch(&self) {
        self.last_activity_ms.fetch_max(now_ms(), Ordering::AcqRel);
    }

    pub(crate) fn last_activity_ms(&self) -> i64 {
        self.last_activity_ms.load(Ordering::Acquire)
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// A receiver that turns true when the runtime is disposed.
    pub fn disposed(&self) -> watch::Receiver<bool> {
        self.disposed.subscribe()
    }

    pub(crate) fn dispose(&self) {
        self.disposed.send_replace(true);
        if let Ok(mut waiting) = self.awaiting_client.lock() {
            waiting.clear();
        }
        if let Ok(mut l) = self.listeners.lock() {
            l.clear();
        }
    }

    /// Registers a standalone (GET) stream, unless the session already has
    /// the most open that it may. A stream counts until its [`Listener`] is
    /// dropped (the client went away) or it is cut off as a slow reader.
    pub fn add_listener(&self, stream_id: String) -> Result<Listener, StreamLimit> {
        self.add_listener_within(stream_id, self.max_listeners)
    }

    /// [`Runtime::add_listener`], also refused when `room` (this node's
    /// grant of the session's streams across the cluster) is used up.
    pub fn add_listener_within(
        &self,
        stream_id: String,
        room: usize,
    ) -> Result<Listener, StreamLimit> {
        // A poisoned lock only means a panic elsewhere while it was held.
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        if listeners.open() >= self.max_listeners.min(room) {
            return Err(StreamLimit(self.max_listeners));
        }
        let (listener, sender) = Listener::new(stream_id, self.slow_reader_bytes);
        listeners.add(sender);
        Ok(listener)
    }

    /// GET streams open on this runtime.
    pub fn open_listeners(&self) -> usize {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .open()
    }

    /// Counts `stream_id` as a POST stream open here until the returned
    /// guard drops (with the stream's body). Call it before the stream
    /// logs anything.
    pub async fn open_post_stream(self: &Arc<Self>, stream_id: &str) -> PostStream {
        let _gate = self.replay_gate.write().await;
        self.posting_lock().push(stream_id.to_string());
        PostStream {
            runtime: self.clone(),
            stream_id: stream_id.to_string(),
        }
    }

    /// For a GET's replay: the POST streams open here, whose events it
    /// must leave to them (taking one would send it twice: an elicitation
    /// asked of the human twice). Hold the answer until the take is done.
    pub async fn in_transit(&self) -> InTransit<'_> {
        let gate = self.replay_gate.read().await;
        InTransit {
            streams: self.posting_lock().clone(),
            _gate: gate,
        }
    }

    fn posting_lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        // A poisoned lock only means a panic elsewhere while it was held.
        self.posting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands an event to an open GET stream: the one with `stream_id` if it
    /// is open (a resumed stream), else any. False when none takes it.
    pub fn deliver_to_listener(&self, stream_id: &str, event: SseEvent) -> bool {
        match self.listeners.lock() {
            Ok(mut l) => l.deliver(stream_id, event),
            Err(_) => false,
        }
    }

    /// Registers a server-initiated request with id `id` before it is
    /// sent; the waiter resolves with the client's JSON-RPC response.
    pub fn await_client_response(self: &Arc<Self>, id: &Value) -> ClientResponse {
        let key = id.to_string();
        let (tx, rx) = oneshot::channel();
        if let Ok(mut waiting) = self.awaiting_client.lock() {
            waiting.insert(key.clone(), tx);
        }
        ClientResponse {
            runtime: self.clone(),
            key,
            rx,
        }
    }

    /// Hands a JSON-RPC response POSTed by the client to the request that
    /// waits for it. False when nothing waits (late, duplicate or unknown).
    pub fn deliver_client_response(&self, response: &Value) -> bool {
        let key = response.get("id").unwrap_or(&Value::Null).to_string();
        let waiter = self
            .awaiting_client
            .lock()
            .ok()
            .and_then(|mut w| w.remove(&key));
        waiter.is_some_and(|tx| tx.send(response.clone()).is_ok())
    }
}

/// The client's answer to one server-initiated request. Dropping it (the
/// asker gave up) forgets the request.
pub struct ClientResponse {
    runtime: Arc<Runtime>,
    key: String,
    rx: oneshot::Receiver<Value>,
}

impl ClientResponse {
    /// The response, or None when the runtime went away first.
    pub async fn recv(mut self) -> Option<Value> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for ClientResponse {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.runtime.awaiting_client.lock() {
            waiting.remove(&self.key);
        }
    }
}

/// The POST streams open on a runtime as a GET saw them; no other joins
/// until this drops.
pub struct InTransit<'a> {
    pub streams: Vec<String>,
    _gate: tokio::sync::RwLockReadGuard<'a, ()>,
}

/// A POST stream's body open on this node (see [`Runtime::open_post_stream`]).
/// Once it drops, what the stream logged and did not write is the next
/// GET's to replay.
pub struct PostStream {
    runtime: Arc<Runtime>,
    stream_id: String,
}

impl PostStream {
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }
}

impl Drop for PostStream {
    fn drop(&mut self) {
        let mut posting = self.runtime.posting_lock();
        if let Some(i) = posting.iter().position(|s| *s == self.stream_id) {
            posting.swap_remove(i);
        }
    }
}

/// Proof that a request (or an open stream) is using a runtime. While any
/// lease is held the runtime counts as busy and is kept up to the in-flight
/// ceiling; dropping the lease records activity.
pub struct Lease {
    runtime: Arc<Runtime>,
}

impl Lease {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        runtime.in_flight.fetch_add(1, Ordering::AcqRel);
        runtime.touch();
        Lease { runtime }
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
}

impl Clone for Lease {
    /// A second lease on the same runtime (e.g. for a stream that outlives
    /// the handler that opened it).
    fn clone(&self) -> Self {
        Lease::new(self.runtime.clone())
    }
}

impl std::ops::Deref for Lease {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        &self.runtime
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.runtime.touch();
        self.runtime.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
