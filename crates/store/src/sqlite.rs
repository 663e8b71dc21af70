//! The embedded default: SQLite in WAL mode.
//!
//! Blocking SQLite calls run on tokio's blocking pool so the async workers
//! never wait on disk. Connections are pooled; WAL lets the server and CLI
//! commands on the same data dir read and write concurrently (`busy_timeout`
//! serialises writers across processes).

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::checkpointer::{Checkpointer, WRITER_BACKSTOP_PAGES};
use crate::leases::{ClaimRefusal, ExecutionRefusal};
use crate::orgs::OrgChoice;
use crate::packed::{Document, pack};
use crate::secrets::{KEY_ENV_VAR, SecretRef};
use crate::wal_probe::{WalHeader, WalProbe};
use crate::writer::{MAX_QUEUED_WRITES, Writer};
use crate::*;

const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);
CREATE TABLE memberships (
    account_id TEXT NOT NULL REFERENCES accounts(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    PRIMARY KEY (account_id, org_id)
);
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    secret_hash BLOB NOT NULL,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    protocol_version TEXT NOT NULL,
    client_info TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    elicitation_mode TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL,
    terminated_at INTEGER
);
CREATE INDEX sessions_last_activity ON sessions(last_activity_at);
CREATE TABLE events (
    session_id TEXT NOT NULL,
    stream_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    undelivered INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, stream_id, seq)
) WITHOUT ROWID;
CREATE INDEX events_undelivered ON events(session_id, undelivered);
CREATE TABLE executions (
    id TEXT PRIMARY KEY,
    session_id TEXT,
    account_id TEXT NOT NULL,
    org_id TEXT NOT NULL,
    code TEXT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    error TEXT,
    logs TEXT NOT NULL,
    tool_calls TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL
);
CREATE INDEX executions_org_started ON executions(org_id, started_at);
"#,
    r#"
CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    pattern TEXT NOT NULL,
    action TEXT NOT NULL,
    position INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX policies_org_position ON policies(org_id, position);
"#,
    r#"
CREATE TABLE execution_states (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    state TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
"#,
    r#"
CREATE TABLE integrations (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    base_url TEXT,
    tool_count INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, namespace)
);
CREATE TABLE catalog_versions (
    org_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
"#,
    r#"
CREATE TABLE connections (
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    kind TEXT NOT NULL,
    username TEXT,
    secret TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (org_id, namespace)
);
"#,
    // A decision posted by `executor resume` for the process running it.
    r#"
ALTER TABLE execution_states ADD COLUMN decision TEXT;
"#,
    // Personal orgs belong to their account (SPEC §4). Before, a personal
    // org was only an org named after the email, so `--org <someone's
    // email>` could create or join it. An org named exactly like an
    // account's email is that account's personal org. Any other name with
    // an `@` was made with `--org` by someone else (emails are stored
    // lowercased and the owner had no account yet): it is renamed to its id
    // (which `--org` also accepts), so that the name stays free for the
    // personal org of the account it looks like.
    r#"
ALTER TABLE orgs ADD COLUMN owner_account_id TEXT REFERENCES accounts(id);
UPDATE orgs SET owner_account_id = (SELECT a.id FROM accounts a WHERE a.email = orgs.name);
UPDATE orgs SET name = id WHERE owner_account_id IS NULL AND name LIKE '%@%';
CREATE UNIQUE INDEX orgs_owner ON orgs(owner_account_id) WHERE owner_account_id IS NOT NULL;
"#,
    // Which write of the org's integrations made this record (the org's
    // catalog version after it): the server reuses an integration's loaded
    // tools while its revision is unchanged.
    r#"
ALTER TABLE integrations ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
"#,
    // The search index of each integration's tools, built at import so
    // that the server need not (see `IntegrationRecord::search_index`).
    r#"
ALTER TABLE integrations ADD COLUMN search_index BLOB;
"#,
    // OAuth connections (executor-oauth): the grant's non-secret state, a
    // generation that every write moves (a refresh saves only where it is
    // unchanged) and the refresh lease that makes one process refresh at a
    // time; logins between their authorization URL and their callback.
    r#"
ALTER TABLE connections ADD COLUMN oauth TEXT;
ALTER TABLE connections ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN lease_holder TEXT;
ALTER TABLE connections ADD COLUMN lease_until INTEGER;
CREATE TABLE oauth_pending (
    state_hash TEXT PRIMARY KEY,
    org_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    sealed TEXT NOT NULL,
    request TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0,
    outcome TEXT
);
"#,
    // Periodic jobs every server schedules (the event sweep, retention GC):
    // the next time each is due, so one process runs each per interval.
    r#"
CREATE TABLE jobs (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    next_at INTEGER NOT NULL
);
"#,
    // Nodes and session leases (SPEC §10): a session's runtime lives on the
    // node named by `holder` while that node is alive; `epoch` grows with
    // each claim and fences the holder's writes.
    r#"
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    url TEXT,
    started_at INTEGER NOT NULL,
    alive_until INTEGER NOT NULL
);
ALTER TABLE sessions ADD COLUMN holder TEXT;
ALTER TABLE sessions ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
-- A paused execution's run lives on one node too: `calling` is the highest
-- call index it started after a resume (a replay answers calls up to it
-- that have no journaled answer as in doubt, never sending them again).
ALTER TABLE execution_states ADD COLUMN holder TEXT;
ALTER TABLE execution_states ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE execution_states ADD COLUMN calling INTEGER NOT NULL DEFAULT -1;
"#,
    // The access revision (`Store::access_revision`): a counter every change
    // to tokens or policies moves, in the same transaction, whichever process
    // makes it (the server, a CLI command, another server on the data dir).
    // Caches of tokens and policies stay valid while it stands still.
    r#"
CREATE TABLE revisions (
    name TEXT PRIMARY KEY,
    n INTEGER NOT NULL
);
INSERT INTO revisions (name, n) VALUES ('access', 0);
CREATE TRIGGER tokens_insert_access AFTER INSERT ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER tokens_update_access AFTER UPDATE ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER tokens_delete_access AFTER DELETE ON tokens
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_insert_access AFTER INSERT ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_update_access AFTER UPDATE ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
CREATE TRIGGER policies_delete_access AFTER DELETE ON policies
    BEGIN UPDATE revisions SET n = n + 1 WHERE name = 'access'; END;
"#,
];

/// Prepared statements each connection keeps (rusqlite's default is 16).
const STATEMENT_CACHE: usize = 128;
/// Connections kept open when idle; more are opened under load.
const IDLE_CONNECTIONS: usize = 8;
/// How long a statement waits for another connection's write lock (the
/// server and CLI commands share the file) before giving up.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Tunables of [`SqliteStore`] (SPEC §12).
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// Writes that may wait for the writer thread; past it a write waits a
    /// moment for room, then fails with [`StoreError::Busy`] (see
    /// [`MAX_QUEUED_WRITES`]).
    pub max_queued_writes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_queued_writes: MAX_QUEUED_WRITES,
        }
    }
}

