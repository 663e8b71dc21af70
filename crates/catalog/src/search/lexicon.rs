//! The words search knows: the stopwords and fillers dropped from text,
//! the plurals not made with an `s`, the abbreviations, synonyms and
//! related words a query word also matches, and the small grammar (verbs,
//! place words) that says what a query or a route does and to what. Word
//! lists and the lookups over them only; the rules that use them live in
//! the tokenizer, the index and the query.

use serde::{Deserialize, Serialize};

/// Plurals not made with an `s` that APIs use for collections, and their
/// singulars (`/items/{id}/children`, `/me/people`).
pub const IRREGULAR_PLURALS: [(&str, &str); 2] = [("children", "child"), ("people", "person")];

/// The route word for a resource's raw content (OData's `$value`, Graph's
/// `…/content`): the resource before it is the route's target too (see
/// the index's `object_of`).
pub(super) const MEDIA_WORD: &str = "content";
/// Words after which a query names where its object is ("list channels
/// *in* a team", "add a member *to* a group").
pub(super) const PLACE_WORDS: [&str; 8] =
    ["in", "of", "from", "within", "inside", "to", "into", "for"];
/// What a route or a query says is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Verb {
    None,
    List,
    Get,
    Create,
    Update,
    Delete,
    /// Any other verb: an action, which writes.
    Action,
}

impl Verb {
    /// Reading, writing, or deleting: verbs of one family do not
    /// contradict each other (except listing against getting one).
    fn family(self) -> u8 {
        match self {
            Verb::List | Verb::Get => 0,
            Verb::Create | Verb::Update => 1,
            _ => 2,
        }
    }
}

/// The verb a route word names.
pub(super) fn verb_of(word: &str) -> Verb {
    match word {
        "list" => Verb::List,
        "get" => Verb::Get,
        "create" => Verb::Create,
        "update" | "set" => Verb::Update,
        "delete" => Verb::Delete,
        _ => Verb::None,
    }
}

/// The verb a query's first word names, itself or through its synonyms.
/// Search and question words read. Any other first word is an action
/// verb when it is `imperative`ly followed by a function word; otherwise
/// the query may well start with a noun ("repository secrets") and names
/// no verb.
pub(super) fn query_verb(word: &str, imperative: bool) -> Verb {
    let verb = match word {
        "search" | "query" => Verb::List,
        "check" | "view" | "see" | "count" | "download" | "who" | "what" | "which" | "how"
        | "where" => Verb::Get,
        "upload" => Verb::Update,
        _ => verb_of(word),
    };
    if verb != Verb::None {
        return verb;
    }
    lookup(&SYNONYMS, word)
        .iter()
        .map(|alt| verb_of(alt))
        .find(|&v| v != Verb::None)
        .unwrap_or(if imperative { Verb::Action } else { Verb::None })
}

