//! Execution records and paused runs on Postgres: [`ExecutionStore`].

use async_trait::async_trait;

use super::notices::DECISIONS_CHANNEL;
use super::{PgStore, col};
use crate::columns::*;
use crate::leases::ExecutionRefusal;
use crate::listing;
use crate::*;

use super::rows::*;

/// The bytes one execution record holds.
const RECORD_BYTES: &str = "octet_length(code) + coalesce(octet_length(result), 0) \
     + coalesce(octet_length(error), 0) + octet_length(logs) + octet_length(tool_calls)";

/// A record `gc_executions` may delete: finished, or paused with its saved
/// state gone (`x` is the executions row).
const TRIMMABLE: &str = "(status <> 'waiting_for_interaction' \
     OR NOT EXISTS (SELECT 1 FROM execution_states s WHERE s.id = x.id))";

/// (rows, bytes) of a trim's one answer row.
pub(super) fn trimmed(row: Option<&tokio_postgres::Row>) -> StoreResult<Trimmed> {
    let Some(row) = row else {
        return Ok(Trimmed::default());
    };
    Ok(Trimmed {
        rows: col::<i64>(row, 0)?.max(0) as u64,
        bytes: col::<i64>(row, 1)?.max(0) as u64,
    })
}

#[async_trait]
impl ExecutionStore for PgStore {
    async fn sync(&self) -> StoreResult<()> {
        // A transaction that wrote WAL waits, on the main pool, for its
        // commit's flush, which covers every earlier commit (the unflushed
        // pool's included). A transactional logical message is such a
        // write that touches no row (an id alone writes no WAL before the
        // commit, and Postgres commits that asynchronously).
        self.query(
            "SELECT pg_logical_emit_message(true, 'executor.sync', '')",
            &[],
        )
        .await?;
        Ok(())
    }

    async fn save_execution_state(
        &self,
        id: &str,
        org_id: &str,
        state: String,
        fence: Option<&Fence>,
    ) -> StoreResult<()> {
        // An upsert, not a replace: a decision `executor resume` posted
        // meanwhile stays for the run to take.
        let Some(fence) = fence else {
            self.execute(
                "INSERT INTO execution_states (id, org_id, state, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id) DO UPDATE SET org_id = excluded.org_id, state = excluded.state, \
                 updated_at = excluded.updated_at",
                &[&id, &org_id, &state, &now_ms()],
            )
            .await?;
            return Ok(());
        };
        // The row lock of the conflicting row orders this against a claim.
        let saved = self
            .execute(
                "INSERT INTO execution_states (id, org_id, state, updated_at, holder, epoch) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (id) DO UPDATE SET org_id = excluded.org_id, state = excluded.state, \
                 updated_at = excluded.updated_at \
                 WHERE execution_states.holder = excluded.holder AND execution_states.epoch = excluded.epoch",
                &[&id, &org_id, &state, &now_ms(), &fence.node, &fence.epoch],
            )
            .await?;
        if saved == 1 {
            Ok(())
        } else {
            Err(StoreError::Fenced { id: id.to_string() })
        }
    }

