//! The tool catalog: every tool an org can call from `execute`, and the
//! seam integration kinds plug into.
//!
//! An integration kind (OpenAPI, GraphQL, upstream MCP servers; the
//! engine's built-in core tools) produces [`ToolEntry`]s and a
//! [`ToolInvoker`] that runs them; a stored kind loads its records through
//! an [`IntegrationLoader`]. This crate holds what every kind and the
//! engine share: the entries, grouped per integration and indexed
//! ([`ToolGroup`], [`Catalog`], `search/`); tool schemas held as compact
//! text with the definitions an integration's tools share stored once
//! (`schema.rs`); argument validation (`validate.rs`); the TypeScript
//! rendering of `describe` (`describe.rs`); and the host memory a tool
//! answer may hold ([`HostBudget`]).
//!
//! It must never depend on the sandbox or on any integration kind: the
//! importers build without QuickJS, and the engine never learns an API
//! description's dialect (schemas arrive as JSON Schema 2020-12).

mod budget;
mod catalog;
pub mod describe;
mod loader;
pub mod schema;
pub mod search;
mod validate;

pub use budget::{BudgetError, HostBudget, HostHold};
pub use catalog::{
    Catalog, CatalogSource, HumanAnswer, HumanQuestions, IntegrationSummary, MAX_NAMESPACE_LEN,
    NewTool, RESERVED_NAMESPACES, RouteHint, StaticCatalog, ToolEntry, ToolError, ToolGroup,
    ToolInvocation, ToolInvoker, ToolResult, ToolSuccess, is_valid_namespace, namespace_problem,
    result_value,
};
pub use loader::{IntegrationLoader, LoadedIntegration, Unavailable, load_stored, stored_format};
pub use schema::{ComposeLimits, Definitions, SchemaInterner, SchemaText, ToolSchema, schema_text};
pub use validate::SchemaProblems;
