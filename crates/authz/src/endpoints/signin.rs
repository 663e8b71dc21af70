//! `/console/login` and `/console/logout` (SPEC §14): sign in by pasting
//! an API token or with a one-time login link, and sign out.
//!
//! A login link opens a page with a button rather than signing in on
//! `GET`, so that a link preview or a prefetch cannot use it up.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_store::tokens::{self, TokenRejection};
use executor_store::{Principal, now_ms};
use serde::Deserialize;

use crate::endpoints::same_origin;
use crate::pages::{error_page, escape, hidden, page, unavailable_page};
use crate::secrets::SecretKind;
use crate::server::AuthorizationServer;
use crate::signin::{SignedIn, set_cookie, start_session};

/// Where a signed-in browser goes when nothing else is asked, under the
/// public URL's path `prefix`.
fn home(prefix: &str) -> String {
    format!("{prefix}/console/login")
}

#[derive(Deserialize, Default)]
pub(crate) struct LoginQuery {
    next: Option<String>,
    link: Option<String>,
}

#[derive(Deserialize, Default)]
pub(crate) struct LoginForm {
    token: Option<String>,
    link: Option<String>,
    next: Option<String>,
}

#[derive(Deserialize, Default)]
pub(crate) struct LogoutForm {
    csrf: Option<String>,
}

/// A local path to return to, or the default: never another origin.
pub(crate) fn safe_next(prefix: &str, next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && n.len() <= 8192
                && n.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            n.to_string()
        }
        _ => home(prefix),
    }
}

pub(crate) async fn login_page(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let prefix = server.config.origin.path();
    let next = safe_next(prefix, query.next.as_deref());
    if let Some(link) = query.link.as_deref() {
        return page(
            StatusCode::OK,
            "Sign in to Executor",
            &format!(
                "<p>This one-time link signs this browser in.</p>\
                 <form method=post action=\"{}/console/login\">{}{}<button>Sign in</button></form>",
                escape(prefix),
                hidden("link", link),
                hidden("next", &next),
            ),
        );
    }
    match server.session(&headers).await {
        Ok(Some(session)) => signed_in_page(&server, &session).await,
        Ok(None) => token_form(prefix, &next, None),
        Err(page) => page,
    }
}

fn token_form(prefix: &str, next: &str, problem: Option<&str>) -> Response {
    let status = if problem.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let problem = problem
        .map(|p| format!("<p class=\"box warn\">{}</p>", escape(p)))
        .unwrap_or_default();
    page(
        status,
        "Sign in to Executor",
        &format!(
            "{problem}<form method=post action=\"{}/console/login\">{}\
             <label for=token>API token</label>\
             <input type=password id=token name=token autocomplete=off required>\
             <button>Sign in</button></form>\
             <p class=muted>Or run <code>executor console login-link</code> on the server \
             and open the link it prints.</p>",
            escape(prefix),
            hidden("next", next),
        ),
    )
}

async fn signed_in_page(server: &AuthorizationServer, session: &SignedIn) -> Response {
    let org = org_name(server, &session.principal).await;
    page(
        StatusCode::OK,
        "Signed in",
        &format!(
            "<p>This browser is signed in to the org <b>{}</b>.</p>\
             <p><a href=\"{prefix}/console\">Open the console</a></p>\
             <form method=post action=\"{prefix}/console/logout\">{}<button>Sign out</button></form>",
            escape(&org),
            hidden("csrf", &session.csrf),
            prefix = escape(server.config.origin.path()),
        ),
    )
}

/// The org's name, for display (its id if it cannot be read).
pub(crate) async fn org_name(server: &AuthorizationServer, principal: &Principal) -> String {
    match server.store.account_orgs(&principal.account_id).await {
        Ok(orgs) => orgs
            .into_iter()
            .find(|(id, _)| *id == principal.org_id)
            .map(|(_, name)| name)
            .unwrap_or_else(|| principal.org_id.clone()),
        Err(_) => principal.org_id.clone(),
    }
}

