//! A page of a newest-first list the store reads by key (executions, tool
//! calls, sessions): the cursor in, the rows and the next cursor out.

use executor_store::{PageKey, PageRequest};

use crate::{OpError, OpResult};

/// Most rows one page holds.
pub const MAX_PAGE: u32 = 200;

/// One page of a list, with the cursor of the next (None on the last).
#[derive(Debug, Clone)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// What page to read: `limit` (1 to [`MAX_PAGE`]) rows after `cursor`.
#[derive(Debug, Clone, Default)]
pub struct PageAsk {
    pub limit: u32,
    pub cursor: Option<String>,
}

impl PageAsk {
    /// The store's request for one row more than asked: that row says
    /// whether there is a next page.
    pub(crate) fn request(&self) -> OpResult<PageRequest> {
        let after = self
            .cursor
            .as_deref()
            .map(PageKey::decode)
            .transpose()
            .map_err(|_| OpError::invalid("cursor", "the cursor is not one this API gave out"))?;
        Ok(PageRequest {
            limit: self.limit.clamp(1, MAX_PAGE) + 1,
            after,
        })
    }

    /// The page of `rows` (read with [`PageAsk::request`]), keyed by `key`.
    pub(crate) fn page<R, T>(
        &self,
        mut rows: Vec<R>,
        key: impl Fn(&R) -> PageKey,
        show: impl Fn(R) -> T,
    ) -> Listed<T> {
        let limit = self.limit.clamp(1, MAX_PAGE) as usize;
        let next_cursor = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|last| key(last).encode())
        } else {
            None
        };
        Listed {
            items: rows.into_iter().map(show).collect(),
            next_cursor,
        }
    }
}
