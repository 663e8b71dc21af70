//! The embedded default: SQLite in WAL mode.
//!
//! Reads run inline on the calling thread with a pooled connection (a WAL
//! reader never waits for a writer, and a point lookup takes microseconds);
//! writes go to one writer thread (`writer.rs`) that commits every write
//! queued at that moment in one transaction; the rare multi-statement
//! operation with its own transaction (`ensure_account`) runs on tokio's
//! blocking pool. WAL lets the server and CLI commands on the same data dir
//! read and write concurrently (`busy_timeout` serialises writers across
//! processes). Each role of the store is implemented in its own file.

mod accounts;
mod catalog;
mod connections;
mod executions;
mod nodes;
mod oauth;
mod policies;
mod schema;
mod sessions;
mod tool_calls;

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use crate::checkpointer::{Checkpointer, WRITER_BACKSTOP_PAGES};
use crate::columns::*;
use crate::leases::{ClaimRefusal, ExecutionRefusal};
use crate::listing;
use crate::node::NODE_ROW_KEPT_MS;
use crate::orgs::OrgChoice;
use crate::packed::{Document, pack};
use crate::records::tool_calls_from_json;
use crate::secrets::{KEY_ENV_VAR, SecretRef};
use crate::wal_probe::{WalHeader, WalProbe};
use crate::writer::{MAX_QUEUED_WRITES, Writer};
use crate::*;
use schema::MIGRATIONS;
pub(crate) use schema::migrate;

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

    /// One row or none, read inline with a pooled connection.
    fn read_one<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> StoreResult<Option<T>> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached(sql)?
                .query_row(params, row)
                .optional()?)
        })
    }

    /// Every row, in the statement's order, read inline with a pooled
    /// connection.
    fn read_all<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> StoreResult<Vec<T>> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(sql)?;
            let rows = stmt.query_map(params, row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
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
        .map_err(|e| StoreError::database_caused(format!("store task failed: {e}"), e))?
    }
}

fn poisoned() -> StoreError {
    StoreError::database("connection pool poisoned")
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
        tool_calls: tool_calls_from_json(&r.get::<_, String>(9)?),
        started_at_ms: r.get(10)?,
        duration_ms: r.get(11)?,
    })
}

/// A list query's parameter as SQLite binds it.
fn sql_value(param: &crate::listing::Param) -> rusqlite::types::Value {
    match param {
        crate::listing::Param::Text(text) => rusqlite::types::Value::Text(text.clone()),
        crate::listing::Param::Int(n) => rusqlite::types::Value::Integer(*n),
    }
}

/// The keyset bound of a page: (time, id) of the previous page's last row.
fn page_after(page: &PageRequest) -> (Option<i64>, Option<&str>) {
    match &page.after {
        Some(key) => (Some(key.started_at_ms), Some(key.id.as_str())),
        None => (None, None),
    }
}

fn token_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenRecord> {
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
        grant_id: r.get(7)?,
    })
}

/// Writes a token row: an API token, or an OAuth access token with its grant.
fn insert_token_row(conn: &Connection, t: &TokenRecord) -> StoreResult<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    ))?
    .execute(params![
        t.id,
        t.secret_hash,
        t.principal.account_id,
        t.principal.org_id,
        t.created_at_ms,
        t.expires_at_ms,
        t.revoked_at_ms,
        t.grant_id
    ])?;
    Ok(())
}

/// `(id, owner_account_id)` of an org.
fn org_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Option<String>)> {
    Ok((r.get(0)?, r.get(1)?))
}

#[async_trait]
impl Store for SqliteStore {
    async fn flush(&self) -> StoreResult<()> {
        // The writer commits in queue order: once this empty write is
        // answered, everything queued before it is committed.
        self.writer.write(|_| Ok(())).await
    }

    fn writes_backed_up(&self) -> bool {
        self.writer.is_full()
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
