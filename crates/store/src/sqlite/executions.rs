//! Execution records and paused runs on SQLite: [`ExecutionStore`].

use super::*;

/// The bytes one execution record holds.
const RECORD_BYTES: &str = "length(CAST(code AS BLOB)) + coalesce(length(CAST(result AS BLOB)), 0) \
     + coalesce(length(CAST(error AS BLOB)), 0) + length(CAST(logs AS BLOB)) \
     + length(CAST(tool_calls AS BLOB))";

/// A record `gc_executions` may delete: finished, or paused with its saved
/// state gone (`x` is the executions row).
const TRIMMABLE: &str = "(status <> 'waiting_for_interaction' \
     OR NOT EXISTS (SELECT 1 FROM execution_states s WHERE s.id = x.id))";

#[async_trait]
impl ExecutionStore for SqliteStore {
    async fn insert_execution(&self, x: ExecutionRecord) -> StoreResult<()> {
        self.writer.write(move |conn| {
            let logs = serde_json::to_string(&x.logs).unwrap_or_else(|_| "[]".into());
            let calls = serde_json::to_string(&x.tool_calls).unwrap_or_else(|_| "[]".into());
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
                calls,
                x.started_at_ms,
                x.duration_ms
            ])?;
            // The same savepoint as the record: a run's record and its
            // calls are never apart.
            write_tool_calls(conn, &x)?;
            Ok(())
        })
        .await
    }

    async fn list_executions(
        &self,
        org_id: Option<&str>,
        filter: &ExecutionFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let query = listing::executions(
            listing::Dialect::Sqlite,
            EXECUTION_LIST_COLUMNS,
            org_id,
            filter,
            page,
        );
        self.read_all(
            &query.sql,
            rusqlite::params_from_iter(query.params.iter().map(sql_value)),
            execution_from_row,
        )
    }

    async fn list_paused_executions(&self, org_id: &str) -> StoreResult<Vec<PausedExecutionRow>> {
        self.read_all(
            "SELECT s.id, s.org_id, s.state, s.updated_at FROM execution_states s \
             JOIN executions x ON x.id = s.id \
             WHERE s.org_id = ?1 AND x.status = 'waiting_for_interaction' \
             ORDER BY s.updated_at DESC, s.id DESC LIMIT ?2",
            params![org_id, MAX_PAUSED_LISTED],
            |r| {
                Ok(PausedExecutionRow {
                    id: r.get(0)?,
                    org_id: r.get(1)?,
                    state: r.get(2)?,
                    updated_at_ms: r.get(3)?,
                })
            },
        )
    }

    async fn gc_executions(&self, before_ms: i64) -> StoreResult<u64> {
        self.writer
            .write(move |conn| {
                // Finished records, and paused ones whose saved state is
                // gone (their run can no longer be resumed).
                let doomed = "SELECT id FROM executions WHERE started_at < ?1 \
                     AND (status <> 'waiting_for_interaction' \
                          OR NOT EXISTS (SELECT 1 FROM execution_states s WHERE s.id = executions.id))";
                conn.prepare_cached(&format!(
                    "DELETE FROM tool_calls WHERE execution_id IN ({doomed})"
                ))?
                .execute([before_ms])?;
                let n = conn
                    .prepare_cached(&format!("DELETE FROM executions WHERE id IN ({doomed})"))?
                    .execute([before_ms])?;
                Ok(n as u64)
            })
            .await
    }

    async fn history_bytes_by_org(&self) -> StoreResult<Vec<(String, u64)>> {
        // A scan of the table: on the blocking pool, not a runtime worker.
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT org_id, SUM({RECORD_BYTES}) FROM executions GROUP BY org_id"
            ))?;
            let rows =
                stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn trim_history(&self, org_id: Option<&str>, bytes: u64) -> StoreResult<Trimmed> {
        let org_id = org_id.map(str::to_string);
        self.writer
            .write(move |conn| {
                // The oldest trimmable records whose bytes before them do
                // not yet make `bytes`: together they free at least that.
                let doomed: Vec<(String, i64)> = conn
                    .prepare_cached(&format!(
                        "SELECT id, size FROM ( \
                           SELECT id, size, coalesce(SUM(size) OVER (ORDER BY started_at, id \
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before \
                           FROM (SELECT id, started_at, {RECORD_BYTES} AS size FROM executions x \
                                 WHERE (?1 IS NULL OR org_id = ?1) AND {TRIMMABLE})) \
                         WHERE before < ?2"
                    ))?
                    .query_map(
                        rusqlite::params![org_id, i64::try_from(bytes).unwrap_or(i64::MAX)],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )?
                    .collect::<Result<_, _>>()?;
                let mut calls =
                    conn.prepare_cached("DELETE FROM tool_calls WHERE execution_id = ?1")?;
                let mut records = conn.prepare_cached("DELETE FROM executions WHERE id = ?1")?;
                let mut trimmed = Trimmed::default();
                for (id, size) in doomed {
                    calls.execute([&id])?;
                    trimmed.rows += records.execute([&id])? as u64;
                    trimmed.bytes += size.max(0) as u64;
                }
                Ok(trimmed)
            })
            .await
    }

    async fn get_execution(&self, id: &str) -> StoreResult<Option<ExecutionRecord>> {
        self.read_one(
            &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = ?1"),
            [id],
            execution_from_row,
        )
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
                    StoreError::database("execution claim refused without a cause")
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

    async fn release_execution(&self, id: &str, fence: &Fence) -> StoreResult<()> {
        let (id, fence) = (id.to_string(), fence.clone());
        self.writer
            .write(move |conn| {
                conn.prepare_cached(
                    "UPDATE execution_states SET holder = NULL WHERE id = ?1 AND holder = ?2 AND epoch = ?3",
                )?
                .execute(params![id, fence.node, fence.epoch])?;
                Ok(())
            })
            .await
    }

    async fn load_execution_state(&self, id: &str) -> StoreResult<Option<String>> {
        self.read_one(
            "SELECT state FROM execution_states WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
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
}

/// Replaces the tool-call rows of execution `x` with its record's calls.
fn write_tool_calls(conn: &Connection, x: &ExecutionRecord) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM tool_calls WHERE execution_id = ?1")?
        .execute([&x.id])?;
    let mut insert = conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO tool_calls ({TOOL_CALL_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"
    ))?;
    for call in &x.tool_calls {
        let names = serde_json::to_string(&call.arg_names).unwrap_or_else(|_| "[]".into());
        insert.execute(params![
            call.id,
            call.org_id,
            call.execution_id,
            call.session_id,
            call.account_id,
            call.tool_path,
            call.outcome,
            call.error_code,
            call.policy_action,
            call.policy_rule,
            call.approval,
            call.decided_by,
            call.approval_wait_ms,
            names,
            call.started_at_ms,
            call.duration_ms,
            call.decided_via,
        ])?;
    }
    Ok(())
}
