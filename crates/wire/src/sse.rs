//! Server-sent-event response bodies: framing, keepalives, rotation.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use executor_sessions::{Lease, Listener, PostStream, Sessions, SseEvent, mark_delivered};
use executor_store::Store;
use futures::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval};

/// Comment sent on every open stream this often (SPEC §2), by default: under
/// the 30–60 s idle timeouts common in proxies, so a quiet stream stays open.
pub const SSE_KEEPALIVE: Duration = Duration::from_secs(25);
/// The standalone GET stream is closed after this, by default, so proxies
/// never hold it forever; the client reconnects.
pub const GET_STREAM_ROTATION: Duration = Duration::from_secs(30 * 60);
/// How long a POST's response waits for the request's answer before its
/// headers and priming event go out alone: an answer ready by then leaves
/// with them in one write, which wakes the client once instead of twice.
/// The priming event's id serves only to resume a stream that is lost;
/// one lost within this window never had it, and its answer waits in the
/// log for the session's next GET, as any answer whose stream is gone.
pub const FIRST_EVENT_WINDOW: Duration = Duration::from_millis(10);
/// Shortest keepalive period: a zero one would make the interval panic.
const MIN_KEEPALIVE: Duration = Duration::from_millis(1);

/// Where a stream's live events come from.
pub enum Source {
    /// A POST's own stream: ends when the request's task drops the sender.
    Post(mpsc::Receiver<SseEvent>),
    /// A standalone GET stream of the session, and what its replay sent
    /// (see [`Source::listen`]).
    Listen(Listener, HashSet<Replayed>),
}

/// An event a GET's replay sent: its id and a hash of its data, so that
/// a notification numbered in the stream's own sequence is never taken
/// for it.
type Replayed = (String, i64, u64);

fn replayed(event: &SseEvent) -> Replayed {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let data = BuildHasherDefault::<DefaultHasher>::default().hash_one(&event.data);
    (event.stream_id.clone(), event.seq, data)
}

impl Source {
    /// A GET stream whose preamble carries `sent`. An event it replayed
    /// may also reach it live (logged, then its POST's body went before
    /// writing it, as when a GET resumes that POST's stream); that copy is
    /// not sent twice.
    pub fn listen(listener: Listener, sent: &[SseEvent]) -> Self {
        Source::Listen(listener, sent.iter().map(replayed).collect())
    }

    async fn next(&mut self) -> Option<SseEvent> {
        match self {
            Source::Post(rx) => rx.recv().await,
            Source::Listen(l, sent) => loop {
                let event = l.events.recv().await?;
                if sent.is_empty() || !sent.remove(&replayed(&event)) {
                    return Some(event);
                }
                l.flushed(&event);
            },
        }
    }
}

/// What a stream belongs to: a lease on the session's runtime here (kept
/// busy while the stream is open, and ending it when disposed), or a
/// session another node holds (ending it when the session is terminated).
pub struct StreamOwner {
    session_id: String,
    ended: watch::Receiver<bool>,
    lease: Option<Lease>,
    /// A POST's stream counts as open on the runtime while its body is.
    _post: Option<PostStream>,
    /// Told when a POST's body drops with events no GET stream here took.
    sessions: Option<Sessions>,
}

impl StreamOwner {
    pub fn lease(lease: Lease) -> Self {
        StreamOwner {
            session_id: lease.id().to_string(),
            ended: lease.disposed(),
            lease: Some(lease),
            _post: None,
            sessions: None,
        }
    }

    /// A POST's own stream: until its body drops, a GET's replay leaves
    /// its events to it; what it has not written then goes to a GET stream.
    pub fn post(lease: Lease, post: PostStream, sessions: Sessions) -> Self {
        StreamOwner {
            _post: Some(post),
            sessions: Some(sessions),
            ..StreamOwner::lease(lease)
        }
    }

    pub fn elsewhere(session_id: &str, gone: watch::Receiver<bool>) -> Self {
        StreamOwner {
            session_id: session_id.to_string(),
            ended: gone,
            lease: None,
            _post: None,
            sessions: None,
        }
    }
}

struct StreamState {
    preamble: VecDeque<Bytes>,
    source: Source,
    keepalive: Interval,
    rotate_at: Option<Instant>,
    /// Turns true when the owner goes (runtime disposed, session gone).
    ended: watch::Receiver<bool>,
    /// Ends a standalone GET stream before its rotation: the server
    /// begins to drain, or the token that opened it is revoked.
    until: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    store: Arc<dyn Store>,
    session_id: String,
    /// Keeps the runtime counted as busy while the stream is open.
    owner: StreamOwner,
    /// See [`Timing::first_event_window`]; taken with the preamble.
    first_event_window: Option<Duration>,
    finished: bool,
}

