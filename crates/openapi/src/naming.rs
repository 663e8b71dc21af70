//! Tool names (SPEC §8): `<group>.<leaf>`, each segment camelCase ASCII
//! starting with a letter, so that `tools.<ns>.<group>.<leaf>(…)` is plain
//! JavaScript.

use std::collections::HashSet;

use serde_json::Value;

const MAX_GROUP_LEN: usize = 48;
const MAX_LEAF_LEN: usize = 64;
/// The group of an operation with no tag and no meaningful path segment.
const ROOT_GROUP: &str = "root";

/// The lowercase ASCII words of an identifier or phrase: split at anything
/// that is not a letter or digit and at camelCase humps (`getHTTPResponse`
/// → get, http, response). Digits stay with the word before them.
pub(crate) fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            flush(&mut words, &mut current);
            continue;
        }
        if c.is_ascii_uppercase() && starts_hump(&chars, i) {
            flush(&mut words, &mut current);
        }
        current.push(c.to_ascii_lowercase());
    }
    flush(&mut words, &mut current);
    words
}

/// Whether the uppercase letter at `i` begins a new word: after a lowercase
/// letter or digit, or as the last capital of an acronym (`HTTPResponse`)
/// unless all that follows is a plural `s` (`APIs`, `IDsList`).
fn starts_hump(chars: &[char], i: usize) -> bool {
    let Some(prev) = i.checked_sub(1).and_then(|p| chars.get(p)) else {
        return false;
    };
    if prev.is_ascii_lowercase() || prev.is_ascii_digit() {
        return true;
    }
    let lower_at = |j: usize| chars.get(j).is_some_and(char::is_ascii_lowercase);
    let plural = chars.get(i + 1) == Some(&'s') && !lower_at(i + 2);
    prev.is_ascii_uppercase() && lower_at(i + 1) && !plural
}

fn flush(words: &mut Vec<String>, current: &mut String) {
    if !current.is_empty() {
        words.push(std::mem::take(current));
    }
}

/// camelCase of words; a leading digit gets an `n` so the result starts
/// with a letter.
pub(crate) fn camel(words: &[String]) -> String {
    let mut out = String::new();
    for (i, word) in words.iter().enumerate() {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(if i == 0 {
                first
            } else {
                first.to_ascii_uppercase()
            });
            out.extend(chars);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'n');
    }
    out
}

/// The group: the first tag camelCased, else the first meaningful path
/// segment (not a parameter, a version like `v1`, or `api`).
pub(crate) fn group(tags: Option<&Value>, path: &str) -> String {
    let tag = tags
        .and_then(Value::as_array)
        .and_then(|tags| tags.first())
        .and_then(Value::as_str)
        .map(|tag| camel(&words(tag)))
        .filter(|tag| !tag.is_empty());
    let name = tag
        .or_else(|| path_group(path))
        .unwrap_or_else(|| ROOT_GROUP.to_string());
    truncated(name, MAX_GROUP_LEN)
}

/// Some documents put a query or fragment in their path keys (AWS:
/// `/#X-Amz-Target=…`); only the path proper names a group.
fn path_group(path: &str) -> Option<String> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    path.split('/')
        .filter(|segment| is_meaningful(segment))
        .map(|segment| camel(&words(segment)))
        .find(|name| !name.is_empty())
}

fn is_meaningful(segment: &str) -> bool {
    !(segment.is_empty()
        || segment.starts_with('{')
        || segment.starts_with(':')
        || segment.eq_ignore_ascii_case("api")
        || is_version(segment))
}

