//! Building the index of a tool group: each field of each tool split into
//! terms, the terms gathered into one vocabulary with their postings (which
//! document fields hold them), and per document what the query side needs
//! without the text: the joined short fields, how many terms the name,
//! summary and route have, and the route's verb and object.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::level::MIN_CONTAINS_LEN;
use super::lexicon::{MEDIA_WORD, QUANTIFIERS, Verb, is_filler, is_stopword, verb_of};
use super::model::{SearchDoc, fingerprint};
use super::tokenizer::{clip, each_term, is_plural};

/// The searchable catalogue, built once per tool-set change.
pub struct SearchIndex {
    pub(super) docs: Vec<Doc>,
    pub(super) terms: Vec<Term>,
    /// The [`fingerprint`] of the documents it was built from.
    pub(super) inputs: u64,
    /// Document positions ordered by path, for listings.
    pub(super) by_path: Vec<usize>,
    /// Each document's place in `by_path`: ties compare integers, not paths.
    pub(super) path_rank: Vec<usize>,
}

impl SearchIndex {
    pub fn build<'a>(docs: impl IntoIterator<Item = SearchDoc<'a>>) -> SearchIndex {
        let docs: Vec<SearchDoc<'a>> = docs.into_iter().collect();
        let mut scratch = Scratch::default();
        let built: Vec<Doc> = docs
            .iter()
            .enumerate()
            .map(|(i, doc)| Doc::new(doc, i, &mut scratch))
            .collect();
        let mut vocabulary = scratch.vocabulary;
        // Postings grew by doubling; the index keeps them for its life.
        for term in &mut vocabulary.terms {
            term.postings.shrink_to_fit();
        }
        SearchIndex::assemble(built, vocabulary.terms, fingerprint(&docs))
    }

    /// The index with its listing order.
    pub(super) fn assemble(docs: Vec<Doc>, terms: Vec<Term>, inputs: u64) -> SearchIndex {
        let mut by_path: Vec<usize> = (0..docs.len()).collect();
        // A tool group hands its documents over already in path order.
        if !docs.is_sorted_by(|a, b| a.path <= b.path) {
            by_path.sort_by(|&a, &b| docs[a].path.cmp(&docs[b].path));
        }
        let mut path_rank = vec![0; docs.len()];
        for (rank, &doc) in by_path.iter().enumerate() {
            path_rank[doc] = rank;
        }
        SearchIndex {
            docs,
            terms,
            inputs,
            by_path,
            path_rank,
        }
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// Field order used everywhere below: path, name, integration, summary (the
/// description's first line, which for real APIs is the operation's
/// plain-language summary: "List pull requests"), description, route.
pub(super) const FIELD_COUNT: usize = 6;
pub(super) const NAME_FIELD: usize = 1;
pub(super) const SUMMARY_FIELD: usize = 3;
pub(super) const ROUTE_FIELD: usize = 5;
/// The fields whose joined form a document keeps, for matching the whole
/// query phrase and tokens that span terms: the short ones. Descriptions
/// and routes are matched term by term only; keeping their joined text for
/// every tool would cost megabytes in a 35k-tool catalog for a phrase bonus
/// the short fields already give.
const PHRASE_FIELDS: usize = 4;
/// Longest summary kept: a first line that runs on is prose, not a title.
const MAX_SUMMARY_BYTES: usize = 160;
/// Very long descriptions add little ranking signal but cost memory and time.
const MAX_DESCRIPTION_BYTES: usize = 4096;

/// A 128-bit set of hashed adjacent byte pairs. If a needle has a pair the
/// haystack lacks, it cannot be a substring; most documents fail this test,
/// which makes the cross-term scan nearly free.
#[derive(Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct PairMask(u128);

impl PairMask {
    pub(super) fn of(text: &str) -> PairMask {
        let mask = text
            .as_bytes()
            .windows(2)
            .fold(0u128, |mask, pair| match pair {
                [a, b] => mask | 1u128 << ((u32::from(*a) * 31 + u32::from(*b)) % 128),
                _ => mask,
            });
        PairMask(mask)
    }

    pub(super) fn may_contain(self, needle: PairMask) -> bool {
        self.0 & needle.0 == needle.0
    }
}

/// Where a term occurs: one document field, packed into four bytes (the
/// field in the low three bits), since a large catalogue has millions.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Posting(u32);

impl Posting {
    fn new(doc: u32, field: u8) -> Posting {
        Posting(doc.saturating_mul(8) | u32::from(field & 7))
    }

    pub(super) fn doc(self) -> usize {
        (self.0 >> 3) as usize
    }

    pub(super) fn field(self) -> usize {
        (self.0 & 7) as usize
    }
}

/// One distinct normalised word of the catalogue.
#[derive(Serialize, Deserialize)]
pub(super) struct Term {
    pub(super) text: Box<str>,
    pub(super) pairs: PairMask,
    /// Each (document, field) holding the term, once.
    pub(super) postings: Vec<Posting>,
}

/// Collects the terms and their postings while documents are added.
#[derive(Default)]
struct Vocabulary {
    /// Fx, not SipHash: the words come from the operator's own API
    /// descriptions, and a 20k-tool build hashes a million of them.
    ids: FxHashMap<Box<str>, usize>,
    terms: Vec<Term>,
}

impl Vocabulary {
    /// Adds one occurrence; returns the term's id.
    fn add(&mut self, word: &str, posting: Posting) -> usize {
        let id = match self.ids.get(word) {
            Some(&id) => id,
            None => self.insert(word),
        };
        let Some(term) = self.terms.get_mut(id) else {
            return id;
        };
        // A field's words are added together, so a repeated word can only
        // duplicate the latest posting.
        if term.postings.last() != Some(&posting) {
            term.postings.push(posting);
        }
        id
    }

    fn insert(&mut self, word: &str) -> usize {
        let id = self.terms.len();
        let text: Box<str> = word.into();
        self.terms.push(Term {
            pairs: PairMask::of(&text),
            text: text.clone(),
            postings: Vec::new(),
        });
        self.ids.insert(text, id);
        id
    }
}

/// The vocabulary being built and the buffers reused for every field.
#[derive(Default)]
pub(super) struct Scratch {
    vocabulary: Vocabulary,
    buffer: String,
    compact: String,
    ids: Vec<usize>,
    /// The last integration name seen: documents come grouped by it.
    integration: Option<Arc<str>>,
}

impl Scratch {
    pub(super) fn integration(&mut self, name: &str) -> Arc<str> {
        match &self.integration {
            Some(last) if **last == *name => last.clone(),
            _ => {
                let shared: Arc<str> = name.into();
                self.integration = Some(shared.clone());
                shared
            }
        }
    }
}

/// What a document keeps of one field for matching across term boundaries.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct Field {
    /// The terms joined without separators ("pullrequest").
    pub(super) compact: Box<str>,
    /// Byte pairs present in `compact`, to skip most substring scans.
    pub(super) pairs: PairMask,
}

