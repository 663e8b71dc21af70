//! The console's one error type, rendered to a page in one place: what
//! went wrong in the operations layer's own words, with the HTTP status
//! its kind maps to. A fault of ours, or a store that cannot be read, is
//! logged here and shown without its detail.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use executor_ops::{ErrorKind, OpError};
use maud::html;

use crate::layout;

#[derive(Debug)]
pub enum ConsoleError {
    /// An operation refused or failed.
    Op(OpError),
    /// Nothing by that name in the viewer's org.
    NotFound(String),
    /// The store could not be read (the detail is logged, not shown).
    Unavailable(String),
    /// An unsafe request without the session's CSRF token, or from
    /// another origin.
    Forged,
    /// A form that could not be read.
    BadForm(String),
}

impl From<OpError> for ConsoleError {
    fn from(e: OpError) -> Self {
        ConsoleError::Op(e)
    }
}

impl ConsoleError {
    fn status_and_message(&self) -> (StatusCode, String) {
        match self {
            ConsoleError::Op(e) => {
                let status = match e.kind {
                    ErrorKind::Invalid => StatusCode::BAD_REQUEST,
                    ErrorKind::NotFound => StatusCode::NOT_FOUND,
                    ErrorKind::Conflict => StatusCode::CONFLICT,
                    ErrorKind::Forbidden => StatusCode::FORBIDDEN,
                    ErrorKind::Upstream => StatusCode::BAD_GATEWAY,
                    ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
                    ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
                };
                (status, e.message.clone())
            }
            ConsoleError::NotFound(what) => {
                (StatusCode::NOT_FOUND, format!("There is no {what} here."))
            }
            ConsoleError::Unavailable(detail) => {
                tracing::error!(error = %detail, "the console could not reach the store");
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The server could not reach its store; try again.".into(),
                )
            }
            ConsoleError::Forged => (
                StatusCode::FORBIDDEN,
                "This form did not come from this server's own page, or your session changed. \
                 Go back, reload the page and try again."
                    .into(),
            ),
            ConsoleError::BadForm(why) => (
                StatusCode::BAD_REQUEST,
                format!("The form could not be read: {why}"),
            ),
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, message) = self.status_and_message();
        let body = html! {
            p.problem role="alert" { (message) }
            p { "Go back to the page you came from, reload it and try again." }
        };
        layout::bare(status, "Something went wrong", body)
    }
}
