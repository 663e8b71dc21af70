//! Values kept per key at the revision they were read at.
//!
//! The store's revisions (`Store::access_revision`, Postgres's catalog
//! watch) move on every change of what they cover, made by any process. A
//! value read after the revision was `r` is current for as long as the
//! revision still is `r`; readers take the revision *before* they read, so
//! a change committed in between leaves the value kept at an older one.

use std::collections::HashMap;
use std::sync::Mutex;

/// Values by key, each with the revision it was read at. At most
/// `max_entries` keys; a full cache starts over (a bound, not an expected
/// size).
pub struct RevisionCache<V> {
    entries: Mutex<HashMap<String, (u64, V)>>,
    max_entries: usize,
}

impl<V: Clone> RevisionCache<V> {
    pub fn new(max_entries: usize) -> Self {
        RevisionCache {
            entries: Mutex::new(HashMap::new()),
            max_entries,
        }
    }

    /// The value kept for `key`, if it was read at `revision`.
    pub fn get(&self, key: &str, revision: u64) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        match entries.get(key) {
            Some((read_at, value)) if *read_at == revision => Some(value.clone()),
            _ => None,
        }
    }

    /// Keeps `value`, read after the revision was `revision`.
    pub fn keep(&self, key: &str, revision: u64, value: V) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.max_entries && !entries.contains_key(key) {
            entries.clear();
        }
        entries.insert(key.to_string(), (revision, value));
    }
}

#[cfg(test)]
mod tests {
    use super::RevisionCache;

    #[test]
    fn a_value_is_kept_only_at_its_revision_and_within_the_bound() {
        let cache = RevisionCache::new(2);
        cache.keep("a", 1, "one");
        assert_eq!(cache.get("a", 1), Some("one"));
        assert_eq!(cache.get("a", 2), None, "the revision moved");
        cache.keep("b", 1, "two");
        cache.keep("a", 3, "three");
        assert_eq!(cache.get("a", 3), Some("three"), "a known key is replaced");
        assert_eq!(cache.get("b", 1), Some("two"));
        cache.keep("c", 1, "four");
        assert_eq!(cache.get("b", 1), None, "full: it started over");
        assert_eq!(cache.get("c", 1), Some("four"));
    }
}
