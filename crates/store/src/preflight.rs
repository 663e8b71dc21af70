//! Start checks (SPEC §11): what [`SqliteStore::open`](crate::SqliteStore::open)
//! verifies before it migrates or writes anything, and the key check the
//! binary runs before a command seals or opens connection secrets.
//!
//! A failed check is a [`Refusal`]. Its text is for the operator (printed on
//! stderr at start, never shown to an agent): it names the file, says in
//! plain words what is wrong and what to do about it.
//!
//! The order matters. The file is inspected through a plain connection that
//! has not switched it to WAL (which rewrites the header), so a file that
//! turns out not to be ours is left exactly as it was:
//!
//! 1. [`prepare_files`]: the data dir (0700) and a new database file (0600;
//!    SQLite gives the `-wal` and `-shm` files the database file's mode);
//! 2. [`check_header`] and [`check_schema`]: a SQLite file at all, not from a
//!    newer release, not another program's;
//! 3. [`check_writable`]: a write goes through (then is rolled back). This
//!    writes for real instead of reading permission bits, which root ignores
//!    and which say nothing about read-only mounts or a `-shm` that cannot be
//!    written.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode};

use crate::secrets::{KEY_ENV_VAR, KEY_FILE_NAME};

/// Created by the first migration and never dropped: a store with a schema
/// version but without this table was not made by executor.
const FIRST_TABLE: &str = "orgs";
/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";
/// Connections named in a lost-key message; the rest are counted.
const NAMED_CONNECTIONS: usize = 5;

/// Why the store cannot be used as it is. The `Display` text is the message
/// for the operator.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the store {} has schema version {found}; this executor knows up to {known}: upgrade executor",
        path.display()
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        known: usize,
    },
    #[error(
        "{} is a SQLite database of another program (schema version {version}, tables: {}), \
         not an executor store; executor adds nothing to it. Point --database-url or \
         --data-dir at a new path",
        path.display(),
        table_list(tables)
    )]
    Foreign {
        path: PathBuf,
        version: i64,
        tables: Vec<String>,
    },
    #[error(
        "{} is not a SQLite database (it holds something else, or is encrypted or damaged); \
         executor will not touch it. Move it away or point --database-url at another path",
        path.display()
    )]
    NotADatabase { path: PathBuf },
    #[error("cannot open the store {}: {cause}", path.display())]
    Unopenable {
        path: PathBuf,
        /// Plain words for the operator, e.g. "/srv/data is a file, not a
        /// directory".
        cause: String,
    },
    #[error(
        "cannot write the store {}: {cause}. Executor writes sessions and executions to it: \
         the file, its -wal and -shm files and its directory must be writable by this user",
        path.display()
    )]
    NotWritable {
        path: PathBuf,
        /// Plain words for the operator.
        cause: String,
    },
    #[error(
        "the store {} holds sealed secrets of {} ({}), but the key they were sealed with is \
         missing: {KEY_ENV_VAR} is not set and {} does not exist. Executor will not make a new \
         key, which could never open them. Put the original {KEY_FILE_NAME} back at {} \
         (mode 0600) or set {KEY_ENV_VAR} to its contents; if the key is lost for good, remove \
         those connections with `executor connections remove NAMESPACE --org ORG` and set \
         them again",
        store.display(),
        connection_count(connections.len()),
        connection_list(connections),
        key_file.display(),
        key_file.display()
    )]
    LostSecretKey {
        store: PathBuf,
        key_file: PathBuf,
        /// `org/namespace` of each connection with a sealed secret.
        connections: Vec<String>,
    },
    /// `url` has its password replaced in every Postgres refusal.
    #[error("cannot open the Postgres store {url}: {cause}")]
    PostgresUnreachable { url: String, cause: String },
    #[error(
        "the Postgres store {url} is a read-only standby (pg_is_in_recovery() is true): \
         point --database-url at the primary"
    )]
    PostgresReadOnly { url: String },
    #[error(
        "the Postgres store {url} has schema version {found}; this executor knows up to \
         {known}: upgrade executor"
    )]
    PostgresNewerSchema {
        url: String,
        found: i64,
        known: usize,
    },
    #[error(
        "the Postgres database {url} holds tables of another program ({}) and no executor \
         schema; executor adds nothing to it. Create a database of its own (createdb \
         executor) and point --database-url at it",
        tables.join(", ")
    )]
    PostgresForeign { url: String, tables: Vec<String> },
    #[error(
        "cannot write the Postgres store {url}: {cause}. Executor writes sessions and \
         executions to it: the role needs to create tables in its schema and write them"
    )]
    PostgresNotWritable { url: String, cause: String },
    #[error(
        "this node's secret key is not the key the store {url} was set up with: every node \
         of a shared store needs the same {KEY_ENV_VAR} (or the same {KEY_FILE_NAME}). \
         Connections sealed by the other nodes would not open with this one, so this node \
         does not start"
    )]
    WrongSecretKey { url: String },
}

