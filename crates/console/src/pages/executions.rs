//! Executions (SPEC §14): the org's runs, newest first, filtered by
//! status, session and time; one run in full — its code, result or error,
//! logs, and every tool call with its outcome, timing and approval.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use executor_ops::{ExecutionDetail, ExecutionSummary, ListExecutions, PageAsk};
use executor_store::ExecutionStatus;
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::pages::{activity, given, pager, parse_time_filter};
use crate::viewer::Viewer;

/// Rows a page of the history shows.
const PAGE_ROWS: u32 = 50;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    status: String,
    #[serde(default)]
    session: String,
    /// `YYYY-MM-DD` or an RFC 3339 time: runs started at or after it.
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    cursor: String,
}

pub(crate) async fn list(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Query(filters): Query<Filters>,
) -> Result<Response, ConsoleError> {
    let status = match filters.status.as_str() {
        "" => None,
        word => Some(
            word.parse::<ExecutionStatus>()
                .map_err(|e| ConsoleError::BadForm(e.to_string()))?,
        ),
    };
    let query = ListExecutions {
        status,
        session_id: given(&filters.session),
        since_ms: parse_time_filter("since", &filters.since)?,
        until_ms: parse_time_filter("until", &filters.until)?,
        page: PageAsk {
            limit: PAGE_ROWS,
            cursor: given(&filters.cursor),
        },
    };
    let listed = state
        .ops
        .list_executions(Some(&viewer.actor.org_id), &query)
        .await?;
    let body = html! {
        form.filters method="get" action=(viewer.href("/console/executions")) {
            label { "Status "
                select name="status" {
                    option value="" selected[filters.status.is_empty()] { "any" }
                    @for s in ExecutionStatus::ALL {
                        option value=(s.as_str()) selected[filters.status == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            label { "Session " input type="text" name="session" value=(filters.session) size="20"; }
            label { "Since " input type="text" name="since" value=(filters.since) placeholder="2026-12-01" size="12"; }
            label { "Until " input type="text" name="until" value=(filters.until) placeholder="2026-12-31" size="12"; }
            button type="submit" { "Filter" }
        }
        (table(&viewer, &listed.items))
        (pager(&viewer, "/console/executions", &[
            ("status", &filters.status), ("session", &filters.session),
            ("since", &filters.since), ("until", &filters.until),
        ], listed.next_cursor.as_deref()))
    };
    Ok(layout::page(&state, &viewer, Section::Executions, "Executions", body).await)
}

fn table(viewer: &Viewer, rows: &[ExecutionSummary]) -> Markup {
    html! {
        @if rows.is_empty() {
            p.empty { "No execution matches." }
        } @else {
            table {
                thead { tr { th scope="col" { "Started" } th scope="col" { "Status" } th scope="col" { "Code" } th scope="col" { "Took" } th scope="col" { "Session" } } }
                tbody {
                    @for x in rows {
                        tr {
                            td { a href=(viewer.href(&format!("/console/executions/{}", x.id))) {
                                time datetime=(format::machine_time(x.started_at_ms)) { (format::time(x.started_at_ms)) } } }
                            td { span class={ "status " (x.status.as_str()) } { (x.status.as_str()) } }
                            td { code { (x.code_preview) } }
                            td { (format::duration(x.duration_ms)) }
                            td { (x.session_id.as_deref().unwrap_or("—")) }
                        }
                    }
                }
            }
        }
    }
}

pub(crate) async fn detail(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let x = state
        .ops
        .get_execution(Some(&viewer.actor.org_id), &id)
        .await?;
    let title = format!("Execution {}", x.id);
    Ok(layout::page(
        &state,
        &viewer,
        Section::Executions,
        &title,
        run(&viewer, &x),
    )
    .await)
}

fn run(viewer: &Viewer, x: &ExecutionDetail) -> Markup {
    html! {
        dl.facts {
            dt { "Status" } dd { span class={ "status " (x.status.as_str()) } { (x.status.as_str()) } }
            dt { "Started" } dd { time datetime=(format::machine_time(x.started_at_ms)) { (format::time(x.started_at_ms)) } }
            dt { "Took" } dd { (format::duration(x.duration_ms)) }
            dt { "Session" } dd { (x.session_id.as_deref().unwrap_or("— (not from an MCP session)")) }
            dt { "Run by" } dd { (x.account_id) }
        }
        @if x.status == ExecutionStatus::WaitingForInteraction {
            p.notice { "This run waits for a decision: "
                a href=(viewer.href(&format!("/console/approvals/{}", x.id))) { "decide it" } "." }
        }
        h2 { "Code" }
        pre.code { (x.code) }
        @if let Some(error) = &x.error {
            h2 { "Error" }
            pre.error { (error) }
        }
        @if let Some(result) = &x.result {
            h2 { "Result" }
            pre { (format::json(result)) }
        }
        @if !x.logs.is_empty() {
            h2 { "Logs" }
            pre.logs { @for line in &x.logs { (line) "\n" } }
        }
        h2 { "Tool calls" }
        (activity::table(viewer, &x.tool_calls, false))
    }
}
