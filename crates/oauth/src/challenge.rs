//! `WWW-Authenticate: Bearer …` (RFC 6750 §3, RFC 9728 §5.1): what a
//! protected resource says when it refuses a request.

/// The Bearer challenge of a 401 or 403.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Challenge {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Space-separated scopes the resource wants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Where the resource's RFC 9728 metadata is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_metadata: Option<String>,
}

/// Longest header read; a longer one is cut (it is only a hint).
const MAX_HEADER: usize = 8 * 1024;

impl Challenge {
    /// The Bearer challenge among the header's challenges, if any.
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = &header[..floor_char_boundary(header, MAX_HEADER)];
        let mut tokens = Lexer { rest: header };
        let mut in_bearer = false;
        let mut found = None::<Challenge>;
        while let Some(item) = tokens.next_item() {
            match item {
                Item::Scheme(name) => {
                    if in_bearer {
                        break;
                    }
                    in_bearer = name.eq_ignore_ascii_case("bearer");
                    if in_bearer {
                        found = Some(Challenge::default());
                    }
                }
                Item::Param(name, value) if in_bearer => {
                    let challenge = found.get_or_insert_with(Challenge::default);
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "error" => &mut challenge.error,
                        "scope" => &mut challenge.scope,
                        "resource_metadata" => &mut challenge.resource_metadata,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                Item::Param(..) => {}
            }
        }
        found
    }

    /// The scopes named, split.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

pub fn split_scopes(text: &str) -> Vec<String> {
    text.split_ascii_whitespace().map(str::to_string).collect()
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

enum Item {
    Scheme(String),
    Param(String, String),
}

/// Challenges are `scheme [param=value, …]`, several per header separated
/// by commas; values are tokens or quoted strings with `\` escapes.
struct Lexer<'a> {
    rest: &'a str,
}

impl Lexer<'_> {
    fn next_item(&mut self) -> Option<Item> {
        self.rest = self
            .rest
            .trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if self.rest.is_empty() {
            return None;
        }
        let end = self
            .rest
            .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
            .unwrap_or(self.rest.len());
        let name = self.rest[..end].to_string();
        let after = self.rest[end..].trim_start();
        if let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            let (value, rest) = if let Some(quoted) = value.strip_prefix('"') {
                read_quoted(quoted)
            } else {
                let end = value
                    .find(|c: char| c == ',' || c.is_whitespace())
                    .unwrap_or(value.len());
                (value[..end].to_string(), &value[end..])
            };
            self.rest = rest;
            Some(Item::Param(name, value))
        } else {
            self.rest = &self.rest[end..];
            Some(Item::Scheme(name))
        }
    }
}

/// The text of a quoted string (after its opening quote) and what follows it.
fn read_quoted(text: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (value, &text[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            c => value.push(c),
        }
    }
    (value, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_bearer_params_of_the_mcp_challenge() {
        let c = Challenge::parse(
            r#"Bearer error="invalid_token", error_description="Missing", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope, None);
    }

    #[test]
    fn finds_bearer_among_several_challenges_with_escapes_and_case() {
        let c = Challenge::parse(
            r#"Basic realm="a, b", BEARER scope="mcp:basic \"x\"", error=insufficient_scope, Digest nonce="1""#,
        )
        .unwrap();
        assert_eq!(c.scope.as_deref(), Some(r#"mcp:basic "x""#));
        assert!(c.is_insufficient_scope());
        assert_eq!(Challenge::parse(r#"Basic realm="x""#), None);
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
        assert_eq!(
            Challenge::parse(r#"Bearer scope="a b""#).unwrap().scopes(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn survives_garbage() {
        for text in [
            "",
            "=",
            "Bearer =,=\"",
            "Bearer scope=\"unterminated",
            "é=é, Bearer é",
        ] {
            let _ = Challenge::parse(text);
        }
        let long = format!("Bearer scope=\"{}\"", "é".repeat(10_000));
        assert!(Challenge::parse(&long).is_some());
    }
}
