//! Warnings collected during an import, deduplicated and capped so that a
//! broken 10k-operation document cannot produce an unbounded list.

use std::collections::HashSet;

/// Warnings kept; the rest are counted.
const MAX_WARNINGS: usize = 200;

#[derive(Debug, Default)]
pub(crate) struct Warnings {
    list: Vec<String>,
    seen: HashSet<String>,
    dropped: usize,
}

impl Warnings {
    pub(crate) fn push(&mut self, message: impl Into<String>) {
        let message = message.into();
        if self.seen.contains(&message) {
            return;
        }
        if self.list.len() >= MAX_WARNINGS {
            self.dropped += 1;
            return;
        }
        self.seen.insert(message.clone());
        self.list.push(message);
    }

    pub(crate) fn finish(mut self) -> Vec<String> {
        if self.dropped > 0 {
            self.list
                .push(format!("… and {} more warnings", self.dropped));
        }
        self.list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deduplicates_and_caps() {
        let mut w = Warnings::default();
        w.push("a");
        w.push("a");
        for i in 0..MAX_WARNINGS + 5 {
            w.push(format!("w{i}"));
        }
        let list = w.finish();
        assert_eq!(list.len(), MAX_WARNINGS + 1);
        assert_eq!(list[0], "a");
        assert_eq!(list[MAX_WARNINGS], "… and 6 more warnings");
    }
}
