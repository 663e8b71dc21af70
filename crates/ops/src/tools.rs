//! Tools: search the org's catalog with the ranking agents get (SPEC §6),
//! describe one as agents read it, list an integration's tools, and call
//! one tool as the operator.

use std::collections::BTreeMap;

use executor_engine::ToolDescription as Described;
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

/// One tool as `tools.describe.tool` shows it to agents, with its schemas.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescription {
    pub path: String,
    pub description: Option<String>,
    /// Whether a call waits for approval when no policy says otherwise.
    pub requires_approval: bool,
    /// The input schema (JSON Schema), with the definitions it refers to.
    pub input_schema: Option<Value>,
    /// The schema of the data a call answers, when the tool declares one.
    pub output_schema: Option<Value>,
    /// The input as a TypeScript type.
    pub input_type_script: Option<String>,
    /// What a call resolves to, as a TypeScript type.
    pub output_type_script: String,
    /// The named types the two refer to, by name.
    pub type_script_definitions: BTreeMap<String, String>,
    /// All of the above as TypeScript declarations to read (`type Input`,
    /// `type Output`, then the named types).
    pub type_script: String,
}

impl From<Described> for ToolDescription {
    fn from(d: Described) -> Self {
        ToolDescription {
            type_script: d.declarations(),
            path: d.path,
            description: d.description,
            requires_approval: d.requires_approval,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            input_type_script: d.input_type_script,
            output_type_script: d.output_type_script,
            type_script_definitions: d.type_script_definitions.into_iter().collect(),
        }
    }
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

    /// One tool of the org, described as agents read it. A policy that
    /// blocks it hides it from agents, not from the operator who manages
    /// the policies; another org's tools are not found.
    pub async fn describe_tool(&self, actor: &Actor, path: &str) -> OpResult<ToolDescription> {
        let catalog = self.parts.catalogs.catalog(&actor.org_id).await;
        let Some(tool) = catalog.get(path) else {
            let near = catalog.suggestions(path);
            return Err(if near.is_empty() {
                OpError::not_found(format_args!("tool {path:?}"))
            } else {
                OpError::not_found(format_args!("tool {path:?} (close: {})", near.join(", ")))
            });
        };
        Ok(Described::of(tool).into())
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