/// Creates the data dir (0700) and, when missing, the database file (0600)
/// before SQLite sees the path. An existing directory or file is left as the
/// operator made it.
pub(crate) fn prepare_files(path: &Path) -> Result<(), Refusal> {
    let unopenable = |fallback: String| Refusal::Unopenable {
        path: path.to_path_buf(),
        cause: diagnose(path).unwrap_or(fallback),
    };
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        // The store holds sessions and token hashes: keep a dir we create private.
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(|e| {
            unopenable(format!(
                "cannot create the directory {}: {}",
                dir.display(),
                plain(&e)
            ))
        })?;
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        // An existing path (a store, or something else) is for SQLite and the
        // checks below to judge.
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(unopenable(format!("cannot create it: {}", plain(&e)))),
    }
}

/// Refuses a non-empty file that does not begin with SQLite's header.
/// SQLite alone is not enough here: it reads a file of one byte as an empty
/// database and would write over it.
pub(crate) fn check_header(path: &Path) -> Result<(), Refusal> {
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    let read = File::open(path)
        .and_then(|file| file.take(SQLITE_HEADER.len() as u64).read_to_end(&mut head));
    // A path that cannot be read is for SQLite and `diagnose` to explain.
    if read.is_err() || head.is_empty() || head == SQLITE_HEADER {
        return Ok(());
    }
    Err(Refusal::NotADatabase {
        path: path.to_path_buf(),
    })
}

/// Opens the plain connection the checks run on: read-write, no create (the
/// file exists by now), rollback journal untouched.
pub(crate) fn inspect_connection(
    path: &Path,
    busy_timeout: std::time::Duration,
) -> Result<Connection, Refusal> {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| explain(path, &e))?;
    conn.busy_timeout(busy_timeout)
        .map_err(|e| explain(path, &e))?;
    Ok(conn)
}

/// Refuses a file that is not SQLite, a schema newer than the `known`
/// migrations, and another program's database. An empty file is a new store.
pub(crate) fn check_schema(path: &Path, conn: &Connection, known: usize) -> Result<(), Refusal> {
    // The first read of the header: a file that is not SQLite fails here.
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| explain(path, &e))?;
    if version > known as i64 {
        return Err(Refusal::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known,
        });
    }
    let tables = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| explain(path, &e))?;
    // The first migration creates its tables and sets the version in one
    // transaction, so version 0 with tables, or a version without them, is
    // not a store of ours.
    let ours = match version {
        0 => tables.is_empty(),
        1.. => tables.iter().any(|table| table == FIRST_TABLE),
        _ => false,
    };
    if !ours {
        return Err(Refusal::Foreign {
            path: path.to_path_buf(),
            version,
            tables,
        });
    }
    Ok(())
}

