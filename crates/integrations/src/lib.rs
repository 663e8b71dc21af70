//! The integrations an org has, served from the store: the registry of
//! integration kinds, each org's catalog built from its stored integrations
//! ([`StoreCatalogs`]), and the connections that hold their credentials.
//!
//! A kind is its own crate (`executor-openapi`, `executor-graphql`,
//! `executor-upstream`) that imports a source
//! into a stored form, loads that form into catalog tools (an
//! [`executor_catalog::IntegrationLoader`]) and invokes them; adding one is
//! a crate, a variant of [`IntegrationKind`] and one line in [`Kinds::new`].

mod catalog_source;
mod connections;
mod kinds;

pub use catalog_source::StoreCatalogs;
pub use connections::Credentials;
pub use kinds::{Kinds, LoadedGroup};

/// The kinds of integration this release serves; stored as text in an
/// integration record and parsed at that edge
/// ([`executor_store::IntegrationRecord::integration_kind`]).
pub use executor_store::IntegrationKind;
