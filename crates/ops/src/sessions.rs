//! The org's MCP sessions, as records: who opened them, with which client
//! and protocol, and when they were last used.

use executor_store::{PageKey, SessionRecord};
use serde::Serialize;
use utoipa::ToSchema;

use crate::paging::{Listed, PageAsk};
use crate::{Actor, OpResult, Operations};

/// A session as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    /// The account whose token opened it.
    pub account_id: String,
    pub protocol_version: String,
    /// The client's `clientInfo.name`, when it gave one.
    pub client_name: Option<String>,
    pub created_at_ms: i64,
    pub last_activity_at_ms: i64,
    pub terminated_at_ms: Option<i64>,
}

impl From<SessionRecord> for SessionInfo {
    fn from(r: SessionRecord) -> Self {
        SessionInfo {
            client_name: r
                .client_info
                .get("name")
                .and_then(|n| n.as_str())
                .map(|n| n.chars().take(200).collect()),
            id: r.id,
            account_id: r.owner.account_id,
            protocol_version: r.protocol_version,
            created_at_ms: r.created_at_ms,
            last_activity_at_ms: r.last_activity_at_ms,
            terminated_at_ms: r.terminated_at_ms,
        }
    }
}

impl Operations {
    /// The org's sessions, most recently active first.
    pub async fn list_sessions(
        &self,
        actor: &Actor,
        page: &PageAsk,
    ) -> OpResult<Listed<SessionInfo>> {
        let request = page.request()?;
        let rows = self.store().list_sessions(&actor.org_id, &request).await?;
        Ok(page.page(
            rows,
            |r| PageKey {
                started_at_ms: r.last_activity_at_ms,
                id: r.id.clone(),
            },
            SessionInfo::from,
        ))
    }
}
