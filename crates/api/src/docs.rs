//! The document (`/api/v1/openapi.json`) and its page (`/api/docs`):
//! readable without a token (they hold no data), served from the binary
//! with no external assets.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use utoipa::openapi::OpenApi;

/// The page: HTML and a script that reads the document and renders every
/// operation, with a form to try it with a token.
const PAGE: &str = include_str!("docs.html");

pub(crate) fn router(document: Arc<OpenApi>) -> Router {
    let json: Arc<str> = document.to_pretty_json().unwrap_or_default().into();
    Router::new()
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let json = json.clone();
                async move { json_response(&json) }
            }),
        )
        .route("/api/docs", get(|| async { Html(PAGE) }))
}

fn json_response(json: &str) -> Response {
    let mut response = json.to_string().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
