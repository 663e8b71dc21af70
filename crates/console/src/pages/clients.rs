//! Clients (SPEC §14): who can reach the org's tools — the OAuth grants
//! clients hold (revoke), the clients it sees, its API tokens (create,
//! shown once; revoke) and the live MCP sessions (terminate). Every change
//! here stops access at once, as the CLI's and the API's do.

use axum::extract::{Path, State};
use axum::response::{Redirect, Response};
use executor_ops::{ClientInfo, GrantInfo, NewToken, PageAsk, SessionInfo, TokenInfo};
use maud::{Markup, html};
use serde::Deserialize;

use crate::ConsoleState;
use crate::error::ConsoleError;
use crate::format;
use crate::layout::{self, Section};
use crate::viewer::{Posted, Viewer};

/// Live sessions the page lists (the newest by activity).
const SESSION_ROWS: u32 = 100;

pub(crate) async fn overview(
    State(state): State<ConsoleState>,
    viewer: Viewer,
) -> Result<Response, ConsoleError> {
    let body = sections(&state, &viewer, None).await?;
    Ok(layout::page(&state, &viewer, Section::Clients, "Clients", body).await)
}

async fn sections(
    state: &ConsoleState,
    viewer: &Viewer,
    minted: Option<&str>,
) -> Result<Markup, ConsoleError> {
    let grants = state.ops.list_grants(&viewer.actor).await?;
    let clients = state.ops.list_org_clients(&viewer.actor).await?;
    let tokens = state.ops.list_tokens(&viewer.actor).await?;
    let sessions = state
        .ops
        .list_sessions(
            &viewer.actor,
            &PageAsk {
                limit: SESSION_ROWS,
                cursor: None,
            },
        )
        .await?;
    Ok(html! {
        @if let Some(token) = minted {
            div.notice role="status" {
                p { strong { "Your new API token" } " — copy it now: it is not shown again." }
                p { input.secret type="text" readonly value=(token) aria-label="The new API token" size="60"; }
            }
        }
        section aria-labelledby="grants" {
            h2 id="grants" { "OAuth grants" }
            p.lede { "Clients that signed in with a browser and were allowed for this org." }
            (grant_table(viewer, &grants))
        }
        section aria-labelledby="clients" {
            h2 id="clients" { "Registered clients" }
            (client_table(&clients))
        }
        section aria-labelledby="tokens" {
            h2 id="tokens" { "API tokens" }
            form.inline method="post" action=(viewer.href("/console/clients/tokens")) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                label { "Expires in days (empty: never) " input type="number" name="expires_in_days" min="1" max="3650" size="6"; }
                button type="submit" { "Create a token" }
            }
            (token_table(viewer, &tokens))
        }
        section aria-labelledby="sessions" {
            h2 id="sessions" { "Live MCP sessions" }
            (session_table(viewer, &sessions.items))
        }
    })
}

fn revoke_button(viewer: &Viewer, action: &str, label: &str, what: &str) -> Markup {
    html! {
        form.inline method="post" action=(viewer.href(action)) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            button.danger type="submit" aria-label={ (label) " " (what) } { (label) }
        }
    }
}

fn grant_table(viewer: &Viewer, grants: &[GrantInfo]) -> Markup {
    html! {
        @if grants.is_empty() { p.empty { "No client holds a grant." } } @else {
            table {
                thead { tr { th scope="col" { "Client" } th scope="col" { "Answers go to" } th scope="col" { "Account" }
                    th scope="col" { "Allowed" } th scope="col" { "Last used" } th scope="col" { "State" } th scope="col" { span.visually-hidden { "Action" } } } }
                tbody { @for g in grants { tr {
                    td { (g.client_name.as_deref().unwrap_or("An unnamed client")) " " small.muted { (g.client_id) } }
                    td { code { (g.redirect_host) } }
                    td { (g.account_id) }
                    td { (format::time(g.created_at_ms)) }
                    td { (format::time(g.last_used_at_ms)) }
                    td { (g.state) }
                    td { @if g.state == "active" { (revoke_button(viewer, &format!("/console/clients/grants/{}/revoke", g.id), "Revoke", &g.id)) } }
                } } }
            }
        }
    }
}

