//! Lists: `limit` (bounded) and an opaque `cursor` in, `{items,
//! next_cursor}` out, the same for every list of the API.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;

/// Items a page holds when the caller names no limit.
pub const DEFAULT_LIMIT: u32 = 50;
/// Items a page holds at most.
pub const MAX_LIMIT: u32 = 200;

/// A page's query.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items to return, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// Where the previous page ended: its `next_cursor`.
    #[param(pattern = "^(?:[0-9a-f]{2}){1,512}$")]
    pub cursor: Option<String>,
}

impl PageQuery {
    pub fn limit(&self) -> Result<u32, ApiError> {
        match self.limit {
            None => Ok(DEFAULT_LIMIT),
            Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            Some(_) => Err(ApiError::invalid(
                "limit",
                format!("a limit is 1 to {MAX_LIMIT}"),
            )),
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The cursor of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

impl<T> From<executor_ops::Listed<T>> for Page<T> {
    fn from(listed: executor_ops::Listed<T>) -> Self {
        Page {
            items: listed.items,
            next_cursor: listed.next_cursor,
        }
    }
}

/// The latest time a filter takes (the last millisecond of year 9999).
pub const MAX_TIME_MS: u64 = 253_402_300_799_999;

/// A time filter (ms since the epoch), within what the document allows.
pub fn time_param(value: Option<u64>, field: &str) -> Result<Option<i64>, ApiError> {
    match value {
        None => Ok(None),
        Some(ms) if ms <= MAX_TIME_MS => Ok(Some(ms as i64)),
        Some(_) => Err(ApiError::invalid(
            field,
            format!("a time is at most {MAX_TIME_MS} (ms since the epoch)"),
        )),
    }
}

/// The operations' page request from a query's `limit` and `cursor`.
pub fn ask(limit: Option<u32>, cursor: Option<String>) -> Result<executor_ops::PageAsk, ApiError> {
    let limit = PageQuery {
        limit,
        cursor: None,
    }
    .limit()?;
    Ok(executor_ops::PageAsk { limit, cursor })
}

/// A page of a list read whole (an org's integrations, policies,
/// connections: hundreds at most), ordered by `key`, which is unique: the
/// cursor is the last key shown, so a page never repeats or skips an item
/// that was there before and after an insert.
pub fn page_of<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> &str,
    query: &PageQuery,
) -> Result<Page<T>, ApiError> {
    let limit = query.limit()? as usize;
    items.sort_by(|a, b| key(a).cmp(key(b)));
    let start = match &query.cursor {
        None => 0,
        Some(cursor) => {
            let after = decode_cursor(cursor)?;
            items.partition_point(|item| key(item) <= after.as_str())
        }
    };
    Ok(page_from(items, start, limit, key))
}

/// A page of a list whose order is its own (policies: match order), not
/// its keys': the cursor is the last key shown, and the page starts after
/// that item wherever it now is (from the start when it is gone).
pub fn page_in_order<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> &str,
    query: &PageQuery,
) -> Result<Page<T>, ApiError> {
    let limit = query.limit()? as usize;
    let start = match &query.cursor {
        None => 0,
        Some(cursor) => {
            let after = decode_cursor(cursor)?;
            items
                .iter()
                .position(|item| key(item) == after)
                .map_or(0, |i| i + 1)
        }
    };
    Ok(page_from(items, start, limit, key))
}

/// The `limit` items from `start` on, with the cursor of the next page
/// when more follow.
fn page_from<T>(items: Vec<T>, start: usize, limit: usize, key: impl Fn(&T) -> &str) -> Page<T> {
    let mut rest: Vec<T> = items.into_iter().skip(start).collect();
    let next_cursor = if rest.len() > limit {
        rest.truncate(limit);
        rest.last().map(|last| encode_cursor(key(last)))
    } else {
        None
    };
    Page {
        items: rest,
        next_cursor,
    }
}

/// An opaque cursor: the key, hex-encoded (so no one builds one by hand
/// and expects it to mean something).
fn encode_cursor(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    let bad = || ApiError::invalid("cursor", "the cursor is not one this API gave out");
    if cursor.is_empty() || !cursor.len().is_multiple_of(2) || cursor.len() > 1024 {
        return Err(bad());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| {
            cursor
                .get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    // A key is text; bytes that are not are no key, and sort where they
    // sort.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(limit: u32, cursor: Option<String>) -> PageQuery {
        PageQuery {
            limit: Some(limit),
            cursor,
        }
    }

    #[test]
    fn pages_walk_every_item_once_even_when_one_is_added_between_them() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let first = page_of(names(&["c", "a", "b", "d"]), |s| s, &query(2, None)).unwrap();
        assert_eq!(first.items, ["a", "b"]);
        let cursor = first.next_cursor.clone();
        // "aa" arrives before the next page: it sorts before the cursor.
        let second = page_of(names(&["c", "a", "aa", "b", "d"]), |s| s, &query(2, cursor)).unwrap();
        assert_eq!(second.items, ["c", "d"]);
        assert_eq!(second.next_cursor, None);
    }

    #[test]
    fn a_cursor_not_given_out_is_refused_by_name() {
        for bad in ["zz", "abc", ""] {
            let e = page_of(vec!["a".to_string()], |s| s, &query(2, Some(bad.into())));
            assert!(e.is_err(), "{bad}");
        }
    }
}
