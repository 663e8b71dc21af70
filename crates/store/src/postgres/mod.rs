//! The shared store: Postgres, for several nodes on one database (SPEC §10).
//!
//! Same trait, same records, same rules as [`SqliteStore`](crate::SqliteStore);
//! what differs is how each method stays atomic. SQLite runs every write on
//! one writer thread, so a "read, then write" method is serialised for free.
//! Postgres runs writers concurrently (READ COMMITTED), so each such method
//! here is one statement (`UPDATE … RETURNING`, `INSERT … ON CONFLICT`), or a
//! short transaction under an advisory lock where a row lock cannot serve
//! (`ensure_account`, policy positions). The store contract suite
//! (`tests/contract.rs`) runs every behaviour against both.
//!
//! Driver: tokio-postgres with deadpool-postgres (docs/decisions/postgres-driver.md says why
//! not sqlx). Statements are prepared once per pooled connection
//! (`prepare_cached`). Every write is awaited and committed before the
//! method returns; Postgres already shares one WAL flush between
//! concurrent commits. Delivery marks are too, but their group lingers up
//! to 20 ms (`group.rs`) and their caller does not wait for them, so they
//! are what [`Store::flush`] waits for.

mod accounts;
mod catalog;
mod connections;
mod executions;
mod group;
mod import;
mod nodes;
mod notices;
mod oauth;
mod policies;
mod rows;
mod schema;
mod sessions;
mod tool_calls;

pub use import::ImportReport;

use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;

use deadpool_postgres::{
    Client, Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::NoTls;

use group::{DeliveryMarks, ExecutionRecords, FencedEvents, Group};
use notices::Listener;

use crate::secrets::{SecretKey, open, seal};
use crate::{Refusal, RevisionCache, StoreError, StoreResult, UnknownValue};

/// Tunables of [`PgStore`].
#[derive(Debug, Clone, Copy)]
pub struct PgOptions {
    /// Connections the pool opens at most. A request that finds all of them
    /// busy waits up to [`POOL_WAIT`], then fails with [`StoreError::Busy`].
    pub pool_size: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions { pool_size: 16 }
    }
}

/// How long a request waits for a pooled connection before the store
/// answers Busy (503 with `Retry-After`, as SQLite's full write queue).
const POOL_WAIT: Duration = Duration::from_secs(2);
/// Connections of the unflushed pool: a claim per restore (one statement;
/// also per request for a session another node holds, where the claim
/// takes nothing and writes nothing) and one group of delivery marks at a
/// time; every connection counts against the server's limit. No batch
/// runs on it, so a claim never waits for a connection behind one.
const UNFLUSHED_POOL_SIZE: usize = 4;
/// How long opening one connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Per-connection settings. The limits are SQLite's `busy_timeout` in
/// Postgres terms: a statement waiting on a lock, a statement, and a
/// transaction left idle never hold a connection (or a row) for long.
/// `client_min_messages=warning`: the server sends no NOTICE (every start's
/// `CREATE TABLE IF NOT EXISTS` made one, which tokio-postgres logs, so each
/// CLI command on Postgres printed "relation … already exists, skipping").
const SESSION_LIMITS: &str = "-c lock_timeout=5000 -c statement_timeout=30000 \
     -c idle_in_transaction_session_timeout=10000 -c client_min_messages=warning";

pub struct PgStore {
    pool: Pool,
    /// Connections whose commits do not wait for their WAL flush
    /// (`synchronous_commit=off`), for the single-row writes whose loss in
    /// a database crash is harmless (claims, delivery marks; see
    /// `PgStore::query_unflushed`): one round trip each, where `SET LOCAL`
    /// in a transaction took four.
    unflushed: Pool,
    /// The URL with its password replaced, for refusals.
    url: String,
    /// For the notice connection, opened on the first subscriber.
    config: tokio_postgres::Config,
    listener: OnceLock<Listener>,
    /// Catalog versions by org, at the catalog watch's revision each was
    /// read at (`catalog_version` in `catalog.rs`).
    catalog_versions: RevisionCache<i64>,
    /// The writes every execution makes, grouped (`group.rs`), each queue
    /// started on first use on the current runtime.
    execution_records: OnceLock<Group<ExecutionRecords>>,
    /// Records whose durability comes with their answer's event
    /// ([`crate::Store::insert_execution_deferred`]), on the unflushed pool.
    execution_records_deferred: OnceLock<Group<ExecutionRecords>>,
    fenced_events: OnceLock<Group<FencedEvents>>,
    delivery_marks: OnceLock<Group<DeliveryMarks>>,
}

