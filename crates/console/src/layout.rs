//! The page shell: the head (the embedded stylesheet and script), the
//! navigation, the org switcher, and the headers every console page
//! carries — a Content-Security-Policy that allows this server's own
//! stylesheet and script and nothing inline, no framing, no caching.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::ConsoleState;
use crate::assets;
use crate::viewer::Viewer;

/// The policy of every console page (SPEC §14: no inline script, no
/// framing). `connect-src 'self'` lets the script follow the approvals
/// stream; nothing else leaves for another origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The console's sections, in the navigation's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Integrations,
    Policies,
    Approvals,
    Executions,
    Activity,
    Clients,
    Connect,
}

impl Section {
    const ALL: [Section; 7] = [
        Section::Integrations,
        Section::Policies,
        Section::Approvals,
        Section::Executions,
        Section::Activity,
        Section::Clients,
        Section::Connect,
    ];

    fn label(self) -> &'static str {
        match self {
            Section::Integrations => "Integrations",
            Section::Policies => "Policies",
            Section::Approvals => "Approvals",
            Section::Executions => "Executions",
            Section::Activity => "Activity",
            Section::Clients => "Clients",
            Section::Connect => "Connect a client",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Section::Integrations => "/console/integrations",
            Section::Policies => "/console/policies",
            Section::Approvals => "/console/approvals",
            Section::Executions => "/console/executions",
            Section::Activity => "/console/activity",
            Section::Clients => "/console/clients",
            Section::Connect => "/console/connect",
        }
    }
}

/// A console page for `viewer`: `title` as its heading, `body` under it,
/// `section` marked in the navigation.
pub async fn page(
    state: &ConsoleState,
    viewer: &Viewer,
    section: Section,
    title: &str,
    body: Markup,
) -> Response {
    let orgs = state
        .ops
        .account_orgs(&viewer.actor)
        .await
        .unwrap_or_default();
    let here = viewer.href(section.path());
    let shell = html! {
        (DOCTYPE)
        html lang="en" {
            (head(&viewer.prefix, title))
            body {
                a.skip href="#main" { "Skip to the content" }
                header.top {
                    a.brand href=(viewer.href("/console")) { "Executor" }
                    nav aria-label="Sections" {
                        ul {
                            @for s in Section::ALL {
                                li {
                                    @if s == section {
                                        a href=(viewer.href(s.path())) aria-current="page" { (s.label()) }
                                    } @else {
                                        a href=(viewer.href(s.path())) { (s.label()) }
                                    }
                                }
                            }
                        }
                    }
                    div.account {
                        @if orgs.len() > 1 {
                            form.org method="post" action=(viewer.href("/console/org")) {
                                input type="hidden" name="csrf" value=(viewer.csrf);
                                input type="hidden" name="back" value=(here);
                                label for="org-switch" { "Org" }
                                select id="org-switch" name="org" {
                                    @for org in &orgs {
                                        option value=(org.id) selected[org.id == viewer.actor.org_id] { (org.name) }
                                    }
                                }
                                button type="submit" { "Switch" }
                            }
                        } @else {
                            @for org in orgs.iter().filter(|o| o.id == viewer.actor.org_id) {
                                span.org-name title="Your org" { (org.name) }
                            }
                        }
                        form method="post" action=(viewer.href("/console/logout")) {
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            button.link type="submit" { "Sign out" }
                        }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    respond(StatusCode::OK, shell)
}

/// A page without navigation (an error before anything is known).
pub fn bare(status: StatusCode, title: &str, body: Markup) -> Response {
    let shell = html! {
        (DOCTYPE)
        html lang="en" {
            (head("", title))
            body { main id="main" { h1 { (title) } (body) } }
        }
    };
    respond(status, shell)
}

fn head(prefix: &str, title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Executor" }
            link rel="stylesheet" href={ (prefix) (assets::css_path()) };
            script src={ (prefix) (assets::js_path()) } defer {}
        }
    }
}

/// `markup` as an HTML response with the console's headers.
pub fn respond(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    headers(&mut response);
    response
}

/// The headers of every console page: the sign-in pages' own, under the
/// console's policy.
pub fn headers(response: &mut Response) {
    executor_authz::html_headers(response, CSP);
}
