//! Tool lists: read from an upstream at `add` ([`discover`]) and again
//! while the integration is in use ([`list_tools`], when the pool re-syncs:
//! the upstream says its tools changed, a call names a tool it no longer
//! has, and every `resync_every`). A changed list is written to the store
//! ([`store_if_changed`]), which bumps the org's catalog version: running
//! sessions get `tools/list_changed`.

use executor_outbound::{Credential, HttpClient};
use executor_store::{Store, now_ms};
use rmcp::model::Tool;
use serde_json::Value;

use crate::connect::{self, Session};
use crate::env::EnvSecrets;
use crate::error::OpenError;
use crate::naming::catalog_names;
use crate::stored::{self, Endpoint, State, UpstreamTool};

/// What an upstream answered at `add`.
pub enum Discovery {
    Ready(Vec<UpstreamTool>),
    /// It asked for an OAuth login (with this `WWW-Authenticate`
    /// challenge): stored with no tools until then.
    NeedsLogin {
        challenge: Option<String>,
    },
}

/// Opens a session with the upstream at `endpoint` and lists its tools.
/// Err says why not (for the operator).
pub async fn discover(
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    http: &HttpClient,
    secrets: EnvSecrets<'_>,
) -> Result<Discovery, String> {
    let session = match connect::open(namespace, endpoint, credential, http, secrets, None).await {
        Ok(session) => session,
        Err(OpenError::NeedsLogin(challenge)) => return Ok(Discovery::NeedsLogin { challenge }),
        Err(e) => return Err(e.to_string()),
    };
    // Some servers open sessions for anyone and ask for a login at the
    // first real request.
    let listed = session.service.list_all_tools().await;
    let _ = session.service.cancel().await;
    match listed {
        Ok(listed) => Ok(Discovery::Ready(upstream_tools(listed))),
        Err(e) if e.auth_challenge().is_some() => Ok(Discovery::NeedsLogin {
            challenge: e.auth_challenge().map(str::to_string),
        }),
        Err(e) => Err(format!("the MCP server did not list its tools: {e}")),
    }
}

/// Every tool the session's upstream lists (all pages), named for the
/// catalog.
pub(crate) async fn list_tools(session: &Session) -> Result<Vec<UpstreamTool>, String> {
    let listed = session
        .service
        .list_all_tools()
        .await
        .map_err(|e| format!("the MCP server did not list its tools: {e}"))?;
    Ok(upstream_tools(listed))
}

fn upstream_tools(listed: Vec<Tool>) -> Vec<UpstreamTool> {
    let names = catalog_names(listed.iter().map(|t| t.name.as_ref()));
    listed
        .into_iter()
        .zip(names)
        .map(|(tool, name)| UpstreamTool {
            name,
            destructive: tool
                .annotations
                .as_ref()
                .and_then(|a| a.destructive_hint)
                .unwrap_or(false),
            description: tool.description.map(|d| d.into_owned()).or(tool.title),
            input_schema: Value::Object((*tool.input_schema).clone()),
            output_schema: tool.output_schema.map(|s| Value::Object((*s).clone())),
            upstream_name: tool.name.into_owned(),
        })
        .collect()
}

/// Writes `tools` as `org_id`'s integration `namespace` at `endpoint` when
/// they differ from the stored ones; true when written.
pub(crate) async fn store_if_changed(
    store: &dyn Store,
    org_id: &str,
    namespace: &str,
    endpoint: &Endpoint,
    tools: &[UpstreamTool],
) -> Result<bool, String> {
    let records = store
        .list_integrations(org_id, true)
        .await
        .map_err(|e| e.to_string())?;
    let Some(mut record) = records.into_iter().find(|r| r.namespace == namespace) else {
        return Ok(false);
    };
    // Only the integration this pool serves: one added again with another
    // server since is that server's.
    if record.source != endpoint.source() {
        return Ok(false);
    }
    let document = stored::store(namespace, endpoint, State::Ready, tools);
    if document == record.document {
        return Ok(false);
    }
    record.document = document;
    record.tool_count = tools.len() as i64;
    record.updated_at_ms = now_ms();
    record.search_index = None;
    store
        .upsert_integration(record)
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}
