//! Every way a `/mcp` request can fail, and how each one looks on the wire.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_mcp::Overload;
use executor_mcp::RpcError;
use std::time::Duration;

use executor_sessions::{AcquireError, StreamLimit};
use executor_store::tokens::TokenRejection;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("Method not allowed")]
    MethodNotAllowed,
    #[error("Forbidden: {0}")]
    HostNotAllowed(&'static str),
    #[error("Unauthorized")]
    Unauthorized {
        resource_metadata: String,
        /// `scope="mcp"` is asked for (the authorization server is on).
        scope: bool,
        rejection: Option<TokenRejection>,
    },
    #[error(transparent)]
    Session(#[from] AcquireError),
    #[error(transparent)]
    Streams(#[from] StreamLimit),
    #[error("Not Acceptable: {0}")]
    NotAcceptable(&'static str),
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("Payload Too Large: the request body is over {0} bytes")]
    PayloadTooLarge(usize),
    /// The client stopped sending its body (SPEC §12, between chunks).
    #[error("Request Timeout: the request body stalled for over {} ms", .0.as_millis())]
    BodyTimeout(Duration),
    #[error("{}", .0.message)]
    Rpc(RpcError),
    #[error("Bad Request: {0}")]
    BadRequest(String),
    #[error("Internal error")]
    Internal,
    /// The server is shutting down: new work goes to another instance.
    #[error("Service Unavailable: the server is shutting down")]
    Draining,
    /// The session's holder could not be reached and has not lapsed yet,
    /// or the request already came from another node (SPEC §10): retry.
    #[error("Service Unavailable: the session is moving between nodes; retry shortly")]
    Moving,
    /// Every execution slot of the server is taken (SPEC §4), or a queue
    /// a request would wait in is full (SPEC §12); retry soon.
    #[error("Service Unavailable: {0}; retry shortly")]
    Overloaded(Overload),
}

impl WireError {
    fn status(&self) -> StatusCode {
        match self {
            WireError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            WireError::HostNotAllowed(_) => StatusCode::FORBIDDEN,
            WireError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            WireError::Session(AcquireError::NotFound | AcquireError::Terminated) => {
                StatusCode::NOT_FOUND
            }
            WireError::Session(AcquireError::Forbidden) => StatusCode::FORBIDDEN,
            WireError::Session(
                AcquireError::Unavailable
                | AcquireError::StoreFull
                | AcquireError::HeldElsewhere(_),
            ) => StatusCode::SERVICE_UNAVAILABLE,
            WireError::Moving => StatusCode::SERVICE_UNAVAILABLE,
            WireError::Session(AcquireError::SessionLimit(_)) | WireError::Streams(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            WireError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            WireError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            WireError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WireError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            WireError::Rpc(_) | WireError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WireError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            WireError::Draining | WireError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn code(&self) -> i64 {
        match self {
            WireError::MethodNotAllowed | WireError::Unauthorized { .. } => {
                RpcError::SESSION_NOT_FOUND
            }
            WireError::Session(AcquireError::NotFound | AcquireError::Terminated) => {
                RpcError::SESSION_NOT_FOUND
            }
            WireError::Session(AcquireError::Forbidden) => RpcError::FORBIDDEN,
            WireError::Rpc(e) => e.code,
            WireError::Internal => RpcError::INTERNAL_ERROR,
            _ => RpcError::SERVER_ERROR,
        }
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        match self {
            WireError::Unauthorized {
                resource_metadata,
                scope,
                rejection,
            } => {
                let mut challenge = format!("Bearer resource_metadata=\"{resource_metadata}\"");
                if *scope {
                    challenge.push_str(", scope=\"mcp\"");
                }
                if let Some(r) = rejection {
                    challenge.push_str(&format!(
                        ", error=\"invalid_token\", error_description=\"{}\"",
                        r.description()
                    ));
                }
                if let Ok(v) = HeaderValue::from_str(&challenge) {
                    h.insert(header::WWW_AUTHENTICATE, v);
                }
            }
            WireError::Session(
                AcquireError::Unavailable
                | AcquireError::StoreFull
                | AcquireError::HeldElsewhere(_),
            )
            | WireError::Moving
            | WireError::Draining
            | WireError::Overloaded(_) => {
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        h
    }
}

impl IntoResponse for WireError {
    fn into_response(self) -> Response {
        let error = match &self {
            WireError::Rpc(e) => e.clone(),
            other => RpcError::new(other.code(), other.to_string()),
        };
        let body = executor_mcp::error_response(&serde_json::Value::Null, &error);
        (self.status(), self.headers(), axum::Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC §12: every cause of "busy" — a full sandbox queue, a full
    /// store write queue, the server's running bound — and a full disk
    /// answer 503 with `Retry-After` and say which, before any work runs.
    #[test]
    fn every_busy_cause_is_a_503_with_retry_after_that_names_it() {
        let cases = [
            (
                WireError::Overloaded(Overload::SandboxQueue),
                "the sandbox's queue",
            ),
            (
                WireError::Overloaded(Overload::StoreWrites),
                "writes queued",
            ),
            (
                WireError::Overloaded(Overload::Executions),
                "as many executions",
            ),
            (
                WireError::Session(AcquireError::StoreFull),
                "storage is full",
            ),
        ];
        for (error, names) in cases {
            let message = error.to_string();
            let response = error.into_response();
            assert_eq!(
                response.status(),
                StatusCode::SERVICE_UNAVAILABLE,
                "{message}"
            );
            assert_eq!(
                response
                    .headers()
                    .get(header::RETRY_AFTER)
                    .map(|v| v.as_bytes()),
                Some(&b"1"[..]),
                "{message}"
            );
            assert!(message.contains(names), "{message} should name {names:?}");
        }
    }
}