/// `v1`, `v2beta1`, `V3`, `1.0`, `v1.2`.
fn is_version(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    let (prefixed, rest) = match lower.strip_prefix('v') {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let numeric_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(numeric_end);
    if !number.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    if prefixed {
        // `v2beta1`, `v1alpha`: letters then optional digits.
        suffix
            .trim_start_matches(|c: char| c.is_ascii_alphabetic())
            .chars()
            .all(|c| c.is_ascii_digit())
    } else {
        suffix.is_empty() && number.contains('.')
    }
}

/// The leaf: the operationId camelCased without the group's words in
/// front (`issues/create` in group `issues` → `create`), else method and
/// path (`getReposOwnerRepo`).
pub(crate) fn leaf(operation_id: Option<&str>, group: &str, method: &str, path: &str) -> String {
    let from_id = operation_id
        .map(|id| strip_group(words(id), &words(group)))
        .map(|w| camel(&w))
        .filter(|name| !name.is_empty());
    let name = from_id.unwrap_or_else(|| {
        let mut all = words(method);
        all.extend(words(path));
        camel(&all)
    });
    truncated(name, MAX_LEAF_LEN)
}

/// Drops the group's words from the front of an operationId's words when
/// something is left after them. A trailing `s` is forgiven either way, so
/// `issue_get` in group `issues` is `get`.
fn strip_group(id_words: Vec<String>, group_words: &[String]) -> Vec<String> {
    if group_words.is_empty() || id_words.len() <= group_words.len() {
        return id_words;
    }
    let matches = group_words
        .iter()
        .zip(&id_words)
        .all(|(g, w)| g == w || *g == format!("{w}s") || *w == format!("{g}s"));
    match id_words.get(group_words.len()..) {
        Some(rest) if matches => rest.to_vec(),
        _ => id_words,
    }
}

/// Names are ASCII, so cutting at a byte index is safe.
fn truncated(mut name: String, max: usize) -> String {
    name.truncate(max);
    name
}

/// Names handed out so far; a taken name gets `2`, `3`, … appended to its
/// leaf, first come first served in document order.
#[derive(Debug, Default)]
pub(crate) struct Names {
    taken: HashSet<String>,
}

impl Names {
    pub(crate) fn claim(&mut self, group: &str, leaf: &str) -> String {
        let base = format!("{group}.{leaf}");
        let name = if self.taken.contains(&base) {
            (2..)
                .map(|n| format!("{base}{n}"))
                .find(|name| !self.taken.contains(name))
                .unwrap_or_default()
        } else {
            base
        };
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn w(text: &str) -> Vec<String> {
        words(text)
    }

    #[test]
    fn splits_words() {
        assert_eq!(w("getHTTPResponse"), ["get", "http", "response"]);
        assert_eq!(w("issues/create"), ["issues", "create"]);
        assert_eq!(w("create_issue"), ["create", "issue"]);
        assert_eq!(w("list-for-repo"), ["list", "for", "repo"]);
        assert_eq!(w("v2Beta oauth2Token"), ["v2", "beta", "oauth2", "token"]);
        assert_eq!(w("APIs"), ["apis"]);
        assert_eq!(w("IDsList"), ["ids", "list"]);
        assert_eq!(w("ABCsomething"), ["ab", "csomething"]);
        assert_eq!(w("Über Straße"), ["ber", "stra", "e"]);
        assert!(w("___").is_empty());
    }

    #[test]
    fn camel_cases() {
        assert_eq!(camel(&w("Pull Requests")), "pullRequests");
        assert_eq!(camel(&w("pullRequests")), "pullRequests");
        assert_eq!(camel(&w("2fa")), "n2fa");
        assert_eq!(camel(&[]), "");
    }

    #[test]
    fn groups_from_tags_then_paths() {
        assert_eq!(group(Some(&json!(["issues", "other"])), "/x"), "issues");
        assert_eq!(group(Some(&json!(["Pet Store"])), "/x"), "petStore");
        assert_eq!(group(Some(&json!([])), "/api/v1/pets/{id}"), "pets");
        assert_eq!(group(Some(&json!(["!!!"])), "/v2beta1/{id}/users"), "users");
        assert_eq!(group(None, "/1.0/store.json"), "storeJson");
        assert_eq!(group(None, "/{id}"), "root");
        assert_eq!(group(None, "/"), "root");
        assert_eq!(group(Some(&json!("notalist")), "/a"), "a");
        assert_eq!(group(None, "/#X-Amz-Target=WAF.Create"), "root");
        assert_eq!(group(None, "/things?action=list"), "things");
    }

    #[test]
    fn version_segments() {
        for v in ["v1", "V2", "v2beta1", "v1alpha", "1.0", "v1.2"] {
            assert!(is_version(v), "{v}");
        }
        for v in ["vault", "v", "2fa", "1", "users", "v1x2y"] {
            assert!(!is_version(v), "{v}");
        }
    }

    #[test]
    fn leaves_from_operation_ids() {
        assert_eq!(leaf(Some("issues/create"), "issues", "post", "/"), "create");
        assert_eq!(leaf(Some("issuesCreate"), "issues", "post", "/"), "create");
        assert_eq!(
            leaf(Some("create_issue"), "issues", "post", "/"),
            "createIssue"
        );
        assert_eq!(leaf(Some("issue_get"), "issues", "get", "/"), "get");
        assert_eq!(
            leaf(Some("pulls/list-review-comments"), "pulls", "get", "/"),
            "listReviewComments"
        );
        // Only the whole group word is stripped, and never everything.
        assert_eq!(
            leaf(Some("petstoreList"), "pet", "get", "/"),
            "petstoreList"
        );
        assert_eq!(leaf(Some("search"), "search", "get", "/"), "search");
    }

    #[test]
    fn leaves_from_method_and_path() {
        assert_eq!(
            leaf(None, "repos", "get", "/repos/{owner}/{repo}"),
            "getReposOwnerRepo"
        );
        assert_eq!(leaf(Some("  "), "x", "delete", "/x/{id}"), "deleteXId");
        let long = "a".repeat(200);
        assert_eq!(leaf(Some(&long), "g", "get", "/").len(), MAX_LEAF_LEN);
    }

    #[test]
    fn collisions_get_numbered_in_order() {
        let mut names = Names::default();
        assert_eq!(names.claim("pets", "list"), "pets.list");
        assert_eq!(names.claim("pets", "list"), "pets.list2");
        assert_eq!(names.claim("pets", "list"), "pets.list3");
        assert_eq!(names.claim("pets", "list2"), "pets.list22");
    }
}
