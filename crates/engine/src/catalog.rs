//! The tool catalog: every tool an org can call from `execute`, and the
//! seam integrations plug into.
//!
//! An integration kind (OpenAPI, GraphQL, MCP upstream, the built-in core
//! tools) produces [`ToolEntry`]s and a [`ToolInvoker`] that runs them. The
//! engine never knows which kind a tool came from.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};

use executor_store::PolicyRecord;

use crate::CallContext;
use crate::budget::{HostBudget, HostHold};
use crate::search::{SearchDoc, SearchIndex};
use crate::validate::Validators;

/// One callable tool.
pub struct ToolEntry {
    /// The address agents call: `<namespace>.<tool>`.
    pub path: String,
    /// The path without the integration's namespace.
    pub name: String,
    pub description: Option<String>,
    /// The integration's namespace.
    pub integration: String,
    pub input_schema: Option<Value>,
    pub output_schema: Option<Value>,
    /// The default when no policy matches (SPEC §9).
    pub requires_approval: bool,
    pub invoker: Arc<dyn ToolInvoker>,
}

/// A call that passed lookup, policy and validation.
pub struct ToolInvocation {
    pub tool: Arc<ToolEntry>,
    pub args: Value,
    pub ctx: CallContext,
    pub catalog: Arc<Catalog>,
    /// The org's policy rules as stored (for `executor.coreTools.policies.list`).
    pub policies: Arc<Vec<PolicyRecord>>,
    /// The host memory the execution's answers may hold while parsed.
    pub budget: HostBudget,
}

/// What a tool returns: `{ok: true, data, http?}` …
#[derive(Debug, Clone)]
pub struct ToolSuccess {
    pub data: Value,
    pub http: Option<Value>,
    /// Room `data` holds in the execution's [`HostBudget`], given back once
    /// the answer has been handed to the sandbox.
    pub held: Option<Arc<HostHold>>,
}

/// Equal when what the program sees is equal.
impl PartialEq for ToolSuccess {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data && self.http == other.http
    }
}

/// … or `{ok: false, error}` (SPEC §7).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            status: None,
            details: None,
            retryable: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

pub type ToolResult = Result<ToolSuccess, ToolError>;

/// The value a tool call resolves to inside the sandbox (the data moves,
/// it is not copied).
pub fn result_value(result: ToolResult) -> Value {
    match result {
        Ok(ok) => {
            let mut v = serde_json::Map::with_capacity(3);
            v.insert("ok".into(), Value::Bool(true));
            v.insert("data".into(), ok.data);
            if let Some(http) = ok.http {
                v.insert("http".into(), http);
            }
            Value::Object(v)
        }
        Err(e) => json!({ "ok": false, "error": e }),
    }
}

/// Runs the tools of one integration kind.
pub trait ToolInvoker: Send + Sync + 'static {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult>;

    /// Refuses arguments that pass the input schema but cannot make the
    /// request the tool names (a path value of `..`). Runs after validation
    /// and before approval, so a human is never asked about a call that
    /// would fail or reach something else. The default accepts everything.
    fn check(&self, _tool: &ToolEntry, _args: &Value) -> Result<(), ToolError> {
        Ok(())
    }
}

/// An integration as listed by `tools.executor.integrations.list`.
#[derive(Debug, Clone, Serialize)]
pub struct IntegrationSummary {
    pub namespace: String,
    #[serde(rename = "toolCount")]
    pub tool_count: usize,
}

/// An org's tools, indexed for lookup and search. Immutable: a change to
/// the integrations builds a new catalog.
pub struct Catalog {
    tools: Vec<Arc<ToolEntry>>,
    by_path: HashMap<String, usize>,
    index: SearchIndex,
    validators: Validators,
    /// Namespaces with tool counts, sorted; the catalog never changes, so
    /// this is counted once rather than per `tools/list` build or listing.
    integrations: Vec<IntegrationSummary>,
}

impl Catalog {
    pub fn new(mut tools: Vec<ToolEntry>) -> Self {
        tools.sort_by(|a, b| a.path.cmp(&b.path));
        tools.dedup_by(|a, b| a.path == b.path);
        let index = SearchIndex::build(tools.iter().map(|t| SearchDoc {
            path: &t.path,
            name: &t.name,
            integration: &t.integration,
            description: t.description.as_deref().unwrap_or(""),
        }));
        let by_path = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.path.clone(), i))
            .collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for t in &tools {
            *counts.entry(&t.integration).or_default() += 1;
        }
        let integrations = counts
            .into_iter()
            .map(|(namespace, tool_count)| IntegrationSummary {
                namespace: namespace.to_string(),
                tool_count,
            })
            .collect();
        Catalog {
            tools: tools.into_iter().map(Arc::new).collect(),
            by_path,
            index,
            validators: Validators::default(),
            integrations,
        }
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn get(&self, path: &str) -> Option<&Arc<ToolEntry>> {
        self.by_path.get(path).map(|&i| &self.tools[i])
    }

    /// Checks arguments against the tool's input schema (tools without one
    /// accept any object).
    pub fn validate(&self, tool: &ToolEntry, args: &Value) -> Result<(), String> {
        match &tool.input_schema {
            Some(schema) => self.validators.check(&tool.path, schema, args),
            None => Ok(()),
        }
    }

    /// Ranked matches, best first.
    pub fn search(&self, query: &str, namespace: Option<&str>) -> Vec<(&Arc<ToolEntry>, f64)> {
        self.index
            .search(query, namespace)
            .into_iter()
            .filter_map(|(i, score)| self.tools.get(i).map(|t| (t, score)))
            .collect()
    }

    /// Up to five paths close to one that does not exist.
    pub fn suggestions(&self, path: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .search(path, None)
            .into_iter()
            .take(5)
            .map(|(t, _)| t.path.clone())
            .collect();
        if found.is_empty() {
            // Fall back to the last segment alone ("github.issue.create" → "create").
            let leaf = path.rsplit('.').next().unwrap_or(path);
            found = self
                .search(leaf, None)
                .into_iter()
                .take(5)
                .map(|(t, _)| t.path.clone())
                .collect();
        }
        found
    }

    /// Integration namespaces with their tool counts, sorted.
    pub fn integrations(&self) -> &[IntegrationSummary] {
        &self.integrations
    }
}
