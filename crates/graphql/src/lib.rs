//! GraphQL as a kind of integration (SPEC §8): a schema — introspection
//! JSON or SDL — imported (`import.rs`) through one model ([`model`]), its root fields made
//! into tools ([`tools`]), stored ([`stored`]) and loaded by the server
//! ([`GraphqlKind`]), and each call sent as one named operation
//! ([`operation`], [`invoker`]).

mod import;
pub mod introspection;
pub mod invoker;
mod kind;
pub mod model;
pub mod operation;
mod sdl;
pub mod stored;
pub mod tools;

pub use import::{ImportError, ImportedGraphql, import};
pub use invoker::introspect;
pub use kind::GraphqlKind;
pub use operation::{SelectError, operation_text};
pub use stored::{FORMAT, store};
pub use tools::{ArgSpec, GraphqlTool, OperationKind, SELECT};

#[cfg(test)]
mod tests;