/// Refuses a store this process cannot write, by writing the schema version
/// back unchanged inside a write transaction and rolling it back.
///
/// `BEGIN IMMEDIATE` alone is not enough: on a file SQLite could only open
/// read-only (chmod 0444, a read-only mount) it quietly begins a read
/// transaction instead. The write needs page 1 and the write lock, and
/// nothing reaches the disk before a commit.
pub(crate) fn check_writable(path: &Path, conn: &Connection) -> Result<(), Refusal> {
    let not_writable = |e: &rusqlite::Error| Refusal::NotWritable {
        path: path.to_path_buf(),
        cause: diagnose(path).unwrap_or_else(|| sqlite_cause(e)),
    };
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| explain(path, &e))?;
    let written = conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; PRAGMA user_version = {version}; ROLLBACK"
    ));
    if let Err(e) = written {
        // The batch stops at the failing statement; the transaction may be open.
        let _ = conn.execute_batch("ROLLBACK");
        return Err(not_writable(&e));
    }
    Ok(())
}

/// Refuses when connections hold sealed secrets but their key is gone:
/// `key_in_env` is false and `<data_dir>/secret.key` does not exist.
/// `sealed` names those connections (`org/namespace`).
///
/// Run before anything loads the key, because loading makes a new key when
/// there is none, and a new key never opens the old secrets.
pub(crate) fn check_secret_key(
    store: &Path,
    sealed: Vec<String>,
    key_in_env: bool,
    data_dir: &Path,
) -> Result<(), Refusal> {
    if sealed.is_empty() || key_in_env {
        return Ok(());
    }
    let key_file = data_dir.join(KEY_FILE_NAME);
    // Only a file that is certainly absent is refused; one that cannot be
    // inspected gets its own, more precise, error when the key is loaded.
    match key_file.try_exists() {
        Ok(false) => Err(Refusal::LostSecretKey {
            store: store.to_path_buf(),
            key_file,
            connections: sealed,
        }),
        _ => Ok(()),
    }
}

/// Turns a SQLite error met while opening or reading the store into a
/// refusal that says what is wrong with the path.
pub(crate) fn explain(path: &Path, error: &rusqlite::Error) -> Refusal {
    let path_buf = path.to_path_buf();
    let cause = || diagnose(path).unwrap_or_else(|| sqlite_cause(error));
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => Refusal::NotADatabase { path: path_buf },
        Some(
            ErrorCode::ReadOnly
            | ErrorCode::PermissionDenied
            | ErrorCode::DiskFull
            | ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked,
        ) => Refusal::NotWritable {
            path: path_buf,
            cause: cause(),
        },
        _ => Refusal::Unopenable {
            path: path_buf,
            cause: cause(),
        },
    }
}

/// Looks at the path and the files next to it for the plain reason SQLite
/// could not open or write it. None when nothing visible is wrong.
fn diagnose(path: &Path) -> Option<String> {
    // The nearest existing ancestor must be a directory.
    for ancestor in path
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
    {
        match fs::metadata(ancestor) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => return Some(format!("{} is a file, not a directory", ancestor.display())),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Some(format!("{}: {}", ancestor.display(), plain(&e))),
        }
    }
    // Then the file itself and SQLite's files next to it.
    let sidecars = ["", "-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    });
    for file in &sidecars {
        match fs::metadata(file) {
            Ok(meta) if meta.is_dir() => {
                return Some(format!("{} is a directory, not a file", file.display()));
            }
            Ok(meta) if !meta.is_file() => {
                return Some(format!("{} is not a regular file", file.display()));
            }
            Ok(_) => {
                if let Err(e) = OpenOptions::new().read(true).write(true).open(file) {
                    return Some(format!(
                        "{} cannot be opened for writing: {}",
                        file.display(),
                        plain(&e)
                    ));
                }
            }
            Err(_) => {}
        }
    }
    None
}

