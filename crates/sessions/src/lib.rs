//! Durable MCP sessions (SPEC §3).
//!
//! [`Sessions`] is the one entry point for every request that carries a
//! session id: it looks the session up, checks its owner, and returns a
//! [`Lease`] on the live [`Runtime`], building it single-flight from the
//! durable record when it is not in memory. Idle runtimes are disposed by a
//! reaper; the record stays and the next request restores it.

mod history;
mod lifecycle;
mod maintenance;
mod parking;
mod remote;
mod runtime;
mod streams;
mod subscriptions;

pub use history::{HISTORY_CHECK_EVERY, HistoryBounds};
pub use lifecycle::{
    AcquireError, BUSY_CEILING, EXECUTION_RETENTION, Holder, MAX_GET_STREAMS_PER_SESSION,
    MAX_SESSIONS_PER_PRINCIPAL, REPLAY_WINDOW, Sessions, SessionsConfig, SessionsMetrics,
};
pub use remote::RemoteListen;
pub use runtime::{ClientResponse, InTransit, Lease, PostStream, Runtime};
pub use streams::{
    Listener, OutboundStream, SLOW_READER_BYTES, SseEvent, StreamLimit, mark_delivered,
    parse_event_id, replay,
};
pub use subscriptions::Subscription;