pub struct SqliteStore {
    path: Arc<std::path::PathBuf>,
    /// Read connections. WAL readers never wait for writers, and a point
    /// lookup with a warm cache takes microseconds, so reads run inline on
    /// the calling thread instead of paying a thread hand-off.
    pool: Arc<Mutex<Vec<Connection>>>,
    writer: Writer,
    _checkpointer: Checkpointer,
    /// The connection that watches the access revision (see
    /// [`SqliteStore::access_revision`]); it never writes.
    watch: Arc<Mutex<RevisionWatch>>,
}

/// The last access revision read, and the connection's `data_version` at
/// that read. `PRAGMA data_version` moves whenever another connection (any
/// process) commits; while it stands still, nothing can have changed, so
/// the check costs one pragma and no table read. Before the pragma, the
/// wal-index header ([`WalProbe`]) says from memory whether anything at all
/// committed since the last check; while it stands still, the check costs
/// no system call either.
struct RevisionWatch {
    /// Reads through `conn`'s mapping of the wal-index, so it lives (and
    /// is read) only beside that connection.
    probe: Option<WalProbe>,
    /// The header read before the last full check.
    seen: Option<WalHeader>,
    conn: Connection,
    data_version: i64,
    revision: u64,
}

impl RevisionWatch {
    fn open(path: &Path) -> StoreResult<Self> {
        let conn = open_connection(path)?;
        let mut watch = RevisionWatch {
            probe: None,
            seen: None,
            conn,
            data_version: -1,
            revision: 0,
        };
        watch.current()?;
        // Only now: the read above mapped the connection's wal-index.
        // SAFETY: the probe is kept beside `conn` in the same struct and
        // read only through it, so never after the connection is closed.
        watch.probe = unsafe { WalProbe::of(&watch.conn) };
        Ok(watch)
    }

    fn current(&mut self) -> StoreResult<u64> {
        let header = self.probe.as_ref().and_then(WalProbe::header);
        if header.is_some() && header == self.seen {
            return Ok(self.revision);
        }
        let revision = self.read()?;
        // The header from before the read: a commit since then has moved
        // it, so the next check reads again.
        self.seen = header;
        Ok(revision)
    }

    fn read(&mut self) -> StoreResult<u64> {
        let version: i64 = self
            .conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?;
        if version != self.data_version {
            // Read after the pragma: a commit between the two moves the
            // version again, so the next check reads once more.
            let n: i64 = self
                .conn
                .prepare_cached("SELECT n FROM revisions WHERE name = 'access'")?
                .query_row([], |r| r.get(0))?;
            self.data_version = version;
            self.revision = n as u64;
        }
        Ok(self.revision)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and applies migrations,
    /// after the start checks of `preflight.rs`: a file that is not a store
    /// of this release, or that this process cannot write, is refused with
    /// [`StoreError::Refused`] before anything is written to it.
    pub fn open(path: &Path) -> StoreResult<Self> {
        Self::open_with(path, StoreOptions::default())
    }

    /// [`SqliteStore::open`] with the operator's tunables.
    pub fn open_with(path: &Path, options: StoreOptions) -> StoreResult<Self> {
        preflight::prepare_files(path)?;
        preflight::check_header(path)?;
        {
            let inspect = preflight::inspect_connection(path, BUSY_TIMEOUT)?;
            preflight::check_schema(path, &inspect, MIGRATIONS.len())?;
            preflight::check_writable(path, &inspect)?;
        }
        // Switching to WAL can still fail on a `-wal` or `-shm` we cannot create.
        let conn = connect(path).map_err(|e| preflight::explain(path, &e))?;
        migrate(&conn)?;
        Ok(SqliteStore {
            path: Arc::new(path.to_path_buf()),
            pool: Arc::new(Mutex::new(vec![conn])),
            writer: Writer::start(path, open_writer_connection, options.max_queued_writes)?,
            _checkpointer: Checkpointer::start(open_connection(path)?)?,
            watch: Arc::new(Mutex::new(RevisionWatch::open(path)?)),
        })
    }

    /// Opens the store named by a `sqlite://PATH` URL.
    pub fn open_url(url: &str, options: StoreOptions) -> StoreResult<Self> {
        let path = url
            .strip_prefix("sqlite://")
            .ok_or_else(|| StoreError::Invalid(format!("not a sqlite:// URL: {url}")))?;
        Self::open_with(Path::new(path), options)
    }

    /// The start check for commands that seal or open connection secrets:
    /// refuses ([`Refusal::LostSecretKey`]) when connections hold sealed
    /// secrets but neither `EXECUTOR_SECRET_KEY` nor `<data_dir>/secret.key`
    /// exists. Call it before the key is loaded, since loading creates a new
    /// key when there is none.
    pub fn check_secret_key(&self, data_dir: &Path) -> StoreResult<()> {
        let key_in_env = std::env::var_os(KEY_ENV_VAR).is_some();
        self.check_secret_key_with(key_in_env, data_dir)
    }

    /// `check_secret_key` with the environment passed in, for tests.
    pub(crate) fn check_secret_key_with(
        &self,
        key_in_env: bool,
        data_dir: &Path,
    ) -> StoreResult<()> {
        let sealed = self.read(sealed_connections)?;
        Ok(preflight::check_secret_key(
            &self.path, sealed, key_in_env, data_dir,
        )?)
    }

    /// Runs a read with a pooled connection on the calling thread.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let taken = self.pool.lock().map_err(|_| poisoned())?.pop();
        let conn = match taken {
            Some(c) => c,
            None => open_connection(&self.path)?,
        };
        let out = f(&conn);
        let mut idle = self.pool.lock().map_err(|_| poisoned())?;
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(conn);
        }
        out
    }

    /// Runs `f` with a pooled connection on the blocking pool (for rare,
    /// multi-statement operations with their own transaction).
    async fn with<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    {
        let pool = self.pool.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let taken = pool.lock().map_err(|_| poisoned())?.pop();
            let mut conn = match taken {
                Some(c) => c,
                None => open_connection(&path)?,
            };
            let out = f(&mut conn);
            let mut idle = pool.lock().map_err(|_| poisoned())?;
            if idle.len() < IDLE_CONNECTIONS {
                idle.push(conn);
            }
            out
        })
        .await
        .map_err(|e| StoreError::Database(format!("store task failed: {e}")))?
    }
}

fn poisoned() -> StoreError {
    StoreError::Database("connection pool poisoned".into())
}

fn open_connection(path: &Path) -> StoreResult<Connection> {
    Ok(connect(path)?)
}

/// The writer's connection: it leaves checkpoints to the checkpoint thread,
/// but for a backstop (see `checkpointer.rs`).
fn open_writer_connection(path: &Path) -> StoreResult<Connection> {
    let conn = open_connection(path)?;
    conn.pragma_update(None, "wal_autocheckpoint", WRITER_BACKSTOP_PAGES)?;
    Ok(conn)
}

