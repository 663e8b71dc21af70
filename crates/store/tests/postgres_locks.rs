//! The order in which the Postgres store's batch writes lock session rows.
//! Activity touches and lease releases each update many sessions in one
//! statement; two of them sharing rows must take the rows in one order (by
//! id), or each can hold a row the other waits for (a deadlock Postgres's
//! log showed during mass disposals). Here a row in the middle of a batch
//! is held by another transaction, as a claim in flight would: a batch
//! locking in id order waits there holding only the rows before it.

use executor_store::{AccountStore, SessionStore};
use std::time::Duration;

use executor_store::testing::PgTestDb;
use executor_store::{ElicitationMode, FIRST_EPOCH, SessionRecord, SessionTouch};

/// Whether another transaction holds `id`'s row lock now.
async fn locked(client: &mut tokio_postgres::Client, id: &str) -> bool {
    let tx = client.transaction().await.unwrap();
    let taken = tx
        .query(
            "SELECT id FROM sessions WHERE id = $1 FOR UPDATE NOWAIT",
            &[&id],
        )
        .await;
    tx.rollback().await.unwrap();
    match taken {
        Ok(_) => false,
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE) => true,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_touch_batch_locks_its_sessions_in_id_order() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.store().await;
    let owner = store.ensure_account("lock@l.test", None).await.unwrap();
    // Stored against id order, so a plan that scans the table visits them
    // in the opposite order; the batch is a third of the table, which
    // Postgres matches by scanning it (a mass disposal's batch is so).
    let ids: Vec<String> = (0..1200).rev().map(|i| format!("s{i:04}")).collect();
    for id in &ids {
        let session = SessionRecord {
            id: id.clone(),
            owner: owner.clone(),
            protocol_version: "2025-06-18".into(),
            client_info: serde_json::json!({}),
            client_capabilities: serde_json::json!({}),
            elicitation_mode: ElicitationMode::Native,
            created_at_ms: 1,
            last_activity_at_ms: 1,
            terminated_at_ms: None,
        };
        store.insert_session(session, "node_a").await.unwrap();
    }
    let mut claim = db.raw().await;
    let claim_tx = claim.transaction().await.unwrap();
    claim_tx
        .query("SELECT id FROM sessions WHERE id = 's0599' FOR UPDATE", &[])
        .await
        .unwrap();

    let touches: Vec<SessionTouch> = ids
        .iter()
        .step_by(3)
        .map(|id| SessionTouch {
            id: id.clone(),
            epoch: FIRST_EPOCH,
            at_ms: 7,
        })
        .collect();
    let batch = {
        let store = store.clone();
        tokio::spawn(async move { store.touch_sessions(touches).await })
    };
    let mut probe = db.raw().await;
    // The batch reaches s0599 and waits there, holding the rows before it.
    let mut waiting = false;
    for _ in 0..100 {
        if locked(&mut probe, "s0302").await {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(waiting, "the batch never took s0302");
    for after in ["s0602", "s0902", "s1199"] {
        assert!(
            !locked(&mut probe, after).await,
            "{after} is locked while the batch waits at s0599: not in id order"
        );
    }
    claim_tx.commit().await.unwrap();
    batch.await.unwrap().unwrap();
    let touched = store.get_session("s1199").await.unwrap().unwrap();
    assert_eq!(touched.last_activity_at_ms, 7);
}
