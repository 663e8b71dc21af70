//! The wire: MCP over Streamable HTTP (SPEC §2) and over stdio.
//!
//! `/mcp` runs the checks of SPEC §2 in their stated order — CORS
//! preflight, method allow-list, Host/Origin guard, authentication, session
//! lookup and ownership, transport checks — then hands the message to
//! [`executor_mcp::McpServer`]. Every failure is a [`WireError`], rendered to
//! the wire in one place.

mod app;
mod auth;
mod delete;
mod drain;
mod error;
mod forward;
mod guard;
mod http;
mod listen;
mod oauth;
mod post;
mod request_stream;
mod server;
mod sessionless;
mod sse;
pub mod stdio;
mod transport;

pub use app::{App, BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, MAX_BODY_BYTES, WireConfig};
pub use auth::MetricsToken;
pub use drain::InFlight;
pub use error::WireError;
pub use guard::HostPolicy;
pub use http::router;
pub use oauth::{
    CallbackPage, CallbackQuery, OAuthCallbacks, SharedCallbacks, oauth_router, serve_oauth,
};
pub use server::serve;
pub use sse::{FIRST_EVENT_WINDOW, GET_STREAM_ROTATION, SSE_KEEPALIVE};
