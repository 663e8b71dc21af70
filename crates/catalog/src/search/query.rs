//! Answering a query: parsing it into tokens and a small grammar (its
//! verb, its object's head, the words that qualify or place the object),
//! matching the tokens against each distinct term of the vocabulary once,
//! gathering the documents those terms reach (again with fewer required
//! words while the hits are weak), scoring them and ranking the hits.

use super::index::{
    Doc, FIELD_COUNT, Field, NAME_FIELD, PairMask, ROUTE_FIELD, SUMMARY_FIELD, SearchIndex, Term,
};
use super::level::{
    MAX_QUERY_TOKENS, MIN_CONTAINS_LEN, MatchLevel, covers, exact_in, level_at, prefix_bits,
    raise_levels, token_bits, tokens_where,
};
use super::lexicon::{
    ABBREVIATIONS, PLACE_WORDS, RELATED, RESTATING, Verb, is_filler, lookup, query_verb, synonyms,
    verbs_conflict,
};
use super::tokenizer::{clip, each_term, is_plural, singular};

impl SearchIndex {
    /// Matching doc indices (position in the build order) with scores, best
    /// first; ties broken by path ascending.
    pub fn search(&self, query: &str, namespace: Option<&str>) -> Vec<(usize, f64)> {
        let namespace = namespace
            .map(|ns| ns.trim().trim_end_matches('.'))
            .filter(|ns| !ns.is_empty());
        let Some(mut query) = Query::parse(query) else {
            return self.listing(namespace);
        };
        let mut matches = self.match_terms(&query);
        let weights = query.token_weights(&matches.reach, self.docs.len());
        // Only a token the catalogue does not have as a word can reach a
        // document no term reached; when there is none, such documents
        // (most of a large catalogue) are not looked at.
        let spanning = query.all_tokens() & !matches.words;
        self.gather(&query, &mut matches, namespace, spanning);
        let mut hits = self.score_all(&query, &mut matches, &weights, spanning);
        // A long query some of whose words no tool says still finds the
        // tools that say the most of it, rather than nothing or only tools
        // that say its words in passing.
        // A query of one or two words has no word to spare.
        while (hits.is_empty() || query.tokens.len() > 2 && weak(&hits)) && query.required > 1 {
            query.required -= 1;
            self.gather(&query, &mut matches, namespace, spanning);
            hits = self.score_all(&query, &mut matches, &weights, spanning);
        }
        // Ranks are distinct, so the order is total and need not be stable.
        hits.sort_unstable_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.path_rank[a.0].cmp(&self.path_rank[b.0]))
        });
        hits
    }

    /// The hits among the gathered documents, unordered.
    fn score_all(
        &self,
        query: &Query,
        matches: &mut Matches,
        weights: &[f64],
        spanning: u16,
    ) -> Vec<(usize, f64)> {
        let Matches { found, terms, .. } = matches;
        let levels_of = |id: u32| {
            let term = usize::try_from(id).ok().and_then(|t| terms.get(t));
            term.copied().unwrap_or(0)
        };
        found
            .iter_mut()
            .filter_map(|m| {
                let i = usize::try_from(m.doc).ok()?;
                let doc = self.docs.get(i)?;
                let reached = Found {
                    touched: matches.reach.get(i).is_some_and(|&r| r != 0),
                    coverage: m.coverage,
                    object: levels_of(doc.object),
                    target: levels_of(doc.target),
                };
                let score =
                    query.score_candidate(doc, &mut m.levels, reached, weights, spanning)?;
                Some((i, score))
            })
            .collect()
    }

    /// Compares the query with each distinct term once and notes which
    /// tokens reach each document; no more than a bit per document, since
    /// a common word ("get") reaches most of a large catalogue.
    fn match_terms(&self, query: &Query) -> Matches {
        let mut matches = Matches {
            terms: vec![0; self.terms.len()],
            matched: Vec::new(),
            reach: vec![0; self.docs.len()],
            words: 0,
            slot: vec![0; self.docs.len()],
            found: Vec::new(),
            gathered_at: usize::MAX,
        };
        for (t, term) in self.terms.iter().enumerate() {
            let (packed, said) = query.pack_levels(term);
            if packed == 0 {
                continue;
            }
            if let Some(levels) = matches.terms.get_mut(t) {
                *levels = packed;
            }
            matches.matched.push(t);
            matches.words |= tokens_where(packed, |l| l == MatchLevel::Exact);
            let bits = u32::from(token_bits(packed)) | u32::from(said) << MAX_QUERY_TOKENS;
            for posting in &term.postings {
                if let Some(reach) = matches.reach.get_mut(posting.doc()) {
                    *reach |= bits;
                }
            }
        }
        matches
    }

    /// Gathers the levels and coverage of every document in scope that
    /// says at least `query.required` of the query's words, or equals it
    /// in a field, and was not gathered before: only these can be hits, so
    /// only their postings are walked twice.
    fn gather(&self, query: &Query, matches: &mut Matches, namespace: Option<&str>, spanning: u16) {
        let (need, before) = (query.required, matches.gathered_at);
        let fresh = matches.found.len();
        let says = |reach: u32| {
            // The low sixteen bits are the tokens matched.
            let words = (reach as u16 | spanning) & !query.qualifiers;
            words.count_ones() as usize
        };
        for (i, (doc, &reach)) in self.docs.iter().zip(&matches.reach).enumerate() {
            if reach == 0 && spanning == 0 {
                continue;
            }
            let count = says(reach);
            // A document that equals the query in a field was gathered the
            // first time.
            let take = if before == usize::MAX {
                count >= need || query.equals_a_field(doc)
            } else {
                (need..before).contains(&count) && !query.equals_a_field(doc)
            };
            if take && namespace.is_none_or(|ns| doc.in_namespace(ns)) {
                // Four billion tools cannot fit in memory.
                let doc_id = u32::try_from(i).unwrap_or(u32::MAX);
                matches.found.push(DocMatch {
                    doc: doc_id,
                    ..DocMatch::default()
                });
                if let Some(slot) = matches.slot.get_mut(i) {
                    *slot = u32::try_from(matches.found.len()).unwrap_or(0);
                }
            }
        }
        matches.gathered_at = need;
        if matches.found.len() == fresh {
            return;
        }
        let count = query.tokens.len();
        let Matches {
            terms,
            matched,
            slot,
            found,
            ..
        } = matches;
        for &t in matched.iter() {
            let (Some(term), Some(&packed)) = (self.terms.get(t), terms.get(t)) else {
                continue;
            };
            let strong = covers(packed);
            for posting in &term.postings {
                let at = slot.get(posting.doc()).map_or(0, |&s| s as usize);
                // Only the documents gathered now, each once.
                let Some(m) = at
                    .checked_sub(1)
                    .filter(|&at| at >= fresh)
                    .and_then(|at| found.get_mut(at))
                else {
                    continue;
                };
                let field = posting.field();
                if let Some(levels) = m.levels.get_mut(field) {
                    raise_levels(levels, packed, count);
                }
                if strong {
                    m.coverage.add(field, packed);
                }
            }
        }
    }

    /// An empty query lists the namespace (or everything) in path order.
    fn listing(&self, namespace: Option<&str>) -> Vec<(usize, f64)> {
        self.by_path
            .iter()
            .copied()
            .filter(|&i| namespace.is_none_or(|ns| self.docs[i].in_namespace(ns)))
            .map(|i| (i, LISTING_SCORE))
            .collect()
    }
}