    async fn claim_execution(&self, id: &str, node: &str) -> StoreResult<ExecutionClaim> {
        // As `claim_session`: the row lock orders racing claimers, and a
        // refusal whose read finds the way clear claims again.
        for _ in 0..3 {
            let claimed = self
                .query_opt(
                    "UPDATE execution_states SET holder = $2, epoch = epoch + 1 \
                     WHERE id = $1 \
                       AND EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                       AND (holder IS NULL OR holder = $2 OR NOT EXISTS \
                            (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= executor_now_ms())) \
                     RETURNING epoch, calling",
                    &[&id, &node],
                )
                .await?;
            if let Some(row) = claimed {
                return Ok(ExecutionClaim::Claimed {
                    fence: Fence {
                        node: node.to_string(),
                        epoch: col(&row, 0)?,
                    },
                    calling: col(&row, 1)?,
                });
            }
            let found = self
                .query_opt(
                    "SELECT holder, (SELECT url FROM nodes n WHERE n.id = execution_states.holder), \
                       EXISTS (SELECT 1 FROM nodes n WHERE n.id = execution_states.holder AND n.alive_until >= executor_now_ms()), \
                       EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND alive_until >= executor_now_ms()) \
                     FROM execution_states WHERE id = $1",
                    &[&id, &node],
                )
                .await?;
            let found = match found {
                Some(row) => Some(ExecutionRefusal {
                    holder: col(&row, 0)?,
                    holder_url: col(&row, 1)?,
                    holder_alive: col(&row, 2)?,
                    caller_alive: col(&row, 3)?,
                }),
                None => None,
            };
            if let Some(outcome) = ExecutionRefusal::outcome(found, node) {
                return Ok(outcome);
            }
        }
        Err(StoreError::Busy)
    }

    async fn advance_execution(&self, id: &str, fence: &Fence, index: i64) -> StoreResult<()> {
        let moved = self
            .execute(
                "UPDATE execution_states SET calling = GREATEST(calling, $4) \
                 WHERE id = $1 AND holder = $2 AND epoch = $3",
                &[&id, &fence.node, &fence.epoch, &index],
            )
            .await?;
        if moved == 1 {
            Ok(())
        } else {
            Err(StoreError::Fenced { id: id.to_string() })
        }
    }

    async fn release_execution(&self, id: &str, fence: &Fence) -> StoreResult<()> {
        self.execute(
            "UPDATE execution_states SET holder = NULL WHERE id = $1 AND holder = $2 AND epoch = $3",
            &[&id, &fence.node, &fence.epoch],
        )
        .await?;
        Ok(())
    }

