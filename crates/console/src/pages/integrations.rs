//! Integrations (SPEC §14): the org's integrations with their kind, tool
//! count and state; one integration with its connection and its tools —
//! searchable, each with its default approval, the policy that applies
//! now and the rule that decides it — and one tool with its description
//! and its input and output as TypeScript.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use executor_ops::{IntegrationState, IntegrationSummary, PolicyEvaluation, ToolHit};
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::viewer::Viewer;

/// Tools an integration page lists at once (a search narrows them).
const MAX_LISTED_TOOLS: usize = 200;

pub(crate) async fn list(
    State(state): State<ConsoleState>,
    viewer: Viewer,
) -> Result<Response, ConsoleError> {
    let integrations = state.ops.list_integrations(&viewer.actor).await?;
    let body = html! {
        p { a.button href=(viewer.href("/console/integrations/new")) { "Add an integration" } }
        @if integrations.is_empty() {
            p.empty { "No integration yet: add an OpenAPI, GraphQL or MCP one; its tools then appear here." }
        } @else {
            table {
                thead { tr { th scope="col" { "Namespace" } th scope="col" { "Kind" } th scope="col" { "Tools" } th scope="col" { "State" } th scope="col" { "Source" } th scope="col" { "Updated" } } }
                tbody { @for i in &integrations { (row(&viewer, i)) } }
            }
        }
    };
    Ok(layout::page(&state, &viewer, Section::Integrations, "Integrations", body).await)
}

/// An integration's state as SPEC §14 names it (ready, needs login,
/// missing credential, unreachable; unavailable with the reason), and
/// its style.
fn state_of(i: &IntegrationSummary) -> (&'static str, String) {
    match i.state {
        IntegrationState::Ready => ("state ready", "ready".into()),
        IntegrationState::Unavailable => ("state attention", i.status.clone()),
        other => ("state attention", other.as_str().into()),
    }
}

