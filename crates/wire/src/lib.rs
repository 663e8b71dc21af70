//! The wire: MCP over Streamable HTTP (SPEC §2) and over stdio.
//!
//! `/mcp` runs the checks of SPEC §2 in their stated order — CORS
//! preflight, method allow-list, Host/Origin guard, authentication, session
//! lookup and ownership, transport checks — then hands the message to
//! [`executor_mcp::McpServer`]. Every failure is a [`WireError`], rendered to
//! the wire in one place.

mod auth;
mod drain;
mod error;
mod forward;
mod guard;
mod http;
mod oauth;
mod server;
mod sse;
pub mod stdio;

pub use auth::MetricsToken;
pub use drain::InFlight;
pub use error::WireError;
pub use guard::HostPolicy;
pub use http::{App, BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, MAX_BODY_BYTES, WireConfig, router};
pub use oauth::{
    CallbackPage, CallbackQuery, OAuthCallbacks, SharedCallbacks, oauth_router, serve_oauth,
};
pub use server::serve;
pub use sse::{FIRST_EVENT_WINDOW, GET_STREAM_ROTATION, SSE_KEEPALIVE};