/// `open_connection` with SQLite's error kept whole, so the start checks can
/// tell its causes apart.
pub(crate) fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Room for every statement of the request path (the writer's group
    // commit alone keeps four), so none is prepared again on each use.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // WAL + NORMAL: a commit survives a killed process (the WAL is in the OS
    // page cache); only an OS crash can lose the last commits.
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY;",
    )?;
    Ok(conn)
}

pub(crate) fn migrate(conn: &Connection) -> StoreResult<()> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        // IMMEDIATE: two processes starting at once serialise here instead
        // of failing to upgrade a read transaction.
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
        // Another process may have migrated between our read and now.
        let v: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if v > i as i64 {
            continue;
        }
        tx.execute_batch(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
        tx.commit()?;
    }
    Ok(())
}

fn to_json(v: &serde_json::Value) -> String {
    v.to_string()
}

fn from_json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

fn session_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: r.get(0)?,
        owner: Principal {
            account_id: r.get(1)?,
            org_id: r.get(2)?,
        },
        protocol_version: r.get(3)?,
        client_info: from_json(&r.get::<_, String>(4)?),
        client_capabilities: from_json(&r.get::<_, String>(5)?),
        elicitation_mode: r.get(6)?,
        created_at_ms: r.get(7)?,
        last_activity_at_ms: r.get(8)?,
        terminated_at_ms: r.get(9)?,
    })
}

fn event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<EventRecord> {
    Ok(EventRecord {
        session_id: r.get(0)?,
        stream_id: r.get(1)?,
        seq: r.get(2)?,
        data: r.get(3)?,
        undelivered: r.get::<_, i64>(4)? != 0,
        created_at_ms: r.get(5)?,
    })
}

fn execution_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExecutionRecord> {
    let logs: String = r.get(8)?;
    Ok(ExecutionRecord {
        id: r.get(0)?,
        session_id: r.get(1)?,
        account_id: r.get(2)?,
        org_id: r.get(3)?,
        code: r.get(4)?,
        status: r.get(5)?,
        result: r.get::<_, Option<String>>(6)?.map(|s| from_json(&s)),
        error: r.get(7)?,
        logs: serde_json::from_str(&logs).unwrap_or_default(),
        tool_calls: from_json(&r.get::<_, String>(9)?),
        started_at_ms: r.get(10)?,
        duration_ms: r.get(11)?,
    })
}

/// `(id, owner_account_id)` of an org.
fn org_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Option<String>)> {
    Ok((r.get(0)?, r.get(1)?))
}

const EXECUTION_COLUMNS: &str = "id, session_id, account_id, org_id, code, status, result, error, logs, tool_calls, started_at, duration_ms";

