//! Parked leases: the sessions whose runtime this node disposed and whose
//! lease it kept (SPEC §10).
//!
//! The reaper parks the lease of each runtime it disposes. A request for the
//! session here then builds its runtime on that lease with no store write,
//! as a live runtime is served; one landing on another node meanwhile is
//! handed here. A lease parked for [`LEASE_KEPT`] (or past [`MAX_PARKED`]) is
//! released, and a node whose own lease lapsed forgets every lease it
//! parked. The state machine that parks and takes them is `lifecycle.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use executor_store::{Fence, SessionRecord, Store};

/// Default time a disposed session's lease stays with its node. Its next
/// request there restores it without a write (a claim was one write to
/// the store per restore, and its release another); a request that lands
/// on another node meanwhile is handed here, as for a live session. After
/// it, the lease is released, and the session is served where it lands.
pub const LEASE_KEPT: Duration = Duration::from_secs(5 * 60);
/// Parked leases one node keeps at most; past it the oldest are released.
/// Each holds a session record (about a kilobyte).
const MAX_PARKED: usize = 10_000;

/// A session whose runtime this node disposed and whose lease it kept.
pub(crate) struct Parked {
    pub(crate) record: SessionRecord,
    pub(crate) fence: Fence,
    since: Instant,
}

/// The leases this node parked, and the count of its lapses that voids
/// them.
pub(crate) struct Parking {
    /// Parked sessions by id. A std lock, as the sessions' `usage`; taken
    /// inside `slots` (by the reaper), never the other way round.
    parked: Mutex<HashMap<String, Parked>>,
    /// Times this node forgot its leases (`lapse_locally`), moved under the
    /// `parked` lock: a disposal that began before a lapse parks nothing.
    lapses: AtomicU64,
    /// How long a lease stays parked (`SessionsConfig::lease_kept`); zero
    /// parks none.
    keep: Duration,
    /// Whether peers can hand requests here (`--node-url`): a node they
    /// cannot reach parks none.
    reachable: bool,
}

impl Parking {
    pub(crate) fn new(keep: Duration, reachable: bool) -> Self {
        Parking {
            parked: Mutex::new(HashMap::new()),
            lapses: AtomicU64::new(0),
            keep,
            reachable,
        }
    }

    fn parked(&self) -> MutexGuard<'_, HashMap<String, Parked>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Times this node forgot its leases so far.
    pub(crate) fn lapses(&self) -> u64 {
        self.lapses.load(Ordering::SeqCst)
    }

    /// Takes the session's parked lease, if any, with the count of lapses
    /// read under the same lock.
    pub(crate) fn take(&self, session_id: &str) -> (Option<Parked>, u64) {
        let mut parked = self.parked();
        let lapses = self.lapses.load(Ordering::SeqCst);
        (parked.remove(session_id), lapses)
    }

    /// Forgets every parked lease and counts a lapse: this node's lease on
    /// the store lapsed (or may have).
    pub(crate) fn lapse(&self) {
        let mut parked = self.parked();
        self.lapses.fetch_add(1, Ordering::SeqCst);
        parked.clear();
    }

    /// Forgets every parked lease (shutdown, which releases them with the
    /// node).
    pub(crate) fn clear(&self) {
        self.parked().clear();
    }

    /// Forgets the session's parked lease (it was terminated).
    pub(crate) fn remove(&self, session_id: &str) {
        self.parked().remove(session_id);
    }

    /// Forgets the session's parked lease if it is the one on `fence`.
    pub(crate) fn remove_fenced(&self, session_id: &str, fence: &Fence) {
        let mut parked = self.parked();
        if parked.get(session_id).is_some_and(|p| p.fence == *fence) {
            parked.remove(session_id);
        }
    }

    /// Parks the leases of runtimes just disposed; returns the leases to
    /// release: parked for `lease_kept` already, over [`MAX_PARKED`], or all
    /// of them on a node peers cannot hand requests to (no URL) or when
    /// this node forgot its leases since `lapses` was read.
    pub(crate) fn park(
        &self,
        disposed: impl Iterator<Item = (SessionRecord, Fence)>,
        lapses: u64,
    ) -> Vec<(String, i64)> {
        let keep = self.keep;
        let mut parked = self.parked();
        if keep.is_zero() || !self.reachable || self.lapses.load(Ordering::SeqCst) != lapses {
            return disposed.map(|(r, f)| (r.id, f.epoch)).collect();
        }
        let now = Instant::now();
        for (record, fence) in disposed {
            let id = record.id.clone();
            let since = now;
            parked.insert(
                id,
                Parked {
                    record,
                    fence,
                    since,
                },
            );
        }
        let mut released: Vec<(String, i64)> = Vec::new();
        parked.retain(|id, p| {
            let keep_it = now.duration_since(p.since) < keep;
            if !keep_it {
                released.push((id.clone(), p.fence.epoch));
            }
            keep_it
        });
        if parked.len() > MAX_PARKED {
            let mut by_age: Vec<(Instant, String)> =
                parked.iter().map(|(id, p)| (p.since, id.clone())).collect();
            by_age.sort_unstable();
            for (_, id) in by_age.into_iter().take(parked.len() - MAX_PARKED) {
                if let Some(p) = parked.remove(&id) {
                    released.push((id, p.fence.epoch));
                }
            }
        }
        if parked.capacity() > 64 && parked.len() < parked.capacity() / 4 {
            parked.shrink_to_fit();
        }
        released
    }
}

/// Gives the leases of disposed runtimes back, in the background.
pub(crate) fn release_leases(store: &Arc<dyn Store>, node_id: &str, sessions: Vec<(String, i64)>) {
    if sessions.is_empty() {
        return;
    }
    let store = store.clone();
    let node = node_id.to_string();
    tokio::spawn(async move {
        if let Err(e) = store.release_sessions(&node, sessions).await {
            tracing::warn!(error = %e, "could not release session leases");
        }
    });
}
