//! GET streams of sessions held by another node (SPEC §10).
//!
//! A GET lands where the load balancer sends it. When another live node
//! holds the session, the stream is served here all the same: the holder
//! logs every event before it sends it, and when none of its own streams
//! takes one it publishes `Events(session)`; each node with a stream of that
//! session here takes the undelivered events (`take_undelivered` is atomic
//! across nodes: one taker gets each) and writes them out. `ListChanged`
//! sends `notifications/tools/list_changed`, `SessionGone` ends the
//! streams. A lost notice costs latency, never an event: a fallback poll
//! takes what is undelivered for every session with a stream here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use executor_store::{LogBounds, Store};
use tokio::sync::watch;

use crate::streams::{Listener, ListenerRegistry, SseEvent, StreamLimit};

struct RemoteSession {
    listeners: ListenerRegistry,
    /// Flips when the session is terminated: its streams end.
    gone: watch::Sender<bool>,
}

/// This node's GET streams of sessions held elsewhere, by session id.
#[derive(Default)]
pub(crate) struct RemoteListeners {
    sessions: Mutex<HashMap<String, RemoteSession>>,
}

/// A GET stream of a session held by another node.
pub struct RemoteListen {
    pub listener: Listener,
    /// Turns true when the session is terminated.
    pub gone: watch::Receiver<bool>,
}

impl RemoteListeners {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, RemoteSession>> {
        // A poisoned lock only means a panic elsewhere while it was held.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a stream of `session_id`, unless it has `max` open here or
    /// as many as this node's `room` across the cluster.
    pub(crate) fn add(
        &self,
        session_id: &str,
        stream_id: String,
        max: usize,
        room: usize,
        slow_reader_bytes: usize,
    ) -> Result<RemoteListen, StreamLimit> {
        let mut sessions = self.sessions();
        let session = sessions
            .entry(session_id.to_string())
            .or_insert_with(|| RemoteSession {
                listeners: ListenerRegistry::default(),
                gone: watch::channel(false).0,
            });
        if session.listeners.open() >= max.min(room) {
            return Err(StreamLimit(max));
        }
        let (listener, sender) = Listener::new(stream_id, slow_reader_bytes);
        session.listeners.add(sender);
        Ok(RemoteListen {
            listener,
            gone: session.gone.subscribe(),
        })
    }

    /// Streams of `session_id` open here.
    pub(crate) fn open(&self, session_id: &str) -> usize {
        self.sessions()
            .get_mut(session_id)
            .map_or(0, |s| s.listeners.open())
    }

    /// Sessions with a stream open here; the others are forgotten.
    pub(crate) fn open_sessions(&self) -> Vec<String> {
        let mut sessions = self.sessions();
        sessions.retain(|_, s| s.listeners.open() > 0);
        sessions.keys().cloned().collect()
    }

    pub(crate) fn has(&self, session_id: &str) -> bool {
        self.sessions()
            .get_mut(session_id)
            .is_some_and(|s| s.listeners.open() > 0)
    }

    /// Takes the session's undelivered events and writes them to its
    /// streams here. An event no stream took (they closed meanwhile) is
    /// put back as undelivered, for the session's next GET.
    pub(crate) async fn feed(&self, store: &Arc<dyn Store>, session_id: &str, bounds: LogBounds) {
        if !self.has(session_id) {
            return;
        }
        // The holder's POST streams are on another node, which this one cannot
        // see: it leaves nothing, and an event in transit there may go twice.
        let events = match store.take_undelivered(session_id, &[]).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(error = %e, "could not take a session's undelivered events");
                return;
            }
        };
        for record in events {
            let event = SseEvent {
                stream_id: record.stream_id.clone(),
                seq: record.seq,
                data: record.data.clone(),
            };
            let delivered = self
                .sessions()
                .get_mut(session_id)
                .is_some_and(|s| s.listeners.deliver(&record.stream_id, event));
            if !delivered {
                let back = executor_store::EventRecord {
                    undelivered: true,
                    ..record
                };
                if let Err(e) = store.append_event(back, bounds, None).await {
                    tracing::warn!(error = %e, "could not put back an undelivered event");
                }
            }
        }
    }

    /// Sends a notification on every stream of the session here.
    pub(crate) fn broadcast(&self, session_id: &str, data: &str) {
        if let Some(s) = self.sessions().get_mut(session_id) {
            s.listeners.broadcast(data);
        }
    }

    /// Ends every stream of the session here.
    pub(crate) fn end(&self, session_id: &str) {
        if let Some(s) = self.sessions().remove(session_id) {
            s.gone.send_replace(true);
        }
    }

    /// Ends every stream (shutdown).
    pub(crate) fn end_all(&self) {
        for (_, s) in self.sessions().drain() {
            s.gone.send_replace(true);
        }
    }
}