#[async_trait]
impl Store for SqliteStore {
    async fn ensure_account(&self, email: &str, org: Option<&str>) -> StoreResult<Principal> {
        let (email, choice) = OrgChoice::asked(email, org)?;
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let now = now_ms();
            let account_id: String = match tx
                .query_row("SELECT id FROM accounts WHERE email = ?1", [&email], |r| {
                    r.get(0)
                })
                .optional()?
            {
                Some(id) => id,
                None => {
                    let id = format!("acc_{}", uuid::Uuid::new_v4().simple());
                    tx.execute(
                        "INSERT INTO accounts (id, email, created_at) VALUES (?1, ?2, ?3)",
                        params![id, email, now],
                    )?;
                    id
                }
            };
            // A personal org is found by its owner, never by its name.
            let (name, owner, found) = match &choice {
                OrgChoice::Personal => (
                    email.as_str(),
                    Some(account_id.as_str()),
                    tx.query_row(
                        "SELECT id, owner_account_id FROM orgs WHERE owner_account_id = ?1",
                        [&account_id],
                        org_row,
                    )
                    .optional()?,
                ),
                OrgChoice::Shared(name) => (
                    name.as_str(),
                    None,
                    tx.query_row(
                        "SELECT id, owner_account_id FROM orgs WHERE name = ?1",
                        [name],
                        org_row,
                    )
                    .optional()?,
                ),
            };
            let org_id = match found {
                Some((_, Some(found_owner))) if found_owner != account_id => {
                    return Err(StoreError::ForeignPersonalOrg {
                        org: name.to_string(),
                    });
                }
                Some((id, _)) => id,
                None => {
                    let id = format!("org_{}", uuid::Uuid::new_v4().simple());
                    tx.execute(
                        "INSERT INTO orgs (id, name, created_at, owner_account_id) VALUES (?1, ?2, ?3, ?4)",
                        params![id, name, now, owner],
                    )?;
                    id
                }
            };
            tx.execute(
                "INSERT OR IGNORE INTO memberships (account_id, org_id) VALUES (?1, ?2)",
                params![account_id, org_id],
            )?;
            tx.commit()?;
            Ok(Principal { account_id, org_id })
        })
        .await
    }

    async fn insert_token(&self, t: TokenRecord) -> StoreResult<()> {
        self.writer.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO tokens (id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                t.id,
                t.secret_hash,
                t.principal.account_id,
                t.principal.org_id,
                t.created_at_ms,
                t.expires_at_ms,
                t.revoked_at_ms
            ])?;
            Ok(())
        })
        .await
    }

    fn access_revision(&self) -> Option<u64> {
        let mut watch = self.watch.lock().ok()?;
        match watch.current() {
            Ok(revision) => Some(revision),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the access revision; reading through");
                None
            }
        }
    }

    async fn find_token(&self, id: &str) -> StoreResult<Option<TokenRecord>> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, secret_hash, account_id, org_id, created_at, expires_at, revoked_at FROM tokens WHERE id = ?1",
                )?
                .query_row([id], |r| {
                    Ok(TokenRecord {
                        id: r.get(0)?,
                        secret_hash: r.get(1)?,
                        principal: Principal {
                            account_id: r.get(2)?,
                            org_id: r.get(3)?,
                        },
                        created_at_ms: r.get(4)?,
                        expires_at_ms: r.get(5)?,
                        revoked_at_ms: r.get(6)?,
                    })
                })
                .optional()?)
        })
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let n = conn.execute(
                    "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
                    params![id, at_ms],
                )?;
                Ok(n > 0)
            })
            .await
    }

    async fn insert_session(&self, s: SessionRecord, holder: &str) -> StoreResult<()> {
        let holder = holder.to_string();
        self.writer.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO sessions (id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at, holder, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .execute(params![
                s.id,
                s.owner.account_id,
                s.owner.org_id,
                s.protocol_version,
                to_json(&s.client_info),
                to_json(&s.client_capabilities),
                s.elicitation_mode,
                s.created_at_ms,
                s.last_activity_at_ms,
                s.terminated_at_ms,
                holder,
                FIRST_EPOCH
            ])?;
            Ok(())
        })
        .await
    }

    async fn get_session(&self, id: &str) -> StoreResult<Option<SessionRecord>> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at FROM sessions WHERE id = ?1",
                )?
                .query_row([id], session_from_row)
                .optional()?)
        })
    }

    async fn touch_sessions(&self, touches: Vec<(String, i64)>) -> StoreResult<()> {
        if touches.is_empty() {
            return Ok(());
        }
        self.writer.write(move |conn| {
            let tx = conn;
            {
                let mut stmt = tx.prepare_cached(
                    "UPDATE sessions SET last_activity_at = MAX(last_activity_at, ?2) WHERE id = ?1",
                )?;
                for (id, at) in &touches {
                    stmt.execute(params![id, at])?;
                }
            }
                        Ok(())
        })
        .await
    }

    async fn terminate_session(&self, id: &str, at_ms: i64) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let tx = conn;
                tx.execute(
                    "UPDATE sessions SET terminated_at = COALESCE(terminated_at, ?2) WHERE id = ?1",
                    params![id, at_ms],
                )?;
                tx.execute("DELETE FROM events WHERE session_id = ?1", [&id])?;
                Ok(())
            })
            .await
    }

    async fn gc_sessions(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer.write(move |conn| {
            let tx = conn;
            tx.execute(
                "DELETE FROM events WHERE session_id IN (SELECT id FROM sessions WHERE last_activity_at < ?1)",
                [before_ms],
            )?;
            let n = tx.execute("DELETE FROM sessions WHERE last_activity_at < ?1", [before_ms])?;
            // Paused executions expire within minutes; their saved states
            // (kept for idempotent repeats) go with the same retention.
            tx.execute("DELETE FROM execution_states WHERE updated_at < ?1", [before_ms])?;
            Ok(n as u64)
        })
        .await
    }

    async fn append_event(
        &self,
        e: EventRecord,
        bounds: LogBounds,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        let fence = fence.cloned();
        self.writer.write(move |conn| {
            let tx = conn;
            if let Some(fence) = &fence {
                holds_session(tx, &e.session_id, fence)?;
            }
            tx.prepare_cached(
                "INSERT OR REPLACE INTO events (session_id, stream_id, seq, data, undelivered, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![e.session_id, e.stream_id, e.seq, e.data, e.undelivered as i64, e.created_at_ms])?;
            // Prune only when the stream can be over its bounds: streams of a
            // single request hold one or two events and skip this entirely.
            if e.seq >= bounds.max_events as i64 || e.data.len() as u64 > bounds.max_bytes / 2 {
                prune_stream(tx, &e.session_id, &e.stream_id, e.seq, bounds)?;
            }
                        Ok(())
        })
        .await
    }

    async fn mark_delivered(&self, session_id: &str, stream_id: &str, seq: i64) -> StoreResult<()> {
        let (session_id, stream_id) = (session_id.to_string(), stream_id.to_string());
        self.writer.write_later(move |conn| {
            conn.prepare_cached(
                "UPDATE events SET undelivered = 0 WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
            )?
            .execute(params![session_id, stream_id, seq])?;
            Ok(())
        });
        Ok(())
    }

    async fn events_after(
        &self,
        session_id: &str,
        stream_id: &str,
        after_seq: i64,
    ) -> StoreResult<Vec<EventRecord>> {
        let (session_id, stream_id) = (session_id.to_string(), stream_id.to_string());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session_id, stream_id, seq, data, undelivered, created_at FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq > ?3 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![session_id, stream_id, after_seq], event_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn take_undelivered(
        &self,
        session_id: &str,
        except: &[String],
    ) -> StoreResult<Vec<EventRecord>> {
        let session_id = session_id.to_string();
        let except = except.to_vec();
        // On the writer: the read and the marks are one step, so of two
        // takers each event goes to one.
        self.writer
            .write(move |conn| {
                let events = {
                    let mut stmt = conn.prepare_cached(
                        "SELECT session_id, stream_id, seq, data, undelivered, created_at FROM events WHERE session_id = ?1 AND undelivered = 1 ORDER BY created_at, stream_id, seq",
                    )?;
                    let rows = stmt.query_map([&session_id], event_from_row)?;
                    rows.collect::<Result<Vec<_>, _>>()?
                };
                let events: Vec<EventRecord> = events
                    .into_iter()
                    .filter(|e| !except.contains(&e.stream_id))
                    .collect();
                let mut mark = conn.prepare_cached(
                    "UPDATE events SET undelivered = 0 WHERE session_id = ?1 AND stream_id = ?2 AND seq = ?3",
                )?;
                for e in &events {
                    mark.execute(params![session_id, e.stream_id, e.seq])?;
                }
                Ok(events)
            })
            .await
    }

    async fn delete_replayed_events(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| {
                // A stream is judged by its newest event, so a stream that is
                // still being written keeps all of its delivered events.
                let n = conn.execute(
                    "DELETE FROM events WHERE undelivered = 0 AND (session_id, stream_id) IN \
                     (SELECT session_id, stream_id FROM events GROUP BY session_id, stream_id \
                      HAVING MAX(created_at) < ?1)",
                    [before_ms],
                )?;
                Ok(n as u64)
            })
            .await
    }

    async fn insert_execution(&self, x: ExecutionRecord) -> StoreResult<()> {
        self.writer.write(move |conn| {
            let logs = serde_json::to_string(&x.logs).unwrap_or_else(|_| "[]".into());
            conn.prepare_cached(&format!(
                "INSERT OR REPLACE INTO executions ({EXECUTION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))?
            .execute(params![
                x.id,
                x.session_id,
                x.account_id,
                x.org_id,
                x.code,
                x.status,
                x.result.as_ref().map(to_json),
                x.error,
                logs,
                to_json(&x.tool_calls),
                x.started_at_ms,
                x.duration_ms
            ])?;
            Ok(())
        })
        .await
    }

    async fn list_executions(
        &self,
        org_id: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let org_id = org_id.map(str::to_string);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions WHERE (?1 IS NULL OR org_id = ?1) ORDER BY started_at DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![org_id, limit], execution_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn get_execution(&self, id: &str) -> StoreResult<Option<ExecutionRecord>> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = ?1"
                ))?
                .query_row([id], execution_from_row)
                .optional()?)
        })
    }

    async fn find_org(&self, name: &str) -> StoreResult<Option<String>> {
        let name = name.trim();
        // Personal orgs are named after the (lowercased) email.
        let name = if name.contains('@') {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT id FROM orgs WHERE name = ?1 OR id = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()?)
        })
    }

    async fn list_orgs(&self) -> StoreResult<Vec<(String, String)>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached("SELECT id, name FROM orgs ORDER BY name")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn add_policy(&self, p: PolicyRecord) -> StoreResult<PolicyRecord> {
        self.writer
            .write(move |conn| {
                let count: i64 = conn.query_row("SELECT COUNT(*) FROM policies WHERE org_id = ?1", [&p.org_id], |r| r.get(0))?;
                let position = p.position.clamp(0, count);
                conn.execute(
                    "UPDATE policies SET position = position + 1 WHERE org_id = ?1 AND position >= ?2",
                    params![p.org_id, position],
                )?;
                conn.execute(
                    "INSERT INTO policies (id, org_id, pattern, action, position, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![p.id, p.org_id, p.pattern, p.action, position, p.created_at_ms],
                )?;
                Ok(PolicyRecord { position, ..p })
            })
            .await
    }

    async fn list_policies(&self, org_id: &str) -> StoreResult<Vec<PolicyRecord>> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, org_id, pattern, action, position, created_at FROM policies WHERE org_id = ?1 ORDER BY position",
            )?;
            let rows = stmt.query_map([org_id], |r| {
                Ok(PolicyRecord {
                    id: r.get(0)?,
                    org_id: r.get(1)?,
                    pattern: r.get(2)?,
                    action: r.get(3)?,
                    position: r.get(4)?,
                    created_at_ms: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn remove_policy(&self, org_id: &str, id: &str) -> StoreResult<bool> {
        let (org_id, id) = (org_id.to_string(), id.to_string());
        self.writer
            .write(move |conn| {
                let position: Option<i64> = conn
                    .query_row("SELECT position FROM policies WHERE org_id = ?1 AND id = ?2", params![org_id, id], |r| r.get(0))
                    .optional()?;
                let Some(position) = position else { return Ok(false) };
                conn.execute("DELETE FROM policies WHERE org_id = ?1 AND id = ?2", params![org_id, id])?;
                conn.execute(
                    "UPDATE policies SET position = position - 1 WHERE org_id = ?1 AND position > ?2",
                    params![org_id, position],
                )?;
                Ok(true)
            })
            .await
    }

    async fn save_execution_state(
        &self,
        id: &str,
        org_id: &str,
        state: String,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        let (id, org_id, fence) = (id.to_string(), org_id.to_string(), fence.cloned());
        self.writer
            .write(move |conn| {
                // An upsert, not a replace: a decision `executor resume`
                // posted meanwhile stays for the run to take.
                let Some(fence) = fence else {
                    conn.prepare_cached(
                        "INSERT INTO execution_states (id, org_id, state, updated_at) VALUES (?1, ?2, ?3, ?4) \
                         ON CONFLICT (id) DO UPDATE SET org_id = ?2, state = ?3, updated_at = ?4",
                    )?
                    .execute(params![id, org_id, state, now_ms()])?;
                    return Ok(());
                };
                let saved = conn
                    .prepare_cached(
                        "INSERT INTO execution_states (id, org_id, state, updated_at, holder, epoch) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                         ON CONFLICT (id) DO UPDATE SET org_id = ?2, state = ?3, updated_at = ?4 \
                         WHERE execution_states.holder = ?5 AND execution_states.epoch = ?6",
                    )?
                    .execute(params![id, org_id, state, now_ms(), fence.node, fence.epoch])?;
                if saved == 1 {
                    Ok(())
                } else {
                    Err(StoreError::Fenced { id })
                }
            })
            .await
    }

    async fn claim_execution(&self, id: &str, node: &str) -> StoreResult<ExecutionClaim> {
        let (id, node) = (id.to_string(), node.to_string());
        self.writer
            .write(move |conn| {
                let now = now_ms();
                let claimed = conn
                    .prepare_cached(
                        "UPDATE execution_states SET holder = ?2, epoch = epoch + 1 \
                         WHERE id = ?1 \
                           AND EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND alive_until >= ?3) \
                           AND (holder IS NULL OR holder = ?2 OR NOT EXISTS \
                                (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= ?3)) \
                         RETURNING epoch, calling",
                    )?
                    .query_row(params![id, node, now], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                if let Some((epoch, calling)) = claimed {
                    return Ok(ExecutionClaim::Claimed {
                        fence: Fence { node, epoch },
                        calling,
                    });
                }
                let found = conn
                    .prepare_cached(
                        "SELECT holder, (SELECT url FROM nodes n WHERE n.id = execution_states.holder), \
                           EXISTS (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= ?3), \
                           EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND alive_until >= ?3) \
                         FROM execution_states WHERE id = ?1",
                    )?
                    .query_row(params![id, node, now], |r| {
                        Ok(ExecutionRefusal {
                            holder: r.get(0)?,
                            holder_url: r.get(1)?,
                            holder_alive: r.get(2)?,
                            caller_alive: r.get(3)?,
                        })
                    })
                    .optional()?;
                // One transaction: a claim refused here cannot have raced.
                ExecutionRefusal::outcome(found, &node).ok_or_else(|| {
                    StoreError::Database("execution claim refused without a cause".into())
                })
            })
            .await
    }

    async fn advance_execution(&self, id: &str, fence: &Fence, index: i64) -> StoreResult<()> {
        let (id, fence) = (id.to_string(), fence.clone());
        self.writer
            .write(move |conn| {
                let moved = conn
                    .prepare_cached(
                        "UPDATE execution_states SET calling = MAX(calling, ?4) \
                         WHERE id = ?1 AND holder = ?2 AND epoch = ?3",
                    )?
                    .execute(params![id, fence.node, fence.epoch, index])?;
                if moved == 1 {
                    Ok(())
                } else {
                    Err(StoreError::Fenced { id })
                }
            })
            .await
    }

    async fn load_execution_state(&self, id: &str) -> StoreResult<Option<String>> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT state FROM execution_states WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?)
        })
    }

    async fn post_execution_decision(&self, id: &str, action: &str) -> StoreResult<bool> {
        let (id, action) = (id.to_string(), action.to_string());
        self.writer
            .write(move |conn| {
                let changed = conn
                    .prepare_cached(
                        "UPDATE execution_states SET decision = ?2 WHERE id = ?1 AND decision IS NULL",
                    )?
                    .execute(params![id, action])?;
                Ok(changed > 0)
            })
            .await
    }

    async fn take_execution_decision(&self, id: &str) -> StoreResult<Option<String>> {
        let id = id.to_string();
        // Servers ask this every 200 ms per paused run: a plain read first,
        // so that the common "nothing posted" answer costs no write.
        let posted = self.read({
            let id = id.clone();
            move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT 1 FROM execution_states WHERE id = ?1 AND decision IS NOT NULL",
                    )?
                    .exists([id])?)
            }
        })?;
        if !posted {
            return Ok(None);
        }
        // Inside the writer's BEGIN IMMEDIATE: read-then-clear is atomic
        // across processes.
        self.writer
            .write(move |conn| {
                let decision: Option<String> = conn
                    .prepare_cached(
                        "SELECT decision FROM execution_states WHERE id = ?1 AND decision IS NOT NULL",
                    )?
                    .query_row([&id], |r| r.get(0))
                    .optional()?;
                if decision.is_some() {
                    conn.prepare_cached("UPDATE execution_states SET decision = NULL WHERE id = ?1")?
                        .execute([&id])?;
                }
                Ok(decision)
            })
            .await
    }

    async fn flush(&self) -> StoreResult<()> {
        // The writer commits in queue order: once this empty write is
        // answered, everything queued before it is committed.
        self.writer.write(|_| Ok(())).await
    }

    async fn upsert_integration(&self, r: IntegrationRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                bump_catalog_version(conn, &r.org_id)?;
                conn.execute(
                    "INSERT INTO integrations (org_id, namespace, kind, source, base_url, tool_count, document, created_at, updated_at, revision, search_index) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, (SELECT version FROM catalog_versions WHERE org_id = ?1), ?9) \
                     ON CONFLICT (org_id, namespace) DO UPDATE SET kind = ?3, source = ?4, base_url = ?5, tool_count = ?6, document = ?7, updated_at = ?8, revision = excluded.revision, search_index = ?9",
                    params![r.org_id, r.namespace, r.kind, r.source, r.base_url, r.tool_count, pack(&r.document), r.updated_at_ms, r.search_index],
                )?;
                Ok(())
            })
            .await
    }

    async fn integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
    ) -> StoreResult<Option<IntegrationDocument>> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT document, search_index FROM integrations WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
            )?;
            let mut rows = stmt.query(params![org_id, namespace, revision])?;
            Ok(match rows.next()? {
                Some(row) => Some(IntegrationDocument {
                    document: row.get::<_, Document>(0)?.0,
                    search_index: row.get(1)?,
                }),
                None => None,
            })
        })
    }

    async fn replace_search_index(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        search_index: Vec<u8>,
    ) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let changed = conn.execute(
                    "UPDATE integrations SET search_index = ?4 WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
                    params![org_id, namespace, revision, search_index],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn replace_integration_document(
        &self,
        org_id: &str,
        namespace: &str,
        revision: i64,
        document: String,
    ) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let changed = conn.execute(
                    "UPDATE integrations SET document = ?4 WHERE org_id = ?1 AND namespace = ?2 AND revision = ?3",
                    params![org_id, namespace, revision, pack(&document)],
                )?;
                Ok(changed == 1)
            })
            .await
    }

    async fn list_integrations(
        &self,
        org_id: &str,
        with_documents: bool,
    ) -> StoreResult<Vec<IntegrationRecord>> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            let sql = if with_documents {
                "SELECT org_id, namespace, kind, source, base_url, tool_count, document, updated_at, revision FROM integrations WHERE org_id = ?1 ORDER BY namespace"
            } else {
                "SELECT org_id, namespace, kind, source, base_url, tool_count, '', updated_at, revision FROM integrations WHERE org_id = ?1 ORDER BY namespace"
            };
            let mut stmt = conn.prepare_cached(sql)?;
            let rows = stmt.query_map([org_id], |r| {
                Ok(IntegrationRecord {
                    org_id: r.get(0)?,
                    namespace: r.get(1)?,
                    kind: r.get(2)?,
                    source: r.get(3)?,
                    base_url: r.get(4)?,
                    tool_count: r.get(5)?,
                    document: r.get::<_, Document>(6)?.0,
                    updated_at_ms: r.get(7)?,
                    revision: r.get(8)?,
                    search_index: None,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn remove_integration(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                let n = conn.execute(
                    "DELETE FROM integrations WHERE org_id = ?1 AND namespace = ?2",
                    params![org_id, namespace],
                )?;
                if n > 0 {
                    bump_catalog_version(conn, &org_id)?;
                }
                Ok(n > 0)
            })
            .await
    }

    async fn catalog_version(&self, org_id: &str) -> StoreResult<i64> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT version FROM catalog_versions WHERE org_id = ?1")?
                .query_row([org_id], |r| r.get(0))
                .optional()?
                .unwrap_or(0))
        })
    }

    async fn set_connection(&self, c: ConnectionRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO connections (org_id, namespace, kind, username, secret, updated_at, oauth, generation) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1) \
                     ON CONFLICT (org_id, namespace) DO UPDATE SET kind = ?3, username = ?4, secret = ?5, updated_at = ?6, \
                     oauth = ?7, generation = generation + 1, lease_holder = NULL, lease_until = NULL",
                    params![c.org_id, c.namespace, c.kind, c.username, c.secret, c.updated_at_ms, c.oauth],
                )?;
                Ok(())
            })
            .await
    }

    async fn list_connections(&self, org_id: &str) -> StoreResult<Vec<ConnectionRecord>> {
        let org_id = org_id.to_string();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT org_id, namespace, kind, username, secret, updated_at, oauth, generation FROM connections WHERE org_id = ?1 ORDER BY namespace",
            )?;
            let rows = stmt.query_map([org_id], connection_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn get_connection(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> StoreResult<Option<ConnectionRecord>> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT org_id, namespace, kind, username, secret, updated_at, oauth, generation FROM connections WHERE org_id = ?1 AND namespace = ?2",
                )?
                .query_row([org_id, namespace], connection_row)
                .optional()?)
        })
    }

    async fn remove_connection(&self, org_id: &str, namespace: &str) -> StoreResult<bool> {
        let (org_id, namespace) = (org_id.to_string(), namespace.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM connections WHERE org_id = ?1 AND namespace = ?2",
                    params![org_id, namespace],
                )? > 0)
            })
            .await
    }

    async fn save_connection_if(&self, c: ConnectionRecord, generation: i64) -> StoreResult<bool> {
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "UPDATE connections SET secret = ?3, oauth = ?4, updated_at = ?5, generation = generation + 1, \
                     lease_holder = NULL, lease_until = NULL \
                     WHERE org_id = ?1 AND namespace = ?2 AND generation = ?6",
                    params![c.org_id, c.namespace, c.secret, c.oauth, c.updated_at_ms, generation],
                )? > 0)
            })
            .await
    }

    async fn lease_connection(
        &self,
        org_id: &str,
        namespace: &str,
        generation: i64,
        holder: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let (org_id, namespace, holder) = (
            org_id.to_string(),
            namespace.to_string(),
            holder.to_string(),
        );
        self.writer
            .write(move |conn| {
                Ok(conn.execute(
                    "UPDATE connections SET lease_holder = ?4, lease_until = ?5 \
                     WHERE org_id = ?1 AND namespace = ?2 AND generation = ?3 \
                     AND (lease_until IS NULL OR lease_until < ?6 OR lease_holder = ?4)",
                    params![org_id, namespace, generation, holder, until_ms, now_ms],
                )? > 0)
            })
            .await
    }

    async fn release_connection_lease(
        &self,
        org_id: &str,
        namespace: &str,
        holder: &str,
    ) -> StoreResult<()> {
        let (org_id, namespace, holder) = (
            org_id.to_string(),
            namespace.to_string(),
            holder.to_string(),
        );
        self.writer
            .write(move |conn| {
                conn.execute(
                    "UPDATE connections SET lease_holder = NULL, lease_until = NULL \
                     WHERE org_id = ?1 AND namespace = ?2 AND lease_holder = ?3",
                    params![org_id, namespace, holder],
                )?;
                Ok(())
            })
            .await
    }

    async fn register_node(&self, id: &str, url: Option<&str>, ttl_ms: i64) -> StoreResult<()> {
        let (id, url) = (id.to_string(), url.map(str::to_string));
        self.writer
            .write(move |conn| {
                let now = now_ms();
                // A node gone for a day has no session left that names it
                // as a live holder; its row is only clutter.
                conn.prepare_cached("DELETE FROM nodes WHERE alive_until < ?1")?
                    .execute([now - NODE_ROW_KEPT_MS])?;
                conn.prepare_cached(
                    "INSERT INTO nodes (id, url, started_at, alive_until) VALUES (?1, ?2, ?3, ?3 + ?4) \
                     ON CONFLICT (id) DO UPDATE SET url = excluded.url, alive_until = excluded.alive_until",
                )?
                .execute(params![id, url, now, ttl_ms])?;
                Ok(())
            })
            .await
    }

    async fn heartbeat_node(&self, id: &str, ttl_ms: i64) -> StoreResult<bool> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                let now = now_ms();
                Ok(conn
                    .prepare_cached(
                        "UPDATE nodes SET alive_until = ?2 + ?3 WHERE id = ?1 AND alive_until >= ?2",
                    )?
                    .execute(params![id, now, ttl_ms])?
                    == 1)
            })
            .await
    }

    async fn evict_node(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("UPDATE nodes SET alive_until = 0 WHERE id = ?1")?
                    .execute([id])?;
                Ok(())
            })
            .await
    }

    async fn node_alive(&self, id: &str) -> StoreResult<bool> {
        let id = id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM nodes WHERE id = ?1 AND alive_until >= ?2")?
                .exists(params![id, now_ms()])?)
        })
    }

    async fn retire_node(&self, id: &str) -> StoreResult<()> {
        let id = id.to_string();
        self.writer
            .write(move |conn| {
                conn.prepare_cached("UPDATE sessions SET holder = NULL WHERE holder = ?1")?
                    .execute([&id])?;
                conn.prepare_cached("DELETE FROM nodes WHERE id = ?1")?
                    .execute([&id])?;
                Ok(())
            })
            .await
    }

    async fn claim_session(&self, id: &str, node: &str) -> StoreResult<SessionClaim> {
        // A read first, off the writer: a request for a session another
        // live node holds (the common case on a node that hands requests
        // over) costs a read, not a write.
        let read = {
            let (id, node) = (id.to_string(), node.to_string());
            self.read(move |conn| claim_refusal(conn, &id, &node))?
        };
        if let Some(outcome) = ClaimRefusal::outcome(read, node) {
            return Ok(outcome);
        }
        let (id, node) = (id.to_string(), node.to_string());
        // The writer runs the claim and, when it fails, the read of why in
        // one transaction: the answer is exact, not a hint.
        self.writer
            .write(move |conn| {
                let now = now_ms();
                let claimed = conn
                    .prepare_cached(&format!(
                        "UPDATE sessions SET holder = ?2, epoch = epoch + 1 \
                         WHERE id = ?1 AND terminated_at IS NULL \
                           AND EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND alive_until >= ?3) \
                           AND (holder IS NULL OR holder = ?2 OR NOT EXISTS \
                                (SELECT 1 FROM nodes n WHERE n.id = sessions.holder AND n.alive_until >= ?3)) \
                         RETURNING {SESSION_COLUMNS}, epoch"
                    ))?
                    .query_row(params![id, node, now], |r| {
                        Ok((session_from_row(r)?, r.get::<_, i64>(10)?))
                    })
                    .optional()?;
                if let Some((record, epoch)) = claimed {
                    return Ok(SessionClaim::Claimed {
                        record,
                        fence: Fence { node, epoch },
                    });
                }
                let found = claim_refusal(conn, &id, &node)?;
                // One transaction: a claim refused here cannot have raced.
                ClaimRefusal::outcome(found, &node)
                    .ok_or_else(|| StoreError::Database("session claim refused without a cause".into()))
            })
            .await
    }

    async fn release_sessions(&self, node: &str, sessions: Vec<(String, i64)>) -> StoreResult<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let node = node.to_string();
        self.writer
            .write(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "UPDATE sessions SET holder = NULL WHERE id = ?1 AND holder = ?2 AND epoch = ?3",
                )?;
                for (id, epoch) in &sessions {
                    stmt.execute(params![id, node, epoch])?;
                }
                Ok(())
            })
            .await
    }

    async fn claim_job(
        &self,
        name: &str,
        holder: &str,
        every_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.writer
            .write(move |conn| {
                Ok(conn
                    .prepare_cached(CLAIM_JOB_SQLITE)?
                    .execute(params![name, holder, now_ms, every_ms])?
                    == 1)
            })
            .await
    }

    async fn insert_pending_login(&self, p: PendingLoginRecord) -> StoreResult<()> {
        self.writer
            .write(move |conn| {
                // Logins are rare and short-lived: an hour past expiry, a
                // row (settled or not) has nobody left to read it.
                conn.execute(
                    "DELETE FROM oauth_pending WHERE expires_at < ?1",
                    [p.created_at_ms - 3_600_000],
                )?;
                conn.execute(
                    &format!("INSERT INTO oauth_pending ({PENDING_LOGIN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                    params![p.state_hash, p.org_id, p.namespace, p.sealed, p.request, p.created_at_ms, p.expires_at_ms],
                )?;
                Ok(())
            })
            .await
    }

    async fn take_pending_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> StoreResult<Option<PendingLoginRecord>> {
        let state_hash = state_hash.to_string();
        self.writer
            .write(move |conn| {
                let taken = conn.execute(
                    "UPDATE oauth_pending SET taken = 1 WHERE state_hash = ?1 AND taken = 0 AND expires_at >= ?2",
                    params![state_hash, now_ms],
                )?;
                if taken == 0 {
                    return Ok(None);
                }
                Ok(conn
                    .query_row(
                        &format!("SELECT {PENDING_LOGIN_COLUMNS} FROM oauth_pending WHERE state_hash = ?1"),
                        [&state_hash],
                        pending_login_row,
                    )
                    .optional()?)
            })
            .await
    }

    async fn settle_pending_login(&self, state_hash: &str, outcome: String) -> StoreResult<()> {
        let state_hash = state_hash.to_string();
        self.writer
            .write(move |conn| {
                conn.execute(
                    "UPDATE oauth_pending SET taken = 1, outcome = ?2 WHERE state_hash = ?1",
                    params![state_hash, outcome],
                )?;
                Ok(())
            })
            .await
    }

    async fn pending_login_outcome(&self, state_hash: &str) -> StoreResult<Option<Option<String>>> {
        let state_hash = state_hash.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT outcome FROM oauth_pending WHERE state_hash = ?1")?
                .query_row([state_hash], |r| r.get::<_, Option<String>>(0))
                .optional()?)
        })
    }
}

