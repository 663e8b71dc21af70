//! The audit trail of tool calls on Postgres: [`ToolCallStore`]. Rows are
//! written with their execution's record (`group.rs`, one statement).

use async_trait::async_trait;

use super::PgStore;
use crate::columns::*;
use crate::listing;
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
        let query = listing::tool_calls(
            listing::Dialect::Postgres,
            TOOL_CALL_COLUMNS,
            org_id,
            filter,
            page,
        );
        let found = self.query(&query.sql, &pg_params(&query.params)).await?;
        rows(found, tool_call_from_row)
    }
}
