//! The routes, one file per resource of SPEC §13. Each handler takes a
//! [`crate::auth::Caller`], calls one operation and returns its output as
//! JSON; errors render in `error.rs`.

pub(crate) mod approvals;
pub(crate) mod connections;
pub(crate) mod executions;
pub(crate) mod integrations;
pub(crate) mod me;
pub(crate) mod oauth;
pub(crate) mod policies;
pub(crate) mod sessions;
pub(crate) mod tokens;
pub(crate) mod tool_calls;
pub(crate) mod tools;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// 201 with `Location` and the created thing.
pub(crate) fn created(location: &str, body: impl Serialize) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}