pub(crate) async fn login(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let prefix = server.config.origin.path();
    let next = safe_next(prefix, form.next.as_deref());
    let base = server.config.origin.for_request(&headers);
    // Login CSRF: another site must not sign this browser in as someone.
    if !same_origin(&headers, &base) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This sign-in did not come from this server's own page.",
        );
    }
    let (principal, token_id) = match (form.link.as_deref(), form.token.as_deref()) {
        (Some(link), _) => match redeem_link(&server, link).await {
            Ok(Some(p)) => (p, None),
            Ok(None) => {
                return error_page(
                    StatusCode::UNAUTHORIZED,
                    "This login link is used, expired or unknown. Run `executor console \
                     login-link` for a new one.",
                );
            }
            Err(response) => return response,
        },
        (None, Some(token)) => match api_token_principal(&server, token.trim()).await {
            Ok(Some((p, id))) => (p, Some(id)),
            Ok(None) => return token_form(prefix, &next, Some("That API token is not valid.")),
            Err(response) => return response,
        },
        (None, None) => return token_form(prefix, &next, Some("Paste an API token to sign in.")),
    };
    match start_session(
        server.store.as_ref(),
        principal,
        token_id,
        server.config.origin.is_https(),
    )
    .await
    {
        Ok(cookie) => {
            tracing::info!("console session started");
            see_other(&next, Some(cookie))
        }
        Err(e) => unavailable_page("start a console session", &e),
    }
}

async fn redeem_link(
    server: &AuthorizationServer,
    link: &str,
) -> Result<Option<Principal>, Response> {
    let Some(hash) = SecretKind::LoginLink.hash_of(link.trim()) else {
        return Ok(None);
    };
    server
        .store
        .redeem_login_link(&hash, now_ms())
        .await
        .map_err(|e| unavailable_page("redeem a login link", &e))
}

/// The principal and id of a pasted API token; OAuth access tokens do
/// not sign in (they are for `/mcp` alone).
async fn api_token_principal(
    server: &AuthorizationServer,
    token: &str,
) -> Result<Option<(Principal, String)>, Response> {
    let Some((id, secret)) = tokens::parse(token) else {
        return Ok(None);
    };
    let record = server
        .store
        .find_token(id)
        .await
        .map_err(|e| unavailable_page("read a token", &e))?;
    let Some(record) = record.filter(|r| !r.is_oauth()) else {
        return Ok(None);
    };
    Ok(tokens::verify(&record, secret, now_ms())
        .map_err(|_: TokenRejection| ())
        .ok()
        .map(|principal| (principal, record.id.clone())))
}

pub(crate) async fn logout(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    let base = server.config.origin.for_request(&headers);
    let prefix = server.config.origin.path();
    let session = match server.session(&headers).await {
        Ok(Some(s)) => s,
        Ok(None) => return see_other(&home(prefix), None),
        Err(page) => return page,
    };
    if !same_origin(&headers, &base) || !session.csrf_matches(form.csrf.as_deref().unwrap_or("")) {
        return error_page(
            StatusCode::FORBIDDEN,
            "This form has expired; reload the page.",
        );
    }
    if let Err(e) = server
        .store
        .delete_console_session(session.session_hash())
        .await
    {
        tracing::error!(error = %e, "could not end a console session");
    }
    see_other(
        &home(prefix),
        Some(set_cookie("", server.config.origin.is_https(), true)),
    )
}

/// 303 to a local path, setting a cookie if given.
pub(crate) fn see_other(location: &str, cookie: Option<HeaderValue>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, v);
    }
    if let Some(cookie) = cookie {
        headers.insert(header::SET_COOKIE, cookie);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_never_leaves_this_origin() {
        assert_eq!(safe_next("", Some("/authorize?x=1")), "/authorize?x=1");
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil",
            "evil",
            "/a b",
        ] {
            assert_eq!(safe_next("", Some(bad)), "/console/login", "{bad}");
        }
        assert_eq!(safe_next("/base", None), "/base/console/login");
    }
}
