//! Every error of the API, rendered in one place as
//! `application/problem+json` (RFC 9457) with a stable `code` and, for bad
//! input, the field at fault.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use executor_ops::{ErrorKind, OpError};
use serde::Serialize;
use utoipa::ToSchema;

/// A problem: what every non-2xx answer of the API carries.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem: `about:blank` plus the `code`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HTTP status's phrase.
    pub title: String,
    pub status: u16,
    /// Stable and machine-readable: `invalid_input`, `not_found`,
    /// `unauthorized`, `rate_limited`, …
    pub code: String,
    /// What went wrong and what to do, for a person.
    pub detail: String,
    /// The input field at fault (a JSON path such as `spec.url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// An error a handler returns.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    detail: String,
    field: Option<String>,
    /// Seconds, for 429 and 503.
    retry_after: Option<u64>,
    /// 401: the `WWW-Authenticate` challenge.
    challenge: bool,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code: code.to_string(),
            detail: detail.into(),
            field: None,
            retry_after: None,
            challenge: false,
        }
    }

    /// Bad input at `field`.
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        ApiError {
            field: Some(field.into()),
            ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", detail)
        }
    }

    /// No credential, or one that is not an API token of this server. The
    /// text says how to get one.
    pub fn unauthorized(detail: &str) -> Self {
        ApiError {
            challenge: true,
            ..Self::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!(
                    "{detail}; send `Authorization: Bearer <token>` with an API token \
                     (make one with `executor token create --email you@example.com`)"
                ),
            )
        }
    }

    /// An OAuth access token, which is for `/mcp` alone (SPEC §13).
    pub fn invalid_token(detail: &str) -> Self {
        ApiError {
            challenge: true,
            ..Self::new(StatusCode::UNAUTHORIZED, "invalid_token", detail)
        }
    }

    /// A console session's unsafe request without its CSRF token.
    pub fn forbidden(detail: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, "csrf_token_missing", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    pub fn rate_limited(retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after.max(1)),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many requests from this token; retry after the Retry-After seconds",
            )
        }
    }

    /// The token (or the server) holds the most event streams it may.
    pub fn too_many_streams(detail: impl Into<String>) -> Self {
        ApiError {
            retry_after: Some(5),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", detail)
        }
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        let status = match e.kind {
            ErrorKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            // The caller named the source; that it cannot be read is about
            // the request, not a fault of this server (a 5xx).
            ErrorKind::Upstream => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            field: e.field.map(str::to_string),
            retry_after: (e.kind == ErrorKind::Unavailable).then_some(1),
            ..Self::new(status, e.code, e.message)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = Problem {
            kind: format!("about:blank#{}", self.code),
            title: self
                .status
                .canonical_reason()
                .unwrap_or("Error")
                .to_string(),
            status: self.status.as_u16(),
            code: self.code,
            detail: self.detail,
            field: self.field,
        };
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"executor\""),
            );
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