fn row(viewer: &Viewer, i: &IntegrationSummary) -> Markup {
    let (state_class, state) = state_of(i);
    html! {
        tr {
            td { a href=(viewer.href(&format!("/console/integrations/{}", i.namespace))) { (i.namespace) } }
            td { (i.kind) }
            td { (i.tool_count) }
            td { span class=(state_class) { (state) } }
            td { small { (format::cut(&i.source, 80)) } }
            td { (format::time(i.updated_at_ms)) }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolSearch {
    #[serde(default)]
    q: String,
}

pub(crate) async fn detail(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Path(namespace): Path<String>,
    Query(search): Query<ToolSearch>,
) -> Result<Response, ConsoleError> {
    render_detail(&state, &viewer, &namespace, &search.q, None).await
}

/// An integration's page, with `notice` (what the last action did) on top.
pub(crate) async fn render_detail(
    state: &ConsoleState,
    viewer: &Viewer,
    namespace: &str,
    query: &str,
    notice: Option<Markup>,
) -> Result<Response, ConsoleError> {
    let integration = state.ops.get_integration(&viewer.actor, namespace).await?;
    let connection = state
        .ops
        .connection_status(&viewer.actor, namespace)
        .await
        .ok();
    let q = query.trim().to_lowercase();
    let tools: Vec<ToolHit> = state
        .ops
        .integration_tools(&viewer.actor, namespace)
        .await?
        .into_iter()
        .filter(|t| {
            q.is_empty()
                || t.path.to_lowercase().contains(&q)
                || t.description
                    .as_deref()
                    .is_some_and(|d| d.to_lowercase().contains(&q))
        })
        .collect();
    let shown = &tools[..tools.len().min(MAX_LISTED_TOOLS)];
    let paths: Vec<String> = shown.iter().map(|t| t.path.clone()).collect();
    let policies = state.ops.evaluate_policies(&viewer.actor, &paths).await?;
    let here = format!("/console/integrations/{}", integration.namespace);
    let body = html! {
        @if let Some(notice) = notice { (notice) }
        dl.facts {
            dt { "Kind" } dd { (integration.kind) }
            dt { "State" } dd { span class=(state_of(&integration).0) { (state_of(&integration).1) } }
            @if let Some(transport) = &integration.transport { dt { "Transport" } dd { (transport) } }
            @if !integration.auth.is_empty() { dt { "Authentication" } dd { (integration.auth.join("; ")) } }
            dt { "Source" } dd { (integration.source) }
            @if let Some(base) = &integration.base_url { dt { "Base URL" } dd { code { (base) } } }
            dt { "Updated" } dd { (format::time(integration.updated_at_ms)) }
        }
        div.buttons {
            form.inline method="post" action=(viewer.href(&format!("{here}/refresh"))) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                button type="submit" { "Refresh" }
            }
            form.inline method="post" action=(viewer.href(&format!("{here}/remove"))) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                button.danger type="submit" { "Remove " (integration.namespace) }
            }
        }
        h2 { "Connection" }
        @if let Some(c) = &connection {
            p { (c.kind.as_str()) " credential, " (c.stored)
                @if let Some(user) = &c.username { " for " (user) }
                ", set " (format::time(c.updated_at_ms)) "." }
        } @else {
            p { "No credential is set: calls go without one." }
        }
        (crate::pages::setup::connection_forms(viewer, &integration.namespace, connection.is_some()))
        h2 id="tools" { "Tools" }
        form.filters method="get" action=(viewer.href(&here)) {
            label { "Search " input type="search" name="q" value=(query) size="30"; }
            button type="submit" { "Search" }
        }
        @if tools.len() > shown.len() {
            p.muted { "The first " (shown.len()) " of " (tools.len()) " tools; search to narrow them." }
        }
        (tool_table(viewer, shown, &policies))
    };
    let title = format!("Integration {}", integration.namespace);
    Ok(layout::page(state, viewer, Section::Integrations, &title, body).await)
}

fn tool_table(viewer: &Viewer, tools: &[ToolHit], policies: &[PolicyEvaluation]) -> Markup {
    html! {
        @if tools.is_empty() { p.empty { "No tool matches." } } @else {
            table {
                thead { tr { th scope="col" { "Tool" } th scope="col" { "Description" } th scope="col" { "By default" } th scope="col" { "Now" } } }
                tbody { @for (t, p) in tools.iter().zip(policies) { tr {
                    td { a href=(viewer.href(&format!("/console/tools/{}", t.path))) { code { (t.path) } } }
                    td { (format::cut(t.description.as_deref().unwrap_or(""), 160)) }
                    td { @if t.requires_approval { "needs approval" } @else { "runs" } }
                    td { (verdict(viewer, p)) }
                } } }
            }
        }
    }
}

/// What the rules make of a tool, and the rule that decides it.
fn verdict(viewer: &Viewer, p: &PolicyEvaluation) -> Markup {
    html! {
        span class={ "action " (p.action.as_str()) } { (p.action.as_str()) }
        @if let Some(rule) = &p.rule {
            " " small { "by " a href=(viewer.href("/console/policies")) { (rule.pattern) } }
        } @else {
            " " small.muted { "(the tool's default)" }
        }
    }
}

pub(crate) async fn tool(
    State(state): State<ConsoleState>,
    viewer: Viewer,
    Path(path): Path<String>,
) -> Result<Response, ConsoleError> {
    render_tool(&state, &viewer, &path, "{}", None).await
}

/// A tool's page: its description and TypeScript, the policy that applies
/// now, and a form to run it (`arguments`: what the form shows).
pub(crate) async fn render_tool(
    state: &ConsoleState,
    viewer: &Viewer,
    path: &str,
    arguments: &str,
    notice: Option<Markup>,
) -> Result<Response, ConsoleError> {
    let described = state.ops.describe_tool(&viewer.actor, path).await?;
    let policy = state.ops.evaluate_policy(&viewer.actor, path).await?;
    let namespace = path.split('.').next().unwrap_or_default();
    let body = html! {
        p { a href=(viewer.href(&format!("/console/integrations/{namespace}"))) { "← " (namespace) } }
        @if let Some(d) = &described.description { p.description { (d) } }
        dl.facts {
            dt { "By default" } dd { @if described.requires_approval { "needs approval" } @else { "runs" } }
            dt { "Now" } dd { (verdict(viewer, &policy)) }
        }
        h2 { "TypeScript" }
        pre.code { code { (described.type_script) } }
        h2 { "Run it" }
        @if let Some(notice) = notice { (notice) }
        form.stack method="post" action=(viewer.href(&format!("/console/tools/{}/run", described.path))) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            label for="arguments" { "Arguments (a JSON object)" }
            textarea id="arguments" name="arguments" rows="6" cols="60" spellcheck="false" { (arguments) }
            p.muted { "You run it as yourself: an approval it needs counts as given; a rule that blocks it still does." }
            div.buttons { button type="submit" { "Run " (described.path) } }
        }
    };
    Ok(layout::page(state, viewer, Section::Integrations, &described.path, body).await)
}
