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
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, Interval};

/// Comment sent on every open stream this often (SPEC §2), by default: under
/// the 30–60 s idle timeouts common in proxies, so a quiet stream stays open.
pub const SSE_KEEPALIVE: Duration = Duration::from_secs(25);
/// The standalone GET stream is closed after this, by default, so proxies
/// never hold it forever; the client reconnects.
pub const GET_STREAM_ROTATION: Duration = Duration::from_secs(30 * 60);
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
    /// The stream ends after this (see [`GET_STREAM_ROTATION`]); `None` for
    /// a POST's stream, which ends with its answer.
    pub rotate_after: Option<Duration>,
}

/// Builds the 200 `text/event-stream` response. `preamble` goes first
/// (priming event, replayed events); the headers are sent at once. A
/// stream ends after `timing.rotate_after` when set, and when `until`
/// resolves.
pub fn response(
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
        finished: false,
    };
    let stream = futures::stream::unfold(state, next_chunk);
    let mut res = Response::new(Body::from_stream(stream));
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
        Step::Event(event) => {
            mark_delivered(&st.store, &st.session_id, &event);
            if let Source::Listen(l, _) = &st.source {
                l.flushed(&event);
            }
            Bytes::from(event.frame())
        }
        Step::Keepalive => Bytes::from_static(b": keepalive\n\n"),
        Step::Rotate => {
            st.finished = true;
            Bytes::from_static(b": reconnect\n\n")
        }
        Step::End => return None,
    };
    Some((Ok(chunk), st))
}

enum Step {
    Event(SseEvent),
    Keepalive,
    Rotate,
    End,
}