    async fn load_execution_state(&self, id: &str) -> StoreResult<Option<String>> {
        match self
            .query_opt("SELECT state FROM execution_states WHERE id = $1", &[&id])
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn post_execution_decision(&self, id: &str, action: &str) -> StoreResult<bool> {
        // The notice goes out with the commit, so the node holding the run
        // takes the decision at once instead of at its next poll.
        let posted = self
            .query_opt(
                &format!(
                    "WITH posted AS (UPDATE execution_states SET decision = $2 \
                       WHERE id = $1 AND decision IS NULL RETURNING id) \
                     SELECT pg_notify('{DECISIONS_CHANNEL}', id) FROM posted"
                ),
                &[&id, &action],
            )
            .await?;
        Ok(posted.is_some())
    }

    async fn take_execution_decision(&self, id: &str) -> StoreResult<Option<String>> {
        // Read and clear in one statement (the row lock makes one taker):
        // Postgres 15 has no `RETURNING OLD`, so the old value comes from a
        // locking CTE.
        match self
            .query_opt(
                "WITH posted AS (SELECT id, decision FROM execution_states \
                   WHERE id = $1 AND decision IS NOT NULL FOR UPDATE) \
                 UPDATE execution_states e SET decision = NULL FROM posted \
                 WHERE e.id = posted.id RETURNING posted.decision",
                &[&id],
            )
            .await?
        {
            Some(row) => Ok(Some(col(&row, 0)?)),
            None => Ok(None),
        }
    }

    async fn insert_execution(&self, x: ExecutionRecord) -> StoreResult<()> {
        // Grouped with the records of executions finishing at the same
        // time (`group.rs`); awaited until its own row is committed.
        self.execution_records().write(x).await
    }

    async fn insert_execution_deferred(&self, x: ExecutionRecord) -> StoreResult<()> {
        // The same, on the unflushed pool: committed, not yet flushed.
        // The caller's next flushed write (its answer's event) flushes the
        // WAL past this commit.
        self.execution_records_deferred().write(x).await
    }

    async fn list_executions(
        &self,
        org_id: Option<&str>,
        filter: &ExecutionFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let query = listing::executions(
            listing::Dialect::Postgres,
            EXECUTION_LIST_COLUMNS,
            org_id,
            filter,
            page,
        );
        let found = self.query(&query.sql, &pg_params(&query.params)).await?;
        rows(found, execution_from_row)
    }

    async fn list_paused_executions(&self, org_id: &str) -> StoreResult<Vec<PausedExecutionRow>> {
        let found = self
            .query(
                "SELECT s.id, s.org_id, s.state, s.updated_at FROM execution_states s \
                 JOIN executions x ON x.id = s.id \
                 WHERE s.org_id = $1 AND x.status = 'waiting_for_interaction' \
                 ORDER BY s.updated_at DESC, s.id DESC LIMIT $2",
                &[&org_id, &i64::from(MAX_PAUSED_LISTED)],
            )
            .await?;
        rows(found, |r| {
            Ok(PausedExecutionRow {
                id: col(r, 0)?,
                org_id: col(r, 1)?,
                state: col(r, 2)?,
                updated_at_ms: col(r, 3)?,
            })
        })
    }

    async fn gc_executions(&self, before_ms: i64) -> StoreResult<u64> {
        // One statement: the records and their calls go together. Finished
        // records, and paused ones whose saved state is gone (their run can
        // no longer be resumed).
        let gone = self
            .query(
                "WITH doomed AS (DELETE FROM executions x WHERE started_at < $1 \
                   AND (status <> 'waiting_for_interaction' \
                        OR NOT EXISTS (SELECT 1 FROM execution_states s WHERE s.id = x.id)) \
                   RETURNING id), \
                 calls AS (DELETE FROM tool_calls WHERE execution_id IN (SELECT id FROM doomed)) \
                 SELECT count(*) FROM doomed",
                &[&before_ms],
            )
            .await?;
        let n: i64 = match gone.first() {
            Some(row) => col(row, 0)?,
            None => 0,
        };
        Ok(n as u64)
    }

    async fn history_bytes_by_org(&self) -> StoreResult<Vec<(String, u64)>> {
        let rows = self
            .query(
                &format!(
                    "SELECT org_id, SUM({RECORD_BYTES})::bigint FROM executions GROUP BY org_id"
                ),
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((col(row, 0)?, col::<i64>(row, 1)?.max(0) as u64)))
            .collect()
    }

    async fn trim_history(&self, org_id: Option<&str>, bytes: u64) -> StoreResult<Trimmed> {
        // One statement: the oldest trimmable records whose bytes before
        // them do not yet make `bytes`, and their calls.
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let rows = self
            .query(
                &format!(
                    "WITH sized AS (SELECT id, started_at, {RECORD_BYTES} AS size \
                       FROM executions x WHERE ($1::text IS NULL OR org_id = $1) AND {TRIMMABLE}), \
                     ranked AS (SELECT id, size, coalesce(SUM(size) OVER (ORDER BY started_at, id \
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before FROM sized), \
                     doomed AS (DELETE FROM executions WHERE id IN \
                       (SELECT id FROM ranked WHERE before < $2) RETURNING id), \
                     calls AS (DELETE FROM tool_calls WHERE execution_id IN (SELECT id FROM doomed)) \
                     SELECT count(*), coalesce(SUM(r.size), 0)::bigint FROM doomed d JOIN ranked r USING (id)"
                ),
                &[&org_id, &bytes],
            )
            .await?;
        let trimmed = trimmed(rows.first())?;
        if trimmed.rows > 0 {
            self.vacuum("executions, tool_calls").await;
        }
        Ok(trimmed)
    }

    async fn get_execution(&self, id: &str) -> StoreResult<Option<ExecutionRecord>> {
        self.query_opt(
            &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = $1"),
            &[&id],
        )
        .await?
        .as_ref()
        .map(execution_from_row)
        .transpose()
    }
}
