//! The MCP protocol, independent of any transport: JSON-RPC message parsing,
//! protocol-version negotiation, and [`McpServer`], which answers one request
//! for one session (or for a sessionless 2026-07-28 request).

mod approvals;
mod jsonrpc;
mod request_state;
mod server;
mod stateless;
mod tool_list;
mod versions;

pub use approvals::{Approvals, action_of, elicitation_params, native_mode};
pub use executor_engine::Overload;
pub use jsonrpc::{
    Incoming, MAX_BATCH, Message, Method, Request, RpcError, cancelled_notification,
    dropped_answer, elicitation_request, error_response, parse, result_response,
    result_response_text, tools_list_changed,
};
pub use request_state::{RequestStateKey, StateClaims};
pub use server::{McpServer, RequestScope};
pub use stateless::{
    HEADER_MISMATCH, ListenMessages, Refusal, SUBSCRIPTIONS_LISTEN, StatelessHeaders,
    UNSUPPORTED_VERSION, admit, listen_messages,
};
pub use tool_list::ToolList;
pub use versions::{ProtocolVersion, UnsupportedVersion};