/// `org/namespace` of every connection whose secret is sealed (not an
/// `env://` reference), by org name where the org still exists.
fn sealed_connections(conn: &Connection) -> StoreResult<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT COALESCE(o.name, c.org_id), c.namespace, c.secret FROM connections c \
         LEFT JOIN orgs o ON o.id = c.org_id ORDER BY 1, 2",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    let mut sealed = Vec::new();
    for row in rows {
        let (org, namespace, secret) = row?;
        if SecretRef::is_sealed(&secret) {
            sealed.push(format!("{org}/{namespace}"));
        }
    }
    Ok(sealed)
}

/// Marks the org's catalog as changed, so servers rebuild it.
fn bump_catalog_version(conn: &Connection, org_id: &str) -> StoreResult<()> {
    conn.execute(
        "INSERT INTO catalog_versions (org_id, version) VALUES (?1, 1) ON CONFLICT (org_id) DO UPDATE SET version = version + 1",
        [org_id],
    )?;
    Ok(())
}

/// Drops the oldest events of a stream beyond its bounds, keeping the newest.
fn prune_stream(
    tx: &Connection,
    session: &str,
    stream: &str,
    newest: i64,
    b: LogBounds,
) -> StoreResult<()> {
    tx.execute(
        "DELETE FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq <= ?3",
        params![session, stream, newest - b.max_events as i64],
    )?;
    // Byte bound: walk newest → oldest and cut where the running total passes.
    let mut stmt = tx.prepare_cached(
        // Bytes, not characters: `length` of TEXT counts characters.
        "SELECT seq, length(CAST(data AS BLOB)) FROM events WHERE session_id = ?1 AND stream_id = ?2 ORDER BY seq DESC",
    )?;
    let sizes = stmt
        .query_map(params![session, stream], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut total: u64 = 0;
    for (i, (seq, len)) in sizes.iter().enumerate() {
        total += *len as u64;
        if i > 0 && total > b.max_bytes {
            tx.execute(
                "DELETE FROM events WHERE session_id = ?1 AND stream_id = ?2 AND seq <= ?3",
                params![session, stream, seq],
            )?;
            break;
        }
    }
    Ok(())
}

fn connection_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ConnectionRecord> {
    Ok(ConnectionRecord {
        org_id: r.get(0)?,
        namespace: r.get(1)?,
        kind: r.get(2)?,
        username: r.get(3)?,
        secret: r.get(4)?,
        updated_at_ms: r.get(5)?,
        oauth: r.get(6)?,
        generation: r.get(7)?,
    })
}

const PENDING_LOGIN_COLUMNS: &str =
    "state_hash, org_id, namespace, sealed, request, created_at, expires_at";

/// The session columns in `session_from_row`'s order.
const SESSION_COLUMNS: &str = "id, account_id, org_id, protocol_version, client_info, client_capabilities, elicitation_mode, created_at, last_activity_at, terminated_at";

/// How long a dead node's row stays (see `register_node`).
const NODE_ROW_KEPT_MS: i64 = 24 * 3600 * 1000;

/// The session row with its holder's liveness and the caller's, as a
/// claim reads it.
fn claim_refusal(conn: &Connection, id: &str, node: &str) -> StoreResult<Option<ClaimRefusal>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS}, holder, \
               (SELECT url FROM nodes n WHERE n.id = sessions.holder), \
               EXISTS (SELECT 1 FROM nodes n WHERE n.id = sessions.holder AND n.alive_until >= ?3), \
               EXISTS (SELECT 1 FROM nodes WHERE id = ?2 AND alive_until >= ?3) \
             FROM sessions WHERE id = ?1"
        ))?
        .query_row(params![id, node, now_ms()], |r| {
            Ok(ClaimRefusal {
                record: session_from_row(r)?,
                holder: r.get(10)?,
                holder_url: r.get(11)?,
                holder_alive: r.get(12)?,
                caller_alive: r.get(13)?,
            })
        })
        .optional()?)
}

