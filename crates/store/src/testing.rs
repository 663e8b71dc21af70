//! Stores for tests (feature `test-support`): a SQLite store in a temporary
//! directory, and a Postgres database of the test's own.
//!
//! Postgres comes from `EXECUTOR_TEST_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`, the machines' trust-auth
//! server). Each [`PgTestDb`] creates `executor_t_<pid>_<n>` and drops it
//! when dropped; databases left by a test process that died are dropped by
//! the next one. Where no Postgres answers, [`PgTestDb::create`] returns
//! None after saying the test was skipped, unless
//! `EXECUTOR_REQUIRE_POSTGRES=1` (CI), which makes it a failure.
//! `EXECUTOR_TEST_POSTGRES=off` skips them quietly: `scripts/test` runs
//! them as a suite of their own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_postgres::NoTls;

use crate::{PgOptions, PgStore, SqliteStore, Store};

pub const TEST_POSTGRES_VAR: &str = "EXECUTOR_TEST_POSTGRES";
pub const REQUIRE_POSTGRES_VAR: &str = "EXECUTOR_REQUIRE_POSTGRES";
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const PREFIX: &str = "executor_t_";

/// A SQLite store in a fresh directory, removed when the directory is dropped.
pub fn sqlite_store() -> (Arc<SqliteStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("executor.db")).expect("open sqlite store");
    (Arc::new(store), dir)
}

/// The server tests create their databases on.
pub fn admin_url() -> String {
    std::env::var(TEST_POSTGRES_VAR)
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_string())
}

fn postgres_required() -> bool {
    std::env::var(REQUIRE_POSTGRES_VAR).is_ok_and(|v| v == "1")
}

/// A database of one test, dropped with it.
pub struct PgTestDb {
    /// `postgres://…/executor_t_<pid>_<n>`.
    pub url: String,
    name: String,
}

impl PgTestDb {
    /// A new empty database, or None (the test is skipped) when no Postgres
    /// answers and none is required.
    pub async fn create() -> Option<PgTestDb> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let admin = admin_url();
        if admin == "off" {
            return None;
        }
        let client = match connect(&admin).await {
            Ok(client) => client,
            Err(e) if !postgres_required() => {
                eprintln!(
                    "skipped: no PostgreSQL at {} ({e}); set {TEST_POSTGRES_VAR}",
                    crate::redact_database_url(&admin)
                );
                return None;
            }
            Err(e) => panic!(
                "{REQUIRE_POSTGRES_VAR}=1 but no PostgreSQL at {}: {e}",
                crate::redact_database_url(&admin)
            ),
        };
        sweep_leftovers(&client).await;
        let name = format!(
            "{PREFIX}{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        Some(PgTestDb {
            url: database_url(&admin, &name),
            name,
        })
    }

    /// A plain connection to the test database (for what a test does
    /// beside the store: hold a lock, read the schema). Test code: a failed
    /// connect panics.
    pub async fn raw(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
    }

    /// A migrated store on this database.
    pub async fn store(&self) -> Arc<PgStore> {
        Arc::new(
            PgStore::open(&self.url, PgOptions { pool_size: 8 })
                .await
                .expect("open postgres store"),
        )
    }
}

impl Drop for PgTestDb {
    fn drop(&mut self) {
        // Drop runs inside a test's runtime, which cannot block on itself:
        // a thread with a runtime of its own drops the database.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let client = connect(&admin_url()).await.ok()?;
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("could not drop the test database {}", self.name);
        }
    }
}

/// A plain connection, its driver task on the current runtime.
async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// `admin` with its database name replaced by `name`.
fn database_url(admin: &str, name: &str) -> String {
    let (base, query) = match admin.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (admin, String::new()),
    };
    let authority_end = base
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| base[start..].find('/').map(|i| start + i))
        .unwrap_or(base.len());
    format!("{}/{name}{query}", &base[..authority_end])
}

/// Drops the test databases of processes that no longer run.
async fn sweep_leftovers(client: &tokio_postgres::Client) {
    let Ok(rows) = client
        .query(
            "SELECT datname::text FROM pg_database WHERE starts_with(datname, $1)",
            &[&PREFIX],
        )
        .await
    else {
        return;
    };
    for row in rows {
        let Ok(name) = row.try_get::<_, String>(0) else {
            continue;
        };
        let pid = name[PREFIX.len()..]
            .split('_')
            .next()
            .and_then(|pid| pid.parse::<u32>().ok());
        let alive = pid.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }
}

/// The two stores a contract test runs on.
pub enum TestStore {
    Sqlite(Arc<SqliteStore>, tempfile::TempDir),
    Postgres(Arc<PgStore>, PgTestDb),
}

/// Names the store a test that runs on either takes from the environment:
/// `postgres` runs it on a database of its own (the pg-rust suite).
pub const TEST_STORE_VAR: &str = "EXECUTOR_TEST_STORE";

impl TestStore {
    /// The store `EXECUTOR_TEST_STORE` names: a fresh Postgres database
    /// when it is `postgres` (which then must answer), else a SQLite store
    /// in a fresh directory. For the crates above the store whose tests
    /// run on both (`scripts/test`'s pg-rust suite sets the variable).
    pub async fn from_env() -> TestStore {
        if std::env::var(TEST_STORE_VAR).is_ok_and(|v| v == "postgres") {
            let db = PgTestDb::create()
                .await
                .expect("EXECUTOR_TEST_STORE=postgres, but no PostgreSQL answers");
            let store = db.store().await;
            return TestStore::Postgres(store, db);
        }
        let (store, dir) = sqlite_store();
        TestStore::Sqlite(store, dir)
    }

    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            TestStore::Sqlite(store, _) => store.clone(),
            TestStore::Postgres(store, _) => store.clone(),
        }
    }

    /// A second handle on the same database, as another process would open.
    pub async fn reopen(&self) -> Arc<dyn Store> {
        match self {
            TestStore::Sqlite(_, dir) => Arc::new(
                SqliteStore::open(&dir.path().join("executor.db")).expect("reopen sqlite store"),
            ),
            TestStore::Postgres(_, db) => db.store().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn a_test_database_keeps_the_server_and_options() {
        assert_eq!(
            database_url("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            database_url("postgres://u:p@h/db?sslmode=disable", "t1"),
            "postgres://u:p@h/t1?sslmode=disable"
        );
        assert_eq!(database_url("postgres://h", "t1"), "postgres://h/t1");
    }
}
