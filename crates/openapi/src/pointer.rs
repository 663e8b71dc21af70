//! Local `$ref` resolution. Only references into the same document
//! (`#/…`) are followed; anything else is reported by the caller.

use percent_encoding::percent_decode_str;
use serde_json::Value;

/// Longest chain of `$ref`s to `$ref`s followed before giving up, so that
/// a reference loop terminates.
const MAX_REF_HOPS: usize = 32;

/// The JSON pointer of a local reference, decoded from its URI-fragment
/// form (`#/components/schemas/a%20b` → `/components/schemas/a b`); None
/// for references to other documents.
pub(crate) fn local_pointer(reference: &str) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    let decoded = percent_decode_str(fragment).decode_utf8_lossy();
    if decoded.is_empty() || decoded.starts_with('/') {
        Some(decoded.into_owned())
    } else {
        None
    }
}

/// The value a local reference points at.
pub(crate) fn resolve<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    doc.pointer(&local_pointer(reference)?)
}

/// Why a `$ref` could not be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefError {
    /// Not `#/…`: another file or a URL.
    External(String),
    /// Local, but nothing is there.
    Missing(String),
    /// A chain longer than [`MAX_REF_HOPS`], which includes loops.
    TooDeep(String),
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefError::External(r) => write!(f, "external $ref {r:?} is not supported"),
            RefError::Missing(r) => write!(f, "$ref {r:?} does not resolve"),
            RefError::TooDeep(r) => write!(f, "$ref {r:?} is part of a reference loop"),
        }
    }
}

/// Follows `$ref` until a value without one (parameters, request bodies,
/// responses, path items: objects that are replaced, not merged).
pub(crate) fn follow<'a>(doc: &'a Value, value: &'a Value) -> Result<&'a Value, RefError> {
    let mut current = value;
    for _ in 0..MAX_REF_HOPS {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return Ok(current);
        };
        if local_pointer(reference).is_none() {
            return Err(RefError::External(reference.to_string()));
        }
        current =
            resolve(doc, reference).ok_or_else(|| RefError::Missing(reference.to_string()))?;
    }
    let reference = current.get("$ref").and_then(Value::as_str).unwrap_or("");
    Err(RefError::TooDeep(reference.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_fragments() {
        assert_eq!(local_pointer("#/a/b").as_deref(), Some("/a/b"));
        assert_eq!(local_pointer("#/a%20b/c~1d").as_deref(), Some("/a b/c~1d"));
        assert_eq!(local_pointer("#").as_deref(), Some(""));
        assert_eq!(local_pointer("other.yaml#/a"), None);
        assert_eq!(local_pointer("#anchor"), None);
    }

    #[test]
    fn resolves_escaped_segments() {
        let doc = json!({"paths": {"/a/{b}": {"x": 1}}});
        assert_eq!(resolve(&doc, "#/paths/~1a~1%7Bb%7D/x"), Some(&json!(1)));
    }

    #[test]
    fn follows_chains_and_stops_loops() {
        let doc = json!({
            "p": {"a": {"$ref": "#/p/b"}, "b": {"name": "x"}, "loop": {"$ref": "#/p/loop"}}
        });
        let a = json!({"$ref": "#/p/a"});
        assert_eq!(follow(&doc, &a), Ok(&json!({"name": "x"})));
        let looping = json!({"$ref": "#/p/loop"});
        assert!(matches!(follow(&doc, &looping), Err(RefError::TooDeep(_))));
        let missing = json!({"$ref": "#/p/zzz"});
        assert!(matches!(follow(&doc, &missing), Err(RefError::Missing(_))));
        let external = json!({"$ref": "common.yaml#/p"});
        assert!(matches!(
            follow(&doc, &external),
            Err(RefError::External(_))
        ));
    }
}