/// SQLite's reason, reworded where its own words say little.
fn sqlite_cause(error: &rusqlite::Error) -> String {
    match error.sqlite_error_code() {
        Some(ErrorCode::ReadOnly) => "SQLite could open it only for reading (the file, its \
            directory or the file system does not allow writing)"
            .into(),
        Some(ErrorCode::CannotOpen) => "SQLite cannot open it (it, its directory or the \
            -wal and -shm files next to it are not accessible to this user)"
            .into(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "another process held its write lock for the whole busy timeout".into()
        }
        Some(ErrorCode::DiskFull) => "the disk is full".into(),
        Some(ErrorCode::DatabaseCorrupt) => "its contents are damaged".into(),
        _ => format!("SQLite says: {error}"),
    }
}

/// An OS error without its "(os error N)" tail, lower-cased to sit mid-sentence.
fn plain(error: &io::Error) -> String {
    let text = error.to_string();
    let text = match text.rfind(" (os error ") {
        Some(end) => &text[..end],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn table_list(tables: &[String]) -> String {
    if tables.is_empty() {
        "none".into()
    } else {
        tables.join(", ")
    }
}

fn connection_count(n: usize) -> String {
    if n == 1 {
        "1 connection".into()
    } else {
        format!("{n} connections")
    }
}

fn connection_list(connections: &[String]) -> String {
    let named = connections
        .iter()
        .take(NAMED_CONNECTIONS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match connections.len().saturating_sub(NAMED_CONNECTIONS) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::{self, SecretKey};
    use crate::sqlite::{connect, migrate};
    use crate::{AccountStore, ConnectionRecord, ConnectionStore, SqliteStore, StoreError};

    /// The number of migrations this build knows, read from a fresh store.
    fn known_version() -> i64 {
        let dir = TempDir::new();
        make_store(&dir.db());
        let conn = Connection::open(dir.db()).unwrap();
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    }

    /// A unique directory under the system temp dir, removed on drop.
    struct TempDir(tempfile::TempDir);

    impl TempDir {
        fn new() -> Self {
            TempDir(tempfile::tempdir().unwrap())
        }

        fn path(&self) -> &Path {
            self.0.path()
        }

        /// Where the stores of these tests live: `<tmp>/data/executor.db`.
        fn db(&self) -> PathBuf {
            self.path().join("data").join("executor.db")
        }
    }

    fn sidecar(db: &Path, suffix: &str) -> PathBuf {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    }

    /// A migrated store at `db`, every connection closed when this returns.
    fn make_store(db: &Path) {
        fs::create_dir_all(db.parent().unwrap()).unwrap();
        let conn = connect(db).unwrap();
        migrate(&conn).unwrap();
    }

    /// Lets `arrange` prepare `<tmp>/data/executor.db`, opens the store there
    /// and expects a refusal whose message names the file and contains each
    /// of `expected`. Returns the refusal and the directory for more checks.
    fn check_refused(arrange: impl FnOnce(&Path), expected: &[&str]) -> (Refusal, TempDir) {
        let dir = TempDir::new();
        let db = dir.db();
        arrange(&db);
        let refusal = match SqliteStore::open(&db) {
            Ok(_) => panic!("opened, expected a refusal containing {expected:?}"),
            Err(StoreError::Refused(refusal)) => refusal,
            Err(other) => panic!("expected a refusal, got {other:?}"),
        };
        let message = refusal.to_string();
        let named = db.display().to_string();
        let parent = db.parent().unwrap().display().to_string();
        assert!(
            message.contains(&named) || message.contains(&parent),
            "names no path: {message}"
        );
        for part in expected {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
        (refusal, dir)
    }

    fn tables(db: &Path) -> Vec<String> {
        let conn = Connection::open(db).unwrap();
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn hardening_store_from_a_newer_release_is_refused() {
        let known = known_version();
        let newer = known + 8;
        let (refusal, dir) = check_refused(
            |db| {
                make_store(db);
                let conn = Connection::open(db).unwrap();
                conn.execute_batch(&format!("PRAGMA user_version = {newer}"))
                    .unwrap();
            },
            &[&format!(
                "has schema version {newer}; this executor knows up to {known}: upgrade executor"
            )],
        );
        assert!(matches!(refusal, Refusal::NewerSchema { .. }));
        let conn = Connection::open(dir.db()).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, newer);
    }

    #[test]
    fn hardening_foreign_sqlite_file_is_refused_and_left_alone() {
        // (schema version, the other program's tables)
        let cases: [(i64, &[&str]); 3] = [
            (0, &["notes"]),
            (0, &["notes", "tags"]),
            // Another program that also counts its versions.
            (3, &["things"]),
        ];
        for (version, foreign) in cases {
            let (refusal, dir) = check_refused(
                |db| {
                    fs::create_dir_all(db.parent().unwrap()).unwrap();
                    let conn = Connection::open(db).unwrap();
                    for table in foreign {
                        conn.execute_batch(&format!(
                            "CREATE TABLE {table} (body TEXT); INSERT INTO {table} VALUES ('x');"
                        ))
                        .unwrap();
                    }
                    conn.execute_batch(&format!("PRAGMA user_version = {version}"))
                        .unwrap();
                },
                &["another program", &foreign.join(", ")],
            );
            assert!(matches!(refusal, Refusal::Foreign { .. }), "{foreign:?}");
            // Nothing added, not even the switch to WAL (which rewrites the header).
            assert_eq!(tables(&dir.db()), foreign, "{foreign:?}");
            let conn = Connection::open(dir.db()).unwrap();
            let mode: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "delete", "{foreign:?}");
        }
    }

    #[test]
    fn hardening_garbage_file_is_refused_and_left_alone() {
        let garbage = "this is a shopping list, not a database\n".repeat(100);
        for contents in [garbage.as_str(), "x"] {
            let (refusal, dir) = check_refused(
                |db| {
                    fs::create_dir_all(db.parent().unwrap()).unwrap();
                    fs::write(db, contents).unwrap();
                },
                &["is not a SQLite database"],
            );
            assert!(matches!(refusal, Refusal::NotADatabase { .. }));
            assert_eq!(fs::read_to_string(dir.db()).unwrap(), contents);
        }
    }

    #[test]
    fn hardening_unopenable_path_is_refused_with_its_cause() {
        // The data dir is a regular file (ENOTDIR: root cannot get past it).
        let (refusal, _dir) = check_refused(
            |db| fs::write(db.parent().unwrap(), "not a dir").unwrap(),
            &["data is a file, not a directory"],
        );
        assert!(matches!(refusal, Refusal::Unopenable { .. }));
        // The database path is a directory (EISDIR).
        let (refusal, _dir) = check_refused(
            |db| fs::create_dir_all(db).unwrap(),
            &["executor.db is a directory, not a file"],
        );
        assert!(matches!(refusal, Refusal::Unopenable { .. }));
        // A fresh store whose WAL file cannot be created.
        let (_, _dir) = check_refused(
            |db| fs::create_dir_all(sidecar(db, "-wal")).unwrap(),
            &["executor.db-wal is a directory, not a file"],
        );
    }

    /// Tests run as root, which ignores permission bits, so a chmod 0444 file
    /// would not exercise anything. A `-shm` path that is a directory does,
    /// for root too: SQLite then maps the WAL index read-only, reads work and
    /// every write fails with SQLITE_READONLY, which is what an unwritable
    /// store looks like to a non-root server (until now it started and
    /// answered each write with a 503).
    #[test]
    fn hardening_unwritable_store_is_refused() {
        let (refusal, _dir) = check_refused(
            |db| {
                make_store(db);
                let shm = sidecar(db, "-shm");
                let _ = fs::remove_file(&shm);
                fs::create_dir(&shm).unwrap();
            },
            &["cannot write the store", "executor.db-shm is a directory"],
        );
        assert!(matches!(refusal, Refusal::NotWritable { .. }));
    }

    /// The write check itself, on a handle SQLite opened read-only (what a
    /// chmod 0444 file or a read-only mount gives a non-root process), where
    /// `BEGIN IMMEDIATE` alone succeeds as a read transaction.
    #[test]
    fn the_write_check_writes() {
        let dir = TempDir::new();
        make_store(&dir.db());
        let read_only =
            Connection::open_with_flags(dir.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        read_only
            .execute_batch("BEGIN IMMEDIATE; ROLLBACK")
            .unwrap();
        let refusal = check_writable(&dir.db(), &read_only).unwrap_err();
        assert!(matches!(refusal, Refusal::NotWritable { .. }), "{refusal}");
        let writable = Connection::open(dir.db()).unwrap();
        check_writable(&dir.db(), &writable).unwrap();
    }

    #[test]
    fn a_missing_or_empty_file_is_a_new_store() {
        let dir = TempDir::new();
        SqliteStore::open(&dir.db()).expect("missing file");
        let empty = dir.path().join("empty.db");
        fs::write(&empty, "").unwrap();
        SqliteStore::open(&empty).expect("empty file");
        // And a store of ours opens again.
        SqliteStore::open(&dir.db()).expect("reopen");
    }

    #[tokio::test]
    async fn hardening_lost_secret_key_with_sealed_connections_is_refused() {
        let dir = TempDir::new();
        let data_dir = dir.path().join("data");
        let store = SqliteStore::open(&dir.db()).unwrap();
        let principal = store
            .ensure_account("ops@example.com", Some("acme"))
            .await
            .unwrap();
        let connection = |namespace: &str, secret: String| ConnectionRecord {
            org_id: principal.org_id.clone(),
            namespace: namespace.into(),
            kind: crate::CredentialKind::Bearer,
            username: None,
            secret,
            updated_at_ms: 1,
            oauth: None,
            generation: 0,
        };
        store
            .set_connection(connection("weather", "env://WEATHER_TOKEN".into()))
            .await
            .unwrap();
        // Only env:// references: nothing is sealed, a new key is harmless.
        store.check_secret_key_with(false, &data_dir).unwrap();

        let key = SecretKey::from_env_value(&"ab".repeat(32)).unwrap();
        let aad = secrets::connection_aad(&principal.org_id, "github");
        let sealed = secrets::seal(&key, "ghp_token", &aad).unwrap();
        store
            .set_connection(connection("github", sealed))
            .await
            .unwrap();
        let err = store.check_secret_key_with(false, &data_dir).unwrap_err();
        assert!(
            matches!(err, StoreError::Refused(Refusal::LostSecretKey { .. })),
            "{err:?}"
        );
        let message = err.to_string();
        let key_file = data_dir.join(KEY_FILE_NAME).display().to_string();
        let db = dir.db().display().to_string();
        for part in [
            db.as_str(),
            key_file.as_str(),
            "1 connection (acme/github)",
            "EXECUTOR_SECRET_KEY",
            "executor connections remove",
        ] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
        assert!(!message.contains("weather"), "{message}");

        // The key in the environment, or the key file back in place: fine.
        store.check_secret_key_with(true, &data_dir).unwrap();
        fs::write(data_dir.join(KEY_FILE_NAME), "ab".repeat(32)).unwrap();
        store.check_secret_key_with(false, &data_dir).unwrap();
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn hardening_store_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let dir = TempDir::new();
        // Directories we create are 0700, down to the data dir.
        let db = dir.path().join("new").join("data").join("executor.db");
        let store = SqliteStore::open(&db).unwrap();
        store.ensure_account("a@example.com", None).await.unwrap();
        assert_eq!(mode(&dir.path().join("new")), 0o700);
        assert_eq!(mode(db.parent().unwrap()), 0o700);
        for file in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        // A directory the operator made is left as it is; our files are still 0600.
        let own = dir.path().join("operator");
        fs::create_dir(&own).unwrap();
        fs::set_permissions(&own, fs::Permissions::from_mode(0o755)).unwrap();
        let db = own.join("executor.db");
        let store = SqliteStore::open(&db).unwrap();
        store.ensure_account("a@example.com", None).await.unwrap();
        assert_eq!(mode(&own), 0o755);
        for file in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }
}
