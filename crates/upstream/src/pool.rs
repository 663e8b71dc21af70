//! Upstream sessions, pooled per (org, integration): a call leases a warm
//! session and gives it back, so that a program's 50 calls open one
//! session; parallel calls open more, up to the cap, and wait beyond it.
//! A stdio server is one child serving every call at once (MCP multiplexes
//! requests on a session). Sessions idle for `idle_timeout` close; so do
//! the pools of integrations removed or changed, found by the maintenance
//! loop, which also re-syncs tool lists (see `sync.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use executor_outbound::{Credential, CredentialSource, HttpClient};
use executor_store::Store;
use executor_store::secrets::SecretKey;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::connect::{self, Session};
use crate::env::EnvSecrets;
use crate::error::OpenError;
use crate::stored::Endpoint;
use crate::sync;

/// Operator settings of upstream MCP integrations.
#[derive(Debug, Clone)]
pub struct UpstreamSettings {
    /// Whether stdio integrations may start their command here
    /// (`--allow-stdio-integrations`).
    pub allow_stdio: bool,
    /// Most sessions open at once with one HTTP upstream per org.
    pub max_sessions: usize,
    /// Sessions (and stdio children) unused this long close.
    pub idle_timeout: Duration,
    /// Longest one tool call may take.
    pub call_timeout: Duration,
    /// How often a tool list in use is listed again.
    pub resync_every: Duration,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        UpstreamSettings {
            allow_stdio: false,
            max_sessions: 8,
            idle_timeout: Duration::from_secs(300),
            call_timeout: Duration::from_secs(300),
            resync_every: Duration::from_secs(900),
        }
    }
}

/// How often the maintenance loop looks at the pools.
const MAINTENANCE_TICK: Duration = Duration::from_secs(2);

/// A session that dies within this long of opening counts as a failed
/// start: the next one waits (backoff).
const HEALTHY_AFTER: Duration = Duration::from_secs(10);
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    pub org_id: String,
    pub namespace: String,
}

/// Every pool of this process; shared by the invokers of every catalog.
pub struct Upstreams {
    pub(crate) http: Arc<HttpClient>,
    pub(crate) credentials: Arc<dyn CredentialSource>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) settings: UpstreamSettings,
    /// Opens stdio integrations' sealed `--env` values (`env.rs`).
    secret_key: Option<Arc<SecretKey>>,
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
    maintaining: AtomicBool,
    opened: AtomicU64,
    /// This process among those sharing the store, as the holder of the
    /// periodic re-syncs it claims.
    process_id: String,
}

/// The sessions of one (org, integration, credential).
pub(crate) struct Pool {
    pub key: PoolKey,
    pub endpoint: Endpoint,
    credential_digest: [u8; 32],
    /// Exclusive leases up to the cap (HTTP); None: one shared session
    /// (stdio).
    permits: Option<Arc<Semaphore>>,
    state: Mutex<PoolState>,
    /// Set when the upstream said its tools changed, or a call named a
    /// tool it does not have.
    pub resync_wanted: AtomicBool,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<(Arc<Session>, Instant)>,
    /// The stdio child's session, and when it was last used.
    shared: Option<(Arc<Session>, Instant)>,
    /// Starts that failed in a row, and when the last one began.
    failures: u32,
    last_open: Option<Instant>,
    last_sync: Option<Instant>,
}

/// A session lent to one call; back to the pool when dropped, unless the
/// call found it broken.
pub(crate) struct Lease {
    pub session: Arc<Session>,
    pool: Arc<Pool>,
    _permit: Option<OwnedSemaphorePermit>,
    broken: bool,
}

impl Lease {
    /// The session failed: it is closed rather than lent again.
    pub fn discard(mut self) {
        self.broken = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.broken || self.session.is_closed() {
            // A broken shared session is not handed to the next call.
            let mut state = self.pool.lock();
            if state
                .shared
                .as_ref()
                .is_some_and(|(shared, _)| Arc::ptr_eq(shared, &self.session))
            {
                state.shared = None;
            }
            return;
        }
        if self.pool.permits.is_some() {
            self.pool
                .lock()
                .idle
                .push((self.session.clone(), Instant::now()));
        } else if let Some((_, used)) = self.pool.lock().shared.as_mut() {
            *used = Instant::now();
        }
    }
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// When the tools were last listed (or the pool made).
    pub fn last_sync(&self) -> Option<Instant> {
        self.lock().last_sync
    }

