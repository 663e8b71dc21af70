//! What a tool call carries between the layers, at the bottom of the ones
//! that share it: who is calling ([`CallContext`]), how a human decides a
//! call that waits for approval ([`Action`], asked through an
//! [`ApprovalPrompt`] as an [`ApprovalRequest`]), and how the answer leaves
//! the server ([`Reply`]). The engine takes them, `mcp` and the transports
//! (`sessions`, `wire`) make them; none of those has to depend on another
//! for them. Also [`release_freed_memory`], which every layer that frees
//! something large calls.
//!
//! No behaviour lives here: types, their parsing, and one allocator call.

mod approval;
mod context;
mod memory;

pub use approval::{Action, ApprovalPrompt, ApprovalRequest, Reply, UnknownAction, args_preview};
pub use context::{ApprovalMode, CallContext, ClientGone, Hold, Holder};
pub use memory::release_freed_memory;
