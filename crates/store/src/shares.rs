//! Bounds that hold across the nodes of one store (SPEC §4, §10, §12):
//! running executions of an org and of all, live sessions of a principal,
//! GET streams of a session.
//!
//! Each node holds a *grant* of every bound it uses: a number of units the
//! store gave it (`shares` rows, one per node and bound). A node uses units
//! within its grant without asking anyone, so the hot path costs no round
//! trip; past it, it asks the store for more ([`Shares::ask`]), and the
//! store grants what the bound leaves beside the other live nodes' grants
//! (`NodeStore::claim_share`, serialised per bound). Units a node no longer
//! uses go back after [`SHARE_LINGER`] ([`Shares::give_back`], run by the
//! node's maintenance), so a steady load keeps its grant and another node
//! waits at most that long for units this one stopped using.
//!
//! A node whose lease lapsed holds nothing: the store counts only live
//! nodes' grants, and a registration drops the node's rows. Locally a grant
//! is valid while the node's lease is and for the registration it was
//! taken under, so a node never uses a grant the others no longer count.
//! The sum of live nodes' grants never exceeds a bound, and a node uses
//! more than its grant only for a run it had admitted before (a resumed
//! execution, see the engine's admission).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{NodeLease, Store};

/// How long units a node stopped using stay granted to it.
pub const SHARE_LINGER: Duration = Duration::from_secs(1);

/// The bounds counted across nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Share {
    /// Running executions in all (`--max-concurrent-executions`); one key.
    Running,
    /// Running executions of an org (`--max-org-executions`), by org id.
    OrgRunning,
    /// Live sessions of an (account, org) (`--max-sessions-per-principal`).
    PrincipalSessions,
    /// GET streams of a session (`--max-get-streams-per-session`), by
    /// session id.
    SessionStreams,
}

impl Share {
    pub fn as_str(self) -> &'static str {
        match self {
            Share::Running => "running",
            Share::OrgRunning => "org_running",
            Share::PrincipalSessions => "principal_sessions",
            Share::SessionStreams => "session_streams",
        }
    }
}

#[derive(Default)]
struct Held {
    /// Units the store granted this node.
    granted: usize,
    /// Units in use now, as the user last said.
    used: usize,
    /// The most in use since the last give-back.
    peak: usize,
    /// The registration of this node the grant was taken under.
    registration: u64,
    /// One ask of this bound at a time from this node.
    asking: Arc<tokio::sync::Mutex<()>>,
}

/// This node's grants of the bounds shared by the cluster.
pub struct Shares {
    store: Arc<dyn Store>,
    node: Arc<NodeLease>,
    /// By bound, then key: looked up by `&str`, without an allocation on
    /// the hot path.
    held: Mutex<HashMap<Share, HashMap<String, Held>>>,
}

impl Shares {
    pub fn new(store: Arc<dyn Store>, node: Arc<NodeLease>) -> Arc<Self> {
        Arc::new(Shares {
            store,
            node,
            held: Mutex::new(HashMap::new()),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Share, HashMap<String, Held>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `held`'s grant still counts on the store.
    fn current(&self, held: &Held) -> bool {
        self.node.valid() && held.registration == self.node.registrations()
    }

    /// The units of `key` this node may use now without asking the store.
    pub fn granted(&self, share: Share, key: &str) -> usize {
        let held = self.held();
        match held.get(&share).and_then(|keys| keys.get(key)) {
            Some(h) if self.current(h) => h.granted,
            _ => 0,
        }
    }

    /// Says how many units of `key` are in use now; a grant above what was
    /// used lately goes back at the next [`Shares::give_back`].
    pub fn using(&self, share: Share, key: &str, used: usize) {
        let mut held = self.held();
        let keys = held.entry(share).or_default();
        let h = match keys.get_mut(key) {
            Some(h) => h,
            None if used == 0 => return,
            None => keys.entry(key.to_string()).or_default(),
        };
        h.used = used;
        h.peak = h.peak.max(used);
    }

    /// The keys of `share` this node holds or uses.
    pub fn keys(&self, share: Share) -> Vec<String> {
        self.held()
            .get(&share)
            .map(|keys| keys.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Asks the store for a grant of `want` units of `key` (of at most
    /// `limit` across the live nodes); returns the grant this node holds
    /// afterwards, which may be less. A store that does not answer is an
    /// error, not a bound: the caller says the store is unavailable.
    pub async fn ask(
        &self,
        share: Share,
        key: &str,
        want: usize,
        limit: usize,
    ) -> Result<usize, crate::StoreError> {
        let asking = {
            let mut held = self.held();
            held.entry(share)
                .or_default()
                .entry(key.to_string())
                .or_default()
                .asking
                .clone()
        };
        let _one = asking.lock().await;
        let (granted, registration) = {
            let held = self.held();
            match held.get(&share).and_then(|keys| keys.get(key)) {
                Some(h) if self.current(h) => (h.granted, h.registration),
                _ => (0, self.node.registrations()),
            }
        };
        // Asked meanwhile by another caller of this node.
        if granted >= want {
            return Ok(granted);
        }
        self.node.ensure_alive(self.store.as_ref()).await?;
        // A registration just now dropped every earlier grant.
        let granted = if registration == self.node.registrations() {
            granted
        } else {
            0
        };
        let registration = self.node.registrations();
        let claimed = self
            .store
            .claim_share(
                self.node.id(),
                share.as_str(),
                key,
                want.max(granted) as i64,
                limit as i64,
            )
            .await?;
        let now = usize::try_from(claimed).unwrap_or(0);
        if now < want {
            // Rare but telling: a refusal that follows is the cluster's
            // bound, not this node's.
            tracing::info!(
                share = share.as_str(),
                key,
                want,
                granted = now,
                limit,
                "the other nodes hold the rest of a shared bound"
            );
        }
        let mut held = self.held();
        let h = held
            .entry(share)
            .or_default()
            .entry(key.to_string())
            .or_default();
        h.granted = now;
        h.registration = registration;
        Ok(now)
    }

    /// Gives back the units not used since the last call (run every
    /// [`SHARE_LINGER`] by the node's maintenance). Bounds being asked for
    /// right now are left to the next call.
    pub async fn give_back(&self) {
        let mut changed = Vec::new();
        let mut guards = Vec::new();
        {
            let mut held = self.held();
            let registration = self.node.registrations();
            for (share, keys) in held.iter_mut() {
                keys.retain(|key, h| {
                    let Ok(guard) = h.asking.clone().try_lock_owned() else {
                        return true;
                    };
                    let keep = h.peak.max(h.used);
                    h.peak = h.used;
                    if h.registration != registration {
                        // Dropped by the registration already.
                        h.granted = 0;
                    } else if h.granted > keep {
                        h.granted = keep;
                        changed.push((share.as_str().to_string(), key.clone(), keep as i64));
                        guards.push(guard);
                    }
                    h.granted > 0 || h.used > 0
                });
            }
        }
        if changed.is_empty() {
            return;
        }
        if let Err(e) = self.store.set_shares(self.node.id(), changed).await {
            // The store keeps the larger grants: other nodes may get less
            // than they could for a while, never more.
            tracing::warn!(error = %e, "could not give shared units back to the store");
        }
        drop(guards);
    }
}
