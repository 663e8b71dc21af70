//! Keyset pagination for the lists the management API reads (SPEC §13):
//! newest first, in (time desc, id desc) order, where a page's cursor is
//! the key of its last row and the next page holds the rows strictly older
//! than it. Unlike an offset, a key never moves: rows inserted after page
//! one was read (newer, or equal in time with a greater id) sort before
//! the key and never shift what later pages hold.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Most rows one page holds; a larger `limit` is cut to it.
pub const MAX_PAGE_LIMIT: u32 = 500;

/// One page of a newest-first list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageRequest {
    /// Rows wanted (at least 1, at most [`MAX_PAGE_LIMIT`]).
    pub limit: u32,
    /// The key of the previous page's last row; None for the first page.
    pub after: Option<PageKey>,
}

impl PageRequest {
    /// The first page of `limit` rows.
    pub fn first(limit: u32) -> Self {
        PageRequest { limit, after: None }
    }

    /// The limit as the store applies it.
    pub fn bounded_limit(&self) -> u32 {
        self.limit.clamp(1, MAX_PAGE_LIMIT)
    }
}

/// Where a page ends: the (time, id) of its last row. The next page holds
/// the rows strictly older in (time desc, id desc) order. The time is the
/// list's own (a tool call's or execution's start, a session's last
/// activity).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageKey {
    pub started_at_ms: i64,
    pub id: String,
}

/// A cursor that is not one this store made (garbage, or cut short).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor")]
pub struct BadCursor;

impl PageKey {
    /// The key as an opaque, URL-safe cursor (base64url of `time:id`).
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.started_at_ms, self.id))
    }

    /// Reads a cursor made by [`PageKey::encode`].
    pub fn decode(cursor: &str) -> Result<PageKey, BadCursor> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| BadCursor)?;
        let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
        let (time, id) = text.split_once(':').ok_or(BadCursor)?;
        let started_at_ms: i64 = time.parse().map_err(|_| BadCursor)?;
        // Only the form `encode` writes (no '+', leading zeros or "-0"),
        // so that one key has one cursor.
        if started_at_ms.to_string() != time || id.is_empty() {
            return Err(BadCursor);
        }
        Ok(PageKey {
            started_at_ms,
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_cursor_reads_back_as_its_key(time in any::<i64>(), id in ".+") {
            let key = PageKey { started_at_ms: time, id };
            let cursor = key.encode();
            prop_assert!(cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            prop_assert_eq!(PageKey::decode(&cursor), Ok(key));
        }

        #[test]
        fn garbage_is_refused_without_a_panic(text in ".*") {
            // Either a key whose encoding is the text again, or refused.
            if let Ok(key) = PageKey::decode(&text) {
                prop_assert_eq!(key.encode(), text);
            }
        }
    }

    #[test]
    fn malformed_cursors_are_refused() {
        let encoded = |text: &str| URL_SAFE_NO_PAD.encode(text);
        for cursor in [
            String::new(),
            "!!".into(),
            encoded("12"),
            encoded(":id"),
            encoded("12:"),
            encoded("+12:id"),
            encoded("1 2:id"),
            encoded("007:id"),
            encoded("-0:id"),
            encoded("99999999999999999999:id"),
            URL_SAFE_NO_PAD.encode([0xff, 0xfe, b':', b'a']),
        ] {
            assert_eq!(PageKey::decode(&cursor), Err(BadCursor), "{cursor}");
        }
        assert_eq!(
            PageKey::decode(&encoded("-5:a:b")),
            Ok(PageKey {
                started_at_ms: -5,
                id: "a:b".into()
            })
        );
    }

    #[test]
    fn limits_are_bounded() {
        assert_eq!(PageRequest::first(0).bounded_limit(), 1);
        assert_eq!(PageRequest::first(10_000).bounded_limit(), MAX_PAGE_LIMIT);
    }
}
