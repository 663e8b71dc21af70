//! The three MCP tools and their dispatch.

use std::sync::Arc;
use std::time::Instant;

use executor_sandbox::{HostBridge, Limits, Pool, RunOutcome};
use executor_store::{ExecutionRecord, Store, now_ms};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::CallContext;
use crate::catalog::Catalog;
use crate::core_tools;
use crate::envelope::{self, internal_error_id};
use crate::invoke::{ExecutionBridge, ToolCallTrace};
use crate::metrics::EngineMetrics;
use crate::normalize::normalize;
use crate::skills::SKILLS;

/// Integration namespaces listed in the `execute` description, at most.
const MAX_LISTED_INTEGRATIONS: usize = 50;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub limits: Limits,
    /// Most executions that run at once; more queue.
    pub max_concurrent_executions: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            max_concurrent_executions: 64,
        }
    }
}

/// A `tools/call` that cannot be dispatched at all: a protocol error
/// (JSON-RPC), as opposed to a tool error (`isError` in the result).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ToolCallError {
    #[error("Unknown tool: {0}")]
    UnknownTool(String),
}

/// Where an org's catalog comes from. The integrations layer implements
/// this over the store; until then every org sees the core tools.
pub trait CatalogSource: Send + Sync + 'static {
    fn catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>>;
}

/// One catalog for everyone.
pub struct StaticCatalog(pub Arc<Catalog>);

impl CatalogSource for StaticCatalog {
    fn catalog(&self, _org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        let catalog = self.0.clone();
        Box::pin(async move { catalog })
    }
}

pub struct Engine {
    store: Arc<dyn Store>,
    pool: Pool,
    catalogs: Arc<dyn CatalogSource>,
    metrics: EngineMetrics,
}

impl Engine {
    /// An engine whose catalog holds the core tools.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        let core = Arc::new(Catalog::new(core_tools::entries()));
        Self::with_catalogs(store, config, Arc::new(StaticCatalog(core)))
    }

    pub fn with_catalogs(
        store: Arc<dyn Store>,
        config: EngineConfig,
        catalogs: Arc<dyn CatalogSource>,
    ) -> Self {
        Engine {
            store,
            pool: Pool::new(config.limits, config.max_concurrent_executions),
            catalogs,
            metrics: EngineMetrics::default(),
        }
    }

    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The org's integration namespaces (not the built-in one), sorted.
    pub async fn integration_inventory(&self, org_id: &str) -> Vec<String> {
        self.catalogs
            .catalog(org_id)
            .await
            .integrations()
            .into_iter()
            .map(|i| i.namespace)
            .filter(|ns| ns != core_tools::NAMESPACE)
            .collect()
    }

    /// The `tools/list` entries. `native_elicitation` hides `resume`.
    pub fn tool_definitions(&self, inventory: &[String], native_elicitation: bool) -> Vec<Value> {
        let mut tools = vec![
            json!({
                "name": "execute",
                "description": execute_description(inventory),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "code": { "type": "string", "minLength": 1, "description": "TypeScript or JavaScript: the body of an async function; use `return` for the result." }
                    },
                    "required": ["code"],
                    "additionalProperties": false
                }
            }),
            json!({
                "name": "skills",
                "description": "How-to guides for this server. Call with no name for the index, or with {\"name\":\"execute\"} before writing code.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "name": { "type": "string", "description": "The skill to read." } },
                    "additionalProperties": false
                }
            }),
        ];
        if !native_elicitation {
            tools.push(json!({
                "name": "resume",
                "description": "Continues an execution that paused for approval: accept runs the pending tool call, decline or cancel makes it throw.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "executionId": { "type": "string", "description": "The exec_… id from the paused result." },
                        "action": { "type": "string", "enum": ["accept", "decline", "cancel"] },
                        "content": { "type": "string", "description": "A JSON object with form values (default \"{}\")." }
                    },
                    "required": ["executionId", "action"],
                    "additionalProperties": false
                }
            }));
        }
        tools
    }

    /// Runs one tool. Tool-level failures are `Ok` results with `isError`.
    pub async fn call_tool(
        &self,
        ctx: &CallContext,
        name: &str,
        args: &Value,
    ) -> Result<Value, ToolCallError> {
        match name {
            "execute" => Ok(self.execute(ctx, args).await),
            "skills" => Ok(self.skills(ctx, args).await),
            "resume" => Ok(resume_not_found(args)),
            other => Err(ToolCallError::UnknownTool(other.to_string())),
        }
    }

    async fn execute(&self, ctx: &CallContext, args: &Value) -> Value {
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return envelope::tool_error(
                "execute needs {\"code\": string}: the program to run",
                &[],
            );
        };
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let (outcome, trace) = self.run(ctx, code).await;
        self.metrics
            .record(&outcome, &trace, clock.elapsed().as_micros() as u64);
        let record = execution_record(
            ctx,
            code,
            &outcome,
            trace,
            started_at_ms,
            clock.elapsed().as_millis() as i64,
        );
        // SPEC §10: the record is committed before the result is returned.
        if let Err(e) = self.store.insert_execution(record).await {
            let id = internal_error_id();
            tracing::error!(error_id = %id, error = %e, "could not record execution");
            return envelope::tool_error(&format!("Internal tool error [{id}]"), &[]);
        }
        envelope::render(&outcome)
    }

    /// Normalises and runs one program with the caller's catalog.
    async fn run(&self, ctx: &CallContext, code: &str) -> (RunOutcome, Vec<ToolCallTrace>) {
        let body = match normalize(code) {
            Ok(body) if body.trim().is_empty() => {
                return (
                    RunOutcome::failed("code is empty: send at least one statement"),
                    Vec::new(),
                );
            }
            Ok(body) => body,
            Err(message) => return (RunOutcome::failed(message), Vec::new()),
        };
        let catalog = self.catalogs.catalog(&ctx.principal.org_id).await;
        let policies = match self.store.list_policies(&ctx.principal.org_id).await {
            Ok(p) => p,
            Err(e) => {
                let id = internal_error_id();
                tracing::error!(error_id = %id, error = %e, "could not read policies");
                return (
                    RunOutcome::failed(format!("Internal tool error [{id}]")),
                    Vec::new(),
                );
            }
        };
        let bridge = ExecutionBridge::new(catalog, ctx.clone(), policies);
        let host: Arc<dyn HostBridge> = Arc::new(bridge.clone());
        let outcome = match self.pool.run(body, Some(host)).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let id = internal_error_id();
                tracing::error!(error_id = %id, error = %e, "sandbox failure");
                RunOutcome::failed(format!("Internal tool error [{id}]"))
            }
        };
        (outcome, bridge.trace())
    }

    async fn skills(&self, ctx: &CallContext, args: &Value) -> Value {
        let name = args
            .get("name")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let index = || {
            let mut text = String::from("# Skills\n");
            for s in SKILLS {
                text.push_str(&format!("- {}: {}\n", s.name, s.summary));
            }
            text
        };
        match name {
            None => envelope::text_result(index(), false),
            Some(name) => match SKILLS.iter().find(|s| s.name == name) {
                Some(skill) => {
                    let inventory = self.integration_inventory(&ctx.principal.org_id).await;
                    envelope::text_result(
                        format!("{}\n{}", skill.body, inventory_section(&inventory)),
                        false,
                    )
                }
                None => {
                    envelope::text_result(format!("Unknown skill {name:?}.\n\n{}", index()), true)
                }
            },
        }
    }
}