    pub fn synced_now(&self) {
        self.lock().last_sync = Some(Instant::now());
    }
}

/// A digest of the credential, to tell whether a pool's sessions were
/// opened with the connection as it is now (never stored or shown).
fn credential_digest(credential: &Credential) -> [u8; 32] {
    let mut hash = Sha256::new();
    match credential {
        Credential::None => hash.update(b"none"),
        Credential::ApiKey(secret) => {
            hash.update(b"key:");
            hash.update(secret.expose().as_bytes());
        }
        Credential::Bearer(secret) => {
            hash.update(b"bearer:");
            hash.update(secret.expose().as_bytes());
        }
        Credential::Basic { username, password } => {
            hash.update(b"basic:");
            hash.update(username.as_bytes());
            hash.update(b"\0");
            hash.update(password.expose().as_bytes());
        }
    }
    hash.finalize().into()
}

impl Upstreams {
    pub fn new(
        http: Arc<HttpClient>,
        credentials: Arc<dyn CredentialSource>,
        store: Arc<dyn Store>,
        settings: UpstreamSettings,
        secret_key: Option<Arc<SecretKey>>,
    ) -> Arc<Self> {
        Arc::new(Upstreams {
            http,
            credentials,
            store,
            settings,
            secret_key,
            pools: Mutex::new(HashMap::new()),
            maintaining: AtomicBool::new(false),
            opened: AtomicU64::new(0),
            process_id: format!("upstreams_{}", executor_store::tokens::random_id(12)),
        })
    }

    pub fn settings(&self) -> &UpstreamSettings {
        &self.settings
    }

    /// What opens the sealed `--env` values of `org_id`'s stdio integrations.
    pub(crate) fn env_secrets<'a>(&'a self, org_id: &'a str) -> EnvSecrets<'a> {
        EnvSecrets {
            key: self.secret_key.as_deref(),
            org_id,
        }
    }

    /// Sessions this process has opened with upstreams (for the logs and
    /// the benchmark).
    pub fn sessions_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    fn pools(&self) -> MutexGuard<'_, HashMap<PoolKey, Arc<Pool>>> {
        self.pools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The pool of `org_id`'s integration `namespace` at `endpoint` with
    /// `credential`; a pool made for another endpoint or credential is
    /// replaced (its sessions close as their calls end).
    pub(crate) fn pool(
        self: &Arc<Self>,
        org_id: &str,
        namespace: &str,
        endpoint: &Endpoint,
        credential: &Credential,
    ) -> Arc<Pool> {
        let key = PoolKey {
            org_id: org_id.to_string(),
            namespace: namespace.to_string(),
        };
        let digest = credential_digest(credential);
        let pool = {
            let mut pools = self.pools();
            match pools.get(&key) {
                Some(pool) if pool.endpoint == *endpoint && pool.credential_digest == digest => {
                    return pool.clone();
                }
                _ => {}
            }
            let permits = match endpoint {
                Endpoint::Stdio { .. } => None,
                Endpoint::Http { .. } => {
                    Some(Arc::new(Semaphore::new(self.settings.max_sessions.max(1))))
                }
            };
            let pool = Arc::new(Pool {
                key: key.clone(),
                endpoint: endpoint.clone(),
                credential_digest: digest,
                permits,
                // The tools were listed when the integration was stored
                // (or at the last re-sync): the next is `resync_every` on.
                state: Mutex::new(PoolState {
                    last_sync: Some(Instant::now()),
                    ..PoolState::default()
                }),
                resync_wanted: AtomicBool::new(false),
            });
            pools.insert(key, pool.clone());
            pool
        };
        self.start_maintenance();
        pool
    }

