//! The stored form of an index: [`SearchIndex::encode`] writes it beside an
//! integration's record at import, and [`SearchIndex::decode`] takes it back
//! only when this build ([`INDEX_FORMAT`]) made it from the very documents it
//! is given; anything else is built again.

use serde::{Deserialize, Serialize};

use super::index::{Doc, FIELD_COUNT, NO_TERM, Scratch, SearchIndex, Term};
use super::model::{SearchDoc, fingerprint};

/// The build of the index that [`SearchIndex::encode`] writes. Bump it with
/// any change to what a build makes of a document (the tokenizer, the
/// stopwords, the summary, verb and object rules, the layout of `Doc` and
/// `Term`): an index stored by another build is then built again, never
/// read as this one's. The test `a_change_to_the_build_bumps_the_index_format`
/// fails until it is bumped.
pub const INDEX_FORMAT: u32 = 1;

/// A stored index read back from its bytes (the slow part of taking it
/// back, which a loader may do while it makes the tools), not yet matched
/// with the documents it claims to be of: [`SearchIndex::adopt`] does that.
pub struct StoredSearchIndex(StoredIndex);

impl StoredSearchIndex {
    /// None for bytes of another build's [`INDEX_FORMAT`], or damaged.
    pub fn read(bytes: &[u8]) -> Option<StoredSearchIndex> {
        let (format, _) = postcard::take_from_bytes::<u32>(bytes).ok()?;
        if format != INDEX_FORMAT {
            return None;
        }
        let stored: StoredIndex = postcard::from_bytes(bytes).ok()?;
        stored.fits().then_some(StoredSearchIndex(stored))
    }
}

impl SearchIndex {
    /// The index as bytes, for [`SearchIndex::decode`] to take back.
    pub fn encode(&self) -> Vec<u8> {
        let stored = StoredIndexRef {
            format: INDEX_FORMAT,
            inputs: self.inputs,
            docs: &self.docs,
            terms: &self.terms,
        };
        // Serialising owned strings and integers into a Vec cannot fail.
        postcard::to_allocvec(&stored).unwrap_or_default()
    }

    /// The index [`SearchIndex::encode`] wrote, when it was built by this
    /// build from exactly `docs`: None for bytes of another format, of
    /// other documents, or damaged (the caller builds the index then).
    pub fn decode(bytes: &[u8], docs: &[SearchDoc<'_>]) -> Option<SearchIndex> {
        SearchIndex::adopt(StoredSearchIndex::read(bytes)?, docs)
    }

    /// `stored`, when it was built from exactly `docs`.
    pub fn adopt(stored: StoredSearchIndex, docs: &[SearchDoc<'_>]) -> Option<SearchIndex> {
        let StoredIndex {
            _inputs: inputs,
            docs: mut kept,
            terms,
            ..
        } = stored.0;
        if kept.len() != docs.len() || inputs != fingerprint(docs) {
            return None;
        }
        let mut integration = Scratch::default();
        for (doc, source) in kept.iter_mut().zip(docs) {
            doc.path = source.path.clone();
            doc.integration = integration.integration(source.integration);
        }
        Some(SearchIndex::assemble(kept, terms, inputs))
    }
}

/// An index as stored: its format and inputs first, so that
/// [`StoredSearchIndex::read`] reads the format before the rest.
#[derive(Serialize)]
struct StoredIndexRef<'a> {
    format: u32,
    inputs: u64,
    docs: &'a [Doc],
    terms: &'a [Term],
}

/// [`StoredIndexRef`], read back.
#[derive(Deserialize)]
struct StoredIndex {
    /// Read first, on its own, by [`StoredSearchIndex::read`].
    _format: u32,
    _inputs: u64,
    docs: Vec<Doc>,
    terms: Vec<Term>,
}

impl StoredIndex {
    /// Whether every id in it points into it: bytes that pass the
    /// fingerprint are this build's, but a damaged record must not make
    /// search index out of bounds.
    fn fits(&self) -> bool {
        let (docs, terms) = (self.docs.len(), self.terms.len());
        let term_fits = |id: u32| id == NO_TERM || (id as usize) < terms;
        self.terms.iter().all(|term| {
            term.postings
                .iter()
                .all(|p| p.doc() < docs && p.field() < FIELD_COUNT)
        }) && self
            .docs
            .iter()
            .all(|doc| term_fits(doc.object) && term_fits(doc.target))
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{Hash, Hasher};
    use std::sync::Arc;

    use rustc_hash::FxHasher;

    use super::*;

    /// Documents that reach every rule of a build: camelCase and acronyms,
    /// plurals, stopwords, summaries kept and replaced by the route, verbs,
    /// actions and their targets, nesting, content routes, quantifiers,
    /// non-ASCII text.
    fn canary() -> Vec<SearchDoc<'static>> {
        let routed = |path: &'static str, description: &'static str, route: &'static str| {
            let (integration, name) = path.split_once('.').unwrap_or(("", path));
            SearchDoc {
                path: path.into(),
                name,
                integration,
                description,
                route,
                depth: u8::try_from(route.split(' ').count()).unwrap_or(0),
            }
        };
        vec![
            routed(
                "g.me.ListMessages",
                "Get open extension\nThe messages of the signed-in user.",
                "list me messages",
            ),
            routed("g.me.getDrive", "Get Drive", "get me drive"),
            routed(
                "g.me.sendMail",
                "Send mail. Sends the message in the request body.",
                "me sendMail",
            ),
            routed(
                "g.me.SetPhotoContent",
                "Update profilePhoto",
                "set me photo content",
            ),
            routed(
                "g.sites.ListSites",
                "List subsites for a site",
                "list sites sites",
            ),
            routed(
                "g.groups.AddMemberRef",
                "Add members",
                "create groups members",
            ),
            routed("g.me.listAllChannels", "Deprecated", "list me allChannels"),
            routed(
                "g.repos.getHTTPResponse",
                "Über die Antwort — 日本語 policies",
                "get repos response",
            ),
            routed(
                "g.people.deletePerson",
                "Delete a person from the people of this tenant's children",
                "delete people",
            ),
        ]
    }

