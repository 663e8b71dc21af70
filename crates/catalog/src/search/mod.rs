//! Ranking for `tools.search` (SPEC §6).
//!
//! Everything that depends only on the catalogue is done once in
//! [`SearchIndex::build`]: each field is split into normalised terms and the
//! terms go into one vocabulary with postings (which document fields hold
//! them). A query is compared with each distinct term once, and only the
//! postings of matching terms are visited, so a catalogue of thousands of
//! tools is searched in well under a millisecond.
//!
//! Building the index of a 22k-tool API takes over 100 ms, so the build is
//! stored: [`SearchIndex::encode`] writes it beside the integration's record
//! at import, and [`SearchIndex::decode`] takes it back only when it was
//! made by this build ([`INDEX_FORMAT`]) from the very documents it is
//! given (their fingerprint); anything else is built again.
//!
//! One file per job, each depending only on those listed before it:
//! `lexicon.rs` holds the word lists and the small grammar of verbs and
//! places; `level.rs` the levels at which a query token matches a term;
//! `tokenizer.rs` splits text into terms; `model.rs` is the tool as search
//! sees it ([`SearchDoc`]); `index.rs` builds the index of a tool group;
//! `stored.rs` is its stored form; `query.rs` parses, matches and ranks a
//! query.

mod index;
mod level;
mod lexicon;
mod model;
mod query;
mod stored;
mod tokenizer;

pub use index::SearchIndex;
pub use lexicon::IRREGULAR_PLURALS;
pub use model::SearchDoc;
pub use stored::{INDEX_FORMAT, StoredSearchIndex};
pub use tokenizer::{for_each_term, tokenize};
