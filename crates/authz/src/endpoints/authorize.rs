//! `/authorize` (SPEC §4): `GET` checks the request and asks for consent
//! (after sign-in); `POST` is the person's answer, from the consent page.
//!
//! The order of checks is the open-redirect rule: until the client and
//! its redirect URI are known to belong together, every problem is an
//! error page; after that, problems go back to the client as RFC 6749
//! §4.1.2.1 errors, with `state` and `iss`.

use std::sync::Arc;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use executor_store::{OAuthClientOrigin, OAuthClientRecord, OAuthCodeRecord, Principal, now_ms};
use serde::Deserialize;
use url::Url;

use crate::cimd::{DocumentError, is_document_url};
use crate::endpoints::same_origin;
use crate::endpoints::signin::{org_name, see_other};
use crate::pages::{error_page, escape, hidden, page, unavailable_page};
use crate::pkce::check_challenge;
use crate::redirect::RedirectUri;
use crate::secrets::SecretKind;
use crate::server::{AuthorizationServer, CODE_TTL, SCOPES};
use crate::signin::SignedIn;

/// The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636,
/// RFC 8707), as a query or as the consent form's hidden fields.
#[derive(Debug, Deserialize, Default, Clone)]
pub(crate) struct AuthorizeParams {
    client_id: Option<String>,
    redirect_uri: Option<String>,
    response_type: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
}

/// The consent form: the request again, and the answer.
#[derive(Debug, Deserialize, Default)]
pub(crate) struct DecisionForm {
    #[serde(flatten)]
    params: AuthorizeParams,
    csrf: Option<String>,
    org: Option<String>,
    decision: Option<String>,
}

/// A request that passed every check.
struct Checked {
    client: OAuthClientRecord,
    redirect: RedirectUri,
    /// The redirect URI as presented (a loopback one with its port).
    redirect_uri: String,
    state: Option<String>,
    scope: String,
    resource: String,
    challenge: String,
}

/// Why a request stops: a page (nothing is redirected to), or an error
/// for the client at its redirect URI.
enum Stop {
    Page(Response),
    Redirect(Response),
}

impl Stop {
    fn into_response(self) -> Response {
        match self {
            Stop::Page(r) | Stop::Redirect(r) => r,
        }
    }
}

pub(crate) async fn ask(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    Query(params): Query<AuthorizeParams>,
) -> Response {
    let issuer = server.config.origin.for_request(&headers);
    let prefix = server.config.origin.path();
    // Errors go back to the client only for a signed-in person: anyone may
    // register a client, and an error redirect before sign-in would make
    // this server an open redirector to whatever it registered.
    let checked = match check(&server, &params, &issuer).await {
        Err(Stop::Page(page)) => return page,
        other => other,
    };
    let session = match server.session(&headers).await {
        Ok(Some(s)) => s,
        Ok(None) => return see_other(&login_then_back(prefix, &params), None),
        Err(page) => return page,
    };
    match checked {
        Ok(checked) => consent_page(&server, &checked, &params, &session, prefix).await,
        Err(stop) => stop.into_response(),
    }
}