/// How long a group of delivery marks stays open after its first mark.
/// Nothing waits for a mark (it is sent once its event is on its way), and
/// one mark costs Postgres about as much as a group of them: alone, marks
/// were a fifth of Postgres's CPU in a burst of restored executions. A
/// reader that must see them ([`crate::Store::take_undelivered`],
/// [`crate::Store::flush`]) flushes the group first. Records and events
/// are awaited by a request, so they do not linger.
const MARKS_LINGER: Duration = Duration::from_millis(20);

/// Orgs whose catalog version [`PgStore`] keeps.
const CACHED_CATALOG_VERSIONS: usize = 10_000;

/// What the key check seals, and the associated data it seals it under.
const KEY_CHECK_TEXT: &str = "executor-key-check:v1:";
const KEY_CHECK_AAD: &str = "executor/key-check";

/// Opens `n` connections of `pool` now, at start, rather than in the
/// first burst of requests: a new backend costs Postgres a fork, and its
/// first statement on each table loads that table's metadata into the
/// backend's caches. Measured on `bench/idle`, the first round's p99 was
/// 121 ms with lazily opened connections, 51 ms with opened ones. A
/// connection that fails to open here is opened when first needed.
async fn fill(pool: &Pool, n: usize, statements: &'static [&'static str]) {
    let mut opening = tokio::task::JoinSet::new();
    for _ in 0..n {
        let pool = pool.clone();
        opening.spawn(async move {
            let client = pool.get().await.ok()?;
            // Planned, never run: the plan opens every table a request
            // writes, and their indexes.
            let _ = client.simple_query(WARM_TABLES).await;
            // Prepared now, not by the first request on this connection
            // (a round trip and a parse each).
            for sql in statements {
                let _ = client.prepare_cached(sql).await;
            }
            Some(client)
        });
    }
    // Every one held until all are open, so that none is reused.
    let opened = opening.join_all().await;
    drop(opened);
}

/// The statements every execution runs, which [`fill`] prepares on each
/// connection of the main pool: the catalog read, a flushed record, the
/// answer's event.
const HOT_STATEMENTS: &[&str] = &[
    rows::CATALOG_VERSION,
    group::INSERT_EXECUTIONS,
    group::APPEND_FENCED_EVENTS,
];
/// The same for the unflushed pool: a deferred record, delivery marks.
const HOT_UNFLUSHED_STATEMENTS: &[&str] = &[group::INSERT_EXECUTIONS, group::MARK_DELIVERED];

/// What [`fill`] has each new backend plan: the tables of the hot path.
const WARM_TABLES: &str = "EXPLAIN SELECT 1 FROM sessions, events, executions, \
    catalog_versions, policies, tokens, nodes, execution_states LIMIT 0";

