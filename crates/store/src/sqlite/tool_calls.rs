//! The audit trail of tool calls on SQLite: [`ToolCallStore`]. Rows are
//! written with their execution's record (`executions.rs`).

use super::*;

#[async_trait]
impl ToolCallStore for SqliteStore {
    async fn list_tool_calls(
        &self,
        org_id: &str,
        filter: &ToolCallFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let (exact, prefix) = filter.tool_match();
        let (after_time, after_id) = page_after(page);
        self.read_all(
            &format!(
                "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE org_id = ?1 \
                   AND (?2 IS NULL OR tool_path = ?2) \
                   AND (?3 IS NULL OR substr(tool_path, 1, length(?3)) = ?3) \
                   AND (?4 IS NULL OR outcome = ?4) AND (?5 IS NULL OR session_id = ?5) \
                   AND (?6 IS NULL OR execution_id = ?6) \
                   AND (?7 IS NULL OR started_at >= ?7) AND (?8 IS NULL OR started_at < ?8) \
                   AND (?9 IS NULL OR started_at < ?9 OR (started_at = ?9 AND id < ?10)) \
                 ORDER BY started_at DESC, id DESC LIMIT ?11"
            ),
            params![
                org_id,
                exact,
                prefix,
                filter.outcome,
                filter.session_id,
                filter.execution_id,
                filter.since_ms,
                filter.until_ms,
                after_time,
                after_id,
                page.bounded_limit()
            ],
            tool_call_from_row,
        )
    }
}

fn tool_call_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolCallRecord> {
    let names: String = r.get(13)?;
    Ok(ToolCallRecord {
        id: r.get(0)?,
        org_id: r.get(1)?,
        execution_id: r.get(2)?,
        session_id: r.get(3)?,
        account_id: r.get(4)?,
        tool_path: r.get(5)?,
        outcome: r.get(6)?,
        error_code: r.get(7)?,
        policy_action: r.get(8)?,
        policy_rule: r.get(9)?,
        approval: r.get(10)?,
        decided_by: r.get(11)?,
        approval_wait_ms: r.get(12)?,
        arg_names: serde_json::from_str(&names).unwrap_or_default(),
        started_at_ms: r.get(14)?,
        duration_ms: r.get(15)?,
    })
}
