//! This process as a node on the store (SPEC §10): its id, its lease, and
//! the local deadline past which it stops acting as any session's holder.
//!
//! The store keeps each node's lease (`nodes.alive_until`, the store's
//! clock); a session's lease is valid while its holder's node lease is. The
//! node renews it every `ttl / 5`. Locally it keeps a monotonic deadline,
//! `sent + ttl − ttl / 10` of the last renewal that succeeded: strictly
//! before the store's deadline, and still running while the process is
//! stopped (SIGSTOP), so a node that wakes after its lease ran out knows it
//! before it acts, without asking the store.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{NodeStore, StoreError};

/// Default lease of a node on the store (`--node-lease-ms`).
pub const NODE_LEASE: Duration = Duration::from_secs(10);

/// How long a dead node's row stays (see `NodeStore::register_node`): a
/// node gone for a day has no session left that names it as a live holder.
pub(crate) const NODE_ROW_KEPT_MS: i64 = 24 * 3600 * 1000;

/// This process's lease on the store. Shared (`Arc`) by the sessions and
/// the engine: both hold things for this node (session runtimes, paused
/// runs).
pub struct NodeLease {
    id: String,
    url: Option<String>,
    ttl: Duration,
    /// The local deadline, in milliseconds after `base`; 0 = not valid.
    valid_until_ms: AtomicU64,
    base: Instant,
    registered: AtomicBool,
    /// One registration at a time; `registrations` counts them, so that
    /// callers who waited for one do not repeat it.
    registering: tokio::sync::Mutex<()>,
    registrations: AtomicU64,
}

/// What a renewal found.
pub enum Renewal {
    Alive,
    /// The store's lease ran out (or the node was evicted): every runtime
    /// this node holds may now be held elsewhere.
    Lapsed,
    /// The store did not answer; the local deadline decides.
    Failed,
}

impl NodeLease {
    pub fn new(url: Option<String>, ttl: Duration) -> Self {
        NodeLease {
            id: format!("node_{}", crate::tokens::random_id(16)),
            url,
            ttl: ttl.max(Duration::from_millis(100)),
            valid_until_ms: AtomicU64::new(0),
            base: Instant::now(),
            registered: AtomicBool::new(false),
            registering: tokio::sync::Mutex::new(()),
            registrations: AtomicU64::new(0),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// How often the lease is renewed.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 5
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// Whether this node may act as a holder now, by its own clock.
    pub fn valid(&self) -> bool {
        let until = self.valid_until_ms.load(Ordering::Acquire);
        until != 0 && (self.base.elapsed().as_millis() as u64) < until
    }

    /// Records a renewal sent at `sent` that the store accepted.
    fn renewed(&self, sent: Instant) {
        let until = sent.duration_since(self.base) + self.ttl - self.ttl / 10;
        self.valid_until_ms
            .store((until.as_millis() as u64).max(1), Ordering::Release);
    }

    fn invalidate(&self) {
        self.valid_until_ms.store(0, Ordering::Release);
    }

    /// How many registrations this process made: a new one (after a
    /// lapse) drops what the node held on the store before.
    pub fn registrations(&self) -> u64 {
        self.registrations.load(Ordering::Acquire)
    }

    pub fn is_registered(&self) -> bool {
        self.registered.load(Ordering::Acquire)
    }

    /// Registers unless this node is alive by its own clock (a process
    /// that claims without renewing: a CLI command).
    pub async fn ensure_alive(&self, store: &dyn NodeStore) -> Result<(), StoreError> {
        if self.valid() {
            return Ok(());
        }
        self.register(store).await
    }

    /// Registers (again), unless another caller's registration finished
    /// while this one waited for its turn.
    pub async fn register(&self, store: &dyn NodeStore) -> Result<(), StoreError> {
        let seen = self.registrations.load(Ordering::Acquire);
        let _one = self.registering.lock().await;
        if self.registrations.load(Ordering::Acquire) != seen {
            return Ok(());
        }
        let sent = Instant::now();
        store
            .register_node(&self.id, self.url(), self.ttl_ms())
            .await?;
        self.renewed(sent);
        self.registered.store(true, Ordering::Release);
        self.registrations.fetch_add(1, Ordering::AcqRel);
        tracing::info!(node = %self.id, "registered as a node on the store");
        Ok(())
    }

    /// Renews the lease.
    pub async fn renew(&self, store: &dyn NodeStore) -> Renewal {
        let sent = Instant::now();
        match store.heartbeat_node(&self.id, self.ttl_ms()).await {
            Ok(true) => {
                self.renewed(sent);
                Renewal::Alive
            }
            Ok(false) => {
                self.invalidate();
                Renewal::Lapsed
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not renew this node's lease");
                Renewal::Failed
            }
        }
    }
}
