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

use std::fmt;
use std::str::FromStr;

/// The kinds of integration this release serves. Stored as text in an
/// integration record's `kind`; parsed here, at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntegrationKind {
    OpenApi,
}

impl IntegrationKind {
    /// Every kind, for listings and tests.
    pub const ALL: &'static [IntegrationKind] = &[IntegrationKind::OpenApi];

    pub fn as_str(self) -> &'static str {
        match self {
            IntegrationKind::OpenApi => "openapi",
        }
    }
}

impl fmt::Display for IntegrationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind this release does not know (written by a newer one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl FromStr for IntegrationKind {
    type Err = UnknownKind;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "openapi" => Ok(IntegrationKind::OpenApi),
            other => Err(UnknownKind(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_what_they_write() {
        for &kind in IntegrationKind::ALL {
            assert_eq!(kind.as_str().parse::<IntegrationKind>(), Ok(kind));
        }
        assert_eq!(
            "graphql".parse::<IntegrationKind>(),
            Err(UnknownKind("graphql".into()))
        );
    }
}