    /// A session of `pool` for one call: a warm one, else a new one.
    pub(crate) async fn lease(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        credential: &Credential,
    ) -> Result<Lease, OpenError> {
        let Some(permits) = &pool.permits else {
            return self.lease_shared(pool, credential).await;
        };
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| OpenError::Unavailable("the integration was removed".into()))?;
        loop {
            let warm = pool.lock().idle.pop();
            match warm {
                Some((session, _)) if session.is_closed() => continue,
                Some((session, _)) => {
                    return Ok(Lease {
                        session,
                        pool: pool.clone(),
                        _permit: Some(permit),
                        broken: false,
                    });
                }
                None => break,
            }
        }
        let session = self.open(pool, credential).await?;
        Ok(Lease {
            session,
            pool: pool.clone(),
            _permit: Some(permit),
            broken: false,
        })
    }

    /// The stdio child's session, started (or restarted) when there is
    /// none. Starts are serialised by the pool's state lock being taken
    /// again after the start: two calls that find no child may both start
    /// one; the second is kept as the shared one and the first closes when
    /// its call ends. Rare (first use only) and harmless.
    async fn lease_shared(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        credential: &Credential,
    ) -> Result<Lease, OpenError> {
        let live = pool
            .lock()
            .shared
            .as_ref()
            .filter(|(session, _)| !session.is_closed())
            .map(|(session, _)| session.clone());
        let session = match live {
            Some(session) => session,
            None => {
                let session = self.open(pool, credential).await?;
                pool.lock().shared = Some((session.clone(), Instant::now()));
                session
            }
        };
        Ok(Lease {
            session,
            pool: pool.clone(),
            _permit: None,
            broken: false,
        })
    }

    /// Opens a session for `pool`, after the backoff its failed starts
    /// call for.
    async fn open(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        credential: &Credential,
    ) -> Result<Arc<Session>, OpenError> {
        // A stdio child that died soon after it started is started again
        // after a growing pause; HTTP opens go straight through.
        if pool.permits.is_none() {
            let wait = {
                let mut state = pool.lock();
                if state
                    .last_open
                    .is_some_and(|at| at.elapsed() < HEALTHY_AFTER)
                {
                    state.failures += 1;
                } else {
                    state.failures = 0;
                }
                let since = state.last_open.map_or(BACKOFF_MAX, |at| at.elapsed());
                backoff(state.failures).saturating_sub(since)
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            pool.lock().last_open = Some(Instant::now());
        }
        let weak = Arc::downgrade(pool);
        let on_change: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(pool) = weak.upgrade() {
                pool.resync_wanted.store(true, Ordering::Relaxed);
            }
        });
        let opened = connect::open(
            &pool.key.namespace,
            &pool.endpoint,
            credential,
            &self.http,
            self.env_secrets(&pool.key.org_id),
            Some(on_change),
        )
        .await;
        match opened {
            Ok(session) => {
                let count = self.opened.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::info!(
                    namespace = %pool.key.namespace,
                    opened_in_all = count,
                    "opened an upstream MCP session"
                );
                Ok(Arc::new(session))
            }
            Err(e) => Err(e),
        }
    }

    /// Starts the maintenance loop unless it runs.
    fn start_maintenance(self: &Arc<Self>) {
        if self.maintaining.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.maintaining.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(self.clone().maintain());
    }

    /// Closes idle sessions and the pools of removed or changed
    /// integrations, and re-syncs tool lists; ends when no pool is left.
    async fn maintain(self: Arc<Self>) {
        loop {
            tokio::time::sleep(MAINTENANCE_TICK).await;
            // Re-syncs first: one that was asked for holds its pool, which
            // closing idle sessions would otherwise drop with the request.
            self.resync_due();
            self.close_idle();
            self.close_removed().await;
            let mut pools = self.pools();
            if pools.is_empty() {
                self.maintaining.store(false, Ordering::Release);
                return;
            }
            pools.shrink_to_fit();
        }
    }

    fn close_idle(&self) {
        let idle_timeout = self.settings.idle_timeout;
        let mut pools = self.pools();
        pools.retain(|_, pool| {
            let mut state = pool.lock();
            state
                .idle
                .retain(|(session, since)| since.elapsed() < idle_timeout && !session.is_closed());
            let shared_done = state.shared.as_ref().is_some_and(|(session, used)| {
                session.is_closed()
                    || (used.elapsed() >= idle_timeout && Arc::strong_count(session) == 1)
            });
            if shared_done {
                state.shared = None;
            }
            // A pool with nothing open and nothing lent goes; the next call
            // makes a new one.
            let lent = pool
                .permits
                .as_ref()
                .is_some_and(|p| p.available_permits() < self.settings.max_sessions.max(1));
            !(state.idle.is_empty() && state.shared.is_none() && !lent)
                || Arc::strong_count(pool) > 1
        });
    }

    /// Drops the pools whose integration is gone from the store or now
    /// names another server: a stdio child stops on `integrations remove`
    /// even when no session is open.
    async fn close_removed(&self) {
        let orgs: Vec<String> = {
            let pools = self.pools();
            let mut orgs: Vec<String> = pools.keys().map(|k| k.org_id.clone()).collect();
            orgs.sort();
            orgs.dedup();
            orgs
        };
        for org_id in orgs {
            let Ok(records) = self.store.list_integrations(&org_id, false).await else {
                continue;
            };
            self.pools().retain(|key, pool| {
                key.org_id != org_id
                    || records
                        .iter()
                        .any(|r| r.namespace == key.namespace && r.source == pool.endpoint.source())
            });
        }
    }

    /// Starts the re-syncs that are due. One the upstream asked for (its
    /// `list_changed` reached this process) runs here; a periodic one runs
    /// on one of the processes sharing the store per interval
    /// (`Store::claim_job`), not on each.
    fn resync_due(self: &Arc<Self>) {
        let every = self.settings.resync_every;
        let due: Vec<(Arc<Pool>, bool)> = self
            .pools()
            .values()
            .filter_map(|pool| {
                let wanted = pool.resync_wanted.swap(false, Ordering::AcqRel);
                let periodic = pool.last_sync().is_some_and(|at| at.elapsed() >= every);
                (wanted || periodic).then(|| (pool.clone(), wanted))
            })
            .collect();
        for (pool, wanted) in due {
            pool.synced_now();
            let upstreams = self.clone();
            tokio::spawn(async move {
                if wanted || upstreams.claim_periodic_resync(&pool, every).await {
                    upstreams.resync(&pool).await;
                }
            });
        }
    }

    /// Lists `pool`'s tools again on one of its sessions and stores them
    /// when they changed.
    async fn resync(self: &Arc<Self>, pool: &Arc<Pool>) {
        let (org_id, namespace) = (&pool.key.org_id, &pool.key.namespace);
        let result = async {
            let credential = self
                .credentials
                .credential(org_id, namespace)
                .await
                .map_err(|e| e.message)?
                .unwrap_or(Credential::None);
            let lease = self
                .lease(pool, &credential)
                .await
                .map_err(|e| e.to_string())?;
            let tools = sync::list_tools(&lease.session).await?;
            drop(lease);
            sync::store_if_changed(&*self.store, org_id, namespace, &pool.endpoint, &tools).await
        }
        .await;
        match result {
            Ok(true) => tracing::info!(namespace, "an upstream MCP server's tools changed; stored"),
            Ok(false) => tracing::debug!(namespace, "an upstream MCP server's tools are unchanged"),
            Err(why) => tracing::warn!(
                namespace,
                why,
                "cannot re-sync an upstream MCP server's tools"
            ),
        }
    }

    /// Whether this process runs the periodic re-sync of `pool` now. A
    /// store error runs it (a re-sync writes only what changed).
    async fn claim_periodic_resync(&self, pool: &Pool, every: Duration) -> bool {
        let name = format!("resync:{}:{}", pool.key.org_id, pool.key.namespace);
        let every_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        self.store
            .claim_job(&name, &self.process_id, every_ms, executor_store::now_ms())
            .await
            .unwrap_or(true)
    }
}

fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    BACKOFF_FIRST
        .saturating_mul(1 << (failures - 1).min(6))
        .min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_a_quarter_second_to_its_cap() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_millis(250));
        assert_eq!(backoff(2), Duration::from_millis(500));
        assert_eq!(backoff(6), BACKOFF_MAX);
        assert_eq!(backoff(40), BACKOFF_MAX);
    }

    #[test]
    fn a_changed_credential_has_another_digest() {
        let a = credential_digest(&Credential::bearer("one-token"));
        assert_eq!(a, credential_digest(&Credential::bearer("one-token")));
        assert_ne!(a, credential_digest(&Credential::bearer("two-token")));
        assert_ne!(a, credential_digest(&Credential::api_key("one-token")));
        assert_ne!(credential_digest(&Credential::None), a);
    }
}
