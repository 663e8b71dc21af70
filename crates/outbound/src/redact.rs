//! Scrubbing a connection's secret from everything an upstream answers
//! (SPEC §9): success bodies, error bodies, header values, messages, as
//! values or object keys, of any media type and nesting.
//!
//! Redaction is by decoding, not by a list of spellings. A string is
//! searched as it is and again after each of up to [`DECODE_LAYERS`]
//! rounds of unescaping (`%HH` in either case, JSON's `\uXXXX` and `\"`
//! escapes, in any mix), so a key that comes back percent-encoded with
//! lowercase hex, JSON-escaped inside a text body, or both, is found the
//! same way as a plain one. Every span of the original text that decodes
//! to one of the credential's forms (the secret, the base64 of a Basic
//! pair) is replaced with `[redacted]`.
//!
//! A JSON body is redacted once, as text, before it is parsed
//! ([`Redactor::json_text`], one more round of unescaping for the JSON
//! layer): a secret echoed as a number is caught, and the parsed tree is
//! never walked again.
//!
//! Text that has to be cut (an error body kept as a bounded detail) is
//! redacted *before* it is cut: the reader keeps [`Redactor::slack`] more
//! bytes than it will return, every form that starts before the cut is
//! then complete in what was read, and a redacted span that crosses the
//! cut is dropped whole. The rule depends only on whole matches, so what
//! an agent sees never tells it whether a guessed prefix of the secret was
//! right.

use memchr::memmem;
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::credential::Credential;
use crate::json_scan::JsonScan;

pub(crate) const REDACTED: &str = "[redacted]";

/// Rounds of unescaping searched beyond the raw text: enough for a key
/// percent-encoded inside a JSON-escaped string (an upstream echoing its
/// request URL in a JSON error text).
const DECODE_LAYERS: usize = 2;

/// Source bytes one decoded byte can take per layer (`\u0041`).
const MAX_ESCAPE_LEN: usize = 6;

/// Finds and removes a credential's forms.
pub(crate) struct Redactor {
    forms: Vec<Zeroizing<Vec<u8>>>,
}

impl Redactor {
    pub(crate) fn new(credential: &Credential) -> Self {
        Redactor {
            forms: credential.forms(),
        }
    }

    /// True when there is nothing to scrub (no credential, or a secret
    /// shorter than the minimum).
    pub(crate) fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// How many bytes past a cut a reader must keep so that any form that
    /// starts before the cut is whole in what it read.
    pub(crate) fn slack(&self) -> usize {
        let longest = self.forms.iter().map(|f| f.len()).max().unwrap_or(0);
        longest * MAX_ESCAPE_LEN.pow(DECODE_LAYERS as u32)
    }

    /// `text` with every occurrence of a form replaced.
    #[cfg(test)]
    pub(crate) fn text(&self, text: &str) -> String {
        self.cut(text, text.len())
    }

    /// Redacts in place; returns whether anything changed.
    pub(crate) fn text_in_place(&self, text: &mut String) -> bool {
        if self.is_empty() {
            return false;
        }
        let spans = self.spans(text.as_bytes());
        if spans.is_empty() {
            return false;
        }
        *text = rebuild(text.as_bytes(), &spans, text.len());
        true
    }

    /// The first `keep` bytes of `text` (at a character boundary), redacted
    /// as if the whole text had been: a redacted span that starts before
    /// `keep` and ends after it is dropped whole, not cut.
    pub(crate) fn cut(&self, text: &str, keep: usize) -> String {
        let keep = floor_char_boundary(text, keep);
        if self.is_empty() {
            return text[..keep].to_string();
        }
        let spans = self.spans(text.as_bytes());
        rebuild(text.as_bytes(), &spans, keep)
    }

    /// Redacts a response header's name. HTTP lowers the case of names, so
    /// a name holding a lowered form of the secret is replaced whole.
    pub(crate) fn header_name_in_place(&self, name: &mut String) {
        let lowered = name.to_ascii_lowercase();
        let holds = self.forms.iter().any(|form| {
            let form = Zeroizing::new(form.to_ascii_lowercase());
            memmem::find(lowered.as_bytes(), &form).is_some()
        });
        if holds {
            *name = REDACTED.to_string();
        } else {
            self.text_in_place(name);
        }
    }

