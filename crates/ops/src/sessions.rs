//! The org's MCP sessions, as records: who opened them, with which client
//! and protocol, and when they were last used; and ending one.
//!
//! A session lives in the store (its record) and, while in use, as a
//! runtime in the memory of the node that holds it. Ending one must reach
//! both: a server hands its operations a [`SessionControl`], which ends the
//! session in its own memory at once and tells the other nodes. A process
//! without one (a CLI command) marks the record terminated and publishes
//! `SessionGone`, which the nodes of a Postgres store act on; the embedded
//! SQLite store carries no notices between processes, so a server on the
//! same data dir keeps serving a session it holds in memory until it lets
//! the runtime go (see `executor sessions terminate --help`).

use std::future::Future;
use std::pin::Pin;

use executor_store::{Notice, PageKey, SessionRecord, now_ms};
use serde::Serialize;
use utoipa::ToSchema;

use crate::paging::{Listed, PageAsk};
use crate::{Actor, OpError, OpResult, Operations};

/// What [`SessionControl::terminate`] returns.
pub type SessionFuture<'a> = Pin<Box<dyn Future<Output = OpResult<()>> + Send + 'a>>;

/// Ends sessions where they live: implemented by a server over its live
/// sessions (the binary's `serve`, over `executor_sessions::Sessions`), so
/// that this crate depends on no transport.
pub trait SessionControl: Send + Sync {
    /// Ends the session: its record is marked terminated, its runtime on
    /// this node (if any) is disposed and its streams end, and the other
    /// nodes are told to do the same. The caller has checked that the
    /// session is the actor's org's.
    fn terminate<'a>(&'a self, session_id: &'a str) -> SessionFuture<'a>;
}

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
    /// Ends one of the org's sessions at once: its next request gets 404
    /// (terminated) and its open streams end. Another org's session, like
    /// one that does not exist, is not found. Ending a session already
    /// terminated does nothing more.
    pub async fn terminate_session(&self, actor: &Actor, session_id: &str) -> OpResult<()> {
        let store = self.store();
        let record = store
            .get_session(session_id)
            .await?
            .filter(|r| r.owner.org_id == actor.org_id)
            .ok_or_else(|| OpError::not_found(format_args!("session {session_id:?}")))?;
        if let Some(control) = &self.parts.sessions {
            // Also for a record already terminated: a server may still hold
            // one that a CLI process ended on a SQLite store.
            return control.terminate(&record.id).await;
        }
        if record.terminated_at_ms.is_none() {
            store.terminate_session(&record.id, now_ms()).await?;
        }
        let gone = Notice::SessionGone {
            session_id: record.id,
        };
        if let Err(e) = store.publish(gone).await {
            tracing::warn!(error = %e, "could not announce a terminated session");
        }
        Ok(())
    }

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
