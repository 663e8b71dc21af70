//! SSE streams and the durable event log behind them (SPEC §2).
//!
//! Every message sent on a stream is appended to the session's event log
//! before it goes to the socket, with an id `<stream-id>:<seq>`. An event is
//! "undelivered" until the HTTP body hands it to the connection; undelivered
//! events are replayed on the session's next GET.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use executor_store::{EventRecord, Fence, LogBounds, Store, StoreResult, now_ms};
use tokio::sync::mpsc;

/// Unflushed bytes a GET stream may queue before it is cut off, by default
/// (SPEC §2, §12): a reader that far behind holds memory for nobody; its
/// events stay in the log, replayable on its next GET.
pub const SLOW_READER_BYTES: usize = 8 * 1024 * 1024;

/// Reconnection delay suggested to clients in priming events.
const RECONNECT_HINT_MS: u32 = 1000;

/// A session already holds the most open GET streams it may (SPEC §12).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("Too many open GET streams on this session (limit {0}): close one before opening another")]
pub struct StreamLimit(pub usize);

/// One SSE event carrying a JSON-RPC message (or the empty priming event).
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub stream_id: String,
    pub seq: i64,
    pub data: String,
}

impl SseEvent {
    pub fn id(&self) -> String {
        format!("{}:{}", self.stream_id, self.seq)
    }

    /// The wire frame: `id: s:n\nevent: message\ndata: …\n\n`.
    pub fn frame(&self) -> String {
        if self.data.is_empty() {
            // Priming: an id the client can resume from, nothing to parse.
            // `retry` tells the client how soon to reconnect if it loses us.
            return format!("id: {}\nretry: {RECONNECT_HINT_MS}\ndata: \n\n", self.id());
        }
        format!("id: {}\nevent: message\ndata: {}\n\n", self.id(), self.data)
    }

    fn from_record(r: EventRecord) -> Self {
        SseEvent {
            stream_id: r.stream_id,
            seq: r.seq,
            data: r.data,
        }
    }
}

/// Parses a `Last-Event-ID` of the form `<stream-id>:<seq>`.
pub fn parse_event_id(id: &str) -> Option<(&str, i64)> {
    let (stream, seq) = id.trim().rsplit_once(':')?;
    if stream.is_empty() {
        return None;
    }
    Some((stream, seq.parse().ok()?))
}

/// The writer side of one stream of one session: numbers events and logs
/// them durably before they are sent.
pub struct OutboundStream {
    store: Arc<dyn Store>,
    session_id: String,
    stream_id: String,
    next_seq: i64,
    bounds: LogBounds,
    /// The holder's lease, carried by every append (None: not a holder's
    /// stream, as in tests of the log alone).
    fence: Option<Fence>,
}

impl OutboundStream {
    pub fn new(store: Arc<dyn Store>, session_id: &str, stream_id: String, after_seq: i64) -> Self {
        OutboundStream {
            store,
            session_id: session_id.to_string(),
            stream_id,
            next_seq: after_seq + 1,
            bounds: LogBounds::DEFAULT,
            fence: None,
        }
    }

    /// Appends only while `fence` holds the session.
    pub(crate) fn fenced(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Keeps the stream's events in the log within `bounds` rather than
    /// the default.
    pub(crate) fn with_bounds(mut self, bounds: LogBounds) -> Self {
        self.bounds = bounds;
        self
    }

    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    /// The priming event (seq 0); not logged, it carries no message.
    pub fn priming(&self) -> SseEvent {
        SseEvent {
            stream_id: self.stream_id.clone(),
            seq: 0,
            data: String::new(),
        }
    }

    /// Appends `message` to the durable log and returns the event to send.
    pub async fn log(&mut self, message: &serde_json::Value) -> StoreResult<SseEvent> {
        let event = SseEvent {
            stream_id: self.stream_id.clone(),
            seq: self.next_seq,
            data: message.to_string(),
        };
        self.next_seq += 1;
        self.store
            .append_event(
                EventRecord {
                    session_id: self.session_id.clone(),
                    stream_id: event.stream_id.clone(),
                    seq: event.seq,
                    data: event.data.clone(),
                    undelivered: true,
                    created_at_ms: now_ms(),
                },
                self.bounds,
                self.fence.as_ref(),
            )
            .await?;
        Ok(event)
    }
}

/// Records that an event reached its connection. Fire-and-forget: a lost
/// mark only means the event may be replayed once more (at-least-once).
pub fn mark_delivered(store: &Arc<dyn Store>, session_id: &str, event: &SseEvent) {
    if event.data.is_empty() {
        return;
    }
    let store = store.clone();
    let (session, stream, seq) = (session_id.to_string(), event.stream_id.clone(), event.seq);
    tokio::spawn(async move {
        if let Err(e) = store.mark_delivered(&session, &stream, seq).await {
            tracing::warn!(error = %e, "could not mark event delivered");
        }
    });
}

/// Events to replay on a GET: those after `Last-Event-ID` on its stream,
/// then every undelivered event of the session but those of the streams in
/// `in_transit` (POST streams open here, which write their own).
pub async fn replay(
    store: &Arc<dyn Store>,
    session_id: &str,
    last_event: Option<(&str, i64)>,
    in_transit: &[String],
) -> StoreResult<Vec<SseEvent>> {
    let mut events = Vec::new();
    if let Some((stream, seq)) = last_event {
        events.extend(
            store
                .events_after(session_id, stream, seq)
                .await?
                .into_iter()
                .map(SseEvent::from_record),
        );
    }
    let undelivered = store.take_undelivered(session_id, in_transit).await?;
    for e in undelivered.into_iter().map(SseEvent::from_record) {
        if !events.contains(&e) {
            events.push(e);
        }
    }
    Ok(events)
}

/// The receiving end of a standalone (GET) stream.
pub struct Listener {
    pub stream_id: String,
    pub events: mpsc::UnboundedReceiver<SseEvent>,
    queued_bytes: Arc<AtomicUsize>,
}

impl Listener {
    /// `slow_reader_bytes`: unflushed bytes queued before the stream is cut off.
    pub(crate) fn new(stream_id: String, slow_reader_bytes: usize) -> (Self, ListenerSender) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        (
            Listener {
                stream_id: stream_id.clone(),
                events: rx,
                queued_bytes: queued_bytes.clone(),
            },
            ListenerSender {
                stream_id,
                tx,
                queued_bytes,
                slow_reader_bytes,
                next_notification_seq: AtomicI64::new(1),
            },
        )
    }