/// Refuses a holder's write whose fence is no longer the session's.
fn holds_session(conn: &Connection, session_id: &str, fence: &Fence) -> StoreResult<()> {
    let holds = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1 AND holder = ?2 AND epoch = ?3")?
        .exists(params![session_id, fence.node, fence.epoch])?;
    if holds {
        Ok(())
    } else {
        Err(StoreError::Fenced {
            id: session_id.to_string(),
        })
    }
}

/// Inserts the job as due again after `every`, or moves it on only where
/// it is due: one row changed means this caller runs it.
const CLAIM_JOB_SQLITE: &str = "INSERT INTO jobs (name, holder, next_at) VALUES (?1, ?2, ?3 + ?4) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, next_at = excluded.next_at \
     WHERE jobs.next_at <= ?3";

fn pending_login_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingLoginRecord> {
    Ok(PendingLoginRecord {
        state_hash: r.get(0)?,
        org_id: r.get(1)?,
        namespace: r.get(2)?,
        sealed: r.get(3)?,
        request: r.get(4)?,
        created_at_ms: r.get(5)?,
        expires_at_ms: r.get(6)?,
    })
}

#[cfg(test)]
mod tests {
    //! SQLite's own: its migrations. The behaviour both stores share is
    //! the contract suite's (`tests/contract.rs`).
    use super::*;