pub(crate) async fn decide(
    State(server): State<Arc<AuthorizationServer>>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    let issuer = server.config.origin.for_request(&headers);
    let prefix = server.config.origin.path();
    let checked = match check(&server, &form.params, &issuer).await {
        Err(Stop::Page(page)) => return page,
        other => other,
    };
    let session = match server.session(&headers).await {
        Ok(Some(s)) => s,
        Ok(None) => return see_other(&login_then_back(prefix, &form.params), None),
        Err(page) => return page,
    };
    if !same_origin(&headers, &issuer) || !session.csrf_matches(form.csrf.as_deref().unwrap_or(""))
    {
        return error_page(
            StatusCode::FORBIDDEN,
            "This consent form did not come from this server's own page, or it has expired. \
             Start the sign-in from your client again.",
        );
    }
    let checked = match checked {
        Ok(checked) => checked,
        Err(stop) => return stop.into_response(),
    };
    if form.decision.as_deref() != Some("allow") {
        tracing::info!(client_id = %checked.client.id, "consent denied");
        return redirect_back(
            &checked,
            &issuer,
            &[
                ("error", "access_denied"),
                ("error_description", "the person declined"),
            ],
        );
    }
    let org_id = match chosen_org(&server, &session, form.org.as_deref()).await {
        Ok(org) => org,
        Err(stop) => return stop,
    };
    let code = SecretKind::Code.mint();
    let now = now_ms();
    let record = OAuthCodeRecord {
        code_hash: code.hash,
        client_id: checked.client.id.clone(),
        redirect_uri: checked.redirect_uri.clone(),
        code_challenge: checked.challenge.clone(),
        resource: checked.resource.clone(),
        scope: checked.scope.clone(),
        principal: Principal {
            account_id: session.principal.account_id.clone(),
            org_id,
        },
        created_at_ms: now,
        expires_at_ms: now + CODE_TTL.as_millis() as i64,
    };
    if let Err(e) = server.store.insert_oauth_code(record).await {
        return unavailable_page("save an authorization code", &e);
    }
    tracing::info!(client_id = %checked.client.id, "consent given");
    redirect_back(&checked, &issuer, &[("code", &code.text)])
}

/// The org a grant is for: the one picked, if the account is a member,
/// else the session's own.
async fn chosen_org(
    server: &AuthorizationServer,
    session: &SignedIn,
    picked: Option<&str>,
) -> Result<String, Response> {
    let Some(picked) = picked.filter(|p| *p != session.principal.org_id) else {
        return Ok(session.principal.org_id.clone());
    };
    match server
        .store
        .account_orgs(&session.principal.account_id)
        .await
    {
        Ok(orgs) if orgs.iter().any(|(id, _)| id == picked) => Ok(picked.to_string()),
        Ok(_) => Err(error_page(
            StatusCode::BAD_REQUEST,
            "You are not a member of the org picked.",
        )),
        Err(e) => Err(unavailable_page("read an account's orgs", &e)),
    }
}

/// The checks of SPEC §4, in the order of the open-redirect rule.
async fn check(
    server: &AuthorizationServer,
    params: &AuthorizeParams,
    issuer: &str,
) -> Result<Checked, Stop> {
    let Some(client_id) = params.client_id.as_deref().filter(|c| !c.is_empty()) else {
        return Err(Stop::Page(error_page(
            StatusCode::BAD_REQUEST,
            "The request names no client (client_id is missing).",
        )));
    };
    let client = client_of(server, client_id).await.map_err(Stop::Page)?;
    let (redirect, redirect_uri) = match_redirect(&client, params.redirect_uri.as_deref())
        .ok_or_else(|| {
            Stop::Page(error_page(
                StatusCode::BAD_REQUEST,
                "The redirect URI is not one this client registered, so the answer is not \
                 sent anywhere.",
            ))
        })?;
    let mut checked = Checked {
        client,
        redirect,
        redirect_uri,
        state: params.state.clone(),
        scope: granted_scope(params.scope.as_deref()),
        resource: format!("{issuer}/mcp"),
        challenge: String::new(),
    };
    let fail = |checked: &Checked, error: &str, description: &str| {
        Stop::Redirect(redirect_back(
            checked,
            issuer,
            &[("error", error), ("error_description", description)],
        ))
    };
    if params.response_type.as_deref() != Some("code") {
        return Err(fail(
            &checked,
            "unsupported_response_type",
            "response_type must be code",
        ));
    }
    if let Err(e) = check_challenge(
        params.code_challenge_method.as_deref(),
        params.code_challenge.as_deref(),
    ) {
        return Err(fail(&checked, "invalid_request", &e.to_string()));
    }
    if !server
        .config
        .origin
        .names_mcp(params.resource.as_deref(), issuer)
    {
        return Err(fail(
            &checked,
            "invalid_target",
            "resource must be this server's MCP endpoint",
        ));
    }
    checked.challenge = params.code_challenge.clone().unwrap_or_default();
    Ok(checked)
}