/// The weight of each field, in the order of [`FIELD_COUNT`]: path, name,
/// integration, summary, description, route.
const FIELD_WEIGHTS: [f64; FIELD_COUNT] = [12.0, 10.0, 8.0, 7.0, 5.0, 10.0];
/// A query token found in several fields counts fully in its best field
/// and at this share in the others (a "disjunction max" with a tie
/// breaker): a tool whose path, name, summary and route all repeat one
/// word must not outscore one that says more of the query once.
const FIELD_TIE: f64 = 0.6;
/// Weights of the share of a tool's name, summary and route that the query
/// covers: among tools that all mention "fork", `repos.createFork` ("Create
/// a fork") is the one *about* forking.
/// The share is squared: a query that says all of what a summary says
/// ("list pull requests" for "List pull requests") must beat one that says
/// a part of a longer one ("List pull requests associated with a commit").
const NAME_COVERAGE_WEIGHT: f64 = 24.0;
const SUMMARY_COVERAGE_WEIGHT: f64 = 40.0;
const ROUTE_COVERAGE_WEIGHT: f64 = 40.0;
/// What each level of depth costs a tool: enough to order tools that match
/// alike, too little to overturn a better match.
const DEPTH_COST: f64 = 1.0;
/// What a tool whose route's verb contradicts the query's leading verb
/// costs ("list messages" against `GET /messages/{id}`; "fork a
/// repository" against `GET /repos/{owner}/{repo}/forks`): enough to order
/// tools that match alike.
const VERB_MISMATCH_COST: f64 = 15.0;
/// What a tool gains when the head of the query's object (see
/// [`object_head`]) names the resource its route acts on (see
/// [`Doc::object`]) rather than only a parent: "list members of a group" is
/// about `/groups/{id}/members`, not `/groups`, though both say both words;
/// "delete an email" about `/me/messages/{id}`, not `…/emailMethods/{id}`.
/// Half a coverage share: it orders tools that match alike.
const OBJECT_WEIGHT: f64 = 20.0;
/// The share of its weight a query word keeps when it only says how to
/// find the object ("get a user *by id or email*"): the key of a lookup is
/// usually a path parameter or a filter, which search does not see, so
/// such words neither decide nor are required.
const QUALIFIER_WEIGHT: f64 = 0.5;
/// What a route that nests a resource in one of its own kind costs
/// (`/sites/{id}/sites/{id}`, `/mailFolders/{id}/childFolders/{id}`): it
/// reaches a copy of what the shorter route reaches, and says every query
/// word the shorter one says. Most of a coverage share, since the copy's
/// generic summary is often as short as the query ("Get sites from sites"
/// against "Get a site resource" for "get a SharePoint site").
const NESTED_COST: f64 = 30.0;
/// What a tool costs whose route names its object in the other number
/// than the query names its own: "get my OneDrive" is `GET /me/drive`,
/// the one drive, rather than `GET /me/drives/{id}`, one of several.
/// Enough to order tools that match alike.
const NUMBER_COST: f64 = 5.0;
/// What a tool costs whose route acts on what the query names as the
/// place of its object, not on the object: "list members of a *group*" is
/// not `GET /groups`, "list all users in the *organization*" not `GET
/// /organization`. Enough to put a tool about the object first.
const CONTAINER_COST: f64 = 50.0;
/// What a tool gains whose route passes through the place the query
/// names ("list messages in my *inbox*": `/me/mailFolders/{id}/messages`
/// over `/me/messages`): the place is said, so the route that has it is the
/// one asked for. Less than a coverage share: it orders tools alike.
const PLACE_WEIGHT: f64 = 10.0;
/// A best score below this means no tool says what the query asks, only
/// some of its words in passing (a name, a route and a summary that say
/// the query's words give well over 100).
const WEAK_SCORE: f64 = 60.0;
/// The first fields are short identifiers, where a query token may span a
/// term boundary ("pullrequest" against `pull_request`); scanning their joined
/// form is cheap. Descriptions are long prose and only matched term by term.
const CROSS_TERM_FIELDS: usize = 3;
/// Only sixteen tokens count, so splitting more text than this is wasted.
const MAX_QUERY_BYTES: usize = 1024;
/// Haystacks up to this many bytes are scanned byte by byte.
const SHORT_HAYSTACK: usize = 64;
/// Every hit of a listing (empty query) gets the same score.
const LISTING_SCORE: f64 = 1.0;

/// Whether no hit says what the query asks (see [`WEAK_SCORE`]).
fn weak(hits: &[(usize, f64)]) -> bool {
    hits.iter().all(|&(_, score)| score < WEAK_SCORE)
}

/// The best level each query token reached in each field of one document.
type DocLevels = [[MatchLevel; MAX_QUERY_TOKENS]; FIELD_COUNT];

/// What matching the vocabulary found.
struct Matches {
    /// Per vocabulary term, the levels of the query tokens against it,
    /// packed as by [`Query::pack_levels`].
    terms: Vec<u32>,
    /// The terms some token matched.
    matched: Vec<usize>,
    /// Per document, the tokens its terms matched (low sixteen bits, one
    /// each) and those of them a term said itself, not only through a
    /// synonym (high sixteen): what a token's weight counts (see
    /// [`Query::token_weights`]).
    reach: Vec<u32>,
    /// The query tokens some term matched exactly, one bit each: words
    /// the catalogue has, which need no piecing together from the terms
    /// of a field (see [`Query::match_across_terms`]).
    words: u16,
    /// Per document, one more than its place in `found`, or 0 when it is
    /// not gathered (see [`SearchIndex::gather`]).
    slot: Vec<u32>,
    found: Vec<DocMatch>,
    /// The `required` of the last gather (see [`SearchIndex::gather`]):
    /// documents that say fewer of the query's words are not gathered
    /// yet; `usize::MAX` before the first.
    gathered_at: usize,
}

/// What matching the vocabulary found in one gathered document.
#[derive(Clone, Copy, Default)]
struct DocMatch {
    doc: u32,
    levels: DocLevels,
    coverage: Coverage,
}

/// Per field of one document, the terms the query covers.
#[derive(Clone, Copy, Default)]
struct Coverage {
    /// How many distinct terms some query token matched at least as a
    /// prefix.
    covered: [u8; FIELD_COUNT],
    /// How many of those no token matched exactly, and the tokens that
    /// matched them as a prefix, one bit each: "plan" in `planner plans`
    /// (see [`Coverage::echoes`]).
    prefixed: [u8; FIELD_COUNT],
    prefix_tokens: [u16; FIELD_COUNT],
}

impl Coverage {
    /// Counts a term of `field` that the query matched as `packed`.
    fn add(&mut self, field: usize, packed: u32) {
        let (Some(covered), Some(prefixed), Some(tokens)) = (
            self.covered.get_mut(field),
            self.prefixed.get_mut(field),
            self.prefix_tokens.get_mut(field),
        ) else {
            return;
        };
        *covered = covered.saturating_add(1);
        if !exact_in(packed) {
            *prefixed = prefixed.saturating_add(1);
            *tokens |= prefix_bits(packed);
        }
    }

    /// How many terms of a field only echo query words that the field says
    /// exactly too: `planner` in `list planner plans tasks` for "list
    /// tasks in a plan", which says "plan" and not "planner". They count
    /// neither as covered nor as terms the query leaves out.
    fn echoes(&self, field: usize, levels: &[MatchLevel]) -> u8 {
        let tokens = self.prefix_tokens[field];
        let all_exact = (0..levels.len())
            .filter(|&t| tokens >> t & 1 == 1)
            .all(|t| levels[t] == MatchLevel::Exact);
        if tokens != 0 && all_exact {
            self.prefixed[field]
        } else {
            0
        }
    }
}

/// What matching the vocabulary found in one document, besides its levels.
#[derive(Clone, Copy, Default)]
struct Found {
    /// Whether any vocabulary term reached the document.
    touched: bool,
    coverage: Coverage,
    /// The packed levels of the query tokens against the document's object
    /// and target (see [`Doc::object`]).
    object: u32,
    target: u32,
}

/// A normalised query.
struct Query {
    tokens: Vec<String>,
    token_pairs: Vec<PairMask>,
    /// Per token, the synonyms it also matches (see [`synonyms`]) and its
    /// abbreviations (see [`ABBREVIATIONS`]).
    alternatives: Vec<Vec<&'static str>>,
    /// Per token, what it is related to (see [`RELATED`]).
    related: Vec<&'static [&'static str]>,
    abbreviations: Vec<&'static [&'static str]>,
    /// The tokens joined without separators, compared with `Field::compact`.
    compact: String,
    required: usize,
    /// The verb the query starts with, if it starts with one.
    verb: Verb,
    /// The token that names what the query acts on (see [`object_head`]).
    head: Option<usize>,
    /// The tokens that only say how to find the object, one bit each (see
    /// [`qualifiers`]).
    qualifiers: u16,
    /// The tokens that name where the object is (see [`containers`]).
    containers: u16,
    /// Whether the head, as written, is plural.
    plural: bool,
}

