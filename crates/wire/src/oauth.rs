//! The browser-facing end of an OAuth login: `GET /oauth/callback`, where
//! the authorization server sends the person back, and the client ID
//! metadata document. What they do is behind [`OAuthCallbacks`] (the
//! binary wires executor-oauth in); the same routes serve on the server's
//! listener and on the one `executor connections login` opens when no
//! server runs.
//!
//! No Host check here, unlike `/mcp`: the callback carries a single-use,
//! unguessable `state`, reveals nothing but a "connected" page, and the
//! public URL an operator configures may name any host.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use serde::Deserialize;
use tokio::net::TcpListener;

/// The query of an authorization response (RFC 6749 §4.1.2, RFC 9207).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CallbackQuery {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// How a callback ended, for the person's browser: no code, state or
/// token is ever echoed.
#[derive(Debug, Clone)]
pub struct CallbackPage {
    pub ok: bool,
    pub message: String,
}

pub trait OAuthCallbacks: Send + Sync + 'static {
    /// Completes the login `query.state` names.
    fn finish(&self, query: CallbackQuery) -> BoxFuture<'_, CallbackPage>;
    /// The client ID metadata document, when this server publishes one.
    fn client_metadata(&self) -> Option<serde_json::Value>;
}

pub type SharedCallbacks = Arc<dyn OAuthCallbacks>;

/// The two OAuth routes, on a state of their own.
pub fn oauth_router(callbacks: SharedCallbacks) -> Router {
    Router::new()
        .route("/oauth/callback", get(callback))
        .route("/oauth/client-metadata.json", get(client_metadata))
        .with_state(callbacks)
}

/// Serves [`oauth_router`] on `listener` until `shutdown` resolves (the
/// CLI's own listener while a login waits).
pub async fn serve_oauth(
    listener: TcpListener,
    callbacks: SharedCallbacks,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // `/healthz` tells a second `connections login` that this address is
    // taken by a process that completes logins.
    let router = oauth_router(callbacks).route("/healthz", get(|| async { "ok" }));
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn callback(
    State(callbacks): State<SharedCallbacks>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let page = callbacks.finish(query).await;
    let status = if page.ok {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let title = if page.ok { "Connected" } else { "Login failed" };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>{title}</title><p>{}</p>\n",
        escape_html(&page.message)
    );
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn client_metadata(State(callbacks): State<SharedCallbacks>) -> Response {
    match callbacks.client_metadata() {
        Some(document) => {
            let mut response = axum::Json(document).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_ORIGIN,
                HeaderValue::from_static("*"),
            );
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("max-age=300"),
            );
            response
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