/// The client `client_id` names: the one its metadata document describes
/// (fetched when due) for an https URL, else a registered or preregistered
/// one; an error page when there is none.
async fn client_of(
    server: &AuthorizationServer,
    client_id: &str,
) -> Result<OAuthClientRecord, Response> {
    if let Some(documents) = &server.documents
        && is_document_url(client_id)
    {
        return documents
            .client(server.store.as_ref(), client_id)
            .await
            .map_err(|e| match e {
                DocumentError::Store(e) => unavailable_page("read a client", &e),
                DocumentError::Busy => error_page(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
                e => {
                    tracing::info!(client_id, error = %e, "a client metadata document was refused");
                    error_page(
                        StatusCode::BAD_REQUEST,
                        &format!(
                            "The sign-in cannot go on: {e}. Nothing of it was kept, so once the \
                             document is fixed, signing in again fetches it anew."
                        ),
                    )
                }
            });
    }
    match server.store.find_oauth_client(client_id).await {
        // With documents off, a client one described is unknown.
        Ok(Some(c)) if c.origin != OAuthClientOrigin::MetadataDocument => Ok(c),
        Ok(_) => Err(error_page(
            StatusCode::BAD_REQUEST,
            "This client is not registered with this server. Remove the server from the \
             client and add it again, so that the client registers anew.",
        )),
        Err(e) => Err(unavailable_page("read a client", &e)),
    }
}

/// The registered URI a presented one matches, and the presented one
/// (defaulting to the only registered URI when none is presented).
fn match_redirect(
    client: &OAuthClientRecord,
    presented: Option<&str>,
) -> Option<(RedirectUri, String)> {
    let registered = client
        .redirect_uris
        .iter()
        .filter_map(|u| RedirectUri::parse(u).ok());
    match presented {
        Some(p) => registered
            .into_iter()
            .find(|r| r.matches(p))
            .map(|r| (r, p.to_string())),
        None => {
            let all: Vec<RedirectUri> = registered.collect();
            match all.as_slice() {
                [only] => Some((only.clone(), only.as_str().to_string())),
                _ => None,
            }
        }
    }
}

/// The scopes granted: the known ones asked for, `mcp` always.
fn granted_scope(asked: Option<&str>) -> String {
    let asked: Vec<&str> = asked.unwrap_or("").split_ascii_whitespace().collect();
    SCOPES
        .iter()
        .filter(|s| **s == "mcp" || asked.contains(s))
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A redirect to the client with `pairs`, `state` and `iss` (RFC 9207).
fn redirect_back(checked: &Checked, issuer: &str, pairs: &[(&str, &str)]) -> Response {
    let Ok(mut url) = Url::parse(&checked.redirect_uri) else {
        return error_page(StatusCode::BAD_REQUEST, "The redirect URI is not a URL.");
    };
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in pairs {
            query.append_pair(name, value);
        }
        if let Some(state) = &checked.state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", issuer);
    }
    see_other(url.as_str(), None)
}

/// Sign-in first, then this very request again (`prefix`: the public
/// URL's path).
fn login_then_back(prefix: &str, params: &AuthorizeParams) -> String {
    let mut back = form_urlencoded::Serializer::new(String::new());
    let fields = [
        ("response_type", &params.response_type),
        ("client_id", &params.client_id),
        ("redirect_uri", &params.redirect_uri),
        ("code_challenge", &params.code_challenge),
        ("code_challenge_method", &params.code_challenge_method),
        ("state", &params.state),
        ("scope", &params.scope),
        ("resource", &params.resource),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            back.append_pair(name, value);
        }
    }
    let next = format!("{prefix}/authorize?{}", back.finish());
    let mut login = form_urlencoded::Serializer::new(String::new());
    login.append_pair("next", &next);
    format!("{prefix}/console/login?{}", login.finish())
}