impl PgStore {
    /// Connects to `url` (`postgres://…`), runs the start checks and applies
    /// the migrations this database lacks. A database that is unreachable,
    /// a standby, from a newer release or another program's is refused with
    /// [`StoreError::Refused`] before anything is written.
    pub async fn open(url: &str, options: PgOptions) -> StoreResult<Self> {
        let unreachable = |cause: String| Refusal::PostgresUnreachable {
            url: redact(url),
            cause,
        };
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| unreachable(format!("not a Postgres URL ({e})")))?;
        config.options(SESSION_LIMITS);
        if config.get_application_name().is_none() {
            config.application_name("executor");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let pool = pool_of(config.clone(), options.pool_size.max(1))
            .map_err(|e| unreachable(e.to_string()))?;
        let mut unflushed_config = config.clone();
        unflushed_config.options(format!("{SESSION_LIMITS} -c synchronous_commit=off"));
        let unflushed = pool_of(unflushed_config, UNFLUSHED_POOL_SIZE)
            .map_err(|e| unreachable(e.to_string()))?;
        let mut client = pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => unreachable(explain_connect(&e)),
            other => unreachable(other.to_string()),
        })?;
        schema::check(&mut client, url).await?;
        schema::migrate(&mut client, url).await?;
        drop(client);
        let mut listen_config = config;
        listen_config
            .application_name("executor-listen")
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            // A silently dead listening connection is found within about a
            // minute (not the OS's default of minutes more): until then the
            // node trusts kept access revisions and catalog versions.
            .keepalives_interval(Duration::from_secs(10))
            .keepalives_retries(3);
        Ok(PgStore {
            pool,
            unflushed,
            url: redact(url),
            config: listen_config,
            listener: OnceLock::new(),
            catalog_versions: RevisionCache::new(CACHED_CATALOG_VERSIONS),
            execution_records: OnceLock::new(),
            execution_records_deferred: OnceLock::new(),
            fenced_events: OnceLock::new(),
            delivery_marks: OnceLock::new(),
        })
    }

    /// Opens every pooled connection now: a server calls it before it
    /// listens (see [`fill`]); a CLI command, which needs one or two, does
    /// not.
    pub async fn warm_pool(&self) {
        fill(&self.pool, self.pool.status().max_size, HOT_STATEMENTS).await;
        fill(
            &self.unflushed,
            UNFLUSHED_POOL_SIZE,
            HOT_UNFLUSHED_STATEMENTS,
        )
        .await;
    }

    fn execution_records(&self) -> &Group<ExecutionRecords> {
        self.execution_records.get_or_init(|| {
            let pool = self.pool.clone();
            Group::start(ExecutionRecords { pool }, Duration::ZERO)
        })
    }

    fn execution_records_deferred(&self) -> &Group<ExecutionRecords> {
        self.execution_records_deferred.get_or_init(|| {
            let pool = self.unflushed.clone();
            Group::start(ExecutionRecords { pool }, Duration::ZERO)
        })
    }

    fn fenced_events(&self) -> &Group<FencedEvents> {
        self.fenced_events.get_or_init(|| {
            let pool = self.pool.clone();
            Group::start(FencedEvents { pool }, Duration::ZERO)
        })
    }

    fn delivery_marks(&self) -> &Group<DeliveryMarks> {
        self.delivery_marks.get_or_init(|| {
            let unflushed = self.unflushed.clone();
            Group::start(DeliveryMarks { unflushed }, MARKS_LINGER)
        })
    }

    /// Waits for every delivery mark sent so far (none if none was).
    async fn flush_marks(&self) {
        if let Some(marks) = self.delivery_marks.get() {
            marks.flush().await;
        }
    }

    /// The notices of this store, its listening connection started on the
    /// first call (on the current runtime; None outside one).
    pub(super) fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<crate::Notice>> {
        if let Some(listener) = self.listener.get() {
            return Some(listener.subscribe());
        }
        tokio::runtime::Handle::try_current().ok()?;
        Some(
            self.listener
                .get_or_init(|| Listener::start(self.config.clone()))
                .subscribe(),
        )
    }

    /// See [`crate::Store::access_revision`]: None until the listening
    /// connection (started here if need be) listens.
    pub(super) fn access_revision(&self) -> Option<u64> {
        self.watches().and_then(|w| w.access.current())
    }

    /// The revision of catalog versions: it moves on every catalog notice
    /// (every integration write of any node notifies in its transaction),
    /// on this store's own catalog writes, and whenever the listening
    /// connection is lost or starts. None while it does not listen.
    pub(super) fn catalog_revision(&self) -> Option<u64> {
        self.watches().and_then(|w| w.catalog.current())
    }

    /// Called after this store commits a catalog write, so its own next
    /// read never waits for the notice to come back.
    pub(super) fn catalog_changed(&self) {
        if let Some(listener) = self.listener.get() {
            listener.watches().catalog.changed();
        }
    }

    /// Called after this store commits a token or policy write, so that
    /// its own next request reads the change (a revoked token, a new rule)
    /// without waiting for the notice to come back (SPEC §4: at once).
    pub(super) fn access_changed(&self) {
        if let Some(listener) = self.listener.get() {
            listener.watches().access.changed();
        }
    }

    /// The listening connection's watches, the connection started here if
    /// need be (None until it listens, and outside a runtime).
    fn watches(&self) -> Option<&notices::Watches> {
        match self.listener.get() {
            Some(listener) => Some(listener.watches()),
            None => {
                self.notices();
                None
            }
        }
    }

    /// A pooled connection; all of them busy past [`POOL_WAIT`] is Busy.
    async fn client(&self) -> StoreResult<Client> {
        checkout(&self.pool).await
    }

    /// A connection of the unflushed pool.
    async fn unflushed_client(&self) -> StoreResult<Client> {
        checkout(&self.unflushed).await
    }

    /// The key check (SPEC §10): the first node that starts with a key
    /// leaves a value sealed with it in the database; a node whose key does
    /// not open that value is refused ([`Refusal::WrongSecretKey`]) before
    /// it seals anything no other node could open. Two first nodes with
    /// different keys: one row wins, the other node is refused.
    pub async fn check_secret_key(&self, key: &SecretKey) -> StoreResult<()> {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let now = crate::now_ms();
        let proof = seal(key, &format!("{KEY_CHECK_TEXT}{nonce}"), KEY_CHECK_AAD)
            .map_err(|e| StoreError::database_caused(e.to_string(), e))?;
        let found = self
            .query_opt(
                "WITH added AS (INSERT INTO executor_meta (name, value, updated_at) \
                   VALUES ('key_check', $1, $2) ON CONFLICT (name) DO NOTHING RETURNING value) \
                 SELECT value FROM added UNION ALL \
                 SELECT value FROM executor_meta WHERE name = 'key_check' LIMIT 1",
                &[&proof, &now],
            )
            .await?;
        // None: another node's first insert committed while this statement
        // ran (its snapshot predates it); the row is there now.
        let found = match found {
            Some(row) => Some(row),
            None => {
                self.query_opt(
                    "SELECT value FROM executor_meta WHERE name = 'key_check'",
                    &[],
                )
                .await?
            }
        };
        let stored: String = match &found {
            Some(row) => col(row, 0)?,
            None => return Err(StoreError::database("the key check row is missing")),
        };
        match open(key, &stored, KEY_CHECK_AAD) {
            Ok(text) if text.expose().starts_with(KEY_CHECK_TEXT) => Ok(()),
            _ => Err(Refusal::WrongSecretKey {
                url: self.url.clone(),
            }
            .into()),
        }
    }

    /// `org/namespace` of every connection whose secret is sealed, for the
    /// key check of commands that open them.
    pub async fn sealed_connections(&self) -> StoreResult<Vec<String>> {
        rows::sealed_connections(self).await
    }
}

