//! The web console (SPEC §14): what the CLI does, in a browser, for a
//! person signed in to the server (sign-in itself is `executor-authz`'s).
//!
//! Every page is rendered here, on the server, from the operations layer
//! (`executor-ops`), the code path the CLI and the management API share:
//! a change made in the console is the same change, visible to the others
//! at once. Pages read without JavaScript; one small script
//! (`assets/console.js`) adds the live parts (the approvals inbox follows
//! a server-sent event stream) and one stylesheet styles them, both
//! embedded at build time. Nothing is loaded from elsewhere.
//!
//! The safety rules live in one place each: `viewer.rs` (who is signed in;
//! every unsafe request carries the session's CSRF token and a same-origin
//! `Origin`), `layout.rs` (the page shell and its headers: a
//! Content-Security-Policy without inline script, no framing), and `maud`,
//! which escapes every value it renders unless told otherwise — nothing
//! here tells it otherwise for a value from an integration, a tool, an
//! agent or an upstream.

mod assets;
mod error;
mod format;
mod layout;
mod pages;
mod viewer;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Redirect;
use axum::routing::{get, post};
use executor_authz::PublicOrigin;
use executor_ops::Operations;

pub use pages::approvals::LiveStreams;
pub use viewer::Viewer;

/// The largest form the console takes: an uploaded API description
/// (the management API's bound too).
pub const MAX_UPLOAD_BYTES: usize = 64 * 1024 * 1024;

/// What every console handler reads.
#[derive(Clone)]
pub struct ConsoleState {
    pub ops: Arc<Operations>,
    /// Which URL names this server (links, the MCP URL, same-origin checks).
    pub public: PublicOrigin,
    /// Flips to true when the server drains: live streams end.
    pub draining: tokio::sync::watch::Receiver<bool>,
    /// The open live streams, bounded per session and in all.
    pub live: Arc<LiveStreams>,
}

/// The console's routes, under `/console` (and `/`, which redirects
/// there). Sign-in and sign-out (`/console/login`, `/console/logout`) are
/// the authorization server's.
pub fn router(state: ConsoleState) -> Router {
    use pages::{activity, approvals, clients, connect, executions, integrations, policies, setup};
    let prefix = state.public.path().to_string();
    let home = format!("{prefix}/console/integrations");
    Router::new()
        .route(
            "/",
            get(move || async move { Redirect::to(&format!("{prefix}/console")) }),
        )
        .route("/console", get(move || async move { Redirect::to(&home) }))
        .route("/console/assets/{name}", get(assets::serve))
        .route("/favicon.ico", get(assets::favicon))
        .route("/console/org", post(viewer::switch_org))
        .route("/console/integrations", get(integrations::list))
        .route(
            "/console/integrations/new",
            get(setup::new_page)
                .post(setup::add)
                .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES)),
        )
        .route(
            "/console/integrations/{namespace}",
            get(integrations::detail),
        )
        .route(
            "/console/integrations/{namespace}/refresh",
            post(setup::refresh),
        )
        .route(
            "/console/integrations/{namespace}/remove",
            post(setup::remove),
        )
        .route(
            "/console/integrations/{namespace}/connection",
            post(setup::set_connection),
        )
        .route(
            "/console/integrations/{namespace}/connection/test",
            post(setup::test_connection),
        )
        .route(
            "/console/integrations/{namespace}/connection/remove",
            post(setup::remove_connection),
        )
        .route(
            "/console/integrations/{namespace}/connection/login",
            post(setup::login),
        )
        .route("/console/tools/{path}", get(integrations::tool))
        .route("/console/tools/{path}/run", post(setup::run_tool))
        .route("/console/policies", get(policies::list).post(policies::add))
        .route("/console/policies/check", get(policies::check))
        .route("/console/policies/preview", post(policies::preview))
        .route("/console/policies/{id}", post(policies::update))
        .route("/console/policies/{id}/move", post(policies::move_rule))
        .route("/console/policies/{id}/remove", post(policies::remove))
        .route("/console/approvals", get(approvals::inbox))
        .route("/console/approvals/live", get(approvals::live))
        .route(
            "/console/approvals/{id}",
            get(approvals::one).post(approvals::decide),
        )
        .route("/console/executions", get(executions::list))
        .route("/console/executions/{id}", get(executions::detail))
        .route("/console/activity", get(activity::list))
        .route("/console/clients", get(clients::overview))
        .route("/console/clients/tokens", post(clients::create_token))
        .route(
            "/console/clients/tokens/{id}/revoke",
            post(clients::revoke_token),
        )
        .route(
            "/console/clients/grants/{id}/revoke",
            post(clients::revoke_grant),
        )
        .route(
            "/console/clients/sessions/{id}/terminate",
            post(clients::terminate_session),
        )
        .route("/console/connect", get(connect::page))
        .with_state(state)
}