    /// Called by the body when it has written an event's bytes.
    pub fn flushed(&self, event: &SseEvent) {
        self.queued_bytes.fetch_sub(
            event
                .data
                .len()
                .min(self.queued_bytes.load(Ordering::Acquire)),
            Ordering::AcqRel,
        );
    }
}

pub(crate) struct ListenerSender {
    stream_id: String,
    tx: mpsc::UnboundedSender<SseEvent>,
    queued_bytes: Arc<AtomicUsize>,
    /// Past this many queued bytes the reader is cut off.
    slow_reader_bytes: usize,
    /// Numbers notifications on this stream (its priming event is seq 0).
    next_notification_seq: AtomicI64,
}

impl ListenerSender {
    /// Sends unless the reader is gone or too slow; a slow reader's stream
    /// is cut off (its events stay in the log, replayable).
    fn send(&self, event: SseEvent) -> bool {
        let queued = self
            .queued_bytes
            .fetch_add(event.data.len(), Ordering::AcqRel);
        if queued + event.data.len() > self.slow_reader_bytes {
            return false;
        }
        self.tx.send(event).is_ok()
    }
}

#[derive(Default)]
pub(crate) struct ListenerRegistry {
    senders: Vec<ListenerSender>,
}

impl ListenerRegistry {
    pub(crate) fn add(&mut self, sender: ListenerSender) {
        self.senders.retain(|s| !s.tx.is_closed());
        self.senders.push(sender);
    }

    /// Streams still open (their receiver not dropped).
    pub(crate) fn open(&mut self) -> usize {
        self.senders.retain(|s| !s.tx.is_closed());
        self.senders.len()
    }

    pub(crate) fn deliver(&mut self, stream_id: &str, event: SseEvent) -> bool {
        self.senders.retain(|s| !s.tx.is_closed());
        let target = self
            .senders
            .iter()
            .position(|s| s.stream_id == stream_id)
            .or(if self.senders.is_empty() {
                None
            } else {
                Some(0)
            });
        match target {
            Some(i) => {
                let ok = self.senders[i].send(event);
                if !ok {
                    // Gone or too slow: drop it so the stream ends.
                    self.senders.remove(i);
                }
                ok
            }
            None => false,
        }
    }

    /// Sends `data` on every open stream, each numbered in its own sequence.
    /// Notifications are not logged: `tools/list_changed` carries no state a
    /// client could miss (it can always list again).
    pub(crate) fn broadcast(&mut self, data: &str) {
        self.senders.retain(|s| !s.tx.is_closed());
        self.senders.retain(|s| {
            let seq = s.next_notification_seq.fetch_add(1, Ordering::AcqRel);
            s.send(SseEvent {
                stream_id: s.stream_id.clone(),
                seq,
                data: data.to_string(),
            })
        });
    }

    pub(crate) fn clear(&mut self) {
        self.senders.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip() {
        let e = SseEvent {
            stream_id: "abc".into(),
            seq: 3,
            data: "{}".into(),
        };
        assert_eq!(parse_event_id(&e.id()), Some(("abc", 3)));
        assert_eq!(e.frame(), "id: abc:3\nevent: message\ndata: {}\n\n");
        assert_eq!(parse_event_id("nope"), None);
        assert_eq!(parse_event_id(":1"), None);
    }
}
