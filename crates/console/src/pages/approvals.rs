//! Approvals (SPEC §14): the org's calls waiting for a human, each with
//! its tool, a bounded preview of its arguments, its session and its
//! deadline, and Approve / Decline. The inbox follows a server-sent event
//! stream (`/console/approvals/live`) that sends the list again whenever
//! it changes — read from the store every half second, so a call paused on
//! any node appears; without JavaScript the page is read and reloaded by hand.
//! Each call has a stable URL, `/console/approvals/<executionId>`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use executor_ops::PendingApproval;
use futures::Stream;
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::viewer::{Posted, Viewer};

/// How often a live inbox reads the waiting list: a call paused on any
/// node shows within this (SPEC §14's target: under a second).
const LIVE_POLL: Duration = Duration::from_millis(500);
/// How long one live stream lasts; the browser's `EventSource` reconnects.
const LIVE_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Live streams one console session may hold (a few tabs), and all
/// sessions together.
pub const MAX_LIVE_PER_SESSION: usize = 8;
pub const MAX_LIVE: usize = 256;
/// How long a decision waits for the run it continues before the page
/// says what it has.
const DECISION_WAIT: Duration = Duration::from_secs(2);

pub(crate) async fn inbox(
    State(state): State<ConsoleState>,
    viewer: Viewer,
) -> Result<Response, ConsoleError> {
    let pending = state.ops.pending_approvals(&viewer.actor).await?;
    let body = html! {
        p.lede { "Calls that wait for a person. A call not decided by its deadline is declined by itself. "
            "This list updates by itself while the page is open." }
        section id="pending" aria-live="polite" data-live=(viewer.href("/console/approvals/live")) {
            (list(&viewer, &pending))
        }
    };
    Ok(layout::page(&state, &viewer, Section::Approvals, "Approvals", body).await)
}

/// The waiting list (also what the live stream sends).
fn list(viewer: &Viewer, pending: &[PendingApproval]) -> Markup {
    html! {
        @if pending.is_empty() {
            p.empty { "Nothing waits for a decision." }
        } @else {
            ul.cards {
                @for p in pending {
                    li.card { (card(viewer, p)) }
                }
            }
        }
    }
}

fn card(viewer: &Viewer, p: &PendingApproval) -> Markup {
    let url = viewer.href(&format!("/console/approvals/{}", p.execution_id));
    html! {
        h2 { a href=(url) { code { (p.tool_path) } } }
        dl.facts {
            @if let Some(question) = &p.question {
                dt { "The integration asks" } dd { (question) }
            }
            dt { "Arguments" } dd { pre { (p.args_preview) } }
            dt { "Session" } dd { (p.session_id.as_deref().unwrap_or("— (not from an MCP session)")) }
            dt { "Asked by" } dd { (p.policy_rule.as_deref().map_or("the tool's default".to_string(), |r| format!("rule {r}"))) }
            dt { "Paused" } dd { time datetime=(format::machine_time(p.paused_at_ms)) { (format::time(p.paused_at_ms)) } }
            dt { "Deadline" } dd { time datetime=(format::machine_time(p.expires_at_ms)) { (format::time(p.expires_at_ms)) } }
        }
        form.decide method="post" action=(url) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            button.approve type="submit" name="decision" value="approve" { "Approve" }
            button.decline type="submit" name="decision" value="decline" { "Decline" }
        }
    }
}

/// One call's stable page: the call while it waits, else where its run
/// ended up.
pub(crate) async fn one(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let pending = state.ops.pending_approvals(&viewer.actor).await?;
    let body = match pending.iter().find(|p| p.execution_id == id) {
        Some(p) => html! { div.card { (card(&viewer, p)) } },
        None => {
            let execution = state
                .ops
                .get_execution(Some(&viewer.actor.org_id), &id)
                .await?;
            html! {
                p { "This call no longer waits: its run is " strong { (execution.status.as_str()) } "." }
                p { a href=(viewer.href(&format!("/console/executions/{}", execution.id))) { "See the execution" } }
            }
        }
    };
    Ok(layout::page(&state, &viewer, Section::Approvals, "Approval", body).await)
}