impl Query {
    /// None when the query has no searchable characters at all.
    fn parse(text: &str) -> Option<Query> {
        let text = clip(text, MAX_QUERY_BYTES);
        let mut all = query_terms(text);
        let phrase_len = all.len();
        all.extend(hyphen_compounds(text));
        // "fork a repository", "reply to an email": a word and then a
        // function word is a verb and its object, not a noun phrase.
        let imperative = all.get(1).is_some_and(|w| is_filler(w) || w == "my");
        let meaningful: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|&(i, t)| !is_filler(t) && (i == 0 || !RESTATING.contains(&t.as_str())))
            .map(|(_, t)| t.clone())
            .collect();
        let words = if meaningful.is_empty() {
            all.clone()
        } else {
            meaningful
        };
        let mut tokens: Vec<String> = Vec::new();
        for token in words {
            if tokens.len() == MAX_QUERY_TOKENS {
                break;
            }
            if !tokens.contains(&token) {
                tokens.push(token);
            }
        }
        if tokens.is_empty() {
            return None;
        }
        let verb = match tokens.first() {
            Some(first) if tokens.len() > 1 => query_verb(first, imperative),
            _ => Verb::None,
        };
        let head_word = object_head(&all[..phrase_len], verb != Verb::None);
        let head = head_word.and_then(|head| tokens.iter().position(|t| t == head));
        let plural = head_word.is_some_and(|head| written_plural(text, head));
        let qualifiers = qualifiers(&all[..phrase_len], &tokens);
        let containers = containers(&all[..phrase_len], &tokens) & !qualifiers;
        let core = tokens.len() - qualifiers.count_ones() as usize;
        Some(Query {
            token_pairs: tokens.iter().map(|t| PairMask::of(t)).collect(),
            alternatives: tokens
                .iter()
                .enumerate()
                .map(|(t, token)| synonyms(token, t == 0))
                .collect(),
            abbreviations: tokens.iter().map(|t| lookup(&ABBREVIATIONS, t)).collect(),
            related: tokens.iter().map(|t| lookup(&RELATED, t)).collect(),
            compact: tokens.concat(),
            required: required_matches(core),
            verb,
            head,
            qualifiers,
            containers,
            plural,
            tokens,
        })
    }

    /// The level of every query token against one term, two bits each,
    /// and the tokens the term says itself (one bit each): not only
    /// through a synonym.
    fn pack_levels(&self, term: &Term) -> (u32, u16) {
        let tokens = self.tokens.iter().zip(&self.token_pairs);
        tokens
            .enumerate()
            .fold((0, 0), |(packed, said), (t, (token, &pairs))| {
                let mut level = term_level(term, token, pairs);
                let abbreviations = self.abbreviations.get(t).copied().unwrap_or_default();
                if abbreviations.iter().any(|abbr| *term.text == **abbr) {
                    level = MatchLevel::Exact;
                }
                if level < MatchLevel::Prefix {
                    let alternatives = self.alternatives.get(t).map_or(&[][..], Vec::as_slice);
                    if alternatives.iter().any(|alt| *term.text == **alt) {
                        level = MatchLevel::Prefix;
                    }
                }
                let own = u16::from(level != MatchLevel::None) << t;
                let related = self.related.get(t).copied().unwrap_or_default();
                if level < MatchLevel::Prefix && related.iter().any(|alt| *term.text == **alt) {
                    level = MatchLevel::Prefix;
                }
                (packed | level.packed_at(t), said | own)
            })
    }

    /// Finishes matching one document and scores it; None when it is not a
    /// hit.
    fn score_candidate(
        &self,
        doc: &Doc,
        levels: &mut DocLevels,
        found: Found,
        weights: &[f64],
        spanning: u16,
    ) -> Option<f64> {
        // Every short field is scanned for the tokens that may span terms;
        // the pair masks make that nearly free.
        let spanned = self.match_across_terms(doc, levels, spanning);
        if found.touched || spanned || self.equals_a_field(doc) {
            self.score(doc, levels, &found, weights)
        } else {
            None
        }
    }

    /// Gives a token of `spanning` (one bit each) that matched no single
    /// term a contains-level hit when it spans terms of a short field
    /// ("pullrequest" in `pull_request`). A word the catalogue has is not
    /// pieced together from others ("user" in `bus_error`).
    /// Reports whether anything new matched.
    fn match_across_terms(&self, doc: &Doc, levels: &mut DocLevels, spanning: u16) -> bool {
        let mut found = false;
        for (field, best) in doc
            .fields
            .iter()
            .zip(levels.iter_mut())
            .take(CROSS_TERM_FIELDS)
        {
            let candidates = self.tokens.iter().zip(&self.token_pairs);
            for (t, ((token, &pairs), level)) in candidates.zip(best.iter_mut()).enumerate() {
                if *level == MatchLevel::None
                    && spanning >> t & 1 == 1
                    && token.len() >= MIN_CONTAINS_LEN
                    && field.pairs.may_contain(pairs)
                    && contains(&field.compact, token)
                {
                    *level = MatchLevel::Contains;
                    found = true;
                }
            }
        }
        found
    }

    /// Every token, one bit each.
    fn all_tokens(&self) -> u16 {
        u16::MAX >> (MAX_QUERY_TOKENS - self.tokens.len())
    }

    /// Whether the whole phrase equals some field, which admits a document
    /// even when its terms did not match the tokens one by one.
    fn equals_a_field(&self, doc: &Doc) -> bool {
        doc.fields.iter().any(|f| *f.compact == *self.compact)
    }

    /// Each token's weight: rarer words say more ("email" against "get"),
    /// as inverse document frequency, scaled so that the weights average 1
    /// and scores stay comparable across queries.
    fn token_weights(&self, reach: &[u32], documents: usize) -> Vec<f64> {
        let count = self.tokens.len();
        let mut frequency = vec![0usize; count];
        for said in reach
            .iter()
            .map(|r| r >> MAX_QUERY_TOKENS)
            .filter(|&s| s != 0)
        {
            for (t, df) in frequency.iter_mut().enumerate() {
                *df += usize::from(said >> t & 1 == 1);
            }
        }
        let documents = documents as f64;
        let idf: Vec<f64> = frequency
            .iter()
            .map(|&df| (1.0 + documents / (1.0 + df as f64)).ln())
            .collect();
        let mean = idf.iter().sum::<f64>() / count.max(1) as f64;
        if mean <= 0.0 {
            return vec![1.0; count];
        }
        idf.iter()
            .enumerate()
            .map(|(t, w)| w / mean * self.qualifier_share(t))
            .collect()
    }

    /// The share of its weight a token keeps (see [`QUALIFIER_WEIGHT`]).
    fn qualifier_share(&self, t: usize) -> f64 {
        if self.qualifiers >> t & 1 == 1 {
            QUALIFIER_WEIGHT
        } else {
            1.0
        }
    }

    fn score(&self, doc: &Doc, levels: &DocLevels, found: &Found, weights: &[f64]) -> Option<f64> {
        let coverage = &found.coverage;
        let count = self.tokens.len();
        let matched = (0..count)
            .filter(|&t| self.qualifiers >> t & 1 == 0)
            .filter(|&t| levels.iter().any(|field| field[t] != MatchLevel::None))
            .count();
        let phrase: [MatchLevel; FIELD_COUNT] = std::array::from_fn(|f| match doc.fields.get(f) {
            Some(field) => self.phrase_level(field, &levels[f][..count]),
            None => MatchLevel::None,
        });
        if matched < self.required && !phrase.contains(&MatchLevel::Exact) {
            return None;
        }
        let mut score = 0.0;
        for (t, w) in weights.iter().enumerate().take(count) {
            let (mut best, mut total) = (0.0f64, 0.0);
            for (f, weight) in FIELD_WEIGHTS.iter().enumerate() {
                let part = weight * token_factor(levels[f][t]);
                best = best.max(part);
                total += part;
            }
            score += w * (best + FIELD_TIE * (total - best));
        }
        for (f, weight) in FIELD_WEIGHTS.iter().enumerate() {
            score += weight * phrase_factor(phrase[f]);
        }
        // A field's terms the query covers: distinct terms matched (two
        // query words for one term count once), and no more than the query
        // words that matched them (one word matching two terms counts once).
        let share = |field: usize, terms: u8| {
            let created = usize::from(field == ROUTE_FIELD && self.creates_object(doc, found));
            let tokens = levels[field][..count]
                .iter()
                .filter(|&&l| l >= MatchLevel::Prefix)
                .count();
            let echoes = coverage.echoes(field, &levels[field][..count]);
            let covered = coverage.covered[field].saturating_sub(echoes);
            let matched = (usize::from(covered) + created).min(tokens + created);
            let terms = terms.saturating_sub(echoes);
            if terms == 0 {
                0.0
            } else {
                (matched as f64 / f64::from(terms)).min(1.0).powi(2)
            }
        };
        score += NAME_COVERAGE_WEIGHT * share(NAME_FIELD, doc.name_terms);
        score += SUMMARY_COVERAGE_WEIGHT * share(SUMMARY_FIELD, doc.summary_terms);
        score += ROUTE_COVERAGE_WEIGHT * share(ROUTE_FIELD, doc.route_terms);
        score += OBJECT_WEIGHT * token_factor(self.object_level(doc, levels, found));
        score -= DEPTH_COST * f64::from(doc.depth);
        if verbs_conflict(self.verb, doc.verb) {
            score -= VERB_MISMATCH_COST;
        }
        if self.verb_only_in_place(doc, levels, found) {
            score -= VERB_MISMATCH_COST;
        }
        if doc.nested {
            score -= NESTED_COST;
        }
        if self.number_differs(doc, found) {
            score -= NUMBER_COST;
        }
        if self.acts_on_container(found) {
            score -= CONTAINER_COST;
        } else if self.passes_through_place(levels) {
            score += PLACE_WEIGHT;
        }
        Some(score)
    }

    /// Whether the query's action verb is found only as the noun made from
    /// it that a tool creates ("invite a guest" against `POST
    /// /invitations`, "subscribe to …" against `POST /subscriptions`): the
    /// query then says the route's `create` too. A verb spelt like the noun
    /// ("reply" and `…/replies`) does not count: the tool may as well
    /// create something else's replies, and the word itself is matched.
    fn creates_object(&self, doc: &Doc, found: &Found) -> bool {
        self.verb == Verb::Action
            && doc.verb == Verb::Create
            && level_at(found.object, 0) == MatchLevel::Prefix
    }

    /// Whether the query's action verb is in the route only as a place it
    /// passes through, a noun spelt like the verb: "share a file" against
    /// `GET /shares/{id}/items`. The route does what its own verb says.
    /// (An action route says its action in its last word, whose head is
    /// its object: "send" is in `sendMail`, whose object is mail.)
    fn verb_only_in_place(&self, doc: &Doc, levels: &DocLevels, found: &Found) -> bool {
        self.verb == Verb::Action
            && doc.verb != Verb::None
            && levels[ROUTE_FIELD][0] == MatchLevel::Exact
            && level_at(found.object, 0) == MatchLevel::None
            && level_at(found.target, 0) == MatchLevel::None
    }

    /// Whether the route names a place the query names (see
    /// [`PLACE_WEIGHT`]).
    fn passes_through_place(&self, levels: &DocLevels) -> bool {
        (0..self.tokens.len())
            .any(|t| self.containers >> t & 1 == 1 && levels[ROUTE_FIELD][t] >= MatchLevel::Prefix)
    }

    /// Whether the route's object is a place the query names rather than
    /// its object (see [`CONTAINER_COST`]).
    fn acts_on_container(&self, found: &Found) -> bool {
        let names_head = self
            .head
            .is_some_and(|t| level_at(found.object, t) >= MatchLevel::Prefix);
        !names_head && self.containers & tokens_where(found.object, |l| l == MatchLevel::Exact) != 0
    }

    /// Whether the query's head names the route's object, but in the other
    /// number (see [`NUMBER_COST`]).
    fn number_differs(&self, doc: &Doc, found: &Found) -> bool {
        let Some(t) = self.head else {
            return false;
        };
        level_at(found.object, t) >= MatchLevel::Prefix && doc.plural != self.plural
    }

    /// How well the query names a route's object: by its head; or by its
    /// verb when the verb stands for an object ("download" for `GET
    /// …/content`), at most as well as a prefix, since a verb said as a noun
    /// ("reply" against `…/replies`) names less than the head does; or how
    /// its head names an action's target ("reply to an email": `POST
    /// /me/messages/{id}/reply`). That the verb names an action is in the
    /// match already. The verb names the object only of a route that does
    /// what the query's verb says, on what the query names: "fork a
    /// repository" is `POST /repos/{owner}/{repo}/forks`, but "share a
    /// file" is not `POST /shares` nor "search …" `PATCH /search`.
    fn object_level(&self, doc: &Doc, levels: &DocLevels, found: &Found) -> MatchLevel {
        let by_head = |packed| self.head.map_or(MatchLevel::None, |t| level_at(packed, t));
        let head_in_route = self
            .head
            .is_none_or(|t| levels[ROUTE_FIELD][t] >= MatchLevel::Prefix);
        let by_verb = if self.verb == Verb::None || doc.verb == Verb::None || !head_in_route {
            MatchLevel::None
        } else {
            level_at(found.object, 0).min(MatchLevel::Prefix)
        };
        by_head(found.object)
            .max(by_verb)
            .max(by_head(found.target))
    }

    /// How the whole query phrase matches a field. The substring scan is only
    /// worth doing when every token already matched that field somehow.
    fn phrase_level(&self, field: &Field, token_levels: &[MatchLevel]) -> MatchLevel {
        if starts_with(&field.compact, &self.compact) {
            if field.compact.len() == self.compact.len() {
                MatchLevel::Exact
            } else {
                MatchLevel::Prefix
            }
        } else if token_levels.iter().all(|&l| l != MatchLevel::None)
            && contains(&field.compact, &self.compact)
        {
            MatchLevel::Contains
        } else {
            MatchLevel::None
        }
    }
}