impl Drop for StreamState {
    /// A POST's body that goes (the client left, the token lapsed) with
    /// events still queued hands them to a GET stream open here now,
    /// rather than leave them in the log for the session's next GET. Its
    /// stream is still in transit meanwhile, so no GET's replay takes them
    /// too.
    fn drop(&mut self) {
        let (Source::Post(rx), Some(lease)) = (&mut self.source, &self.owner.lease) else {
            return;
        };
        rx.close();
        let mut waiting = false;
        while let Ok(event) = rx.try_recv() {
            waiting |= !lease.deliver_to_listener(&event.stream_id.clone(), event);
        }
        if waiting && let Some(sessions) = &self.owner.sessions {
            sessions.events_waiting(lease.id());
        }
    }
}

/// When a stream sends keepalives and when it ends by itself.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// A keepalive comment goes out this often (see [`SSE_KEEPALIVE`]).
    pub keepalive: Duration,
    /// How long the headers and the preamble may wait for the first event,
    /// to leave in one write with it (see [`FIRST_EVENT_WINDOW`]); `None`
    /// sends them at once.
    pub first_event_window: Option<Duration>,
    /// The stream ends after this (see [`GET_STREAM_ROTATION`]); `None` for
    /// a POST's stream, which ends with its answer.
    pub rotate_after: Option<Duration>,
}

/// Builds the 200 `text/event-stream` response. `preamble` goes first
/// (priming event, replayed events); the headers are sent at once, or,
/// with `timing.first_event_window`, with the first event if it comes
/// within it. A stream ends after `timing.rotate_after` when set, and
/// when `until` resolves.
pub async fn response(
    owner: StreamOwner,
    store: Arc<dyn Store>,
    preamble: Vec<String>,
    source: Source,
    timing: Timing,
    until: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
) -> Response {
    let keepalive = timing.keepalive.max(MIN_KEEPALIVE);
    let state = StreamState {
        preamble: preamble.into_iter().map(Bytes::from).collect(),
        keepalive: tokio::time::interval_at(Instant::now() + keepalive, keepalive),
        rotate_at: timing.rotate_after.map(|after| Instant::now() + after),
        ended: owner.ended.clone(),
        until,
        session_id: owner.session_id.clone(),
        store,
        source,
        owner,
        first_event_window: timing.first_event_window,
        finished: false,
    };
    let mut stream = Box::pin(futures::stream::unfold(state, next_chunk));
    // Hyper writes a response's head as soon as its body has nothing
    // ready; with a window, the head waits for the first chunk (the
    // preamble, and the first event if it comes in time).
    let first = match timing.first_event_window {
        Some(_) => stream.next().await,
        None => None,
    };
    let body = futures::stream::iter(first).chain(stream);
    let mut res = Response::new(Body::from_stream(body));
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

async fn next_chunk(mut st: StreamState) -> Option<(Result<Bytes, Infallible>, StreamState)> {
    if st.finished {
        return None;
    }
    if let Some(chunk) = st.preamble.pop_front() {
        let chunk = match st.first_event_window.take() {
            Some(window) if st.preamble.is_empty() => {
                with_first_event(&mut st, chunk, window).await
            }
            _ => chunk,
        };
        return Some((Ok(chunk), st));
    }
    let rotate_at = st.rotate_at;
    let step = tokio::select! {
        event = st.source.next() => match event {
            Some(event) => Step::Event(event),
            None => Step::End,
        },
        _ = st.keepalive.tick() => Step::Keepalive,
        _ = async { tokio::time::sleep_until(rotate_at.unwrap_or_else(Instant::now)).await }, if rotate_at.is_some() => Step::Rotate,
        _ = st.ended.wait_for(|d| *d) => Step::End,
        _ = async { if let Some(until) = st.until.as_mut() { until.await } }, if st.until.is_some() => Step::End,
    };
    let chunk = match step {
        Step::Event(event) => event_chunk(&st, event),
        Step::Keepalive => Bytes::from_static(b": keepalive\n\n"),
        Step::Rotate => {
            st.finished = true;
            Bytes::from_static(b": reconnect\n\n")
        }
        Step::End => return None,
    };
    Some((Ok(chunk), st))
}

/// The preamble's last chunk, followed by the first event if it comes
/// within `window`.
async fn with_first_event(st: &mut StreamState, chunk: Bytes, window: Duration) -> Bytes {
    // `recv` is cancel-safe: an event that comes after the window is
    // taken by the next poll.
    let Ok(Some(event)) = tokio::time::timeout(window, st.source.next()).await else {
        return chunk;
    };
    let frame = event_chunk(st, event);
    let mut joined = Vec::with_capacity(chunk.len() + frame.len());
    joined.extend_from_slice(&chunk);
    joined.extend_from_slice(&frame);
    Bytes::from(joined)
}

/// An event leaving on this stream: marked delivered, and framed.
fn event_chunk(st: &StreamState, event: SseEvent) -> Bytes {
    mark_delivered(&st.store, &st.session_id, &event);
    if let Source::Listen(l, _) = &st.source {
        l.flushed(&event);
    }
    Bytes::from(event.frame())
}

enum Step {
    Event(SseEvent),
    Keepalive,
    Rotate,
    End,
}
