//! Notices between processes (SPEC §10): a commit on one handle of a
//! Postgres store is pushed to every other handle's subscribers, a write
//! that changes nothing pushes nothing, and a lost listening connection is
//! reported (`Lagged`) and comes back.

use executor_store::{CatalogStore, ExecutionStore, NodeStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use executor_store::testing::{PgTestDb, sqlite_store};
use executor_store::*;
use tokio::sync::broadcast::Receiver;

async fn next(rx: &mut Receiver<Notice>) -> Notice {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a notice within 10 s")
        .expect("the channel is open")
}

fn integration(namespace: &str) -> IntegrationRecord {
    IntegrationRecord {
        org_id: "org_n".into(),
        namespace: namespace.into(),
        kind: "openapi".into(),
        source: "s".into(),
        base_url: None,
        tool_count: 0,
        document: "{}".into(),
        updated_at_ms: 1,
        revision: 0,
        search_index: None,
    }
}

#[tokio::test]
async fn sqlite_has_no_push_and_says_so() {
    let (store, _dir) = sqlite_store();
    assert!(store.subscribe().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_on_one_handle_reach_the_subscribers_of_another() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (writer, reader) = (db.store().await, db.store().await);
    let mut rx = reader.subscribe().expect("postgres pushes");
    assert_eq!(next(&mut rx).await, Notice::Lagged, "listening from here");

    writer.upsert_integration(integration("a")).await.unwrap();
    assert_eq!(
        next(&mut rx).await,
        Notice::Catalog {
            org_id: "org_n".into()
        }
    );
    writer
        .save_execution_state("exec_n", "org_n", "{}".into(), None)
        .await
        .unwrap();
    assert!(
        writer
            .post_execution_decision("exec_n", "accept")
            .await
            .unwrap()
    );
    assert_eq!(
        next(&mut rx).await,
        Notice::Decision {
            execution_id: "exec_n".into()
        }
    );
    // Writes that change nothing notify nothing: the next notice is the
    // removal that did happen.
    assert!(
        !writer
            .post_execution_decision("exec_n", "decline")
            .await
            .unwrap()
    );
    assert!(
        !writer
            .post_execution_decision("exec_none", "accept")
            .await
            .unwrap()
    );
    assert!(!writer.remove_integration("org_n", "missing").await.unwrap());
    assert!(writer.remove_integration("org_n", "a").await.unwrap());
    assert_eq!(
        next(&mut rx).await,
        Notice::Catalog {
            org_id: "org_n".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listening_connection_says_lagged_and_comes_back() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.store().await;
    let mut rx = store.subscribe().expect("postgres pushes");
    assert_eq!(next(&mut rx).await, Notice::Lagged);
    let (admin, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let killed = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'executor-listen' AND datname = current_database()",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(killed.len(), 1, "one listening connection per store");
    assert_eq!(next(&mut rx).await, Notice::Lagged, "the loss is reported");
    // Listening again: wait for its own Lagged, then a write comes through.
    assert_eq!(next(&mut rx).await, Notice::Lagged, "and listening again");
    store.upsert_integration(integration("b")).await.unwrap();
    assert_eq!(
        next(&mut rx).await,
        Notice::Catalog {
            org_id: "org_n".into()
        }
    );
}

/// A node keeps each org's catalog version until a catalog notice moves
/// it: a subscriber that hears the notice (the tool-list refresh) must
/// read the version the notice announces, never the one kept before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_notice_is_heard_after_the_version_it_announces_is_readable() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (writer, reader) = (db.store().await, db.store().await);
    let mut rx = reader.subscribe().expect("postgres pushes");
    assert_eq!(next(&mut rx).await, Notice::Lagged, "listening from here");
    for expected in 1..=3 {
        // Read twice: the second read is the kept one.
        assert_eq!(reader.catalog_version("org_n").await.unwrap(), expected - 1);
        assert_eq!(reader.catalog_version("org_n").await.unwrap(), expected - 1);
        writer
            .upsert_integration(integration(&format!("ns{expected}")))
            .await
            .unwrap();
        assert_eq!(
            next(&mut rx).await,
            Notice::Catalog {
                org_id: "org_n".into()
            }
        );
        assert_eq!(
            reader.catalog_version("org_n").await.unwrap(),
            expected,
            "the notice came before the version it announces"
        );
    }
    // A store's own writes never wait for their notice to come back: the
    // writer, listening and holding the version, reads its write at once.
    let mut writer_rx = writer.subscribe().expect("postgres pushes");
    assert_eq!(next(&mut writer_rx).await, Notice::Lagged);
    assert_eq!(writer.catalog_version("org_n").await.unwrap(), 3);
    assert!(writer.remove_integration("org_n", "ns1").await.unwrap());
    assert_eq!(writer.catalog_version("org_n").await.unwrap(), 4);
}

/// What an execution reads: another process's integration write is seen
/// as soon as it commits, before its notice arrives (the CLI adds an
/// integration, the agent calls it at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_catalog_version_is_never_a_kept_one() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (writer, reader) = (db.store().await, db.store().await);
    let mut rx = reader.subscribe().expect("postgres pushes");
    assert_eq!(next(&mut rx).await, Notice::Lagged, "listening from here");
    for expected in 1..=20 {
        // Kept from here until the notice.
        reader.catalog_version("org_c").await.unwrap();
        writer
            .upsert_integration(IntegrationRecord {
                org_id: "org_c".into(),
                ..integration(&format!("ns{expected}"))
            })
            .await
            .unwrap();
        // Not waiting for the notice: read at once.
        assert_eq!(
            reader.committed_catalog_version("org_c").await.unwrap(),
            expected
        );
    }
}

/// Readers racing a writer (and keeping the version meanwhile, as tool
/// lists do) each read at least the version committed before they asked:
/// the sequential test above, with the reads racing the commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_committed_reads_each_see_what_was_committed_before_they_asked() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let (writer, reader) = (db.store().await, db.store().await);
    let committed = Arc::new(AtomicI64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (reader, committed, done) = (reader.clone(), committed.clone(), done.clone());
            tokio::spawn(async move {
                let mut reads = 0;
                // At least one read, however late this task first runs.
                while reads == 0 || !done.load(Ordering::Acquire) {
                    // Tool lists read the kept version meanwhile.
                    reader.catalog_version("org_r").await.unwrap();
                    let before = committed.load(Ordering::Acquire);
                    let read = reader.committed_catalog_version("org_r").await.unwrap();
                    assert!(read >= before, "read {read} after {before} had committed");
                    reads += 1;
                    tokio::task::yield_now().await;
                }
                reads
            })
        })
        .collect();
    for version in 1..=30 {
        writer
            .upsert_integration(IntegrationRecord {
                org_id: "org_r".into(),
                ..integration(&format!("ns{version}"))
            })
            .await
            .unwrap();
        committed.store(version, Ordering::Release);
        tokio::task::yield_now().await;
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.await.unwrap() > 0, "every reader read");
    }
    assert_eq!(reader.committed_catalog_version("org_r").await.unwrap(), 30);
}