fn term_level(term: &Term, token: &str, token_pairs: PairMask) -> MatchLevel {
    if starts_with(&term.text, token) {
        if term.text.len() == token.len() {
            MatchLevel::Exact
        } else {
            MatchLevel::Prefix
        }
    } else if token.len() >= MIN_CONTAINS_LEN
        && term.pairs.may_contain(token_pairs)
        && contains(&term.text, token)
    {
        MatchLevel::Contains
    } else {
        MatchLevel::None
    }
}

/// The head of the query's object: the last word of the first noun phrase
/// after the verb, where a function word ends the phrase. "list *my email
/// messages* in a folder" is about messages, "list *members* of a group" about
/// members, "list *conditional access policies*" about policies.
fn object_head(words: &[String], has_verb: bool) -> Option<&str> {
    let mut rest = words
        .iter()
        .skip_while(|w| is_filler(w))
        .skip(usize::from(has_verb))
        .skip_while(|w| is_filler(w) || *w == "my")
        .peekable();
    let mut head = None;
    // A possessive goes on ("a user's manager" is about the manager).
    while let Some(word) = rest.next_if(|w| !is_filler(w) || *w == "s") {
        if word != "s" {
            head = Some(word.as_str());
        }
    }
    head
}

/// Whether the query `text` writes the word whose singular is `head` in the
/// plural.
fn written_plural(text: &str, head: &str) -> bool {
    let mut buffer = String::new();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| is_plural(word))
        .any(|word| {
            // A name written whole ("OneDrives") or the last term of one.
            let mut whole = word.to_lowercase();
            singular(&mut whole);
            let mut last = None;
            each_term(word, &mut buffer, &mut |term| last = Some(term == head));
            whole == head || last == Some(true)
        })
}

/// The tokens that come only after "by" in the query's `words`: they say
/// how to find the object ("get a user by id or email"), not what it is.
/// None when "by" starts the query or nothing comes after it; none either
/// when the query is all qualifiers.
fn qualifiers(words: &[String], tokens: &[String]) -> u16 {
    let bits = said_only_after(words, tokens, |w| w == "by");
    if bits.count_ones() as usize == tokens.len() {
        0
    } else {
        bits
    }
}

/// The tokens a query says only after a [`PLACE_WORDS`] word: where its
/// object is ("list messages in my *inbox*"), not the object. "my" says
/// whose, not where.
fn containers(words: &[String], tokens: &[String]) -> u16 {
    let my = tokens
        .iter()
        .position(|t| t == "my")
        .map_or(0, |t| 1u16 << t);
    said_only_after(words, tokens, |w| PLACE_WORDS.contains(&w)) & !my
}

