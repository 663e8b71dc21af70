//! Tools: search the org's catalog with the ranking agents get (SPEC §6),
//! list an integration's tools, and call one tool as the operator.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use executor_call::ApprovalMode;

use crate::executions::CallResult;
use crate::{Actor, OpError, OpResult, Operations};

/// Most hits one search returns.
pub const MAX_SEARCH_HITS: usize = 100;

/// A tool as a search or a listing shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolHit {
    pub path: String,
    pub description: Option<String>,
    /// The search's score; absent in a listing.
    pub score: Option<f64>,
    /// Whether a call waits for approval when no policy says otherwise.
    pub requires_approval: bool,
}

impl Operations {
    /// The org's tools ranked for `query`, best first.
    pub async fn search_tools(
        &self,
        actor: &Actor,
        query: &str,
        namespace: Option<&str>,
        limit: usize,
    ) -> OpResult<Vec<ToolHit>> {
        let catalog = self.parts.catalogs.catalog(&actor.org_id).await;
        Ok(catalog
            .search(query, namespace)
            .into_iter()
            .take(limit.clamp(1, MAX_SEARCH_HITS))
            .map(|(tool, score)| ToolHit {
                path: tool.path.to_string(),
                description: tool.description.clone(),
                score: Some((score * 100.0).round() / 100.0),
                requires_approval: tool.requires_approval,
            })
            .collect())
    }

    /// An integration's tools, by path.
    pub async fn integration_tools(
        &self,
        actor: &Actor,
        namespace: &str,
    ) -> OpResult<Vec<ToolHit>> {
        let catalog = self.parts.catalogs.catalog(&actor.org_id).await;
        let group = catalog
            .groups()
            .iter()
            .find(|g| g.namespace() == namespace)
            .ok_or_else(|| OpError::not_found(format_args!("integration {namespace:?}")))?;
        Ok(group
            .tools()
            .iter()
            .map(|tool| ToolHit {
                path: tool.path.to_string(),
                description: tool.description.clone(),
                score: None,
                requires_approval: tool.requires_approval,
            })
            .collect())
    }

    /// Calls one tool as `actor`: a one-line program, so that the call
    /// meets the policies, the validation and the record any call meets.
    /// `approval`: whether a call that needs approval waits for a human
    /// (`executor call`) or counts as approved by the caller (the API's
    /// `tools/call`, SPEC §13); `block` applies either way.
    pub async fn call_tool(
        &self,
        actor: &Actor,
        path: &str,
        input: &Value,
        approval: ApprovalMode,
    ) -> OpResult<CallResult> {
        if !input.is_object() {
            return Err(OpError::invalid("input", "the input must be a JSON object"));
        }
        // Bracket access keeps any segment a valid property name.
        let accessor: String = path
            .split('.')
            .map(|segment| format!("[{}]", Value::from(segment)))
            .collect();
        let code = format!("return await tools{accessor}({input});");
        self.run_code_as(actor, &code, approval).await
    }
}
