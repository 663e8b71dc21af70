//! The OpenAPI integration kind (SPEC §7–9): importing an OpenAPI 3.0/3.1
//! or Swagger 2.0 document into tools, storing and loading the result, and
//! calling those tools over HTTP.
//!
//! [`import`] reads the document (JSON or YAML) and shapes every operation
//! into an [`OperationTool`] — a name, a flat input schema and the request
//! shape ([`HttpOperation`]) — and the schema definitions they share, once;
//! those nouns are `model.rs`'s, which every other module may use.
//! The importer is pure: it never touches the network or the file system,
//! and it treats the document as untrusted (no panics, bounded work and
//! output whatever the input). `stored.rs` is the import as the store keeps
//! it and the server loads it; `request.rs` turns a call's arguments into
//! an HTTP request, and [`OpenApiInvoker`] sends it through
//! `executor-outbound` with the credential its
//! [`executor_outbound::CredentialSource`] gives.
//!
//! OpenAPI's dialect (`nullable`, `x-nullable`, `components`, Swagger's
//! `collectionFormat`) ends here: the catalog sees JSON Schema 2020-12.

mod auth;
mod context;
mod document;
mod error;
mod import;
mod invoker;
mod kind;
mod media;
mod model;
mod naming;
mod operation;
mod parameters;
mod pointer;
mod request;
mod route;
mod schema;
mod servers;
mod stored;
mod text;
mod warnings;

pub use error::ImportError;
pub use import::{import, import_with_progress};
pub use invoker::{OpenApiInvoker, OpenApiService};
pub use kind::OpenApiKind;
pub use model::{
    AuthMethod, BodySpec, FORMAT, HttpOperation, ImportOptions, ImportedIntegration, OAuthFlow,
    OAuthFlows, OperationTool, ParamLocation, ParamSpec, ParamStyle, SpecVersion,
};
pub use request::{call, check_args, credential_placement};
pub use stored::{LoadError, StoredIntegration, format_of, load, tool_entries, upgrade};
