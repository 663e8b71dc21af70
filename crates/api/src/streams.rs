//! The bound on open event streams: each holds a task and a store read a
//! second, so one token may hold a few at once and no more.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::ApiError;

/// Event streams one API token may hold open at once.
pub const MAX_STREAMS_PER_TOKEN: usize = 8;

/// Event streams the server holds open at once, every token's together
/// (tokens can be minted: the per-token bound alone bounds nothing).
pub const MAX_STREAMS: usize = 512;

/// Who holds how many streams.
#[derive(Debug, Default)]
pub struct StreamSlots {
    open: Mutex<HashMap<String, usize>>,
}

/// One open stream; dropping it frees its place.
pub(crate) struct StreamSlot {
    slots: Arc<StreamSlots>,
    token_id: String,
}

impl StreamSlots {
    /// A place for one more stream of `token_id`, or 429 when it holds the
    /// most it may.
    pub(crate) fn open(self: &Arc<Self>, token_id: &str) -> Result<StreamSlot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = open.values().sum();
        if total >= MAX_STREAMS {
            return Err(ApiError::too_many_streams(
                "the server holds the most open streams it may; retry shortly",
            ));
        }
        let held = open.entry(token_id.to_string()).or_default();
        if *held >= MAX_STREAMS_PER_TOKEN {
            return Err(ApiError::too_many_streams(format!(
                "this token holds {MAX_STREAMS_PER_TOKEN} open streams, the most it may; close one first"
            )));
        }
        *held += 1;
        Ok(StreamSlot {
            slots: self.clone(),
            token_id: token_id.to_string(),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = open.get_mut(&self.token_id) {
            *held -= 1;
            if *held == 0 {
                open.remove(&self.token_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_at_most_the_bound_and_a_closed_stream_frees_its_place() {
        let slots = Arc::new(StreamSlots::default());
        let held: Vec<_> = (0..MAX_STREAMS_PER_TOKEN)
            .map(|_| slots.open("tok").expect("within the bound"))
            .collect();
        assert!(slots.open("tok").is_err(), "one past the bound");
        assert!(slots.open("other").is_ok(), "another token has its own");
        drop(held);
        let again = slots.open("tok").expect("the places are free again");
        assert_eq!(slots.open.lock().unwrap().get("tok"), Some(&1));
        drop(again);
        assert_eq!(
            slots.open.lock().unwrap().get("tok"),
            None,
            "no entry is kept"
        );
    }

    #[test]
    fn the_server_holds_at_most_its_bound_whatever_the_tokens() {
        let slots = Arc::new(StreamSlots::default());
        let held: Vec<_> = (0..MAX_STREAMS)
            .map(|i| {
                slots
                    .open(&format!("tok{}", i % 100))
                    .expect("within the bound")
            })
            .collect();
        assert!(
            slots.open("a-new-token").is_err(),
            "one past the server's bound"
        );
        drop(held);
        assert!(slots.open("a-new-token").is_ok());
    }
}
