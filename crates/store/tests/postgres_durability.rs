//! A deferred execution record (`Store::insert_execution_deferred`) on
//! Postgres: committed — every connection sees it — when the call returns,
//! and durable once the writer's next flushed write commits (its answer's
//! event) or `Store::sync` returns. The WAL is flushed in order, so a flush
//! up to a later commit covers the record's; these tests read the server's
//! WAL positions to check that it did.

use executor_store::{ExecutionStore, SessionStore};
use std::sync::Arc;

use executor_store::testing::PgTestDb;
use executor_store::{EventRecord, ExecutionRecord, ExecutionStatus, LogBounds, PgStore};

fn record(id: &str) -> ExecutionRecord {
    ExecutionRecord {
        id: id.into(),
        session_id: Some("s".into()),
        account_id: "acc".into(),
        org_id: "org".into(),
        code: "return 1".into(),
        status: ExecutionStatus::Completed,
        result: Some(serde_json::json!(1)),
        error: None,
        logs: Vec::new(),
        tool_calls: Vec::new(),
        started_at_ms: 1,
        duration_ms: 1,
    }
}

/// The WAL position after everything inserted so far, and the position
/// flushed to disk, as the server reports them now.
async fn wal(client: &tokio_postgres::Client) -> (u64, u64) {
    let row = client
        .query_one(
            "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint, \
                    (pg_current_wal_flush_lsn() - '0/0')::bigint",
            &[],
        )
        .await
        .unwrap();
    (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64)
}

/// A store on a database of the test's own, and a plain connection to
/// watch the server with (None: no Postgres, the test is skipped).
async fn fresh() -> Option<(PgTestDb, Arc<PgStore>, tokio_postgres::Client)> {
    let db = PgTestDb::create().await?;
    let store = db.store().await;
    let probe = db.raw().await;
    Some((db, store, probe))
}

async fn visible(client: &tokio_postgres::Client, id: &str) -> bool {
    client
        .query_opt("SELECT id FROM executions WHERE id = $1", &[&id])
        .await
        .unwrap()
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_record_is_durable_with_the_answers_event() {
    let Some((_db, store, probe)) = fresh().await else {
        return;
    };

    store.insert_execution_deferred(record("x1")).await.unwrap();
    assert!(visible(&probe, "x1").await, "committed when written");
    let (after_record, _) = wal(&probe).await;

    let answer = EventRecord {
        session_id: "s".into(),
        stream_id: "st".into(),
        seq: 1,
        data: "{}".into(),
        undelivered: true,
        created_at_ms: 1,
    };
    store
        .append_event(answer, LogBounds::DEFAULT, None)
        .await
        .unwrap();
    let (_, flushed) = wal(&probe).await;
    assert!(
        flushed >= after_record,
        "the event's flush covers the record: flushed {flushed:#x}, record at {after_record:#x}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_makes_a_deferred_record_durable() {
    let Some((_db, store, probe)) = fresh().await else {
        return;
    };

    for round in 0..20 {
        let id = format!("x{round}");
        store.insert_execution_deferred(record(&id)).await.unwrap();
        assert!(visible(&probe, &id).await, "committed when written");
        let (after_record, _) = wal(&probe).await;
        store.sync().await.unwrap();
        let (_, flushed) = wal(&probe).await;
        assert!(
            flushed >= after_record,
            "round {round}: flushed {flushed:#x}, record at {after_record:#x}"
        );
    }
    // Deferred and flushed writes of one id are one record, the later one.
    let failed = ExecutionRecord {
        status: ExecutionStatus::Error,
        error: Some("boom".into()),
        result: None,
        ..record("x0")
    };
    store.insert_execution(failed.clone()).await.unwrap();
    assert_eq!(store.get_execution("x0").await.unwrap(), Some(failed));
}
