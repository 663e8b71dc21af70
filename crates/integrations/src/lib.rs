//! The integrations an org has, served from the store: the registry of
//! integration kinds, each org's catalog built from its stored integrations
//! ([`StoreCatalogs`]), and the connections that hold their credentials.
//!
//! A kind is its own crate (`executor-openapi` today) that imports a source
//! into a stored form, loads that form into catalog tools and invokes them;
//! adding one is a crate plus a variant of [`IntegrationKind`] — the
//! compiler then lists every place that must handle it.

mod catalog_source;
mod connections;

pub use catalog_source::{InvokerFactory, OpenApiInvokers, StoreCatalogs};
pub use connections::Credentials;

/// The kinds of integration this release serves; stored as text in an
/// integration record and parsed at that edge
/// ([`executor_store::IntegrationRecord::integration_kind`]).
pub use executor_store::IntegrationKind;
