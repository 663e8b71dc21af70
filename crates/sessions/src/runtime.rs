//! What a live session holds in memory.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use executor_engine::CallContext;
use executor_store::{SessionRecord, now_ms};
use serde_json::Value;
use tokio::sync::watch;

use crate::streams::{Listener, ListenerRegistry, SseEvent};

/// The in-memory half of a session: built from the durable record on
/// demand, thrown away when idle.
pub struct Runtime {
    pub record: SessionRecord,
    pub ctx: CallContext,
    /// The `tools/list` snapshot, with the `execute` description built from
    /// the integration inventory at build time.
    pub tools: Arc<Vec<Value>>,
    last_activity_ms: AtomicI64,
    in_flight: AtomicUsize,
    listeners: Mutex<ListenerRegistry>,
    /// Flips to true when the runtime is disposed; open streams end.
    disposed: watch::Sender<bool>,
}

impl Runtime {
    pub(crate) fn new(record: SessionRecord, tools: Arc<Vec<Value>>) -> Self {
        let ctx = CallContext {
            principal: record.owner.clone(),
            session_id: Some(record.id.clone()),
        };
        Runtime {
            record,
            ctx,
            tools,
            last_activity_ms: AtomicI64::new(now_ms()),
            in_flight: AtomicUsize::new(0),
            listeners: Mutex::new(ListenerRegistry::default()),
            disposed: watch::channel(false).0,
        }
    }

    pub fn id(&self) -> &str {
        &self.record.id
    }

    pub fn protocol_version(&self) -> &str {
        &self.record.protocol_version
    }

    pub fn native_elicitation(&self) -> bool {
        self.record.elicitation_mode == "native"
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
        if let Ok(mut l) = self.listeners.lock() {
            l.clear();
        }
    }

    /// Registers a standalone (GET) stream.
    pub fn add_listener(&self, stream_id: String) -> Listener {
        let (listener, sender) = Listener::new(stream_id);
        if let Ok(mut l) = self.listeners.lock() {
            l.add(sender);
        }
        listener
    }

    /// Hands an event to an open GET stream: the one with `stream_id` if it
    /// is open (a resumed stream), else any. False when none takes it.
    pub fn deliver_to_listener(&self, stream_id: &str, event: SseEvent) -> bool {
        match self.listeners.lock() {
            Ok(mut l) => l.deliver(stream_id, event),
            Err(_) => false,
        }
    }

    /// Number of open GET streams (for tests and metrics).
    pub fn listener_count(&self) -> usize {
        self.listeners.lock().map(|mut l| l.live()).unwrap_or(0)
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