    fn searched(index: &SearchIndex, queries: &[&str]) -> Vec<Vec<(usize, u64)>> {
        let exact =
            |hits: Vec<(usize, f64)>| hits.into_iter().map(|(d, s)| (d, s.to_bits())).collect();
        queries
            .iter()
            .map(|q| exact(index.search(q, None)))
            .collect()
    }

    const CANARY_QUERIES: [&str; 8] = [
        "list my messages",
        "send an email",
        "update my profile photo",
        "add a member to a group",
        "sub sites",
        "http response",
        "delete people",
        "",
    ];

    #[test]
    fn a_stored_index_searches_as_the_built_one() {
        let docs = canary();
        let built = SearchIndex::build(docs.iter().cloned());
        let bytes = built.encode();
        let taken = SearchIndex::decode(&bytes, &docs).expect("this build's index of these docs");
        assert_eq!(
            searched(&taken, &CANARY_QUERIES),
            searched(&built, &CANARY_QUERIES)
        );
        assert!(!searched(&built, &CANARY_QUERIES)[0].is_empty());
        assert_eq!(taken.encode(), bytes, "it stores as it was stored");
        // The paths are the documents' own, shared, not copies.
        assert!(Arc::ptr_eq(&taken.docs[0].path, &docs[0].path));
    }

    #[test]
    fn an_index_of_other_documents_or_another_build_is_not_taken() {
        let docs = canary();
        let bytes = SearchIndex::build(docs.iter().cloned()).encode();
        let mut changed = docs.clone();
        changed[3].description = "Update profilePhoto.";
        assert!(
            SearchIndex::decode(&bytes, &changed).is_none(),
            "a description changed"
        );
        let mut changed = docs.clone();
        changed[1].route = "list me drive";
        assert!(
            SearchIndex::decode(&bytes, &changed).is_none(),
            "a route changed"
        );
        assert!(
            SearchIndex::decode(&bytes, &docs[1..]).is_none(),
            "a tool less"
        );
        // The format is the first byte (a varint under 128).
        let mut other_build = bytes.clone();
        other_build[0] = u8::try_from(INDEX_FORMAT + 1).unwrap();
        assert!(SearchIndex::decode(&other_build, &docs).is_none());
        assert!(SearchIndex::decode(&bytes[..bytes.len() / 2], &docs).is_none());
        assert!(SearchIndex::decode(b"", &docs).is_none());
    }

    #[test]
    fn a_change_to_the_build_bumps_the_index_format() {
        // When this fails, what a build makes of a document has changed:
        // an index stored by the previous build would search differently
        // from a fresh one. Bump INDEX_FORMAT, then pin the new hash.
        let bytes = SearchIndex::build(canary()).encode();
        let mut hasher = FxHasher::default();
        bytes.hash(&mut hasher);
        assert_eq!(
            (INDEX_FORMAT, hasher.finish()),
            (1, 16675624291226096179),
            "the index build changed: bump INDEX_FORMAT and pin the new hash"
        );
    }

    proptest::proptest! {
        /// A damaged stored index is refused or searches without a panic;
        /// it never reads out of bounds.
        #[test]
        fn a_damaged_stored_index_never_panics(
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..8),
        ) {
            let docs = canary();
            let mut bytes = SearchIndex::build(docs.iter().cloned()).encode();
            // The header stays, so that the damage reaches the body.
            let body = postcard::take_from_bytes::<(u32, u64)>(&bytes).map_or(0, |(_, rest)| rest.len());
            let header = bytes.len() - body;
            for (at, value) in flips {
                let len = bytes.len() - header;
                bytes[header + at % len] = value;
            }
            if let Some(index) = SearchIndex::decode(&bytes, &docs) {
                for query in CANARY_QUERIES {
                    let _ = index.search(query, None);
                    let _ = index.search(query, Some("g"));
                }
            }
        }
    }
}
