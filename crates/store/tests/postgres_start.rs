//! The Postgres store's start checks (SPEC §11): what it refuses before it
//! writes anything, in words an operator can act on, never with the
//! password of the URL; and migrations when several nodes start at once.

use executor_store::secrets::SecretKey;
use executor_store::testing::PgTestDb;
use executor_store::{PgOptions, PgStore, StoreError};

async fn refusal(url: &str) -> String {
    match PgStore::open(url, PgOptions::default()).await {
        Err(StoreError::Refused(refusal)) => refusal.to_string(),
        Err(other) => panic!("not a refusal: {other}"),
        Ok(_) => panic!("opened {url}"),
    }
}

#[tokio::test]
async fn another_programs_database_is_refused_untouched() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let client = db.raw().await;
    client
        .batch_execute("CREATE TABLE invoices (id int)")
        .await
        .unwrap();
    let message = refusal(&db.url).await;
    assert!(message.contains("invoices"), "{message}");
    assert!(message.contains("another program"), "{message}");
    let ours: bool = client
        .query_one("SELECT to_regclass('executor_schema') IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(ours, "nothing was created");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    drop(db.store().await);
    db.raw()
        .await
        .batch_execute("UPDATE executor_schema SET version = 999")
        .await
        .unwrap();
    let message = refusal(&db.url).await;
    assert!(message.contains("schema version 999"), "{message}");
    assert!(message.contains("upgrade executor"), "{message}");
}

#[tokio::test]
async fn a_read_only_database_is_refused() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    drop(db.store().await);
    let name = db.url.rsplit('/').next().unwrap().to_string();
    db.raw()
        .await
        .batch_execute(&format!(
            "ALTER DATABASE {name} SET default_transaction_read_only = on"
        ))
        .await
        .unwrap();
    let message = refusal(&db.url).await;
    assert!(message.contains("cannot write"), "{message}");
}

#[tokio::test]
async fn unreachable_and_missing_databases_say_so_without_the_password() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    // A server that is not there.
    let message = refusal("postgres://executor:hunter2@127.0.0.1:1/executor").await;
    assert!(
        message.contains("cannot open the Postgres store"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("executor:***@127.0.0.1:1"), "{message}");
    // A database that does not exist on a server that is.
    let missing = format!("{}_missing", db.url);
    let message = refusal(&missing).await;
    assert!(message.contains("createdb"), "{message}");
    // Not a URL at all.
    let message = refusal("postgres://[nope").await;
    assert!(message.contains("cannot open"), "{message}");
}

/// Three nodes starting at once on a new database: one applies each
/// migration, all open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move { PgStore::open(&url, PgOptions { pool_size: 2 }).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().expect("every node opens");
    }
    let version: i64 = db
        .raw()
        .await
        .query_one("SELECT version FROM executor_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert!(version >= 1);
}

fn key(byte: u8) -> SecretKey {
    SecretKey::from_env_value(&format!("{byte:02x}").repeat(32)).unwrap()
}

/// Every node needs the key the store was set up with; one with another
/// key is refused at start, saying so, whichever node came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_secret_key_is_refused() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (first, second) = (db.store().await, db.store().await);
    let (one, two) = (key(1), key(2));
    let (a, b) = tokio::join!(first.check_secret_key(&one), second.check_secret_key(&two));
    // Racing first starts with different keys: exactly one key wins.
    let refused = [&a, &b].iter().filter(|r| r.is_err()).count();
    assert_eq!(refused, 1, "{a:?} {b:?}");
    let winner = if a.is_ok() { 1 } else { 2 };
    first.check_secret_key(&key(winner)).await.unwrap();
    second.check_secret_key(&key(winner)).await.unwrap();
    match first.check_secret_key(&key(9)).await {
        Err(StoreError::Refused(refusal)) => {
            let message = refusal.to_string();
            assert!(message.contains("EXECUTOR_SECRET_KEY"), "{message}");
            assert!(message.contains("same"), "{message}");
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_shared_store_never_makes_up_a_key() {
    if std::env::var_os("EXECUTOR_SECRET_KEY").is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let error = SecretKey::load_existing(dir.path())
        .unwrap_err()
        .to_string();
    assert!(error.contains("EXECUTOR_SECRET_KEY"), "{error}");
    assert!(!dir.path().join("secret.key").exists());
    // An existing key file is used.
    SecretKey::load_or_create(dir.path()).unwrap();
    SecretKey::load_existing(dir.path()).unwrap();
}
