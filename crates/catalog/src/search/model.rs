//! The tool as search sees it ([`SearchDoc`]) and the fingerprint of a
//! catalogue of them: the one input that both a build and a stored index
//! read.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHasher;

/// One tool as the search sees it.
#[derive(Debug, Clone)]
pub struct SearchDoc<'a> {
    /// Kept by the index (shared, not copied).
    pub path: Arc<str>,
    pub name: &'a str,
    pub integration: &'a str,
    pub description: &'a str,
    /// The words of the tool's route (see [`crate::RouteHint`]); may be
    /// empty.
    pub route: &'a str,
    pub depth: u8,
}

/// A hash of everything a build reads from its documents, in order: a
/// stored index is of these documents only when it matches. Fx is stable
/// across processes (it has no random seed). It lives beside [`SearchDoc`]
/// because a field added there is a field to hash here.
pub(super) fn fingerprint(docs: &[SearchDoc<'_>]) -> u64 {
    let mut hasher = FxHasher::default();
    docs.len().hash(&mut hasher);
    for doc in docs {
        doc.path.hash(&mut hasher);
        doc.name.hash(&mut hasher);
        doc.integration.hash(&mut hasher);
        doc.description.hash(&mut hasher);
        doc.route.hash(&mut hasher);
        doc.depth.hash(&mut hasher);
    }
    hasher.finish()
}