/// A driver error as the server log's text: the server's own message and
/// SQLSTATE when there is one (tokio-postgres's `Display` says only
/// "db error").
fn pool_of(config: tokio_postgres::Config, size: usize) -> Result<Pool, impl std::fmt::Display> {
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .runtime(Runtime::Tokio1)
        .build()
}

impl PgStore {
    /// Makes the space of rows a trim deleted reusable at once: until a
    /// vacuum a Postgres table only grows, and autovacuum may be off or
    /// behind under the load that made the trim necessary. A table this
    /// role does not own, or one another vacuum holds, is skipped with a
    /// notice; a failure is logged, never the trim's.
    pub(super) async fn vacuum(&self, tables: &str) {
        let vacuumed = async {
            let client = checkout(&self.pool).await?;
            // The simple protocol: VACUUM runs outside any transaction.
            client
                .batch_execute(&format!("VACUUM (SKIP_LOCKED) {tables}"))
                .await
                .map_err(db_error)
        };
        if let Err(e) = vacuumed.await {
            tracing::warn!(error = %e, tables, "could not vacuum after a trim");
        }
    }
}

async fn checkout(pool: &Pool) -> StoreResult<Client> {
    pool.get().await.map_err(|e| match e {
        PoolError::Timeout(_) => StoreError::Busy,
        PoolError::Backend(e) => db_error(e),
        other => StoreError::database_caused(other.to_string(), other),
    })
}