    /// Hardening: a store made before personal orgs had owners. An org named
    /// like an account's email becomes its personal org; one named like an
    /// email nobody has (made by someone else's `--org`) gives the name up.
    #[tokio::test]
    async fn hardening_migration_gives_personal_orgs_their_owner() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("executor.db");
        {
            let conn = connect(&db).unwrap();
            // The store as it was before the personal-orgs migration.
            let before = MIGRATIONS
                .iter()
                .position(|m| m.contains("ADD COLUMN owner_account_id"))
                .unwrap();
            for sql in &MIGRATIONS[..before] {
                conn.execute_batch(sql).unwrap();
            }
            conn.execute_batch(&format!(
                "PRAGMA user_version = {before};
                 INSERT INTO accounts VALUES ('acc_carol', 'carol@c.test', 1);
                 INSERT INTO orgs VALUES ('org_carol', 'carol@c.test', 1);
                 INSERT INTO orgs VALUES ('org_hijack', 'dave@d.test', 1);
                 INSERT INTO orgs VALUES ('org_team', 'team', 1);
                 INSERT INTO memberships VALUES ('acc_carol', 'org_carol');
                 INSERT INTO memberships VALUES ('acc_carol', 'org_hijack');"
            ))
            .unwrap();
        }
        let s = SqliteStore::open(&db).unwrap();
        let carol = s.ensure_account("carol@c.test", None).await.unwrap();
        assert_eq!(carol.org_id, "org_carol");
        let dave = s.ensure_account("dave@d.test", None).await.unwrap();
        assert_ne!(dave.org_id, "org_hijack");
        assert_eq!(s.find_org("dave@d.test").await.unwrap(), Some(dave.org_id));
        assert_eq!(
            s.find_org("org_hijack").await.unwrap().as_deref(),
            Some("org_hijack")
        );
        let team = s.ensure_account("dave@d.test", Some("team")).await.unwrap();
        assert_eq!(team.org_id, "org_team");
    }
}