/// The tokens that come only after the first of the query's `words` (not
/// the first word itself) that `marks` a phrase, one bit each.
fn said_only_after(words: &[String], tokens: &[String], marks: impl Fn(&str) -> bool) -> u16 {
    let Some(at) = words.iter().position(|w| marks(w)).filter(|&at| at > 0) else {
        return 0;
    };
    let (before, after) = words.split_at(at);
    tokens.iter().enumerate().fold(0u16, |bits, (t, token)| {
        if after.contains(token) && !before.contains(token) {
            bits | 1 << t
        } else {
            bits
        }
    })
}

/// Splits a query as [`each_term`] does, except that a word a person writes
/// in PascalCase is a name ("SharePoint", "OneDrive", "OneNote") and stays
/// one term, as APIs write them (`/me/onenote`): split, "SharePoint" would
/// be about sharing and "OneNote" about notes. camelCase words
/// ("listMessages") are identifiers and are split.
fn query_terms(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut buffer = String::new();
    let words = text.split(|c: char| !c.is_alphanumeric());
    for word in words.filter(|w| !w.is_empty()) {
        if is_pascal_name(word) {
            let mut whole = word.to_lowercase();
            singular(&mut whole);
            terms.push(whole);
        } else {
            each_term(word, &mut buffer, &mut |term| terms.push(term.to_string()));
        }
    }
    terms
}

/// An uppercase letter, then a lowercase one followed by an uppercase one:
/// "SharePoint", not "Teams", "API" or "listMessages".
fn is_pascal_name(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && word
            .chars()
            .zip(word.chars().skip(1))
            .any(|(a, b)| a.is_lowercase() && b.is_uppercase())
}