impl Field {
    /// Adds the terms of `text` to the vocabulary; returns how many
    /// distinct ones it has, and leaves their joined form in
    /// `scratch.compact`. In an `identifier`, the [`QUANTIFIERS`] are not
    /// indexed but count: `allChannels` says more than `channels`.
    fn index(text: &str, posting: Posting, identifier: bool, scratch: &mut Scratch) -> u8 {
        let Scratch {
            vocabulary,
            buffer,
            compact,
            ids,
            ..
        } = scratch;
        compact.clear();
        ids.clear();
        let mut quantifiers = 0;
        each_term(text, buffer, &mut |term| {
            if !is_stopword(term) {
                compact.push_str(term);
                ids.push(vocabulary.add(term, posting));
            } else if identifier && QUANTIFIERS.contains(&term) {
                quantifiers += 1;
            }
        });
        ids.sort_unstable();
        ids.dedup();
        u8::try_from(ids.len() + quantifiers).unwrap_or(u8::MAX)
    }

    /// The kept form of the text [`Field::index`] just indexed.
    fn keep(scratch: &Scratch) -> Field {
        let compact: Box<str> = scratch.compact.as_str().into();
        Field {
            pairs: PairMask::of(&compact),
            compact,
        }
    }
}

/// One tool as the index keeps it: what matching and scoring read of it
/// besides the vocabulary's postings.
#[derive(Serialize, Deserialize)]
pub(super) struct Doc {
    /// Not stored: [`SearchIndex::adopt`] takes them from its documents.
    #[serde(skip)]
    pub(super) path: Arc<str>,
    /// Shared by the documents of one integration.
    #[serde(skip)]
    pub(super) integration: Arc<str>,
    pub(super) fields: [Field; PHRASE_FIELDS],
    /// Distinct meaningful terms of the name, the summary and the route,
    /// for the coverage shares.
    pub(super) name_terms: u8,
    pub(super) summary_terms: u8,
    pub(super) route_terms: u8,
    /// The verb the route starts with (see [`verb_of`]).
    pub(super) verb: Verb,
    pub(super) depth: u8,
    /// The vocabulary ids of the route's object and, for an action, of
    /// the resource it acts on (see [`object_of`]), or [`NO_TERM`].
    pub(super) object: u32,
    pub(super) target: u32,
    /// Whether the route nests a resource in one of its own kind (see
    /// [`nests_own_kind`]).
    pub(super) nested: bool,
    /// Whether the route's last word, as written, is plural.
    pub(super) plural: bool,
}

