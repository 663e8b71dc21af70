//! The audit trail of tool calls on Postgres: [`ToolCallStore`]. Rows are
//! written with their execution's record (`group.rs`, one statement).

use async_trait::async_trait;

use super::PgStore;
use crate::columns::*;
use crate::*;

use super::rows::*;

#[async_trait]
impl ToolCallStore for PgStore {
    async fn list_tool_calls(
        &self,
        org_id: &str,
        filter: &ToolCallFilter,
        page: &PageRequest,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let (exact, prefix) = filter.tool_match();
        let (after_time, after_id) = page_after(page);
        let outcome = filter.outcome.map(|o| o.as_str());
        let found = self
            .query(
                &format!(
                    "SELECT {TOOL_CALL_COLUMNS} FROM tool_calls WHERE org_id = $1 \
                       AND ($2::text IS NULL OR tool_path = $2) \
                       AND ($3::text IS NULL OR starts_with(tool_path, $3)) \
                       AND ($4::text IS NULL OR outcome = $4) AND ($5::text IS NULL OR session_id = $5) \
                       AND ($6::text IS NULL OR execution_id = $6) \
                       AND ($7::int8 IS NULL OR started_at >= $7) AND ($8::int8 IS NULL OR started_at < $8) \
                       AND ($9::int8 IS NULL OR (started_at, id) < ($9, $10::text)) \
                     ORDER BY started_at DESC, id DESC LIMIT $11"
                ),
                &[
                    &org_id,
                    &exact,
                    &prefix,
                    &outcome,
                    &filter.session_id,
                    &filter.execution_id,
                    &filter.since_ms,
                    &filter.until_ms,
                    &after_time,
                    &after_id,
                    &i64::from(page.bounded_limit()),
                ],
            )
            .await?;
        rows(found, tool_call_from_row)
    }
}
