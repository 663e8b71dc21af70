//! GET `/mcp`: a session's standalone SSE stream, resumed from
//! `Last-Event-ID` and replayed from the log, served here also for a
//! session another node holds (SPEC §10).

use axum::http::HeaderMap;
use axum::response::Response;
use executor_mcp::ProtocolVersion;
use executor_sessions::{AcquireError, OutboundStream, parse_event_id, replay};
use executor_store::Principal;
use executor_store::tokens::random_id;

use crate::WireError;
use crate::app::App;
use crate::auth;
use crate::sse::{self, Source, StreamOwner};
use crate::transport::{
    Accepts, LAST_EVENT_HEADER, VERSION_HEADER, header_str, set_session_header,
};

pub(crate) async fn listen(
    app: &App,
    principal: Principal,
    token_id: String,
    session_id: Option<String>,
    headers: &HeaderMap,
) -> Result<Response, WireError> {
    let session_id = session_id
        .ok_or_else(|| WireError::BadRequest("Mcp-Session-Id header is required".into()))?;
    // Another live node holds the session: the stream is served here from
    // the log, fed as that node logs (SPEC §10; the owner was checked).
    let lease = match app.sessions.acquire(&session_id, &principal).await {
        Ok(lease) => Some(lease),
        Err(AcquireError::HeldElsewhere(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if !Accepts::of(headers).sse {
        return Err(WireError::NotAcceptable(
            "the client must accept text/event-stream",
        ));
    }
    if let Some(text) = header_str(headers, VERSION_HEADER) {
        text.parse::<ProtocolVersion>()
            .map_err(|e| WireError::BadRequest(e.to_string()))?;
    }
    let last_event = header_str(headers, LAST_EVENT_HEADER).and_then(parse_event_id);
    let stream_id = last_event
        .map(|(s, _)| s.to_string())
        .unwrap_or_else(|| random_id(9));
    // Registered first: a POST stream whose body goes from now on hands
    // what it did not write to a GET stream open here (this one, or the
    // stream it resumes, or an older one), or, gone before the look below,
    // leaves it to the replay. Before the replay, which takes the
    // undelivered events: a stream refused over the limit leaves them for
    // the next GET.
    let runtime = lease.as_ref().map(|l| l.runtime().clone());
    // The bound holds across the nodes: this node's room for the session.
    let room = app.sessions.get_stream_room(&session_id).await?;
    let (listener, owner) = match lease {
        Some(lease) => (
            lease.add_listener_within(stream_id.clone(), room)?,
            StreamOwner::lease(lease),
        ),
        None => {
            let remote = app
                .sessions
                .listen_elsewhere(&session_id, stream_id.clone(), room)?;
            (
                remote.listener,
                StreamOwner::elsewhere(&session_id, remote.gone),
            )
        }
    };
    // POST streams open here write their own events: taking one of them
    // too would send it twice. None joins until the take below is done.
    let in_transit = match &runtime {
        Some(runtime) => Some(runtime.in_transit().await),
        None => None,
    };
    let except = in_transit
        .as_ref()
        .map_or(&[][..], |t| t.streams.as_slice());
    let replayed = replay(app.store(), &session_id, last_event, except)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "could not read the event log");
            WireError::Internal
        })?;
    drop(in_transit);
    let mut preamble = Vec::with_capacity(replayed.len() + 1);
    match last_event {
        // A resumed stream keeps its ids; a comment flushes the headers.
        Some(_) => preamble.push(": resumed\n\n".to_string()),
        None => preamble.push(
            OutboundStream::new(app.store().clone(), &session_id, stream_id, 0)
                .priming()
                .frame(),
        ),
    }
    preamble.extend(replayed.iter().map(|e| e.frame()));
    // The stream ends when the server drains or the token lapses.
    let mut draining = app.sessions.draining();
    let lapsed = auth::token_lapsed(app.store().clone(), token_id);
    let until = Box::pin(async move {
        tokio::select! {
            _ = draining.wait_for(|d| *d) => {}
            _ = lapsed => {}
        }
    });
    let mut res = sse::response(
        owner,
        app.store().clone(),
        preamble,
        Source::listen(listener, &replayed),
        sse::Timing {
            keepalive: app.config.sse_keepalive,
            rotate_after: Some(app.config.get_stream_rotation),
            first_event_window: None,
        },
        Some(until),
    )
    .await;
    set_session_header(&mut res, &session_id);
    Ok(res)
}