/// Whether a route verb contradicts a query verb. Asking for many ("list")
/// and getting one contradicts, but asking for one may find it in a list;
/// creating and setting are close (`PUT` adds as often as it updates);
/// reading and writing, or deleting and anything else, are not. A query led
/// by any other verb ("fork a repository", "reply to an email") acts, so a
/// route that only reads contradicts it.
pub(super) fn verbs_conflict(query: Verb, route: Verb) -> bool {
    if query == Verb::None || route == Verb::None || query == route {
        return false;
    }
    if query == Verb::Action {
        return route.family() == 0;
    }
    query.family() != route.family() || (query == Verb::List && route == Verb::Get)
}
/// Words that carry no meaning in a query ("get *a* repository"); dropped
/// from queries and from indexed text alike, unless a query is nothing else.
const STOPWORDS: [&str; 22] = [
    "a", "an", "the", "to", "for", "of", "in", "on", "at", "by", "from", "into", "with", "and",
    "or", "is", "be", "this", "that", "some", "all", "its",
];
/// Stopwords that, in an identifier, make it name something else:
/// `allChannels` is not `channels`, `removeAllLabels` not `removeLabel`.
pub(super) const QUANTIFIERS: [&str; 2] = ["all", "some"];
/// More words a person writes in a query that say nothing about the tool
/// ("find times *when* attendees *are* free", "a user*'s* photo"):
/// prepositions, pronouns, auxiliaries and the tails of possessives and
/// contractions. In a long query each would count towards the tokens a
/// tool must match, and short ones ("i", "as", "s") match the start of
/// countless terms. Indexed text keeps them: in identifiers they are
/// parts of names (`iOS`, `hasAttachments`).
const QUERY_FILLERS: [&str; 22] = [
    "as", "across", "about", "via", "within", "i", "we", "you", "it", "are", "was", "were", "has",
    "have", "had", "do", "does", "can", "when", "another", "s", "t",
];
/// Words that, after a verb, restate it ("add a *new* contact", "create a
/// *new* team"): they say nothing the verb does not, and would match
/// generated summaries ("Add new entity to contacts") of the wrong tool.
/// Leading a query ("new issue") such a word is the verb and stays.
pub(super) const RESTATING: [&str; 1] = ["new"];
/// Query words and their usual short forms in API names; these match as if
/// the word itself were there. They are listed rather than guessed: a term
/// that starts a query word is as often the first half of a compound
/// ("share" in "sharepoint", "mail" in "mailbox") as an abbreviation.
pub(super) const ABBREVIATIONS: [(&str, &[&str]); 18] = [
    ("repository", &["repo"]),
    ("organization", &["org"]),
    ("configuration", &["config"]),
    ("authentication", &["auth"]),
    ("authorization", &["auth"]),
    ("application", &["app"]),
    ("environment", &["env"]),
    ("information", &["info"]),
    ("administrator", &["admin"]),
    ("parameter", &["param"]),
    ("specification", &["spec"]),
    ("statistics", &["stats"]),
    ("description", &["desc"]),
    ("document", &["doc"]),
    ("directory", &["dir"]),
    ("message", &["msg"]),
    ("certificate", &["cert"]),
    ("attribute", &["attr"]),
];
/// Query words and what the tools usually call the same thing. An
/// alternative matches at most at the prefix level, below the word itself.
const SYNONYMS: [(&str, &[&str]); 35] = [
    ("open", &["create"]),
    ("make", &["create"]),
    ("new", &["create"]),
    ("add", &["create", "set"]),
    ("post", &["create"]),
    ("start", &["create"]),
    ("register", &["create"]),
    ("close", &["update"]),
    ("edit", &["update"]),
    ("modify", &["update"]),
    ("change", &["update"]),
    ("mark", &["update"]),
    ("set", &["update", "create"]),
    ("update", &["set"]),
    ("replace", &["set"]),
    ("remove", &["delete"]),
    ("fetch", &["get"]),
    ("retrieve", &["get"]),
    ("show", &["get"]),
    ("read", &["get"]),
    ("find", &["search", "list"]),
    ("trigger", &["dispatch"]),
    ("approve", &["review"]),
    ("invite", &["invitation"]),
    ("subscribe", &["subscription"]),
    ("my", &["authenticated", "me"]),
    ("email", &["mail", "message"]),
    ("meeting", &["event"]),
    ("file", &["item"]),
    ("profile", &["user"]),
    ("folder", &["child"]),
    ("inbox", &["folder"]),
    ("sharepoint", &["site"]),
    ("onedrive", &["drive"]),
    ("library", &["drive"]),
];
/// Query words and what a tool that does it usually names, though it is
/// not the same thing: one uploads a file's *content*, shares by
/// *invite*. They match as [`SYNONYMS`] do, but the word keeps its own
/// rarity: "upload" is a rare word even though "content" is everywhere,
/// whereas "email" is as common as the "message" it stands for.
pub(super) const RELATED: [(&str, &[&str]); 6] = [
    ("search", &["query"]),
    ("download", &["content"]),
    ("upload", &["content"]),
    ("photo", &["content"]),
    ("belong", &["member"]),
    ("share", &["invite", "permission"]),
];

/// The alternatives `table` lists for `word`; none for a word it lacks.
pub(super) fn lookup(
    table: &'static [(&str, &'static [&'static str])],
    word: &str,
) -> &'static [&'static str] {
    table
        .iter()
        .find(|(w, _)| *w == word)
        .map_or(&[][..], |(_, alts)| *alts)
}

/// The [`SYNONYMS`] of a query word. A word stands for a route verb
/// ("change" for `update`) only where a verb stands, first: "subscribe to
/// change notifications" is not about updating anything.
pub(super) fn synonyms(word: &str, leading: bool) -> Vec<&'static str> {
    lookup(&SYNONYMS, word)
        .iter()
        .copied()
        .filter(|alt| leading || verb_of(alt) == Verb::None)
        .collect()
}

/// The length of the longest word of `words`.
const fn longest(words: &[&str]) -> usize {
    let (mut i, mut most) = (0, 0);
    while i < words.len() {
        if words[i].len() > most {
            most = words[i].len();
        }
        i += 1;
    }
    most
}

const LONGEST_STOPWORD: usize = longest(&STOPWORDS);
const LONGEST_FILLER: usize = longest(&QUERY_FILLERS);

// Indexing asks of every word of a catalogue whether it is one of these;
// most are longer than any, and are answered without a comparison.
pub(super) fn is_stopword(term: &str) -> bool {
    term.len() <= LONGEST_STOPWORD && STOPWORDS.contains(&term)
}

/// A stopword or a [`QUERY_FILLERS`] word.
pub(super) fn is_filler(word: &str) -> bool {
    is_stopword(word) || word.len() <= LONGEST_FILLER && QUERY_FILLERS.contains(&word)
}