    /// Redacts a JSON text before it is parsed, so that a secret echoed as
    /// a number (an all-digit key, which parsing could also round) is
    /// caught too: a match inside a string becomes `[redacted]`, one outside
    /// becomes the string `"[redacted]"`. None when nothing matched.
    pub(crate) fn json_text(&self, text: &[u8]) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        // A JSON text is one more layer of escaping than the strings it
        // holds (`\\u0025` in the text is `\u0025` in the string).
        let spans = self.spans_within(text, DECODE_LAYERS + 1);
        if spans.is_empty() {
            return None;
        }
        // A form decoded across the text's own escapes (a secret ending in
        // `\` before an escaped quote) maps back to a range that would take
        // half an escape: ranges are widened to whole escapes.
        let spans = crate::json_scan::whole_escapes(text, &spans);
        let out = self.replace_spans(text, &spans);
        if serde_json::from_slice::<serde::de::IgnoredAny>(&out).is_ok()
            || serde_json::from_slice::<serde::de::IgnoredAny>(text).is_err()
        {
            return Some(out);
        }
        // Never expected: a replacement that breaks valid JSON. The parsed
        // value is redacted instead, which can only redact more.
        tracing::warn!("redacting a JSON answer as text broke it; redacting the parsed value");
        let mut value: Value = serde_json::from_slice(text).ok()?;
        self.value(&mut value);
        serde_json::to_vec(&value).ok()
    }

    /// `text` with each span replaced by the marker, quoted where it stood
    /// outside a string.
    fn replace_spans(&self, text: &[u8], spans: &[(usize, usize)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut scan = JsonScan::default();
        let mut at = 0;
        for &(start, end) in spans {
            scan.feed(&text[at..start]);
            out.extend_from_slice(&text[at..start]);
            if scan.in_string() {
                out.extend_from_slice(REDACTED.as_bytes());
            } else {
                out.push(b'"');
                out.extend_from_slice(REDACTED.as_bytes());
                out.push(b'"');
            }
            scan.feed(&text[start..end]);
            at = end;
        }
        out.extend_from_slice(&text[at..]);
        out
    }

    /// Redacts every string and every object key inside `value`.
    pub(crate) fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                self.text_in_place(s);
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                map.values_mut().for_each(|v| self.value(v));
                if map.keys().any(|k| !self.spans(k.as_bytes()).is_empty()) {
                    let old = std::mem::take(map);
                    *map = old
                        .into_iter()
                        .map(|(mut k, v)| {
                            self.text_in_place(&mut k);
                            (k, v)
                        })
                        .collect::<Map<String, Value>>();
                }
            }
            _ => {}
        }
    }

    /// Sorted, merged byte ranges of `text` that decode to a form.
    fn spans(&self, text: &[u8]) -> Vec<(usize, usize)> {
        self.spans_within(text, DECODE_LAYERS)
    }

    /// [`Redactor::spans`], unescaping up to `layers` rounds.
    fn spans_within(&self, text: &[u8], layers: usize) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        self.find_in(text, |s, e| spans.push((s, e)));
        self.find_decoded(text, &[], layers, &mut spans);
        merge(spans)
    }

    /// Searches each way of unescaping `source` (JSON, percent, both at
    /// once), then recursively their unescapings, up to `layers` rounds.
    /// The kinds are tried apart as well as together because a secret may
    /// itself contain text that looks like the other kind of escape
    /// (`A%00"` JSON-escaped is `A%00\"`). `below` maps positions in
    /// `source` back to the original text.
    fn find_decoded(
        &self,
        source: &[u8],
        below: &[&Decoded],
        layers: usize,
        spans: &mut Vec<(usize, usize)>,
    ) {
        if below.len() == layers || memchr::memchr2(b'%', b'\\', source).is_none() {
            return;
        }
        let json = Decoded::of(source, Kinds::Json);
        let percent = Decoded::of(source, Kinds::Percent);
        // With only one kind present, "both" decodes exactly like it.
        let both = match (&json, &percent) {
            (Some(_), Some(_)) => Decoded::of(source, Kinds::Both),
            _ => None,
        };
        for decoded in [json, percent, both].iter().flatten() {
            self.find_in(&decoded.bytes, |s, e| {
                let (mut s, mut e) = decoded.to_source(s, e);
                for layer in below.iter().rev() {
                    (s, e) = layer.to_source(s, e);
                }
                spans.push((s, e));
            });
            let mut deeper = below.to_vec();
            deeper.push(decoded);
            self.find_decoded(&decoded.bytes, &deeper, layers, spans);
        }
    }

    fn find_in(&self, haystack: &[u8], mut found: impl FnMut(usize, usize)) {
        for form in &self.forms {
            for start in memmem::find_iter(haystack, form.as_slice()) {
                found(start, start + form.len());
            }
        }
    }
}