/// A document whose route names no object.
pub(super) const NO_TERM: u32 = u32::MAX;

impl Doc {
    pub(super) fn new(doc: &SearchDoc<'_>, index: usize, scratch: &mut Scratch) -> Doc {
        // Four billion tools cannot fit in memory, so the conversion holds.
        let doc_id = u32::try_from(index).unwrap_or(u32::MAX);
        let texts = [
            &doc.path,
            doc.name,
            doc.integration,
            summary_for(doc),
            clip(doc.description, MAX_DESCRIPTION_BYTES),
            doc.route,
        ];
        let mut distinct = [0u8; FIELD_COUNT];
        let mut kept: [Option<Field>; PHRASE_FIELDS] = Default::default();
        for (field, text) in texts.into_iter().enumerate() {
            // Fewer than eight fields, so the narrowing holds.
            let posting = Posting::new(doc_id, field as u8);
            let identifier = field == NAME_FIELD || field == ROUTE_FIELD;
            distinct[field] = Field::index(text, posting, identifier, scratch);
            if let Some(slot) = kept.get_mut(field) {
                *slot = Some(Field::keep(scratch));
            }
        }
        let fields = kept.map(Option::unwrap_or_default);
        let verb = doc
            .route
            .split_whitespace()
            .next()
            .map_or(Verb::None, verb_of);
        let (object, target) = object_of(doc.route, verb, scratch);
        let nested = nests_own_kind(doc.route, verb, scratch);
        let plural = doc
            .route
            .split_whitespace()
            .next_back()
            .is_some_and(is_plural);
        Doc {
            integration: scratch.integration(doc.integration),
            path: doc.path.clone(),
            fields,
            name_terms: distinct[NAME_FIELD],
            summary_terms: distinct[SUMMARY_FIELD],
            route_terms: distinct[ROUTE_FIELD],
            verb,
            depth: doc.depth,
            object,
            target,
            nested,
            plural,
        }
    }

    /// Namespaces compare ASCII case-insensitively: `GitHub` lists `github.*`.
    pub(super) fn in_namespace(&self, namespace: &str) -> bool {
        if self.integration.eq_ignore_ascii_case(namespace) {
            return true;
        }
        let n = namespace.len();
        self.path.as_bytes().get(n) == Some(&b'.')
            && self
                .path
                .get(..n)
                .is_some_and(|head| head.eq_ignore_ascii_case(namespace))
    }
}

/// The terms a route's last segments end with: the head noun of the
/// resource the operation acts on (`message` in "list me messages",
/// `folder` in "list me mailFolders"), where the segments before it only
/// say where the resource lives. A route without a verb ends with an
/// action ("me messages move", "me sendMail"), whose own head is the
/// object, and the resource before it is the target it acts on. The
/// route's terms are already in the vocabulary.
fn object_of(route: &str, verb: Verb, scratch: &mut Scratch) -> (u32, u32) {
    let mut words = resource_words(route, verb);
    let (Some(last), before) = (words.next_back(), words.next_back()) else {
        return (NO_TERM, NO_TERM);
    };
    // A resource's content is that resource in another form, so the
    // resource is what the route acts on too: `PUT /me/photo/$value`
    // ("set me photo content") updates the photo.
    let target = before.filter(|_| verb == Verb::None || last == MEDIA_WORD);
    (
        head_term(last, scratch),
        target.map_or(NO_TERM, |w| head_term(w, scratch)),
    )
}