async fn consent_page(
    server: &AuthorizationServer,
    checked: &Checked,
    params: &AuthorizeParams,
    session: &SignedIn,
    prefix: &str,
) -> Response {
    let orgs = server
        .store
        .account_orgs(&session.principal.account_id)
        .await
        .unwrap_or_default();
    let current = org_name(server, &session.principal).await;
    let org_field = if orgs.len() > 1 {
        let options: String = orgs
            .iter()
            .map(|(id, name)| {
                let selected = if *id == session.principal.org_id {
                    " selected"
                } else {
                    ""
                };
                format!(
                    "<option value=\"{}\"{selected}>{}</option>",
                    escape(id),
                    escape(name)
                )
            })
            .collect();
        format!("<label for=org>For the org</label><select id=org name=org>{options}</select>")
    } else {
        format!(
            "<p>For the org <b>{}</b>.</p>{}",
            escape(&current),
            hidden("org", &session.principal.org_id)
        )
    };
    let name = checked
        .client
        .client_name
        .as_deref()
        .unwrap_or("An unnamed client");
    let provenance = match checked.client.origin {
        OAuthClientOrigin::MetadataDocument => {
            let host = Url::parse(&checked.client.id)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default();
            format!(
                "(described by a document at <b>{}</b>, verified)",
                escape(&host)
            )
        }
        _ => "(name given by the client, unverified)".to_string(),
    };
    let host = checked.redirect.host().unwrap_or(checked.redirect.as_str());
    let this_machine = if checked.redirect.is_loopback() {
        "<p class=\"box warn\">The answer goes to a program on <b>this machine</b> \
         (a loopback address). Allow only if you just started this sign-in here.</p>"
    } else {
        ""
    };
    let offline = if checked.scope.contains("offline_access") {
        "<li>Keep this access until you revoke it, by refreshing its tokens</li>"
    } else {
        "<li>Keep this access until you revoke it (its tokens are refreshed)</li>"
    };
    let carried: String = [
        ("response_type", &params.response_type),
        ("client_id", &params.client_id),
        ("redirect_uri", &Some(checked.redirect_uri.clone())),
        ("code_challenge", &params.code_challenge),
        ("code_challenge_method", &params.code_challenge_method),
        ("state", &params.state),
        ("scope", &params.scope),
        ("resource", &params.resource),
    ]
    .iter()
    .filter_map(|(n, v)| v.as_deref().map(|v| hidden(n, v)))
    .collect();
    page(
        StatusCode::OK,
        "Allow access?",
        &format!(
            "<div class=box><p><b>{name}</b> <span class=muted>{provenance}</span> asks to:</p><ul><li>Use this server's MCP tools, acting as you</li>\
             {offline}</ul><p>It will receive the answer at <code>{host}</code>.</p></div>\
             {this_machine}<form method=post action=\"{prefix}/authorize\">{carried}{csrf}{org_field}\
             <button name=decision value=allow>Allow</button>\
             <button name=decision value=deny>Deny</button></form>",
            name = escape(name),
            host = escape(host),
            csrf = hidden("csrf", &session.csrf),
            prefix = escape(prefix),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_is_always_granted_and_unknown_scopes_are_ignored() {
        assert_eq!(granted_scope(None), "mcp");
        assert_eq!(
            granted_scope(Some("admin offline_access")),
            "mcp offline_access"
        );
        assert_eq!(granted_scope(Some("mcp")), "mcp");
    }

    #[test]
    fn sign_in_comes_back_to_the_same_request() {
        let params = AuthorizeParams {
            client_id: Some("cl_1".into()),
            state: Some("a&b".into()),
            ..AuthorizeParams::default()
        };
        let to = login_then_back("", &params);
        assert!(to.starts_with("/console/login?next=%2Fauthorize%3F"));
        assert!(to.contains("client_id%3Dcl_1"));
        assert!(to.contains("state%3Da%2526b"));
    }
}
