//! `/approvals`: the calls waiting for a human, deciding one, and a
//! stream of the waiting list as it changes (the console's live inbox).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use executor_ops::{CallResult, PendingApproval};
use futures::Stream;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::ApiState;
use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::extract::{Body, Segment};
use crate::routes::executions::{Decision, decide};

pub(crate) fn router() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(pending_approvals))
        .routes(routes!(stream_approvals))
        .routes(routes!(decide_approval))
}

/// How often a stream reads the waiting list. The list is read from the
/// store, so a pause or decision on any node shows within this.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// How long one stream lasts before it ends and the client reconnects
/// (an `EventSource` does so by itself): a stream is never held forever.
const STREAM_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// The org's waiting calls as a server-sent event stream: an event
/// `pending` with the whole list (as `GET /approvals` answers it) at once
/// and whenever it changes; a comment every 15 s keeps proxies from
/// closing it. It ends when the token stops being valid, when the server
/// drains, or after 15 min.
#[utoipa::path(get, path = "/approvals/stream", tag = "approvals",
    responses(
        (status = 200, description = "`pending` events, each the whole waiting list (JSON, as `GET /approvals`)", content_type = "text/event-stream", body = String),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 429, description = "Too many requests or too many open streams", body = Problem),
    ),
    security(("bearer" = [])))]
async fn stream_approvals(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let slot = state.streams.open(&caller.token_id)?;
    let first = state.ops.pending_approvals(&caller.actor).await?;
    let stream = async_stream(state, caller, slot, first);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The events of one stream; `slot` is held until it ends.
fn async_stream(
    state: ApiState,
    caller: Caller,
    slot: crate::streams::StreamSlot,
    first: Vec<PendingApproval>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watch {
        state: ApiState,
        caller: Caller,
        _slot: crate::streams::StreamSlot,
        last: Option<String>,
        next: Option<Vec<PendingApproval>>,
        ends_at: tokio::time::Instant,
    }
    let watch = Watch {
        state,
        caller,
        _slot: slot,
        last: None,
        next: Some(first),
        ends_at: tokio::time::Instant::now() + STREAM_LIFETIME,
    };
    futures::stream::unfold(watch, |mut w| async move {
        loop {
            if let Some(list) = w.next.take() {
                let text = serde_json::to_string(&list).unwrap_or_else(|_| "[]".into());
                if w.last.as_deref() != Some(text.as_str()) {
                    w.last = Some(text.clone());
                    let event = Event::default().event("pending").data(text);
                    return Some((Ok(event), w));
                }
            }
            let mut draining = w.state.draining.clone();
            tokio::select! {
                _ = tokio::time::sleep(STREAM_POLL) => {}
                _ = tokio::time::sleep_until(w.ends_at) => return None,
                _ = draining.wait_for(|d| *d) => return None,
            }
            if tokio::time::Instant::now() >= w.ends_at || *w.state.draining.borrow() {
                return None;
            }
            if !crate::auth::still_valid(&w.state, &w.caller).await {
                return None;
            }
            match w.state.ops.pending_approvals(&w.caller.actor).await {
                Ok(list) => w.next = Some(list),
                Err(e) => {
                    tracing::warn!(error = %e, "an approvals stream could not read the waiting list");
                }
            }
        }
    })
}

/// The org's calls waiting for a decision, oldest first.
#[utoipa::path(get, path = "/approvals", tag = "approvals",
    responses(
        (status = 200, description = "The waiting calls", body = Vec<PendingApproval>),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn pending_approvals(
    State(state): State<ApiState>,
    caller: Caller,
) -> ApiResult<Json<Vec<PendingApproval>>> {
    Ok(Json(state.ops.pending_approvals(&caller.actor).await?))
}

/// Decides the call an execution waits on (the same as
/// `POST /executions/{id}/resume`), and answers with what the run came to.
#[utoipa::path(post, path = "/approvals/{executionId}", tag = "approvals",
    params(("executionId" = String, Path, description = "The paused execution (exec_…)")),
    request_body = Decision,
    responses(
        (status = 200, description = "What the run came to after the decision", body = CallResult),
        (status = 401, description = "No valid API token", body = Problem),
        (status = 404, description = "No such paused execution in the org", body = Problem),
        (status = 409, description = "The execution has finished or was decided", body = Problem),
        (status = 415, description = "The body is not JSON", body = Problem),
        (status = 422, description = "A bad action", body = Problem),
        (status = 429, description = "Too many requests", body = Problem),
    ),
    security(("bearer" = [])))]
async fn decide_approval(
    State(state): State<ApiState>,
    caller: Caller,
    Segment(id): Segment,
    Body(body): Body<Decision>,
) -> ApiResult<Json<CallResult>> {
    Ok(Json(decide(&state, &caller, &id, body.action).await?))
}