fn merge(mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// The first `keep` bytes of `text` with each span replaced by the marker;
/// a span that starts before `keep` is replaced whole.
fn rebuild(text: &[u8], spans: &[(usize, usize)], keep: usize) -> String {
    let mut out = Vec::with_capacity(keep.min(text.len()));
    let mut at = 0;
    for &(s, e) in spans {
        if s >= keep {
            break;
        }
        out.extend_from_slice(&text[at..s]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = e;
    }
    if at < keep {
        out.extend_from_slice(&text[at..keep]);
    }
    // Spans start and end on character boundaries (a form is valid UTF-8 or
    // ASCII, and escapes are ASCII), so this is lossless.
    String::from_utf8_lossy(&out).into_owned()
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One round of unescaping, with the way back to the source's positions.
struct Decoded {
    bytes: Vec<u8>,
    /// Every escape that was decoded, in order. Between two escapes,
    /// decoded and source bytes correspond one to one.
    escapes: Vec<Escape>,
}

#[derive(Clone, Copy)]
struct Escape {
    decoded_start: usize,
    decoded_len: usize,
    source_start: usize,
    source_len: usize,
}

impl Decoded {
    /// Decodes the escapes of `kinds`; None when `source` has none.
    fn of(source: &[u8], kinds: Kinds) -> Option<Decoded> {
        let mut decoded = Decoded {
            bytes: Vec::with_capacity(source.len()),
            escapes: Vec::new(),
        };
        let mut i = 0;
        while i < source.len() {
            match escape_at(source, i, kinds) {
                Some((len, ch)) => {
                    let start = decoded.bytes.len();
                    let mut buf = [0u8; 4];
                    let encoded = match ch {
                        Unescaped::Byte(b) => {
                            buf[0] = b;
                            &buf[..1]
                        }
                        Unescaped::Char(c) => c.encode_utf8(&mut buf).as_bytes(),
                    };
                    decoded.bytes.extend_from_slice(encoded);
                    decoded.escapes.push(Escape {
                        decoded_start: start,
                        decoded_len: encoded.len(),
                        source_start: i,
                        source_len: len,
                    });
                    i += len;
                }
                None => {
                    decoded.bytes.push(source[i]);
                    i += 1;
                }
            }
        }
        (!decoded.escapes.is_empty()).then_some(decoded)
    }

    /// The source range a decoded range `[start, end)` came from.
    fn to_source(&self, start: usize, end: usize) -> (usize, usize) {
        let (s, _) = self.unit(start);
        let (_, e) = self.unit(end.saturating_sub(1).max(start));
        (s, e)
    }

    /// The source range of the one decoded byte at `at`.
    fn unit(&self, at: usize) -> (usize, usize) {
        // The last escape that starts at or before `at`.
        let index = self.escapes.partition_point(|e| e.decoded_start <= at);
        let Some(escape) = index.checked_sub(1).map(|i| self.escapes[i]) else {
            return (at, at + 1);
        };
        if at < escape.decoded_start + escape.decoded_len {
            return (escape.source_start, escape.source_start + escape.source_len);
        }
        let source = escape.source_start
            + escape.source_len
            + (at - escape.decoded_start - escape.decoded_len);
        (source, source + 1)
    }
}

/// Which escapes one round of decoding reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kinds {
    Json,
    Percent,
    Both,
}

enum Unescaped {
    Byte(u8),
    Char(char),
}

/// The escape starting at `i`, as (source length, what it stands for).
fn escape_at(s: &[u8], i: usize, kinds: Kinds) -> Option<(usize, Unescaped)> {
    match s.get(i)? {
        b'%' if kinds != Kinds::Json => {
            let hi = hex(*s.get(i + 1)?)?;
            let lo = hex(*s.get(i + 2)?)?;
            Some((3, Unescaped::Byte(hi << 4 | lo)))
        }
        b'\\' if kinds != Kinds::Percent => match s.get(i + 1)? {
            b'u' => {
                let unit = hex4(s, i + 2)?;
                if let Some(c) = char::from_u32(unit as u32) {
                    return Some((6, Unescaped::Char(c)));
                }
                // A surrogate pair: \uD83D\uDE00.
                if (0xD800..0xDC00).contains(&unit) && s.get(i + 6..i + 8) == Some(b"\\u") {
                    let low = hex4(s, i + 8)?;
                    if (0xDC00..0xE000).contains(&low) {
                        let code = 0x10000 + ((unit as u32 - 0xD800) << 10) + (low as u32 - 0xDC00);
                        return char::from_u32(code).map(|c| (12, Unescaped::Char(c)));
                    }
                }
                None
            }
            b'"' => Some((2, Unescaped::Byte(b'"'))),
            b'\\' => Some((2, Unescaped::Byte(b'\\'))),
            b'/' => Some((2, Unescaped::Byte(b'/'))),
            b'b' => Some((2, Unescaped::Byte(0x08))),
            b'f' => Some((2, Unescaped::Byte(0x0c))),
            b'n' => Some((2, Unescaped::Byte(b'\n'))),
            b'r' => Some((2, Unescaped::Byte(b'\r'))),
            b't' => Some((2, Unescaped::Byte(b'\t'))),
            _ => None,
        },
        _ => None,
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn hex4(s: &[u8], i: usize) -> Option<u16> {
    let digits = s.get(i..i + 4)?;
    digits
        .iter()
        .try_fold(0u16, |acc, &b| Some(acc << 4 | hex(b)? as u16))
}

/// Scrubs every form of `credential` from every string and key of `value`
/// (a kind whose answers do not come through [`crate::HttpClient::send`],
/// such as an upstream MCP server's).
pub fn scrub_value(credential: &Credential, value: &mut Value) {
    Redactor::new(credential).value(value);
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// The spellings SPEC §9 names, as an upstream would write them.
    #[derive(Debug, Clone, Copy)]
    enum Spelling {
        Raw,
        /// `serde_json`'s escaping: quotes, backslashes, control characters.
        JsonEscaped,
        /// Every character as `\uXXXX` (surrogate pairs above the BMP).
        JsonUnicode,
        PercentUpper,
        PercentLower,
        /// Only what a URL component must escape, upper-case hex.
        PercentComponent,
        /// Percent-encoded, then that text JSON-escaped character by character.
        PercentThenJson,
        /// The standard base64 a Basic header carries.
        Base64,
    }

    const SPELLINGS: [Spelling; 8] = [
        Spelling::Raw,
        Spelling::JsonEscaped,
        Spelling::JsonUnicode,
        Spelling::PercentUpper,
        Spelling::PercentLower,
        Spelling::PercentComponent,
        Spelling::PercentThenJson,
        Spelling::Base64,
    ];

    fn spell(text: &str, spelling: Spelling) -> String {
        let percent = |lower: bool| {
            text.bytes()
                .map(|b| {
                    let hex = format!("%{b:02X}");
                    if lower { hex.to_lowercase() } else { hex }
                })
                .collect::<String>()
        };
        let unicode = |s: &str| {
            s.encode_utf16()
                .map(|u| format!("\\u{u:04x}"))
                .collect::<String>()
        };
        match spelling {
            Spelling::Raw => text.to_string(),
            Spelling::JsonEscaped => {
                let quoted = serde_json::to_string(text).unwrap();
                quoted[1..quoted.len() - 1].to_string()
            }
            Spelling::JsonUnicode => unicode(text),
            Spelling::PercentUpper => percent(false),
            Spelling::PercentLower => percent(true),
            Spelling::PercentComponent => {
                percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
            }
            Spelling::PercentThenJson => unicode(&percent(true)),
            Spelling::Base64 => STANDARD.encode(text),
        }
    }

    /// What an agent must never see: the secret (and, for Basic, the pair
    /// a header carries) in every spelling.
    fn forbidden(credential: &Credential, secret: &str) -> Vec<String> {
        let mut plain = vec![secret.to_string()];
        if let Credential::Basic { username, .. } = credential {
            plain.push(format!("{username}:{secret}"));
        }
        plain
            .iter()
            .flat_map(|p| SPELLINGS.iter().map(move |s| spell(p, *s)))
            .filter(|f| f.len() >= MIN_REDACTED_LEN_FOR_TESTS)
            .collect()
    }

    const MIN_REDACTED_LEN_FOR_TESTS: usize = crate::credential::MIN_REDACTED_LEN;

    fn strings(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => {
                for (k, v) in map {
                    out.push(k.clone());
                    strings(v, out);
                }
            }
            _ => {}
        }
    }

    fn assert_clean(texts: &[String], forbidden: &[String]) -> Result<(), TestCaseError> {
        for text in texts {
            for f in forbidden {
                prop_assert!(!text.contains(f.as_str()), "{f:?} found in {text:?}");
            }
        }
        Ok(())
    }

    /// Secrets: no lower-case letters, so that they cannot be confused with
    /// the filler or the `[redacted]` marker; punctuation that JSON and URLs
    /// escape; non-ASCII up to astral characters.
    fn secret() -> impl Strategy<Value = String> {
        "[A-Z0-9][A-Z0-9 !\"#$%&'()*+,./:;<=>?@\\[\\\\\\]^_`{|}~é€😀-]{5,40}"
    }

    /// Filler that shares no character with any spelling of a secret.
    fn filler(max: usize) -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![Just(' '), Just('ß'), Just('ø'), Just('æ')],
            0..max,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn credential(secret: &str, basic: bool) -> Credential {
        if basic {
            Credential::basic("user", secret)
        } else {
            Credential::api_key(secret)
        }
    }

    /// A spelled secret that, as a Basic credential, may be the header's
    /// base64 pair rather than the password.
    fn spelled(credential: &Credential, secret: &str, spelling: usize, pair: bool) -> String {
        let spelling = SPELLINGS[spelling % SPELLINGS.len()];
        match credential {
            Credential::Basic { username, .. } if pair => {
                spell(&format!("{username}:{secret}"), spelling)
            }
            _ => spell(secret, spelling),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any spelling, anywhere in a JSON answer — a value, an object key,
        /// deep inside arrays — is gone after redaction.
        #[test]
        fn no_spelling_survives_in_any_position(
            secret in secret(),
            basic in any::<bool>(),
            pair in any::<bool>(),
            spelling in 0usize..8,
            before in filler(20),
            after in filler(20),
            position in 0usize..5,
        ) {
            let credential = credential(&secret, basic);
            let token = spelled(&credential, &secret, spelling, pair);
            let wrapped = format!("{before}{token}{after}");
            let mut answer = match position {
                0 => json!(wrapped),
                1 => json!({ wrapped.clone(): "x-api-key" }),
                2 => json!({"a": [1, {"b": [[wrapped]]}]}),
                3 => json!([{ "headers": { "x-api-key": wrapped, wrapped.clone(): [wrapped] } }]),
                _ => json!({"text": format!("request GET /?q={wrapped} headers {}", json!({"k": wrapped}))}),
            };
            let redactor = Redactor::new(&credential);
            // As the answer's JSON text, redacted before it is parsed (what
            // the invoker does with a JSON body) ...
            let text = answer.to_string();
            let redacted = redactor.json_text(text.as_bytes()).unwrap_or_else(|| text.into_bytes());
            let parsed: Value = serde_json::from_slice(&redacted).expect("still JSON");
            // ... and as a parsed value.
            redactor.value(&mut answer);
            for shown in [parsed, answer] {
                let mut texts = Vec::new();
                strings(&shown, &mut texts);
                texts.push(shown.to_string());
                assert_clean(&texts, &forbidden(&credential, &secret))?;
            }
        }

        /// Text cut at any point keeps no piece of a spelled secret: a
        /// redacted span that crosses the cut is dropped whole.
        #[test]
        fn a_cut_never_leaves_part_of_a_secret(
            secret in secret(),
            basic in any::<bool>(),
            pair in any::<bool>(),
            spelling in 0usize..8,
            before in filler(40),
            after in filler(40),
            cut_at in any::<proptest::sample::Index>(),
        ) {
            let credential = credential(&secret, basic);
            let token = spelled(&credential, &secret, spelling, pair);
            let text = format!("{before}{token}{after}");
            let keep = cut_at.index(text.len() + 1);
            let shown = Redactor::new(&credential).cut(&text, keep);
            prop_assert!(shown.len() <= keep + REDACTED.len());
            // No piece of the token: every character of `shown` is filler,
            // part of the marker, or base64 padding (which tells nothing).
            let rest = shown.replace(REDACTED, "");
            prop_assert!(
                rest.chars().all(|c| matches!(c, ' ' | 'ß' | 'ø' | 'æ' | '=')),
                "{shown:?} keeps part of {token:?}"
            );
        }
    }

    #[test]
    fn short_secrets_and_no_credential_change_nothing() {
        for credential in [Credential::None, Credential::api_key("abc")] {
            let redactor = Redactor::new(&credential);
            assert!(redactor.is_empty());
            let mut value = json!({"abc": "abc"});
            redactor.value(&mut value);
            assert_eq!(value, json!({"abc": "abc"}));
            assert_eq!(redactor.cut("abcdef", 3), "abc");
        }
    }

    #[test]
    fn other_text_is_kept_exactly() {
        let redactor = Redactor::new(&Credential::api_key("AKEY-0123"));
        let text = r#"a %41KEY-0123 b \u0041KEY-0123 c AKEY-0123 d %zz \x \ud800 é"#;
        assert_eq!(
            redactor.text(text),
            r#"a [redacted] b [redacted] c [redacted] d %zz \x \ud800 é"#
        );
    }
}