/// Hyphenated words of a query, joined: "to-do" is also `todo`, "e-mail"
/// also `email` (APIs write compounds as one word).
fn hyphen_compounds(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|word| word.contains('-'))
        .map(|word| {
            word.chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .filter(|joined| joined.len() >= MIN_CONTAINS_LEN)
        .collect()
}

/// A field's share of its weight for one query token matched at `level`.
fn token_factor(level: MatchLevel) -> f64 {
    match level {
        MatchLevel::Exact => 1.0,
        MatchLevel::Prefix => 0.6,
        MatchLevel::Contains => 0.3,
        MatchLevel::None => 0.0,
    }
}

/// The bonus share of a field's weight when the whole query phrase matches it.
fn phrase_factor(level: MatchLevel) -> f64 {
    match level {
        MatchLevel::Exact => 1.5,
        MatchLevel::Prefix => 0.9,
        MatchLevel::Contains => 0.5,
        MatchLevel::None => 0.0,
    }
}

/// How many distinct query tokens a document has to match.
fn required_matches(token_count: usize) -> usize {
    if token_count <= 2 {
        token_count
    } else {
        // ceil(0.6 * n) in integers.
        (3 * token_count).div_ceil(5)
    }
}

/// Substring test. On short haystacks (vocabulary terms, names) a plain
/// byte scan beats the standard searcher's set-up cost; long ones
/// (descriptions) go to the standard, vectorised search. Both sides are
/// valid UTF-8, so a byte match always lines up with character boundaries.
fn contains(haystack: &str, needle: &str) -> bool {
    if haystack.len() > SHORT_HAYSTACK {
        return haystack.contains(needle);
    }
    let (hay, pin) = (haystack.as_bytes(), needle.as_bytes());
    pin.is_empty() || hay.windows(pin.len()).any(|w| starts_with_bytes(w, pin))
}

/// `str::starts_with` as an inline byte loop: the strings compared are a
/// few bytes long and mostly differ at once, where a `memcmp` call per
/// vocabulary term would dominate.
fn starts_with(text: &str, prefix: &str) -> bool {
    starts_with_bytes(text.as_bytes(), prefix.as_bytes())
}

fn starts_with_bytes(text: &[u8], prefix: &[u8]) -> bool {
    text.len() >= prefix.len() && text.iter().zip(prefix).all(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::index::Scratch;
    use crate::search::model::SearchDoc;

    fn doc<'a>(
        path: &'a str,
        name: &'a str,
        integration: &'a str,
        description: &'a str,
    ) -> SearchDoc<'a> {
        SearchDoc {
            path: path.into(),
            name,
            integration,
            description,
            route: "",
            depth: 0,
        }
    }

    /// Paths of the hits, best first.
    fn paths(
        index: &SearchIndex,
        docs: &[SearchDoc<'_>],
        query: &str,
        ns: Option<&str>,
    ) -> Vec<String> {
        index
            .search(query, ns)
            .into_iter()
            .map(|(i, _)| docs[i].path.to_string())
            .collect()
    }

    fn run(docs: &[SearchDoc<'_>], query: &str, ns: Option<&str>) -> Vec<String> {
        let index = SearchIndex::build(docs.iter().cloned());
        paths(&index, docs, query, ns)
    }

    #[test]
    fn exact_beats_prefix_beats_contains() {
        let docs = [
            doc("a.one", "misreported", "a", ""),
            doc("a.two", "reports", "a", ""),
            doc("a.three", "report", "a", ""),
        ];
        assert_eq!(run(&docs, "report", None), ["a.three", "a.two", "a.one"]);
    }

    #[test]
    fn path_weight_beats_description() {
        let docs = [
            doc(
                "crm.thing.get",
                "get",
                "crm",
                "Fetch a record.\nAn invoice too.",
            ),
            doc(
                "crm.invoice.get",
                "get",
                "crm",
                "Fetch a record.\nA thing too.",
            ),
        ];
        assert_eq!(
            run(&docs, "invoice", None),
            ["crm.invoice.get", "crm.thing.get"]
        );
    }

    #[test]
    fn two_token_queries_need_every_token() {
        let docs = [
            doc(
                "github.createPullRequest",
                "createPullRequest",
                "github",
                "Open a PR",
            ),
            doc(
                "github.createIssue",
                "createIssue",
                "github",
                "Open an issue",
            ),
            doc("github.listIssues", "listIssues", "github", "List issues"),
        ];
        assert_eq!(run(&docs, "create issue", None), ["github.createIssue"]);
        // A token may span the terms of a short field.
        assert_eq!(
            run(&docs, "pullrequest", None),
            ["github.createPullRequest"]
        );
    }

    #[test]
    fn longer_queries_need_sixty_percent_of_tokens() {
        let docs = [
            route("list alpha bravo charlie", 1)(doc(
                "x.three",
                "alphaBravoCharlie",
                "x",
                "Alpha bravo charlie",
            )),
            doc("x.two", "alphaBravo", "x", ""),
        ];
        // Five tokens: three are required (and the tool that says three
        // says them well, so no fewer are asked for).
        assert_eq!(
            run(&docs, "alpha bravo charlie delta echo", None),
            ["x.three"]
        );
        // Three tokens: two are required; the tool the query covers more
        // of comes first.
        let docs = [
            doc("x.three", "alphaBravoCharlie", "x", ""),
            doc("x.two", "alphaBravo", "x", ""),
        ];
        assert_eq!(run(&docs, "alpha bravo zulu", None), ["x.two", "x.three"]);
    }

    #[test]
    fn an_exact_phrase_overrides_the_token_rule() {
        let docs = [
            doc("pages.githubio", "githubio", "pages", ""),
            doc("github.repos", "repos", "github", ""),
        ];
        // "io" is too short to match inside a term, but the phrase as a whole
        // equals the name.
        assert_eq!(run(&docs, "github io", None), ["pages.githubio"]);
    }

    #[test]
    fn empty_query_lists_a_namespace_by_path() {
        let docs = [
            doc("slack.chat.post", "post", "slack", ""),
            doc("github.repos.get", "get", "github", ""),
            doc("githubx.other", "other", "githubx", ""),
            doc("github.issues.create", "create", "github", ""),
            doc("mirror.thing", "thing", "github", ""),
        ];
        let index = SearchIndex::build(docs.iter().cloned());
        let hits = index.search("  ", Some("github"));
        assert!(hits.iter().all(|&(_, score)| score == LISTING_SCORE));
        assert_eq!(
            paths(&index, &docs, "", Some("GitHub")),
            ["github.issues.create", "github.repos.get", "mirror.thing"]
        );
        assert_eq!(paths(&index, &docs, "", None).len(), docs.len());
        assert_eq!(paths(&index, &docs, "", None)[0], "github.issues.create");
        // The namespace also filters real queries.
        assert_eq!(
            paths(&index, &docs, "chat", Some("github")),
            Vec::<String>::new()
        );
        assert_eq!(
            paths(&index, &docs, "chat", Some("slack.")),
            ["slack.chat.post"]
        );
    }

    #[test]
    fn ties_are_broken_by_path() {
        let docs = [
            doc("y.send", "send", "mail", "send mail"),
            doc("z.send", "send", "mail", "send mail"),
            doc("x.send", "send", "mail", "send mail"),
        ];
        let index = SearchIndex::build(docs.iter().cloned());
        let hits = index.search("send", None);
        assert_eq!(hits.len(), 3);
        assert!(
            hits.iter()
                .all(|&(_, score)| score.total_cmp(&hits[0].1).is_eq())
        );
        assert_eq!(
            paths(&index, &docs, "send", None),
            ["x.send", "y.send", "z.send"]
        );
    }

    #[test]
    fn odd_input_does_not_panic() {
        let docs = [doc("é.ü", "", "", "ünïcödé ✓ text"), doc("", "", "", "")];
        let index = SearchIndex::build(docs.iter().cloned());
        assert_eq!(index.len(), 2);
        assert!(!index.is_empty());
        assert!(SearchIndex::build(std::iter::empty()).is_empty());
        for query in [
            "✓",
            "ü",
            "a b c d e f g h i j k l m n o p q r s t u v",
            "!!!",
        ] {
            for ns in [None, Some("é"), Some("€€"), Some(".")] {
                let _ = index.search(query, ns);
            }
        }
    }

    #[test]
    fn finds_the_right_tool_among_thousands() {
        const VERBS: [&str; 10] = [
            "list", "get", "create", "update", "delete", "search", "archive", "export", "import",
            "sync",
        ];
        const NOUNS: [&str; 10] = [
            "users", "projects", "tickets", "invoices", "files", "events", "teams", "notes",
            "orders", "labels",
        ];
        let mut owned = Vec::new();
        for i in 0..33 {
            for (v, verb) in VERBS.iter().enumerate() {
                for (n, noun) in NOUNS.iter().enumerate() {
                    let name = format!("{verb}{}", capitalise(noun));
                    let path = format!("app{i}.{noun}.{name}");
                    let description = format!("{verb} the {noun} of app {i} ({v}/{n})");
                    owned.push((path, name, format!("app{i}"), description));
                }
            }
        }
        owned.push((
            "app7.tickets.mergeDuplicates".to_string(),
            "mergeDuplicates".to_string(),
            "app7".to_string(),
            "Merge duplicate tickets".to_string(),
        ));
        assert_eq!(owned.len(), 3_301);
        let docs: Vec<SearchDoc<'_>> = owned.iter().map(|(p, n, i, d)| doc(p, n, i, d)).collect();
        let index = SearchIndex::build(docs.iter().cloned());
        assert_eq!(index.len(), 3_301);
        let hits = paths(&index, &docs, "merge duplicates", None);
        assert_eq!(
            hits.first().map(String::as_str),
            Some("app7.tickets.mergeDuplicates")
        );
        let hits = paths(&index, &docs, "archive invoices", Some("app12"));
        assert_eq!(
            hits.first().map(String::as_str),
            Some("app12.invoices.archiveInvoices")
        );
    }

    /// `doc` with a route hint of `words` at `depth`.
    fn route(words: &'static str, depth: u8) -> impl Fn(SearchDoc<'static>) -> SearchDoc<'static> {
        move |mut d| {
            d.route = words;
            d.depth = depth;
            d
        }
    }

    #[test]
    fn the_route_speaks_for_a_tool_its_summary_misdescribes() {
        // Graph summarises `GET /me/messages` and `POST /me/messages` as
        // "Get open extension" and "Create open extension"; the names say
        // "messages" alike. The route tells them apart.
        let docs = [
            route("create me messages", 2)(doc(
                "g.a.messages",
                "messages",
                "g",
                "Create open extension",
            )),
            route("list me messages", 2)(doc(
                "g.b.messages",
                "messages",
                "g",
                "Get open extension",
            )),
        ];
        assert_eq!(run(&docs, "list my messages", None)[0], "g.b.messages");
        assert_eq!(run(&docs, "add a message", None)[0], "g.a.messages");
        // Alike but for depth: the shallower resource first, though its
        // path sorts later.
        let docs = [
            route("list me folders messages", 4)(doc("g.a.listMessages", "listMessages", "g", "")),
            route("list me messages", 2)(doc("g.b.listMessages", "listMessages", "g", "")),
        ];
        assert_eq!(
            run(&docs, "list messages", None),
            ["g.b.listMessages", "g.a.listMessages"]
        );
    }

    #[test]
    fn a_word_repeated_in_every_field_counts_once_and_a_bit() {
        // Two tools with no name, summary or route terms (so no coverage
        // share tells them apart): one repeats the first query word in all
        // six fields and has the second only in its description, the other
        // says both words in its path, name and description. Summed over
        // fields the first would win (57 to 54); a word counts fully once
        // and then at the tie share, and the second wins (41 to 42).
        let plain = SearchDoc {
            path: "g.a.x".into(),
            name: "",
            integration: "",
            description: "",
            route: "",
            depth: 0,
        };
        let mut scratch = Scratch::default();
        let repeats = Doc::new(&plain, 0, &mut scratch);
        let says_more = Doc::new(&plain, 1, &mut scratch);
        let Some(query) = Query::parse("alpha beta") else {
            panic!("parses");
        };
        let mut levels: DocLevels = [[MatchLevel::None; MAX_QUERY_TOKENS]; FIELD_COUNT];
        for field in &mut levels {
            field[0] = MatchLevel::Exact;
        }
        levels[4][1] = MatchLevel::Exact;
        let mut more: DocLevels = [[MatchLevel::None; MAX_QUERY_TOKENS]; FIELD_COUNT];
        for field in [0, NAME_FIELD, 4] {
            more[field][0] = MatchLevel::Exact;
            more[field][1] = MatchLevel::Exact;
        }
        let weights = [1.0, 1.0];
        let score =
            |doc: &Doc, levels: &DocLevels| query.score(doc, levels, &Found::default(), &weights);
        let (Some(more), Some(repeated)) = (score(&says_more, &more), score(&repeats, &levels))
        else {
            panic!("both are hits");
        };
        assert!(more > repeated, "{more} against {repeated}");
    }

    #[test]
    fn the_query_verb_and_the_route_verb_must_agree() {
        // Graph again: listing is summarised "Get open extension", getting
        // one message "List messages". Asked to list, the listing comes
        // first.
        let docs = [
            route("get me messages", 3)(doc(
                "g.a.getMessages",
                "getMessages",
                "g",
                "List messages",
            )),
            route("list me messages", 2)(doc(
                "g.b.listMessages",
                "listMessages",
                "g",
                "Get open extension",
            )),
        ];
        assert_eq!(run(&docs, "list messages", None)[0], "g.b.listMessages");
        // A query led by another verb acts: "fork a repository" creates a
        // fork rather than listing the forks.
        let docs = [
            route("list repos forks", 4)(doc("g.a.listForks", "listForks", "g", "List forks")),
            route("create repos forks", 4)(doc(
                "g.b.createFork",
                "createFork",
                "g",
                "Create a fork",
            )),
        ];
        assert_eq!(run(&docs, "fork a repository", None)[0], "g.b.createFork");
        // But a query that starts with a noun names no verb.
        assert_eq!(run(&docs, "forks", None)[0], "g.a.listForks");
        // `PUT` sets: asked to update or to add, it answers.
        let docs = [
            route("set repos topics", 4)(doc("g.a.replaceTopics", "replaceTopics", "g", "")),
            route("list repos topics", 4)(doc("g.b.getTopics", "getTopics", "g", "")),
        ];
        assert_eq!(run(&docs, "update the topics", None), ["g.a.replaceTopics"]);
    }

    #[test]
    fn hyphenated_query_words_also_match_joined() {
        let docs = [
            doc("g.a.listDoings", "listDoings", "g", "List doings"),
            doc("g.me.todoLists", "todoLists", "g", "List the todo lists"),
        ];
        assert_eq!(run(&docs, "to-do lists", None)[0], "g.me.todoLists");
        assert_eq!(hyphen_compounds("my to-do, e-mail x-y"), ["todo", "email"]);
    }

    #[test]
    fn rare_words_weigh_more_than_common_ones() {
        // Both tools say "get" and "invoice", one word in the path, which
        // weighs more, and the other in the description; but forty tools
        // say "get", so the tool whose path holds "invoice" is the better
        // match (unweighted, the two tie and path order would put `x.get`
        // first).
        let mut docs = vec![
            doc("x.get", "one", "x", "Invoice"),
            doc("x.invoice", "two", "x", "Get"),
        ];
        let names: Vec<String> = (0..40).map(|i| format!("x.get{i}")).collect();
        docs.extend(names.iter().map(|n| doc(n, "get", "x", "Get")));
        assert_eq!(run(&docs, "get invoice", None)[..2], ["x.invoice", "x.get"]);
    }

    #[test]
    fn a_query_whose_words_only_partly_match_still_finds_tools() {
        let docs = [
            doc("x.three", "alphaBravoCharlie", "x", ""),
            doc("x.two", "alphaBravo", "x", ""),
            doc("x.none", "zulu", "x", ""),
        ];
        // Five tokens, so three are required, and no tool says more than
        // two: the tools that say the most still come back.
        assert_eq!(
            run(&docs, "alpha bravo delta echo foxtrot", None),
            ["x.two", "x.three"]
        );
        // Nothing at all matches: nothing comes back.
        assert!(run(&docs, "delta echo foxtrot", None).is_empty());
    }

    #[test]
    fn a_word_that_restates_the_verb_is_dropped_unless_it_leads() {
        let tokens = |text: &str| Query::parse(text).map(|q| q.tokens).unwrap_or_default();
        assert_eq!(tokens("add a new contact"), ["add", "contact"]);
        assert_eq!(tokens("new issue"), ["new", "issue"]);
    }

    #[test]
    fn a_tool_about_the_place_of_the_object_comes_after_one_about_the_object() {
        // "organization" is rarer than "user" and would weigh more; the
        // query names it as where the users are.
        let docs = [
            route("list organization", 1)(doc(
                "g.org.list",
                "listOrganization",
                "g",
                "List organization",
            )),
            route("list users", 1)(doc("g.users.list", "listUser", "g", "List users")),
            route("get users manager", 3)(doc("g.users.manager", "getManager", "g", "")),
            route("get users drive", 3)(doc("g.users.drive", "getDrive", "g", "")),
            route("get users photo", 3)(doc("g.users.photo", "getPhoto", "g", "")),
            route("get users mailbox", 3)(doc("g.users.mailbox", "getMailbox", "g", "")),
            route("get users calendar", 3)(doc("g.users.calendar", "getCalendar", "g", "")),
            route("get users presence", 3)(doc("g.users.presence", "getPresence", "g", "")),
        ];
        let query = Query::parse("list all users in the organization").map(|q| q.containers);
        assert_eq!(query, Some(0b100));
        assert_eq!(
            run(&docs, "list all users in the organization", None)[0],
            "g.users.list"
        );
    }

    #[test]
    fn a_route_through_the_place_the_query_names_comes_first() {
        // Both say every word; without the place, the shorter route would
        // come first.
        let docs = [
            route("list me messages", 2)(doc(
                "g.a.me",
                "meListMessages",
                "g",
                "List messages\nEvery message of the mailbox, the inbox's too.",
            )),
            route("list me folders messages", 4)(doc(
                "g.b.folder",
                "listMessages",
                "g",
                "List messages",
            )),
        ];
        assert_eq!(run(&docs, "list my messages", None)[0], "g.a.me");
        assert_eq!(
            run(&docs, "list messages in my inbox", None)[0],
            "g.b.folder"
        );
    }

    #[test]
    fn a_query_only_said_in_passing_also_finds_tools_that_say_less_of_it_well() {
        let docs = [
            doc(
                "x.report",
                "getReport",
                "x",
                "Get a report\nLarge reports come in chunks; upload them elsewhere.",
            ),
            route("upload files", 2)(doc("x.upload", "uploadFile", "x", "Upload a file")),
        ];
        // Three of four words are required; only the report says three,
        // in passing. The upload says two, as its name, route and summary.
        assert_eq!(
            run(&docs, "upload a large file in chunks", None),
            ["x.upload", "x.report"]
        );
    }

    #[test]
    fn the_route_object_outweighs_the_segments_before_it() {
        // Alike but for which resource the route ends with, its object:
        // the query is about members, so `/groups/{id}/members` answers
        // before `/members/{id}/groups`, though its path sorts later.
        let docs = [
            route("list members groups", 3)(doc("g.a.list", "list", "g", "")),
            route("list groups members", 3)(doc("g.b.list", "list", "g", "")),
        ];
        assert_eq!(
            run(&docs, "list members of a group", None),
            ["g.b.list", "g.a.list"]
        );
        assert_eq!(
            run(&docs, "list groups of a member", None),
            ["g.a.list", "g.b.list"]
        );
        // An action acts on the resource before it: moving a message is
        // `…/messages/{id}/move`, not `…/mailFolders/{id}/move`.
        let docs = [
            route("me messages mailFolders move", 5)(doc("g.a.move", "move", "g", "")),
            route("me mailFolders messages move", 5)(doc("g.b.move", "move", "g", "")),
        ];
        assert_eq!(run(&docs, "move a message", None)[0], "g.b.move");
    }

    #[test]
    fn the_object_of_a_query_is_the_head_of_its_first_noun_phrase() {
        let head = |query: &str, has_verb: bool| {
            let words = query_terms(query);
            object_head(&words, has_verb).map(str::to_string)
        };
        assert_eq!(
            head("list members of a group", true).as_deref(),
            Some("member")
        );
        assert_eq!(
            head("get a user's manager", true).as_deref(),
            Some("manager")
        );
        assert_eq!(
            head("list my conditional access policies", true).as_deref(),
            Some("policy")
        );
        assert_eq!(
            head("find meeting times when all attendees are free", true).as_deref(),
            Some("time")
        );
        assert_eq!(head("repository secrets", false).as_deref(), Some("secret"));
    }

    #[test]
    fn pascal_case_names_stay_whole_in_queries() {
        assert_eq!(
            query_terms("SharePoint OneDrive listMessages Teams API"),
            ["sharepoint", "onedrive", "list", "message", "team", "api"]
        );
        // Split, "SharePoint" would be about sharing.
        let docs = [
            route("get shares site", 3)(doc("g.a.sharesGetSite", "sharesGetSite", "g", "")),
            route("get sites", 2)(doc("g.b.getSite", "getSite", "g", "")),
        ];
        assert_eq!(run(&docs, "get a SharePoint site", None)[0], "g.b.getSite");
    }

    #[test]
    fn a_quantifier_makes_an_identifier_name_something_else() {
        let docs = [
            route("list teams allChannels", 3)(doc(
                "t.a.listAllChannels",
                "listAllChannels",
                "t",
                "",
            )),
            route("list teams channels", 3)(doc("t.b.listChannels", "listChannels", "t", "")),
        ];
        assert_eq!(
            run(&docs, "list channels in a team", None)[0],
            "t.b.listChannels"
        );
    }

    #[test]
    fn a_verb_synonym_stands_for_a_verb_only_where_a_verb_stands() {
        // "change" is not "update" in "change notifications".
        let docs = [
            route("update subscriptions", 2)(doc(
                "g.a.updateSubscription",
                "updateSubscription",
                "g",
                "Update subscription",
            )),
            route("create subscriptions", 1)(doc(
                "g.b.createSubscription",
                "createSubscription",
                "g",
                "Create subscription",
            )),
        ];
        assert_eq!(
            run(&docs, "subscribe to change notifications", None)[0],
            "g.b.createSubscription"
        );
        assert_eq!(
            run(&docs, "change a subscription", None)[0],
            "g.a.updateSubscription"
        );
    }

    #[test]
    fn coverage_counts_what_the_query_covers_of_a_tool_once() {
        // "email" (through its synonym) and "message" both match
        // `message`: the chat route still has a term the query leaves out.
        let docs = [
            route("list me chats messages", 4)(doc("g.a.listMessages", "listMessages", "g", "")),
            route("list me messages", 2)(doc("g.b.listMessages", "listMessages", "g", "")),
        ];
        assert_eq!(
            run(&docs, "list my email messages", None)[0],
            "g.b.listMessages"
        );
    }

    #[test]
    fn words_after_by_only_say_how_to_find_the_object() {
        // Neither required nor weighed fully: `GET /users/{id}` says
        // neither "id" nor "email", and a user's messages are not a user.
        let docs = [
            route("get users messages", 4)(doc(
                "g.a.getMessages",
                "getMessages",
                "g",
                "Get message\nA user's email message, by its id.",
            )),
            route("get users", 2)(doc("g.b.getUser", "getUser", "g", "Get user")),
        ];
        assert_eq!(
            run(&docs, "get a user by id or email", None),
            ["g.b.getUser", "g.a.getMessages"]
        );
        // As rare as the others, they weigh half as much.
        let weights = Query::parse("get a user by id or email")
            .map(|q| {
                // One document says all four words itself.
                let all = 0b1111 | 0b1111 << MAX_QUERY_TOKENS;
                q.token_weights(&[all], 1)
            })
            .unwrap_or_default();
        assert_eq!(weights.len(), 4);
        assert!((weights[0] - 2.0 * weights[2]).abs() < 1e-9);
        assert!((weights[1] - 2.0 * weights[3]).abs() < 1e-9);
        let query = |text: &str| Query::parse(text).map(|q| (q.qualifiers, q.required));
        assert_eq!(query("get a user by id or email"), Some((0b1100, 2)));
        // Nothing after "by", or nothing before it: no qualifiers.
        assert_eq!(query("sort by"), Some((0, 1)));
        assert_eq!(query("by name"), Some((0, 1)));
    }

    #[test]
    fn a_route_that_nests_its_own_kind_is_a_copy() {
        // `/sites/{id}/sites/{id}` (a subsite) says all that `/sites/{id}`
        // says, and its summary ("Get sites from sites") no more.
        let docs = [
            route("get sites sites", 4)(doc(
                "g.a.getSites",
                "getSites",
                "g",
                "Get sites from sites",
            )),
            route("get sites", 2)(doc("g.b.getSite", "getSite", "g", "Get a site resource")),
        ];
        assert_eq!(
            run(&docs, "get a SharePoint site", None),
            ["g.b.getSite", "g.a.getSites"]
        );
    }

    #[test]
    fn an_action_verb_may_name_what_a_tool_creates() {
        let docs = [
            route("update users", 2)(doc(
                "g.a.updateUser",
                "updateUser",
                "g",
                "Update user\nGuest users may update some properties.",
            )),
            route("create invitations", 1)(doc(
                "g.b.createInvitation",
                "createInvitation",
                "g",
                "Create invitation\nAdds an external user.",
            )),
            route("get invitations invitedUser", 3)(doc(
                "g.c.getInvitedUser",
                "getInvitedUser",
                "g",
                "Get invitedUser from invitations",
            )),
        ];
        // "invite" is found as the noun the second tool creates.
        assert_eq!(
            run(&docs, "invite a guest user", None)[0],
            "g.b.createInvitation"
        );
    }

    #[test]
    fn a_term_that_echoes_a_word_said_exactly_is_not_left_out() {
        // "plan" matches `planner` as a prefix and `plans` exactly: the
        // route of the plan's tasks leaves nothing of the query out.
        let docs = [
            route("list planner tasks", 2)(doc("g.a.listTasks", "listTasks", "g", "List tasks")),
            route("list planner plans tasks", 4)(doc(
                "g.b.listTasks",
                "plansListTasks",
                "g",
                "List tasks",
            )),
        ];
        assert_eq!(run(&docs, "list tasks in a plan", None)[0], "g.b.listTasks");
    }

    #[test]
    fn the_query_and_the_route_name_the_object_in_one_number() {
        let docs = [
            route("get me drives", 3)(doc("g.a.getDrives", "getDrives", "g", "Get drives from me")),
            route("get me drive", 2)(doc("g.b.getDrive", "getDrive", "g", "Get Drive")),
        ];
        assert_eq!(run(&docs, "get my OneDrive", None)[0], "g.b.getDrive");
        assert!(is_plural("drives") && is_plural("children"));
        assert!(!is_plural("drive") && !is_plural("status") && !is_plural("access"));
        assert!(written_plural("list my OneDrives", "onedrive"));
        assert!(written_plural("list mailFolders", "folder"));
        assert!(!written_plural("get my drive", "drive"));
    }

    #[test]
    fn a_related_word_keeps_its_own_rarity() {
        // "upload" is related to the `content` every drive item has, yet
        // few tools say it: it still outweighs "large", which one Excel
        // function says.
        let mut docs: Vec<SearchDoc<'static>> = (0..40)
            .map(|_| {
                route("set drives items content", 5)(doc(
                    "g.a.updateContent",
                    "drivesUpdateItemsContent",
                    "g",
                    "Update content for the navigation property items in drives",
                ))
            })
            .collect();
        docs.push(route("drives items createUploadSession", 5)(doc(
            "g.b.createUploadSession",
            "drivesItemsCreateUploadSession",
            "g",
            "Invoke action createUploadSession\nCreate an upload session to upload files.",
        )));
        docs.push(route("drives items workbook functions large", 7)(doc(
            "g.c.large",
            "drivesItemsWorkbookFunctionsLarge",
            "g",
            "Invoke action large",
        )));
        let found = run(&docs, "upload a large file in chunks", None);
        let rank = |path: &str| found.iter().position(|p| p == path);
        assert!(
            rank("g.b.createUploadSession") < rank("g.c.large"),
            "{found:?}"
        );
    }

    #[test]
    fn the_content_of_a_resource_is_that_resource_too() {
        // `PUT /me/photo/$value` updates my photo; `PATCH
        // /me/contacts/{id}/photo` a contact's.
        let docs = [
            route("update me contacts photo", 4)(doc(
                "g.meContact.updatePhoto",
                "meContactsUpdatePhoto",
                "g",
                "Update the navigation property photo in me",
            )),
            route("set me photo content", 3)(doc(
                "g.meProfilePhoto.meUpdatePhotoContent",
                "meUpdatePhotoContent",
                "g",
                "Update media content for the navigation property photo in me",
            )),
        ];
        assert_eq!(
            run(&docs, "update my profile photo", None)[0],
            "g.meProfilePhoto.meUpdatePhotoContent"
        );
    }

    #[test]
    fn the_verb_names_the_object_only_of_a_route_on_the_querys_object() {
        // Every drive item says "item", so "file" weighs little, and
        // `POST /shares` says "share" in all its fields; but it is not
        // about a file, and sharing is not making a share.
        let mut docs: Vec<SearchDoc<'static>> = (0..100)
            .map(|_| {
                route("get drives items", 4)(doc(
                    "g.a.getItems",
                    "drivesGetItems",
                    "g",
                    "Get items from drives",
                ))
            })
            .collect();
        docs.push(route("create shares", 1)(doc(
            "g.sharesSharedDriveItem.createSharedDriveItem",
            "shares.sharedDriveItem.CreateSharedDriveItem",
            "g",
            "Add new entity to shares",
        )));
        docs.push(route("drives items invite", 5)(doc(
            "g.drivesActions.drivesDriveItemsDriveItemInvite",
            "drives.drive.items.driveItem.invite",
            "g",
            "Invoke action invite\nSends a sharing invitation for a driveItem.",
        )));
        assert_eq!(
            run(&docs, "share a file with specific people", None)[0],
            "g.drivesActions.drivesDriveItemsDriveItemInvite"
        );
    }

    #[test]
    fn an_action_verb_said_only_as_a_place_is_not_done_there() {
        let docs = [
            route("list shares items", 3)(doc(
                "g.a.sharesListItems",
                "sharesListItems",
                "g",
                "Get items from shares",
            )),
            route("drives items invite", 5)(doc(
                "g.b.invite",
                "drivesItemsInvite",
                "g",
                "Invoke action invite\nSends a sharing invitation for a driveItem.",
            )),
        ];
        assert_eq!(
            run(&docs, "share a file with someone", None)[0],
            "g.b.invite"
        );
    }

    #[test]
    fn a_word_the_catalogue_has_is_not_pieced_together_from_others() {
        let docs = [
            doc("g.a.busError", "busError", "g", ""),
            doc("g.b.getUser", "getUser", "g", ""),
            doc("g.c.pullRequests", "pull_requests", "g", ""),
        ];
        // "user" is a word here: `bus_error` does not say it.
        assert_eq!(run(&docs, "user", None), ["g.b.getUser"]);
        // "pullrequest" is not: `pull_requests` says it in two.
        assert_eq!(run(&docs, "pullrequest", None), ["g.c.pullRequests"]);
    }

    fn capitalise(word: &str) -> String {
        let mut chars = word.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    }
}
