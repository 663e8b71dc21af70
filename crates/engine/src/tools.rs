//! The three MCP tools and their dispatch.

use std::sync::Arc;
use std::time::Instant;

use executor_sandbox::{HostBridge, Limits, Pool, RunOutcome};
use executor_store::{ExecutionRecord, Store, now_ms};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::CallContext;
use crate::catalog::Catalog;
use crate::core_tools;
use crate::envelope::{self, internal_error_id};
use crate::execution::{
    Action, ApprovalGate, Decision, Executions, LiveExecution, ResumeRefusal, RunEvent,
    SavedExecution, paused_envelope,
};
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
    /// How long a paused call waits for a human (SPEC §9: 4 minutes).
    pub approval_window: std::time::Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            max_concurrent_executions: 64,
            approval_window: crate::execution::APPROVAL_WINDOW,
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
    metrics: Arc<EngineMetrics>,
    executions: Arc<Executions>,
    /// Serialises restores of paused executions after a restart.
    restoring: tokio::sync::Mutex<()>,
    approval_window: std::time::Duration,
}

impl Engine {
    /// An engine whose catalog holds the core tools.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        let core = Arc::new(Catalog::new(core_tools::entries(store.clone())));
        Self::with_catalogs(store, config, Arc::new(StaticCatalog(core)))
    }

    pub fn with_catalogs(
        store: Arc<dyn Store>,
        config: EngineConfig,
        catalogs: Arc<dyn CatalogSource>,
    ) -> Self {
        Engine {
            approval_window: config.approval_window,
            store,
            pool: Pool::new(config.limits, config.max_concurrent_executions),
            catalogs,
            metrics: Arc::new(EngineMetrics::default()),
            executions: Arc::new(Executions::default()),
            restoring: tokio::sync::Mutex::new(()),
        }
    }

    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// Whether an execution of this session waits for approval.
    pub fn has_paused_in_session(&self, session_id: &str) -> bool {
        self.executions.has_paused_in_session(session_id)
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
            "resume" => Ok(self.resume(ctx, args).await),
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
        let id = format!("exec_{}", uuid::Uuid::new_v4());
        let body = match normalize(code) {
            Ok(body) if body.trim().is_empty() => {
                Err("code is empty: send at least one statement".to_string())
            }
            other => other,
        };
        let body = match body {
            Ok(body) => body,
            Err(message) => return self.refuse_before_running(ctx, &id, code, message).await,
        };
        let saved = SavedExecution {
            id: id.clone(),
            owner: ctx.principal.clone(),
            session_id: ctx.session_id.clone(),
            body,
            code: code.to_string(),
            pending: None,
            journal: Vec::new(),
            settled: None,
        };
        match self.start(saved, None).await {
            Ok(live) => {
                let mut events = live.events.lock().await;
                self.advance(&live, &mut events).await
            }
            Err(envelope) => envelope,
        }
    }

    /// Records and answers a program that never ran (syntax errors and the like).
    async fn refuse_before_running(
        &self,
        ctx: &CallContext,
        id: &str,
        code: &str,
        message: String,
    ) -> Value {
        let outcome = RunOutcome::failed(message);
        self.metrics.record(&outcome, &[], 0);
        let record = execution_record(ctx, id, code, &outcome, Vec::new(), now_ms(), 0);
        if let Err(e) = self.store.insert_execution(record).await {
            return internal_error("could not record execution", &e);
        }
        envelope::render(&outcome)
    }

    /// Starts (or, after a restart, replays) the run of `saved`. With a
    /// `decision`, the pending call of `saved` receives it when reached.
    async fn start(
        &self,
        saved: SavedExecution,
        decision: Option<Decision>,
    ) -> Result<Arc<LiveExecution>, Value> {
        let org = saved.owner.org_id.clone();
        let catalog = self.catalogs.catalog(&org).await;
        let policies = self
            .store
            .list_policies(&org)
            .await
            .map_err(|e| internal_error("could not read policies", &e))?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let preset = decision
            .zip(saved.pending.as_ref())
            .map(|(d, p)| (p.index, d));
        let gate = Arc::new(ApprovalGate::new(
            events_tx.clone(),
            saved.journal.clone(),
            preset,
            self.approval_window,
        ));
        let ctx = CallContext {
            principal: saved.owner.clone(),
            session_id: saved.session_id.clone(),
        };
        let bridge = ExecutionBridge::new(catalog, ctx.clone(), policies, gate.clone());
        let live = LiveExecution::new(saved.clone(), gate, events_rx);
        let runner = Runner {
            pool: self.pool.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            executions: self.executions.clone(),
        };
        tokio::spawn(runner.run(ctx, saved, bridge, events_tx));
        Ok(live)
    }

    /// Waits for the run to pause or finish and answers accordingly. The
    /// caller holds the execution's event lock.
    async fn advance(
        &self,
        live: &Arc<LiveExecution>,
        events: &mut mpsc::UnboundedReceiver<RunEvent>,
    ) -> Value {
        match events.recv().await {
            Some(RunEvent::Paused(pending, journal)) => {
                let Some(saved) = live.update(|s| {
                    s.pending = Some(pending.clone());
                    s.journal = journal;
                }) else {
                    return internal_error("execution state lock poisoned", &"poisoned");
                };
                self.executions.register(&saved.id, live.clone());
                if let Err(e) = self.save(&saved).await {
                    return internal_error("could not save paused execution", &e);
                }
                let record = ExecutionRecord {
                    status: "waiting_for_interaction".into(),
                    ..execution_record(
                        &CallContext {
                            principal: saved.owner.clone(),
                            session_id: saved.session_id.clone(),
                        },
                        &saved.id,
                        &saved.code,
                        &RunOutcome::failed(String::new()),
                        Vec::new(),
                        now_ms(),
                        0,
                    )
                };
                let record = ExecutionRecord {
                    error: None,
                    ..record
                };
                if let Err(e) = self.store.insert_execution(record).await {
                    return internal_error("could not record execution", &e);
                }
                paused_envelope(&saved.id, &pending)
            }
            Some(RunEvent::Finished(outcome)) => envelope::render(&outcome),
            None => internal_error("execution runner stopped without an answer", &"closed"),
        }
    }

    async fn save(&self, saved: &SavedExecution) -> Result<(), executor_store::StoreError> {
        let state = serde_json::to_string(saved).unwrap_or_default();
        self.store
            .save_execution_state(&saved.id, &saved.owner.org_id, state)
            .await
    }

    /// `resume {executionId, action}` (SPEC §9).
    async fn resume(&self, ctx: &CallContext, args: &Value) -> Value {
        let shape =
            "resume expects { executionId: string, action: \"accept\" | \"decline\" | \"cancel\" }";
        let Some(id) = args.get("executionId").and_then(Value::as_str) else {
            return envelope::tool_error(shape, &[]);
        };
        let action: Action = match args.get("action").and_then(Value::as_str).map(str::parse) {
            Some(Ok(a)) => a,
            _ => return envelope::tool_error(shape, &[]),
        };
        // A paused run still in memory waits inside its tool call; after a
        // restart the run is replayed with the decision preset instead.
        let (live, replayed) = match self.executions.get(id) {
            Some(live) => (live, false),
            None => match self.restore(ctx, id, action).await {
                Ok(live) => (live, true),
                Err(answer) => return answer,
            },
        };
        let Some(saved) = live.snapshot() else {
            return internal_error("execution state lock poisoned", &"poisoned");
        };
        if saved.owner != ctx.principal {
            return ResumeRefusal::Forbidden.envelope(id);
        }
        // Concurrent duplicates queue here and then see the first's result.
        let mut events = live.events.lock().await;
        let Some(saved) = live.snapshot() else {
            return internal_error("execution state lock poisoned", &"poisoned");
        };
        if let Some(answer) = settled_answer(&saved, action) {
            return answer;
        }
        let Some(pending) = saved.pending.clone() else {
            return ResumeRefusal::AlreadySettled.envelope(id);
        };
        if pending.expires_at_ms <= now_ms() {
            return ResumeRefusal::Expired.envelope(id);
        }
        if !replayed && !live.gate.answer(decision_of(action)) {
            return ResumeRefusal::Expired.envelope(id);
        }
        live.update(|s| s.pending = None);
        let answer = self.advance(&live, &mut events).await;
        self.settle_if_finished(&live, action, &answer).await;
        answer
    }

    /// After a restart: rebuilds a paused execution from the store and
    /// replays it up to its pending call, which receives the decision.
    async fn restore(
        &self,
        ctx: &CallContext,
        id: &str,
        action: Action,
    ) -> Result<Arc<LiveExecution>, Value> {
        let state = self
            .store
            .load_execution_state(id)
            .await
            .map_err(|e| internal_error("could not load execution", &e))?;
        let saved: SavedExecution = match state.as_deref().map(serde_json::from_str) {
            Some(Ok(saved)) => saved,
            _ => return Err(ResumeRefusal::NotFound.envelope(id)),
        };
        if saved.owner != ctx.principal {
            return Err(ResumeRefusal::Forbidden.envelope(id));
        }
        if let Some(answer) = settled_answer(&saved, action) {
            return Err(answer);
        }
        match &saved.pending {
            None => return Err(ResumeRefusal::NotFound.envelope(id)),
            Some(p) if p.expires_at_ms <= now_ms() => {
                return Err(ResumeRefusal::Expired.envelope(id));
            }
            Some(_) => {}
        }
        // One restore at a time: two resumes arriving together after a
        // restart must not replay the program twice.
        let _restoring = self.restoring.lock().await;
        if let Some(live) = self.executions.get(id) {
            return Ok(live);
        }
        let live = self.start(saved, Some(decision_of(action))).await?;
        let (live, _) = self.executions.register(id, live);
        Ok(live)
    }

    /// Remembers the final answer of a resumed execution, for repeats.
    async fn settle_if_finished(&self, live: &Arc<LiveExecution>, action: Action, answer: &Value) {
        let paused_again = answer["structuredContent"]["status"] == "waiting_for_interaction";
        if paused_again {
            return;
        }
        if let Some(saved) = live.update(|s| {
            s.pending = None;
            s.settled = Some((action, answer.clone()));
        }) && let Err(e) = self.save(&saved).await
        {
            tracing::warn!(error = %e, "could not save settled execution");
        }
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
    id: &str,
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
        id: id.to_string(),
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

/// Runs one execution to its end on its own task, so a pause can answer the
/// `execute` call while the program waits inside its tool call.
struct Runner {
    pool: Pool,
    store: Arc<dyn Store>,
    metrics: Arc<EngineMetrics>,
    executions: Arc<Executions>,
}

impl Runner {
    async fn run(
        self,
        ctx: CallContext,
        saved: SavedExecution,
        bridge: ExecutionBridge,
        events: mpsc::UnboundedSender<RunEvent>,
    ) {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let host: Arc<dyn HostBridge> = Arc::new(bridge.clone());
        let mut outcome = match self.pool.run(saved.body.clone(), Some(host)).await {
            Ok(outcome) => outcome,
            Err(e) => {
                let id = internal_error_id();
                tracing::error!(error_id = %id, error = %e, "sandbox failure");
                RunOutcome::failed(format!("Internal tool error [{id}]"))
            }
        };
        let trace = bridge.trace();
        self.metrics
            .record(&outcome, &trace, clock.elapsed().as_micros() as u64);
        let record = execution_record(
            &ctx,
            &saved.id,
            &saved.code,
            &outcome,
            trace.clone(),
            started_at_ms,
            clock.elapsed().as_millis() as i64,
        );
        // SPEC §10: the record is committed before the result is returned.
        if let Err(e) = self.store.insert_execution(record).await {
            let id = internal_error_id();
            tracing::error!(error_id = %id, error = %e, "could not record execution");
            outcome = RunOutcome::failed(format!("Internal tool error [{id}]"));
        }
        self.executions.forget(&saved.id);
        let _ = events.send(RunEvent::Finished(outcome));
    }
}

fn decision_of(action: Action) -> Decision {
    match action {
        Action::Accept => Decision::Accept,
        Action::Decline => Decision::Decline { reason: "declined" },
        Action::Cancel => Decision::Decline {
            reason: "cancelled",
        },
    }
}

/// The answer for a resume of an execution that is already settled: the
/// same result for the same action (idempotent), a refusal for another.
fn settled_answer(saved: &SavedExecution, action: Action) -> Option<Value> {
    let (settled_with, answer) = saved.settled.as_ref()?;
    Some(if *settled_with == action {
        answer.clone()
    } else {
        ResumeRefusal::AlreadySettled.envelope(&saved.id)
    })
}

/// `Internal tool error [id]`, with the detail in the server log only.
fn internal_error(what: &str, detail: &dyn std::fmt::Display) -> Value {
    let id = internal_error_id();
    tracing::error!(error_id = %id, error = %detail, "{what}");
    envelope::tool_error(&format!("Internal tool error [{id}]"), &[])
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