/// Whether two resource words of a route end with the same term: `sites
/// sites`, `mailFolders childFolders`. The route's terms are already in the
/// vocabulary.
fn nests_own_kind(route: &str, verb: Verb, scratch: &mut Scratch) -> bool {
    let mut heads: Vec<u32> = resource_words(route, verb)
        .map(|word| head_term(word, scratch))
        .filter(|&id| id != NO_TERM)
        .collect();
    let count = heads.len();
    heads.sort_unstable();
    heads.dedup();
    heads.len() < count
}

/// The words of a route after its verb (the route's first word, when
/// `verb` says it has one).
fn resource_words(route: &str, verb: Verb) -> std::str::SplitWhitespace<'_> {
    let mut words = route.split_whitespace();
    if verb != Verb::None {
        words.next();
    }
    words
}

/// The vocabulary id of the last meaningful term of a route word
/// (`folder` of `mailFolders`, `member` of `memberOf`).
fn head_term(word: &str, scratch: &mut Scratch) -> u32 {
    let Scratch {
        vocabulary, buffer, ..
    } = scratch;
    let mut head = NO_TERM;
    each_term(word, buffer, &mut |term| {
        if let Some(&id) = vocabulary.ids.get(term).filter(|_| !is_stopword(term)) {
            head = u32::try_from(id).unwrap_or(NO_TERM);
        }
    });
    head
}

/// The first line of a description, if it is short enough to be a title.
fn summary_of(description: &str) -> &str {
    let line = description.lines().next().unwrap_or("").trim();
    let line = line.strip_suffix('.').unwrap_or(line);
    if line.len() <= MAX_SUMMARY_BYTES {
        line
    } else {
        ""
    }
}

/// The text a tool's summary field holds: the description's first line,
/// unless that names nothing the tool's route or name names, when the
/// route stands in for it. Large generated specs misplace summaries
/// (Microsoft Graph summarises `GET /me/messages` as "Get open
/// extension"); an unrelated summary would only mislead, while the route
/// is always right about what the operation does.
fn summary_for<'a>(doc: &SearchDoc<'a>) -> &'a str {
    let summary = summary_of(doc.description);
    if doc.route.is_empty() || names_something_of(summary, doc.route, doc.name) {
        summary
    } else {
        doc.route
    }
}

/// Whether a summary names (beyond verbs and function words) a thing its
/// route or name names too, or names too little to judge: a line of one
/// word ("Deprecated") is a flag, not a summary. A term and its short form
/// count as one (`org` for "organization", `ref` for "reference").
fn names_something_of(summary: &str, route: &str, name: &str) -> bool {
    let mut buffer = String::new();
    // The summary's things, each followed by a space: one allocation, not
    // one per word (every tool of a large API comes through here).
    let mut things = String::new();
    each_term(summary, &mut buffer, &mut |word| {
        if !is_filler(word) && verb_of(word) == Verb::None {
            things.push_str(word);
            things.push(' ');
        }
    });
    if things.split_terminator(' ').nth(1).is_none() {
        return true;
    }
    let mut related = false;
    for text in [route, name] {
        each_term(text, &mut buffer, &mut |known| {
            related |= things
                .split_terminator(' ')
                .any(|thing| same_thing(thing, known));
        });
    }
    related
}

/// Whether two terms name one thing: equal, or one the start of the other
/// (`org` and "organization").
fn same_thing(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= MIN_CONTAINS_LEN && long.starts_with(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_about_something_else_gives_way_to_the_route() {
        // Graph's `GET /me/messages` says "Get open extension".
        assert!(!names_something_of(
            "Get open extension",
            "list me messages",
            "meListMessages"
        ));
        assert!(names_something_of(
            "List messages",
            "list me messages",
            "meListMessages"
        ));
        // Short forms are the same thing; a one-word flag is no summary.
        assert!(names_something_of("Get an organization", "get orgs", "get"));
        assert!(names_something_of(
            "Deprecated",
            "list teams members",
            "listMembersLegacy"
        ));
        let misplaced = SearchDoc {
            path: "g.a.list".into(),
            name: "meListMessages",
            integration: "g",
            description: "Get open extension",
            route: "list me messages",
            depth: 2,
        };
        assert_eq!(summary_for(&misplaced), "list me messages");
    }
}