#[derive(Deserialize)]
pub(crate) struct Decision {
    #[serde(default)]
    decision: String,
}

/// Approve or Decline, then back to the call's page (which says how it
/// ended, or shows the run's next pause).
pub(crate) async fn decide(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Decision>,
) -> Result<Redirect, ConsoleError> {
    let Posted { viewer, form } = posted;
    let action = match form.decision.as_str() {
        "approve" => "accept",
        "decline" => "decline",
        _ => {
            return Err(ConsoleError::BadForm(
                "the decision must be approve or decline".into(),
            ));
        }
    };
    state
        .ops
        .resume_execution(
            Some(&viewer.actor),
            &id,
            action,
            DECISION_WAIT,
            executor_store::ApprovalChannel::Console,
        )
        .await?;
    tracing::info!(execution_id = %id, decision = action, "decided in the console");
    Ok(Redirect::to(
        &viewer.href(&format!("/console/approvals/{id}")),
    ))
}

/// Who holds how many live streams (bounded: each holds a task and a
/// store read a second).
#[derive(Debug, Default)]
pub struct LiveStreams {
    open: Mutex<HashMap<Vec<u8>, usize>>,
}

struct LiveSlot {
    streams: Arc<LiveStreams>,
    session: Vec<u8>,
}

impl LiveStreams {
    fn open(self: &Arc<Self>, session: &[u8]) -> Option<LiveSlot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.values().sum::<usize>() >= MAX_LIVE {
            return None;
        }
        let held = open.entry(session.to_vec()).or_default();
        if *held >= MAX_LIVE_PER_SESSION {
            return None;
        }
        *held += 1;
        Some(LiveSlot {
            streams: self.clone(),
            session: session.to_vec(),
        })
    }
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = open.get_mut(&self.session) {
            *held -= 1;
            if *held == 0 {
                open.remove(&self.session);
            }
        }
    }
}

/// The live inbox: an event `pending` carrying the list's HTML at once
/// and whenever it changes. It ends when the session ends, when the
/// server drains, or after 15 min (the browser reconnects).
pub(crate) async fn live(State(state): State<ConsoleState>, viewer: Viewer) -> Response {
    let Some(slot) = state.live.open(viewer.session_hash()) else {
        return (
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            "too many live pages are open; close some",
        )
            .into_response();
    };
    let mut response = Sse::new(events(state, viewer, slot))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

fn events(
    state: ConsoleState,
    viewer: Viewer,
    slot: LiveSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watch {
        state: ConsoleState,
        viewer: Viewer,
        _slot: LiveSlot,
        last: Option<String>,
        first: bool,
        ends_at: tokio::time::Instant,
    }
    let watch = Watch {
        state,
        viewer,
        _slot: slot,
        last: None,
        first: true,
        ends_at: tokio::time::Instant::now() + LIVE_LIFETIME,
    };
    futures::stream::unfold(watch, |mut w| async move {
        loop {
            if !w.first {
                let mut draining = w.state.draining.clone();
                tokio::select! {
                    _ = tokio::time::sleep(LIVE_POLL) => {}
                    _ = tokio::time::sleep_until(w.ends_at) => return None,
                    _ = draining.wait_for(|d| *d) => return None,
                }
                if !w.viewer.still_signed_in(&w.state).await {
                    return None;
                }
            }
            w.first = false;
            match w.state.ops.pending_approvals(&w.viewer.actor).await {
                Ok(pending) => {
                    let html = list(&w.viewer, &pending).into_string();
                    if w.last.as_deref() != Some(html.as_str()) {
                        w.last = Some(html.clone());
                        return Some((Ok(Event::default().event("pending").data(html)), w));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a live inbox could not read the waiting list")
                }
            }
        }
    })
}
