//! Activity (SPEC §14): the tool-call audit trail of the management API
//! (§13), newest first, with its filters — tool (a path, or a prefix
//! ending in `.`), outcome, session, execution and time. Argument names
//! only: the audit trail never keeps values.

use axum::extract::{Query, State};
use axum::response::Response;
use executor_ops::{PageAsk, ToolCall, ToolCallQuery};
use executor_store::{ApprovalChannel, ToolCallOutcome};
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::pages::{given, pager, parse_time_filter};
use crate::viewer::Viewer;

const PAGE_ROWS: u32 = 50;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Filters {
    #[serde(default)]
    tool: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    session: String,
    #[serde(default)]
    execution: String,
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
    let outcome = match filters.outcome.as_str() {
        "" => None,
        word => Some(
            word.parse::<ToolCallOutcome>()
                .map_err(|e| ConsoleError::BadForm(e.to_string()))?,
        ),
    };
    let query = ToolCallQuery {
        tool: given(&filters.tool),
        outcome,
        session_id: given(&filters.session),
        execution_id: given(&filters.execution),
        since_ms: parse_time_filter("since", &filters.since)?,
        until_ms: parse_time_filter("until", &filters.until)?,
        page: PageAsk {
            limit: PAGE_ROWS,
            cursor: given(&filters.cursor),
        },
    };
    let listed = state.ops.list_tool_calls(&viewer.actor, &query).await?;
    let body = html! {
        form.filters method="get" action=(viewer.href("/console/activity")) {
            label { "Tool " input type="text" name="tool" value=(filters.tool) placeholder="github. or github.issues.create" size="24"; }
            label { "Outcome "
                select name="outcome" {
                    option value="" selected[filters.outcome.is_empty()] { "any" }
                    @for o in ToolCallOutcome::ALL {
                        option value=(o.as_str()) selected[filters.outcome == o.as_str()] { (o.as_str()) }
                    }
                }
            }
            label { "Session " input type="text" name="session" value=(filters.session) size="16"; }
            label { "Execution " input type="text" name="execution" value=(filters.execution) size="16"; }
            label { "Since " input type="text" name="since" value=(filters.since) placeholder="2026-12-01" size="12"; }
            label { "Until " input type="text" name="until" value=(filters.until) placeholder="2026-12-31" size="12"; }
            button type="submit" { "Filter" }
        }
        (table(&viewer, &listed.items, true))
        (pager(&viewer, "/console/activity", &[
            ("tool", &filters.tool), ("outcome", &filters.outcome), ("session", &filters.session),
            ("execution", &filters.execution), ("since", &filters.since), ("until", &filters.until),
        ], listed.next_cursor.as_deref()))
    };
    Ok(layout::page(&state, &viewer, Section::Activity, "Activity", body).await)
}

/// Tool calls as a table; `with_execution`: a column linking each to its
/// run (the execution page leaves it out).
pub(crate) fn table(viewer: &Viewer, calls: &[ToolCall], with_execution: bool) -> Markup {
    html! {
        @if calls.is_empty() {
            p.empty { "No tool call." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Started" } th scope="col" { "Tool" } th scope="col" { "Outcome" }
                    th scope="col" { "Policy" } th scope="col" { "Approval" } th scope="col" { "Took" }
                    th scope="col" { "Arguments" }
                    @if with_execution { th scope="col" { "Execution" } }
                } }
                tbody {
                    @for c in calls {
                        tr {
                            td { time datetime=(format::machine_time(c.started_at_ms)) { (format::time(c.started_at_ms)) } }
                            td { code { (c.tool_path) } }
                            td {
                                span class={ "outcome " (c.outcome.as_str()) } { (c.outcome.as_str()) }
                                @if let Some(code) = &c.error_code { " " small { (code) } }
                            }
                            td {
                                (c.policy_action.map_or("—", |a| a.as_str()))
                                @if let Some(rule) = &c.policy_rule { " " small { (rule) } }
                            }
                            td {
                                @if let Some(decision) = c.approval {
                                    (decision.as_str())
                                    @if let Some(by) = &c.decided_by { " by " (by) }
                                    @if let Some(via) = c.decided_via { " " (channel(via)) }
                                    " after " (format::duration(c.approval_wait_ms))
                                } @else {
                                    "—"
                                }
                            }
                            td { (format::duration(c.duration_ms)) }
                            td { (c.arg_names.join(", ")) }
                            @if with_execution {
                                td { a href=(viewer.href(&format!("/console/executions/{}", c.execution_id))) { (c.execution_id) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How a decision was made, as a phrase ("in the console").
fn channel(via: ApprovalChannel) -> &'static str {
    match via {
        ApprovalChannel::Resume => "with resume",
        ApprovalChannel::Native => "in the client",
        ApprovalChannel::Console => "in the console",
        ApprovalChannel::Api => "over the API",
        ApprovalChannel::Cli => "at the shell",
        ApprovalChannel::Caller => "by calling it",
        ApprovalChannel::Timeout => "(nobody decided in time)",
    }
}