pub(super) fn db_error(e: tokio_postgres::Error) -> StoreError {
    if e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL) {
        return StoreError::Full;
    }
    StoreError::database_caused(describe(&e), e)
}

pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// Why a first connection failed, in words with what to do about it.
fn explain_connect(e: &tokio_postgres::Error) -> String {
    let code = e.as_db_error().map(|db| db.code().code());
    let hint = match code {
        Some("3D000") => ": create the database first (createdb NAME)",
        Some("28P01" | "28000") => ": check the user and password in the URL",
        _ => "",
    };
    format!("{}{hint}", describe(e))
}

/// `url` with its password replaced, for every message that names it.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = tail
        .split('&')
        .map(|part| match part.find("password=") {
            Some(i) => format!("{}password=***", &part[..i]),
            None => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{scheme}://{authority}{tail}")
}

/// Postgres `TEXT` refuses NUL, which SQLite keeps. Text an agent or a
/// client chose (program code, error messages, a protocol version) has any
/// NUL stored as U+FFFD instead of failing the write that records it.
pub(super) fn pg_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// One column of a row; a type mismatch is an error, never a panic.
pub(super) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    index: usize,
) -> StoreResult<T> {
    row.try_get(index).map_err(db_error)
}

/// A column holding one of the store's closed sets of words.
pub(super) fn word<T: FromStr<Err = UnknownValue>>(
    row: &tokio_postgres::Row,
    index: usize,
) -> StoreResult<T> {
    let text: &str = col(row, index)?;
    text.parse()
        .map_err(|e: UnknownValue| StoreError::database_caused(e.to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        for (url, shown) in [
            (
                "postgres://u:secret@db:5432/x",
                "postgres://u:***@db:5432/x",
            ),
            ("postgres://u@db/x", "postgres://u@db/x"),
            (
                "postgresql://db/x?user=u&password=secret&sslmode=require",
                "postgresql://db/x?user=u&password=***&sslmode=require",
            ),
            ("postgres://u:p@ss:w@db", "postgres://u:***@db"),
        ] {
            assert_eq!(redact(url), shown);
            assert!(!redact(url).contains("secret"));
        }
    }

    #[tokio::test]
    async fn a_warmed_pool_has_every_connection_open_with_the_hot_statements_prepared() {
        let Some(db) = crate::testing::PgTestDb::create().await else {
            return;
        };
        let store = PgStore::open(&db.url, PgOptions { pool_size: 3 })
            .await
            .unwrap();
        store.warm_pool().await;
        assert_eq!(store.pool.status().size, 3);
        assert_eq!(store.unflushed.status().size, UNFLUSHED_POOL_SIZE);
        for (pool, statements) in [
            (&store.pool, HOT_STATEMENTS),
            (&store.unflushed, HOT_UNFLUSHED_STATEMENTS),
        ] {
            // Every connection at once, so each of them is looked at.
            let mut held = Vec::new();
            for _ in 0..pool.status().max_size {
                held.push(pool.get().await.unwrap());
            }
            for client in &held {
                assert!(client.statement_cache.size() >= statements.len());
            }
        }
    }

    /// Issue 37: every CLI command on Postgres printed the NOTICE of the
    /// start's `CREATE TABLE IF NOT EXISTS` ("relation … already exists,
    /// skipping"), which tokio-postgres logs. The server sends none now, on
    /// either pool.
    #[tokio::test]
    async fn the_server_sends_no_notices() {
        let Some(db) = crate::testing::PgTestDb::create().await else {
            return;
        };
        let store = PgStore::open(&db.url, PgOptions { pool_size: 1 })
            .await
            .unwrap();
        for pool in [&store.pool, &store.unflushed] {
            let client = pool.get().await.unwrap();
            let level: String = client
                .query_one("SHOW client_min_messages", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(level, "warning");
        }
    }

    #[test]
    fn nul_is_stored_as_a_replacement_character() {
        assert_eq!(pg_text("a\0b"), "a\u{FFFD}b");
        assert!(matches!(pg_text("ab"), std::borrow::Cow::Borrowed("ab")));
    }
}