fn client_table(clients: &[ClientInfo]) -> Markup {
    html! {
        @if clients.is_empty() { p.empty { "No client yet." } } @else {
            table {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Known by" } th scope="col" { "Redirect URIs" } th scope="col" { "Created" } th scope="col" { "Last used" } } }
                tbody { @for c in clients { tr {
                    td {
                        (c.client_name.as_deref().unwrap_or("An unnamed client"))
                        @if c.origin == "metadata_document" { " " small { "(verified document)" } } @else { " " small.muted { "(unverified name)" } }
                        br; small.muted { (c.id) }
                    }
                    td { (c.origin.replace('_', " ")) }
                    td { @for uri in &c.redirect_uris { code { (uri) } br; } }
                    td { (format::time(c.created_at_ms)) }
                    td { (c.last_used_at_ms.map_or("never".to_string(), format::time)) }
                } } }
            }
        }
    }
}

fn token_table(viewer: &Viewer, tokens: &[TokenInfo]) -> Markup {
    html! {
        @if tokens.is_empty() { p.empty { "No API token." } } @else {
            table {
                thead { tr { th scope="col" { "Token" } th scope="col" { "Account" } th scope="col" { "Created" } th scope="col" { "Expires" } th scope="col" { "State" } th scope="col" { span.visually-hidden { "Action" } } } }
                tbody { @for t in tokens { tr {
                    td { code { (t.id) } }
                    td { (t.account_id) }
                    td { (format::time(t.created_at_ms)) }
                    td { (t.expires_at_ms.map_or("never".to_string(), format::time)) }
                    td { (t.state) }
                    td { @if t.state == "active" { (revoke_button(viewer, &format!("/console/clients/tokens/{}/revoke", t.id), "Revoke", &t.id)) } }
                } } }
            }
        }
    }
}

fn session_table(viewer: &Viewer, sessions: &[SessionInfo]) -> Markup {
    let live: Vec<&SessionInfo> = sessions
        .iter()
        .filter(|s| s.terminated_at_ms.is_none())
        .collect();
    html! {
        @if live.is_empty() { p.empty { "No live session." } } @else {
            table {
                thead { tr { th scope="col" { "Client" } th scope="col" { "Protocol" } th scope="col" { "Account" } th scope="col" { "Started" } th scope="col" { "Last activity" } th scope="col" { span.visually-hidden { "Action" } } } }
                tbody { @for s in live { tr {
                    td { (s.client_name.as_deref().unwrap_or("—")) br; small.muted { (s.id) } }
                    td { (s.protocol_version) }
                    td { (s.account_id) }
                    td { (format::time(s.created_at_ms)) }
                    td { (format::time(s.last_activity_at_ms)) }
                    td { (revoke_button(viewer, &format!("/console/clients/sessions/{}/terminate", s.id), "Terminate", &s.id)) }
                } } }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct NewTokenForm {
    #[serde(default)]
    expires_in_days: String,
}

/// Creates a token and shows it, once, on the page itself (never in a URL).
pub(crate) async fn create_token(
    State(state): State<ConsoleState>,
    posted: Posted<NewTokenForm>,
) -> Result<Response, ConsoleError> {
    let Posted { viewer, form } = posted;
    let expires_in_days =
        match form.expires_in_days.trim() {
            "" => None,
            days => Some(days.parse::<u64>().map_err(|_| {
                ConsoleError::BadForm("expires in days must be a whole number".into())
            })?),
        };
    let minted = state
        .ops
        .create_token(&viewer.actor, NewToken { expires_in_days })
        .await?;
    tracing::info!(token_id = %minted.id, "API token created in the console");
    let body = sections(&state, &viewer, Some(&minted.token)).await?;
    Ok(layout::page(&state, &viewer, Section::Clients, "Clients", body).await)
}

#[derive(Deserialize)]
pub(crate) struct Nothing {}

pub(crate) async fn revoke_token(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Redirect, ConsoleError> {
    let viewer = posted.viewer;
    state
        .ops
        .revoke_token(Some(&viewer.actor.org_id), &id)
        .await?;
    Ok(Redirect::to(&viewer.href("/console/clients#tokens")))
}

pub(crate) async fn revoke_grant(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Redirect, ConsoleError> {
    let viewer = posted.viewer;
    state
        .ops
        .revoke_grant(Some(&viewer.actor.org_id), &id)
        .await?;
    Ok(Redirect::to(&viewer.href("/console/clients#grants")))
}

pub(crate) async fn terminate_session(
    State(state): State<ConsoleState>,
    Path(id): Path<String>,
    posted: Posted<Nothing>,
) -> Result<Redirect, ConsoleError> {
    let viewer = posted.viewer;
    state.ops.terminate_session(&viewer.actor, &id).await?;
    Ok(Redirect::to(&viewer.href("/console/clients#sessions")))
}
