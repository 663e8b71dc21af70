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
        let query = listing::tool_calls(
            listing::Dialect::Sqlite,
            TOOL_CALL_COLUMNS,
            org_id,
            filter,
            page,
        );
        self.read_all(
            &query.sql,
            rusqlite::params_from_iter(query.params.iter().map(sql_value)),
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
        decided_via: r.get(16)?,
    })
}
