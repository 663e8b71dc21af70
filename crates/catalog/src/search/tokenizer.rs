//! Splitting text into terms: lowercase words, cut at separators and at
//! camelCase humps, each made singular. The index splits every field of
//! every tool with it and a query its words, so both sides meet on the same
//! terms.

use super::lexicon::{IRREGULAR_PLURALS, is_filler};

/// Splits text into lowercase terms: on anything that is not a letter or a
/// digit (which covers `_ . / : -` and whitespace), and inside words at
/// camelCase humps, keeping acronyms whole ("getHTTPResponse" gives `get`,
/// `http`, `response`).
pub fn tokenize(text: &str) -> Vec<String> {
    let mut terms = Vec::new();
    for_each_term(text, &mut |term| terms.push(term.to_string()));
    terms
}

/// The terms of [`tokenize`], each handed to `found` without being kept.
pub fn for_each_term(text: &str, found: &mut dyn FnMut(&str)) {
    each_term(text, &mut String::new(), found);
}

/// [`tokenize`] without a `Vec` or a `String` per term: each term is built
/// in `buffer` and handed to `found`. Indexing a 20k-tool API splits a
/// million words; allocating each would dominate the build.
pub(super) fn each_term(text: &str, buffer: &mut String, found: &mut dyn FnMut(&str)) {
    buffer.clear();
    if text.is_ascii() {
        each_ascii_term(text, buffer, found);
        return;
    }
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let alphanumeric = if c.is_ascii() {
            c.is_ascii_alphanumeric()
        } else {
            c.is_alphanumeric()
        };
        if !alphanumeric {
            flush(buffer, found);
            prev = None;
            continue;
        }
        if let Some(p) = prev
            && is_hump(p, c, chars.peek().copied())
        {
            flush(buffer, found);
        }
        if c.is_ascii() {
            buffer.push(c.to_ascii_lowercase());
        } else {
            buffer.extend(c.to_lowercase());
        }
        prev = Some(c);
    }
    flush(buffer, found);
}

/// [`each_term`] over ASCII text (most API text), byte by byte.
fn each_ascii_term(text: &str, buffer: &mut String, found: &mut dyn FnMut(&str)) {
    let text = text.as_bytes();
    let mut prev: Option<u8> = None;
    for (i, &c) in text.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            flush(buffer, found);
            prev = None;
            continue;
        }
        if let Some(p) = prev
            && is_ascii_hump(p, c, text.get(i + 1).copied())
        {
            flush(buffer, found);
        }
        buffer.push(char::from(c.to_ascii_lowercase()));
        prev = Some(c);
    }
    flush(buffer, found);
}

/// [`is_hump`] for ASCII letters and digits.
fn is_ascii_hump(prev: u8, cur: u8, next: Option<u8>) -> bool {
    cur.is_ascii_uppercase()
        && (prev.is_ascii_lowercase()
            || prev.is_ascii_digit()
            || (prev.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase())))
}

/// A new word starts at an uppercase letter after a lowercase letter or a
/// digit ("userId", "v2Users"), or at the last capital of an acronym that is
/// followed by lowercase (`HTTPResponse`).
fn is_hump(prev: char, cur: char, next: Option<char>) -> bool {
    cur.is_uppercase()
        && (prev.is_lowercase()
            || prev.is_numeric()
            || (prev.is_uppercase() && next.is_some_and(char::is_lowercase)))
}

fn flush(current: &mut String, found: &mut dyn FnMut(&str)) {
    if !current.is_empty() {
        // Stopwords and fillers stay whole so that they are recognised
        // ("this" is not the plural of "thi", nor "does" of "doe").
        if !is_filler(current) {
            singular(current);
        }
        found(current);
        current.clear();
    }
}

/// A light plural stemmer, so "issue" finds `issues.create` exactly and
/// "policies" finds `policy`: `-ies` → `-y`, a final `s` dropped (not `ss`,
/// and not from short words like `bus`… `gas`: only words over 3 letters),
/// and the [`IRREGULAR_PLURALS`].
pub(super) fn singular(term: &mut String) {
    if let Some((_, one)) = IRREGULAR_PLURALS.iter().find(|(many, _)| term == many) {
        term.clear();
        term.push_str(one);
    } else if term.len() > 4 && term.ends_with("ies") {
        term.truncate(term.len() - 3);
        term.push('y');
    } else if term.len() > 3
        && term.ends_with('s')
        && !term.ends_with("ss")
        && !term.ends_with("us")
    {
        term.pop();
    }
}

/// Whether a word, as written (`drives`, `children`), is plural: it ends
/// in an `s` that [`singular`] drops, or is one of the
/// [`IRREGULAR_PLURALS`].
pub(super) fn is_plural(word: &str) -> bool {
    let lower = word.to_lowercase();
    let mut one = lower.clone();
    singular(&mut one);
    one != lower
}

/// Cuts `text` to at most `max` bytes without splitting a character.
pub(super) fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_match_singulars() {
        assert_eq!(
            tokenize("issues policies class bus children"),
            ["issue", "policy", "class", "bus", "child"]
        );
    }

    #[test]
    fn tokenize_splits_camel_case_acronyms_and_separators() {
        assert_eq!(tokenize("getHTTPResponse"), ["get", "http", "response"]);
        assert_eq!(tokenize("XMLHttpRequest"), ["xml", "http", "request"]);
        assert_eq!(
            tokenize("PascalCase userId"),
            ["pascal", "case", "user", "id"]
        );
        assert_eq!(
            tokenize("github.issues/list_for-repo:v2Users\tALL"),
            [
                "github", "issue", "list", "for", "repo", "v2", "user", "all"
            ]
        );
        assert_eq!(tokenize("  --__..  "), Vec::<String>::new());
        assert_eq!(tokenize("ÉtatCivil naïve"), ["état", "civil", "naïve"]);
    }
}