fn execution_record(
    ctx: &CallContext,
    code: &str,
    outcome: &RunOutcome,
    trace: Vec<ToolCallTrace>,
    started_at_ms: i64,
    duration_ms: i64,
) -> ExecutionRecord {
    let (status, result, error) = match &outcome.result {
        Ok(value) => ("completed", value.clone(), None),
        Err(message) => ("error", None, Some(message.clone())),
    };
    ExecutionRecord {
        id: format!("exec_{}", uuid::Uuid::new_v4()),
        session_id: ctx.session_id.clone(),
        account_id: ctx.principal.account_id.clone(),
        org_id: ctx.principal.org_id.clone(),
        code: code.to_string(),
        status: status.into(),
        result,
        error,
        logs: outcome.logs.clone(),
        tool_calls: serde_json::to_value(trace).unwrap_or(Value::Null),
        started_at_ms,
        duration_ms,
    }
}

fn execute_description(inventory: &[String]) -> String {
    format!(
        "Runs TypeScript in a sandboxed runtime where `tools.<path>(args)` calls the connected integrations. Call the `skills` tool with {{\"name\":\"execute\"}} first for how to search, describe and call tools.\n\n{}",
        inventory_section(inventory)
    )
}

fn inventory_section(inventory: &[String]) -> String {
    let mut names: Vec<&String> = inventory.iter().collect();
    names.sort();
    names.dedup();
    let mut text = String::from("## Available integrations\n");
    if names.is_empty() {
        text.push_str("- (none yet)\n");
    }
    for name in names.iter().take(MAX_LISTED_INTEGRATIONS) {
        text.push_str(&format!("- {name}\n"));
    }
    if names.len() > MAX_LISTED_INTEGRATIONS {
        text.push_str(&format!(
            "- ... {} more\n",
            names.len() - MAX_LISTED_INTEGRATIONS
        ));
    }
    text
}

/// Paused executions arrive with approvals; until then every id is unknown.
fn resume_not_found(args: &Value) -> Value {
    let execution_id = args
        .get("executionId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    json!({
        "content": [{ "type": "text", "text": format!("Execution {execution_id:?} was not found: it may have finished or expired. Run `execute` again.") }],
        "structuredContent": { "status": "execution_not_found", "executionId": execution_id, "recovery": "re_execute" },
        "isError": true,
    })
}
