//! The three MCP tools and their dispatch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use executor_sandbox::{AgentError, HostBridge, Limits, Pool, RunOutcome, SandboxError, Stop};
use executor_store::{
    ExecutionClaim, ExecutionRecord, ExecutionStatus, FIRST_EPOCH, Fence, NODE_LEASE, NodeLease,
    Notice, Store, next_notice, now_ms,
};
use futures::FutureExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::admission::{Admission, Refused, ShareLimits, Slot};
use crate::core_tools;
use crate::envelope::{
    self, MAX_EMITTED_TEXT_CHARS, MAX_RESULT_TEXT_CHARS, TextLimits, internal_error_id,
};
use crate::execution::{
    Action, ApprovalGate, ApprovalPrompt, ApprovalRequest, Decision, ExecutionState, Executions,
    LiveExecution, MAX_ARGS_PREVIEW_CHARS, Reply, ResumeRefusal, RunEvent, RunLease,
    SavedExecution, is_paused, paused_envelope,
};
use crate::invoke::{CallBounds, CatalogAtStart, ExecutionBridge, ToolCallTrace};
use crate::metrics::EngineMetrics;
use crate::normalize::normalize;
use crate::policy_cache::PolicyCache;
use crate::skills::SKILLS;
use executor_catalog::{CallContext, Catalog, CatalogSource, HostBudget, StaticCatalog};

/// How often a server looks for decisions posted by `executor resume`.
const POSTED_DECISION_POLL: Duration = Duration::from_millis(200);
/// The same poll behind a store's decision notices, for a lost one.
const POSTED_DECISION_FALLBACK: Duration = Duration::from_secs(2);

/// How long `executor resume` follows a run a server has taken over.
const FOLLOW_RESUMED_RUN: Duration = Duration::from_secs(600);
/// How long a finished run that had paused stays in memory (see
/// `Executions::forget_after`).
const FINISHED_RUN_KEPT: Duration = Duration::from_secs(30);
/// How long the node holding a paused run has to take a decision posted
/// for it by another node (a notice wakes it at once; SQLite's poll is
/// 200 ms) before the decision is taken back.
const HOLDER_TAKES_DECISION: Duration = Duration::from_secs(5);

/// Integration namespaces listed in the `execute` description, at most.
const MAX_LISTED_INTEGRATIONS: usize = 50;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub limits: Limits,
    /// Running executions in all and per org (SPEC §4, §12); more are
    /// refused at once, never queued.
    pub share: ShareLimits,
    /// How long a paused call waits for a human (SPEC §9: 4 minutes).
    pub approval_window: std::time::Duration,
    /// An execution's wall clock — compute and tool waits, approval pauses
    /// excluded — after which it is stopped (SPEC §12: 10 minutes).
    pub wall_clock: Duration,
    /// Bytes of tool-call arguments and answers journaled for replay.
    pub max_journal_bytes: usize,
    /// Longest tool path accepted.
    pub max_tool_path_bytes: usize,
    /// Longest result text, in characters, before it is cut with a note.
    pub max_result_text_chars: usize,
    /// Longest emitted text file shown inline, in characters.
    pub max_emitted_text_chars: usize,
    /// Longest argument preview of a paused call, in characters.
    pub max_approval_preview_chars: usize,
}

/// SPEC §12's execution wall clock.
pub const WALL_CLOCK: Duration = Duration::from_secs(10 * 60);

/// How often a running execution's wall clock is read.
const WALL_CLOCK_TICK: Duration = Duration::from_millis(100);

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            share: ShareLimits::default(),
            approval_window: crate::execution::APPROVAL_WINDOW,
            wall_clock: WALL_CLOCK,
            max_journal_bytes: crate::execution::MAX_JOURNAL_BYTES,
            max_tool_path_bytes: crate::invoke::MAX_TOOL_PATH_BYTES,
            max_result_text_chars: MAX_RESULT_TEXT_CHARS,
            max_emitted_text_chars: MAX_EMITTED_TEXT_CHARS,
            max_approval_preview_chars: MAX_ARGS_PREVIEW_CHARS,
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

pub struct Engine {
    store: Arc<dyn Store>,
    pool: Pool,
    /// Fair share of running and paused executions between orgs.
    admission: Arc<Admission>,
    wall_clock: Duration,
    max_journal_bytes: usize,
    call_bounds: CallBounds,
    catalogs: Arc<dyn CatalogSource>,
    metrics: Arc<EngineMetrics>,
    executions: Arc<Executions>,
    /// Serialises restores of paused executions after a restart.
    restoring: tokio::sync::Mutex<()>,
    approval_window: std::time::Duration,
    /// How much text a rendered outcome may hold.
    text_limits: TextLimits,
    /// Longest argument preview of a paused call, in characters.
    approval_preview_chars: usize,
    /// This process as a node on the store: the holder of the paused runs
    /// in its memory (shared with the sessions in a server, see
    /// [`Engine::attach_node`]).
    node: std::sync::OnceLock<Arc<NodeLease>>,
    /// Each org's policies at the store's access revision.
    policies: PolicyCache,
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
            // Paused executions keep their sandbox thread parked, so the
            // pool has room for the running and the paused bounds.
            pool: Pool::new(config.limits, config.share.threads()),
            admission: Admission::new(config.share),
            wall_clock: config.wall_clock,
            max_journal_bytes: config.max_journal_bytes,
            call_bounds: CallBounds {
                max_path_bytes: config.max_tool_path_bytes,
            },
            catalogs,
            metrics: Arc::new(EngineMetrics::default()),
            executions: Arc::new(Executions::default()),
            restoring: tokio::sync::Mutex::new(()),
            text_limits: TextLimits {
                result_chars: config.max_result_text_chars,
                emitted_chars: config.max_emitted_text_chars,
            },
            approval_preview_chars: config.max_approval_preview_chars,
            node: std::sync::OnceLock::new(),
            policies: PolicyCache::default(),
        }
    }

    /// Makes `node` (the server's, renewed by its sessions) the holder of
    /// the runs this engine pauses. Without it, an engine (a CLI command)
    /// registers a node of its own when it first needs one.
    pub fn attach_node(&self, node: Arc<NodeLease>) {
        let _ = self.node.set(node);
    }

    fn node(&self) -> &Arc<NodeLease> {
        self.node
            .get_or_init(|| Arc::new(NodeLease::new(None, NODE_LEASE)))
    }

    /// Longest argument preview of a paused call: what a transport that
    /// asks the human itself cuts the arguments at.
    pub fn approval_preview_chars(&self) -> usize {
        self.approval_preview_chars
    }

    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// Whether a new execution of `org` would be refused because the whole
    /// server is at its limit (not the org's share): a transport that can
    /// still choose its status answers 503 with `Retry-After` then.
    pub fn server_full_for(&self, org_id: &str) -> bool {
        matches!(
            self.admission.would_refuse(org_id),
            Some(Refused::ServerFull(_))
        )
    }

    /// Registers the engine's `/metrics` series: the counters, and running
    /// and paused executions now (read here, so a scrape sees this moment).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        let (running, paused) = self.admission.totals();
        self.metrics.register(registry, running, paused);
    }

    /// (running, paused) executions of `org`.
    pub fn executions_of_org(&self, org_id: &str) -> (usize, usize) {
        self.admission.of_org(org_id)
    }

    /// Whether an execution of this session waits for approval.
    pub fn has_paused_in_session(&self, session_id: &str) -> bool {
        self.executions.has_paused_in_session(session_id)
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The org's integrations (not the built-in one), sorted, each as the
    /// `execute` description lists it: its namespace and tool count (or
    /// that it cannot be served). The count is in it so that a change of
    /// an integration's tools — an upstream MCP server's re-synced list —
    /// changes the description, and open sessions get
    /// `notifications/tools/list_changed` (SPEC §2).
    ///
    /// For tool lists: read from the catalog this node last heard of
    /// (`CatalogSource::listed_catalog`), which a catalog notice refreshes.
    pub async fn integration_inventory(&self, org_id: &str) -> Vec<String> {
        inventory_of(&*self.catalogs.listed_catalog(org_id).await)
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
    /// Approvals use model mode: a pause answers with the paused envelope.
    pub async fn call_tool(
        &self,
        ctx: &CallContext,
        name: &str,
        args: &Value,
    ) -> Result<Value, ToolCallError> {
        self.call_tool_asking(ctx, name, args, None, Reply::Direct)
            .await
    }

    /// [`Engine::call_tool`], with approvals asked through `prompt` inline
    /// (native elicitation) when there is one: the call then answers only
    /// when the program has finished. `reply` says how the answer leaves
    /// the server (see [`Reply`]).
    pub async fn call_tool_asking(
        &self,
        ctx: &CallContext,
        name: &str,
        args: &Value,
        prompt: Option<&dyn ApprovalPrompt>,
        reply: Reply,
    ) -> Result<Value, ToolCallError> {
        match name {
            "execute" => Ok(self.execute(ctx, args, prompt, reply).await),
            "skills" => Ok(self.skills(ctx, args).await),
            "resume" => Ok(self.resume(ctx, args).await),
            other => Err(ToolCallError::UnknownTool(other.to_string())),
        }
    }

    async fn execute(
        &self,
        ctx: &CallContext,
        args: &Value,
        prompt: Option<&dyn ApprovalPrompt>,
        reply: Reply,
    ) -> Value {
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return envelope::tool_error(
                "execute needs {\"code\": string}: the program to run",
                &[],
            );
        };
        let id = format!("exec_{}", uuid::Uuid::new_v4());
        let body = match normalize(code) {
            Ok(body) if body.trim().is_empty() => Err(AgentError::new(
                "code is empty: send at least one statement",
            )),
            other => other,
        };
        let body = match body {
            Ok(body) => body,
            Err(refused) => {
                let message = refused.message().to_string();
                return self
                    .refuse_before_running(ctx, &id, code, message, reply)
                    .await;
            }
        };
        // SPEC §4: over the org's share (or the server's limit) the answer
        // comes at once, before anything runs or is recorded.
        let slot = match self.admission.admit(&ctx.principal.org_id) {
            Ok(slot) => slot,
            Err(refused) => return envelope::tool_error(&refused.to_string(), &[]),
        };
        let saved = SavedExecution {
            id: id.clone(),
            owner: ctx.principal.clone(),
            session_id: ctx.session_id.clone(),
            body,
            code: code.to_string(),
            state: ExecutionState::Running,
            journal: Vec::new(),
            decided: Vec::new(),
            journal_dropped: false,
        };
        match self.start(saved, None, slot, None, reply).await {
            Ok(live) => {
                let mut events = live.events.lock().await;
                let answer = self.advance(&live, &mut events).await;
                match prompt {
                    Some(prompt) => self.ask_inline(&live, &mut events, answer, prompt).await,
                    None => answer,
                }
            }
            Err(envelope) => envelope,
        }
    }

    /// Native elicitation: while the run is paused, asks `prompt` and hands
    /// the answer to the waiting call, until the program finishes. The
    /// window still bounds each wait; when it closes the call is declined
    /// with `approval_timeout` as in model mode.
    async fn ask_inline(
        &self,
        live: &Arc<LiveExecution>,
        events: &mut mpsc::UnboundedReceiver<RunEvent>,
        mut answer: Value,
        prompt: &dyn ApprovalPrompt,
    ) -> Value {
        while is_paused(&answer) {
            let Some(saved) = live.snapshot() else {
                return internal_error("execution state lock poisoned", &"poisoned");
            };
            let ExecutionState::Waiting(pending) = saved.state else {
                return answer;
            };
            let request = ApprovalRequest::of(&saved.id, &pending, self.approval_preview_chars);
            let window = Duration::from_millis((pending.expires_at_ms - now_ms()).max(0) as u64);
            live.asked_inline.store(true, Ordering::Release);
            let mut posted = live.posted.subscribe();
            let asked = async {
                let posted = async { posted.wait_for(Option::is_some).await.ok().and_then(|a| *a) };
                tokio::select! {
                    action = prompt.ask(request) => action,
                    Some(action) = posted => Some(action),
                }
            };
            let asked = tokio::time::timeout(window, asked).await;
            live.posted.send_replace(None);
            let action = match asked {
                Ok(Some(action)) => action,
                // The client could not ask: nobody approved, so it is cancelled.
                Ok(None) => Action::Cancel,
                // The gate has declined it by itself (approval_timeout).
                Err(_) => Action::Decline,
            };
            // False when the window closed first; the run goes on either way.
            live.gate.answer(pending.index, decision_of(action));
            live.update(|s| {
                s.state = ExecutionState::Running;
                s.decided.push((pending.index, action));
            });
            answer = self.advance(live, events).await;
            self.settle_if_finished(live, action, &answer).await;
        }
        answer
    }

    /// Records and answers a program that never ran (syntax errors and the like).
    async fn refuse_before_running(
        &self,
        ctx: &CallContext,
        id: &str,
        code: &str,
        message: String,
        reply: Reply,
    ) -> Value {
        let outcome = RunOutcome::failed(message);
        self.metrics.record(&outcome, &[], 0);
        let record = execution_record(ctx, id, code, &outcome, Vec::new(), now_ms(), 0);
        if let Err(e) = write_record(&self.store, record, reply).await {
            return internal_error("could not record execution", &e);
        }
        envelope::render(&outcome, self.text_limits)
    }

    /// Starts (or, after a restart, replays) the run of `saved`. With a
    /// `decision`, the pending call of `saved` receives it when reached.
    /// `reply`: how the answer of the call that starts it leaves the server.
    async fn start(
        &self,
        saved: SavedExecution,
        decision: Option<Decision>,
        slot: Slot,
        claimed: Option<(Fence, i64)>,
        reply: Reply,
    ) -> Result<Arc<LiveExecution>, Value> {
        let org = saved.owner.org_id.clone();
        let catalog = catalog_at_start(&self.catalogs, &org);
        let policies = self
            .policies
            .policies(self.store.as_ref(), &org)
            .await
            .map_err(|e| internal_error("could not read policies", &e))?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        // Decisions already given (their calls may not have answered before
        // the restart), then the one for the pending call.
        let preset: Vec<(usize, Decision)> = saved
            .decided
            .iter()
            .map(|&(index, action)| (index, decision_of(action)))
            .chain(
                decision
                    .zip(saved.state.pending())
                    .map(|(d, p)| (p.index, d)),
            )
            .collect();
        let mut gate = ApprovalGate::new(
            events_tx.clone(),
            saved.journal.clone(),
            preset,
            self.approval_window,
        )
        .with_journal_bound(self.max_journal_bytes)
        .with_slot(slot);
        if let Some((fence, calling)) = claimed {
            let lease = RunLease {
                store: self.store.clone(),
                execution_id: saved.id.clone(),
                fence,
            };
            gate = gate.with_lease(lease, calling);
        }
        let gate = Arc::new(gate);
        let ctx = saved.owner_context();
        // The sandbox's memory cap bounds what its answers may hold on the host.
        let budget = HostBudget::new(self.pool.limits().memory_bytes);
        let bridge = ExecutionBridge::new(
            catalog,
            ctx.clone(),
            policies,
            gate.clone(),
            budget.clone(),
            self.call_bounds,
        );
        let live = LiveExecution::new(saved.clone(), gate.clone(), events_rx);
        let runner = Runner {
            pool: self.pool.clone(),
            store: self.store.clone(),
            metrics: self.metrics.clone(),
            executions: self.executions.clone(),
            gate: gate.clone(),
            wall_clock: self.wall_clock,
            budget,
            reply,
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
        loop {
            let pending = match events.recv().await {
                Some(RunEvent::Paused(pending)) => pending,
                Some(RunEvent::Finished(outcome)) => {
                    return envelope::render(&outcome, self.text_limits);
                }
                None => {
                    return internal_error("execution runner stopped without an answer", &"closed");
                }
            };
            // Calls accepted a moment ago answer first, so that the journal
            // saved with the pause holds them. Meanwhile this call may have
            // stopped waiting (timed out, or the run ended): then its pause
            // is stale, and the next event says what happened.
            live.gate.until_paused_or_idle().await;
            if live.gate.is_waiting(pending.index) {
                return self.report_pause(live, &pending).await;
            }
        }
    }

    /// Saves a paused execution (with its journal as it is now: a call
    /// decided since the pause was queued may have answered) and answers
    /// with the paused envelope.
    async fn report_pause(
        &self,
        live: &Arc<LiveExecution>,
        pending: &crate::execution::PendingCall,
    ) -> Value {
        let journal = live.gate.journal_entries();
        let dropped = live.gate.journal_overflowed();
        let Some(saved) = live.update(|s| {
            s.state = ExecutionState::Waiting(pending.clone());
            s.journal = journal;
            s.journal_dropped = dropped;
        }) else {
            return internal_error("execution state lock poisoned", &"poisoned");
        };
        self.executions.register(&saved.id, live.clone());
        // Paused, the run is this node's to hold (SPEC §10).
        if let Err(e) = self.node().ensure_alive(self.store.as_ref()).await {
            return internal_error("could not register this node", &e);
        }
        let lease = live.gate.lease_or(|| RunLease {
            store: self.store.clone(),
            execution_id: saved.id.clone(),
            fence: Fence {
                node: self.node().id().to_string(),
                epoch: FIRST_EPOCH,
            },
        });
        if let Err(e) = save_state(&self.store, &saved, lease.as_deref()).await {
            return internal_error("could not save paused execution", &e);
        }
        if !live.persisting.swap(true, Ordering::AcqRel) {
            // Detached: it ends with the run (the journal closes).
            tokio::spawn(persist_journal(self.store.clone(), Arc::downgrade(live)));
        }
        let record = ExecutionRecord {
            status: ExecutionStatus::WaitingForInteraction,
            error: None,
            ..execution_record(
                &saved.owner_context(),
                &saved.id,
                &saved.code,
                &RunOutcome::failed(String::new()),
                Vec::new(),
                now_ms(),
                0,
            )
        };
        if let Err(e) = self.store.insert_execution(record).await {
            return internal_error("could not record execution", &e);
        }
        paused_envelope(&saved.id, pending, self.approval_preview_chars)
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
        if let Err(answer) = still_waiting(&saved, action, ResumeRefusal::AlreadySettled) {
            return answer;
        }
        let index = saved.state.pending().map_or(0, |p| p.index);
        if !replayed && !live.gate.answer(index, decision_of(action)) {
            return ResumeRefusal::Expired.envelope(id);
        }
        live.update(|s| {
            s.state = ExecutionState::Running;
            s.decided.push((index, action));
        });
        let answer = self.advance(&live, &mut events).await;
        self.settle_if_finished(&live, action, &answer).await;
        answer
    }

    /// Applies decisions posted by `executor resume` (another process) to
    /// the executions this process holds paused. Spawn once per server.
    ///
    /// Runs until `stop` turns true; the server flips it once its requests
    /// have drained (a run paused during the drain may still be decided).
    pub async fn apply_posted_decisions(
        self: Arc<Self>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        // A store that pushes decisions needs only a slow poll behind its
        // notices (one can be lost); one that cannot is polled briskly.
        let mut notices = self.store.subscribe();
        let every = if notices.is_some() {
            POSTED_DECISION_FALLBACK
        } else {
            POSTED_DECISION_POLL
        };
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Which run to look at: the one a notice names, or all of them.
            let only = tokio::select! {
                _ = interval.tick() => None,
                notice = next_notice(&mut notices) => match notice {
                    Notice::Decision { execution_id } => Some(execution_id),
                    Notice::Lagged => None,
                    _ => continue,
                },
                _ = stop.wait_for(|s| *s) => return,
            };
            for live in self.executions.waiting() {
                let Some(saved) = live.snapshot() else {
                    continue;
                };
                if only.as_ref().is_some_and(|id| *id != saved.id) {
                    continue;
                }
                let action = match self.store.take_execution_decision(&saved.id).await {
                    Ok(Some(action)) => action.parse::<Action>(),
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read posted decisions");
                        continue;
                    }
                };
                let Ok(action) = action else {
                    tracing::warn!(execution = %saved.id, "ignoring a malformed posted decision");
                    continue;
                };
                if live.asked_inline.load(Ordering::Acquire) {
                    live.posted.send_replace(Some(action));
                    continue;
                }
                let engine = self.clone();
                tokio::spawn(async move {
                    let ctx = saved.owner_context();
                    let args = json!({ "executionId": saved.id, "action": action });
                    engine.resume(&ctx, &args).await;
                });
            }
        }
    }

    /// `executor resume`: decides a paused execution from another process.
    /// The decision is posted to the store; the server holding the run
    /// applies it and this waits for the outcome. When no server takes it
    /// within `wait` (none is running, or none holds the run since a
    /// restart), it is taken back and applied here by replay.
    pub async fn resume_from_outside(&self, id: &str, action: Action, wait: Duration) -> Value {
        let saved = match self.load_saved(id).await {
            Ok(saved) => saved,
            Err(answer) => return answer,
        };
        let pending = match still_waiting(&saved, action, ResumeRefusal::NotFound) {
            Ok(pending) => pending,
            Err(answer) => return answer,
        };
        let owner = saved.owner_context();
        let args = json!({ "executionId": id, "action": action });
        if let Err(answer) = self.post_decision(id, action).await {
            return answer;
        }
        // Taken by a server within `wait`: follow the run until it settles
        // or pauses again (bounded by the execution's own limits).
        let mut deadline = Instant::now() + wait;
        let mut taken = false;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Ok(saved) = self.load_saved(id).await {
                if let Some(answer) = settled_answer(&saved, action) {
                    return answer;
                }
                match saved.state.pending() {
                    Some(next) if next.index != pending.index => {
                        return paused_envelope(id, next, self.approval_preview_chars);
                    }
                    _ => {}
                }
            }
            if Instant::now() < deadline {
                continue;
            }
            if taken {
                return envelope::tool_error(
                    &format!(
                        "{id} was resumed by the server but has not finished yet; see `executor executions show {id}`"
                    ),
                    &[],
                );
            }
            match self.store.take_execution_decision(id).await {
                // Nobody took it: apply it in this process.
                Ok(Some(_)) => return self.resume(&owner, &args).await,
                Ok(None) => {
                    taken = true;
                    deadline = Instant::now() + FOLLOW_RESUMED_RUN;
                }
                Err(e) => return internal_error("could not take the decision back", &e),
            }
        }
    }

    async fn load_saved(&self, id: &str) -> Result<SavedExecution, Value> {
        let state = self
            .store
            .load_execution_state(id)
            .await
            .map_err(|e| internal_error("could not load execution", &e))?;
        match state.as_deref().map(serde_json::from_str) {
            Some(Ok(saved)) => Ok(saved),
            _ => Err(ResumeRefusal::NotFound.envelope(id)),
        }
    }

    /// After a restart: rebuilds a paused execution from the store and
    /// replays it up to its pending call, which receives the decision.
    async fn restore(
        &self,
        ctx: &CallContext,
        id: &str,
        action: Action,
    ) -> Result<Arc<LiveExecution>, Value> {
        let saved = self.load_saved(id).await?;
        if saved.owner != ctx.principal {
            return Err(ResumeRefusal::Forbidden.envelope(id));
        }
        still_waiting(&saved, action, ResumeRefusal::NotFound)?;
        if saved.journal_dropped {
            return Err(ResumeRefusal::NotReplayable.envelope(id));
        }
        // One restore at a time: two resumes arriving together after a
        // restart must not replay the program twice (in this process; the
        // claim below is what keeps two nodes from it).
        let _restoring = self.restoring.lock().await;
        if let Some(live) = self.executions.get(id) {
            return Ok(live);
        }
        let mut claimed = None;
        // Each round either claims, answers, or finds the holder gone.
        for _ in 0..3 {
            match self.claim_run(id).await {
                Ok(ExecutionClaim::Claimed { fence, calling }) => {
                    claimed = Some((fence, calling));
                    break;
                }
                Ok(ExecutionClaim::Held { holder }) => {
                    if holder.url.is_some() && holder.url.as_deref() == self.node().url() {
                        // A previous run of this node at this address,
                        // killed before it could leave: gone.
                        self.evict(&holder.id).await;
                        continue;
                    }
                    match self.hand_to_holder(id, action, &holder.id).await {
                        Handed::Answered(answer) => return Err(answer),
                        Handed::HolderGone => self.evict(&holder.id).await,
                    }
                }
                Ok(ExecutionClaim::NotFound) => return Err(ResumeRefusal::NotFound.envelope(id)),
                Ok(ExecutionClaim::Lapsed) => {
                    return Err(internal_error(
                        "this node is not alive on the store",
                        &"lapsed",
                    ));
                }
                Err(e) => return Err(internal_error("could not claim the execution", &e)),
            }
        }
        let Some(claimed) = claimed else {
            return Err(internal_error(
                "could not claim the execution",
                &"claims kept failing",
            ));
        };
        // Read again as its holder: the journal as the last holder left it
        // (or the answer it settled with meanwhile).
        let saved = self.load_saved(id).await?;
        still_waiting(&saved, action, ResumeRefusal::NotFound)?;
        if saved.journal_dropped {
            return Err(ResumeRefusal::NotReplayable.envelope(id));
        }
        let slot = self.admission.readmit(&saved.owner.org_id);
        let live = self
            .start(
                saved,
                Some(decision_of(action)),
                slot,
                Some(claimed),
                Reply::Direct,
            )
            .await?;
        let live = self.executions.register(id, live);
        Ok(live)
    }

    /// Claims a paused run for this node, registering the node first when
    /// the store says it is not alive.
    async fn claim_run(&self, id: &str) -> Result<ExecutionClaim, executor_store::StoreError> {
        let node = self.node();
        node.ensure_alive(self.store.as_ref()).await?;
        match self.store.claim_execution(id, node.id()).await? {
            ExecutionClaim::Lapsed => {
                node.register(self.store.as_ref()).await?;
                self.store.claim_execution(id, node.id()).await
            }
            claim => Ok(claim),
        }
    }

    /// Another live node holds the paused run in its memory: the decision
    /// is posted for it (its notice wakes that node) and followed until the
    /// run settles or pauses again. A holder whose lease lapses before it
    /// takes the decision is gone: the decision is taken back and the
    /// caller claims the run. One that stays alive without taking it gets
    /// it taken back after [`HOLDER_TAKES_DECISION`] times two leases.
    async fn hand_to_holder(&self, id: &str, action: Action, holder: &str) -> Handed {
        let answered = |answer| Handed::Answered(answer);
        let pending_index = match self.load_saved(id).await {
            Ok(saved) => match still_waiting(&saved, action, ResumeRefusal::NotFound) {
                Ok(pending) => pending.index,
                Err(answer) => return answered(answer),
            },
            Err(answer) => return answered(answer),
        };
        if let Err(answer) = self.post_decision(id, action).await {
            return answered(answer);
        }
        let give_up = Instant::now() + HOLDER_TAKES_DECISION + 2 * self.node().ttl();
        let mut next_liveness_check = Instant::now();
        let mut taken_at: Option<Instant> = None;
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Ok(saved) = self.load_saved(id).await {
                if let Some(answer) = settled_answer(&saved, action) {
                    return answered(answer);
                }
                if let Some(next) = saved.state.pending()
                    && next.index != pending_index
                {
                    return answered(paused_envelope(id, next, self.approval_preview_chars));
                }
            }
            if taken_at.is_some_and(|t| t.elapsed() >= FOLLOW_RESUMED_RUN) {
                return answered(envelope::tool_error(
                    &format!(
                        "{id} was resumed on another node but has not finished yet; see `executor executions show {id}`"
                    ),
                    &[],
                ));
            }
            if Instant::now() < next_liveness_check {
                continue;
            }
            next_liveness_check = Instant::now() + Duration::from_millis(500);
            if !self.store.node_alive(holder).await.unwrap_or(true) {
                // Gone, with or without our decision: what it did not
                // finish is replayed here (calls it started are in doubt).
                let _ = self.store.take_execution_decision(id).await;
                return Handed::HolderGone;
            }
            if taken_at.is_some() || Instant::now() < give_up {
                continue;
            }
            match self.store.take_execution_decision(id).await {
                Ok(Some(_)) => {
                    tracing::warn!(
                        execution = id,
                        node = holder,
                        "the node holding a paused run did not take its decision"
                    );
                    return answered(envelope::tool_error(
                        &format!(
                            "{id} is held by a node that did not take the decision; it was not applied: retry resume"
                        ),
                        &[],
                    ));
                }
                // Taken meanwhile: the holder runs it; follow it.
                Ok(None) => taken_at = Some(Instant::now()),
                Err(e) => return answered(internal_error("could not take the decision back", &e)),
            }
        }
    }

    /// Posts a decision for the process holding the run to apply.
    async fn post_decision(&self, id: &str, action: Action) -> Result<(), Value> {
        match self
            .store
            .post_execution_decision(id, action.as_str())
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(envelope::tool_error(
                &format!("a decision for {id} is already waiting to be applied"),
                &[],
            )),
            Err(e) => Err(internal_error("could not post the decision", &e)),
        }
    }

    /// Ends a node's lease on the store: it refused, or it is a previous
    /// run of this one.
    async fn evict(&self, node: &str) {
        if let Err(e) = self.store.evict_node(node).await {
            tracing::warn!(error = %e, "could not evict a node");
        }
    }

    /// Remembers the final answer of a resumed execution, for repeats.
    async fn settle_if_finished(&self, live: &Arc<LiveExecution>, action: Action, answer: &Value) {
        if is_paused(answer) {
            return;
        }
        if let Some(saved) = live.update(|s| {
            s.state = ExecutionState::Settled {
                action,
                envelope: answer.clone(),
            };
        }) && let Err(e) = save_state(&self.store, &saved, live.gate.lease().as_deref()).await
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
                    // Committed, as an execution reads it: a skill read
                    // right after `integrations add` lists what `execute`
                    // can call.
                    let catalog = self.catalogs.catalog(&ctx.principal.org_id).await;
                    let inventory = inventory_of(&catalog);
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
        Ok(value) => (ExecutionStatus::Completed, value.clone(), None),
        Err(message) => (ExecutionStatus::Error, None, Some(message.clone())),
    };
    ExecutionRecord {
        id: id.to_string(),
        session_id: ctx.session_id.clone(),
        account_id: ctx.principal.account_id.clone(),
        org_id: ctx.principal.org_id.clone(),
        code: code.to_string(),
        status,
        result,
        error,
        logs: outcome.logs.clone(),
        tool_calls: serde_json::to_value(trace).unwrap_or(Value::Null),
        started_at_ms,
        duration_ms,
    }
}

/// What handing a decision to a paused run's holder came to.
enum Handed {
    Answered(Value),
    /// The holder's lease lapsed before it took the decision.
    HolderGone,
}

/// Runs one execution to its end on its own task, so a pause can answer the
/// `execute` call while the program waits inside its tool call.
struct Runner {
    pool: Pool,
    store: Arc<dyn Store>,
    metrics: Arc<EngineMetrics>,
    executions: Arc<Executions>,
    /// Holds the run's fair-share slot; released when the run ends.
    gate: Arc<ApprovalGate>,
    wall_clock: Duration,
    budget: HostBudget,
    /// How the answer of the call that started the run leaves the server.
    reply: Reply,
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
        let stop = Stop::default();
        let watch = tokio::spawn(watch_wall_clock(
            self.wall_clock,
            self.gate.clone(),
            stop.clone(),
        ));
        let ran = self
            .pool
            .run_until(saved.body.clone(), Some(host), stop)
            .await;
        watch.abort();
        self.gate.release_slot();
        self.budget.give_back_memory();
        let mut outcome = match ran {
            Ok(outcome) => outcome,
            Err(SandboxError::Busy) => RunOutcome::failed(
                "the server is too busy to start this execution; retry in a moment",
            ),
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
        let reply = record_durability(self.reply, self.gate.has_paused());
        match write_record(&self.store, record, reply).await {
            Ok(()) => self.metrics.record_written(reply),
            Err(e) => {
                let id = internal_error_id();
                tracing::error!(error_id = %id, error = %e, "could not record execution");
                outcome = RunOutcome::failed(format!("Internal tool error [{id}]"));
            }
        }
        self.executions.forget_after(&saved.id, FINISHED_RUN_KEPT);
        let _ = events.send(RunEvent::Finished(outcome));
    }
}

/// How a finished run's record is made durable: as the call that started
/// the run answers, unless a call of the run has waited for a human — the
/// answer may then go to another caller (a resume, the CLI) or to none,
/// and the record is flushed as it is written.
fn record_durability(started_by: Reply, has_paused: bool) -> Reply {
    match has_paused {
        true => Reply::Direct,
        false => started_by,
    }
}

/// Writes an execution's record, durable at once or, for an answer that
/// is logged by a flushed write before it is sent, with that write.
async fn write_record(
    store: &Arc<dyn Store>,
    record: ExecutionRecord,
    reply: Reply,
) -> Result<(), executor_store::StoreError> {
    match reply {
        Reply::Direct => store.insert_execution(record).await,
        Reply::Logged => store.insert_execution_deferred(record).await,
    }
}

/// Saves the run's state, as its holder once it has a lease.
async fn save_state(
    store: &Arc<dyn Store>,
    saved: &SavedExecution,
    lease: Option<&RunLease>,
) -> Result<(), executor_store::StoreError> {
    let state = serde_json::to_string(saved).unwrap_or_default();
    store
        .save_execution_state(
            &saved.id,
            &saved.owner.org_id,
            state,
            lease.map(|l| &l.fence),
        )
        .await
}

/// Keeps a paused execution's saved journal current: a call decided while
/// another still waits (two approvals of one `Promise.all`) answers after
/// the pause was saved, and a replay after a restart must not repeat it.
///
/// Holds the execution weakly and ends when the run does — also when the
/// run ended before this task subscribed.
async fn persist_journal(store: Arc<dyn Store>, live: std::sync::Weak<LiveExecution>) {
    let Some(mut changes) = live.upgrade().map(|l| l.gate.journal_changes()) else {
        return;
    };
    loop {
        if *changes.borrow_and_update() == crate::execution::JOURNAL_CLOSED {
            return;
        }
        if changes.changed().await.is_err() {
            return;
        }
        if *changes.borrow() == crate::execution::JOURNAL_CLOSED {
            return;
        }
        let Some(live) = live.upgrade() else {
            return;
        };
        let journal = live.gate.journal_entries();
        let Some(saved) = live.update(|s| {
            if s.state.pending().is_some() {
                s.journal = journal;
            }
        }) else {
            return;
        };
        if saved.state.pending().is_some()
            && let Err(e) = save_state(&store, &saved, live.gate.lease().as_deref()).await
        {
            tracing::warn!(error = %e, "could not save a paused execution's journal");
        }
    }
}

/// Stops the run once it has used `limit` of wall-clock time, not counting
/// the time its calls wait for a human (SPEC §12).
async fn watch_wall_clock(limit: Duration, gate: Arc<ApprovalGate>, stop: Stop) {
    let mut used = Duration::ZERO;
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(WALL_CLOCK_TICK.min(limit)).await;
        let now = Instant::now();
        if !gate.is_paused() {
            used += now - last;
        }
        last = now;
        if used >= limit {
            stop.request(format!(
                "execution stopped: it ran for more than {} s of wall-clock time \
                 (compute and tool calls, approval waits excluded)",
                limit.as_secs_f64()
            ));
            return;
        }
    }
}

/// Starts reading `org`'s committed catalog for an execution that starts
/// now (see [`CatalogAtStart`]). Committed, not kept: an integration the
/// CLI has just added is callable by the next execution on every node. A
/// read task that died (it panicked) is read again by its first caller.
fn catalog_at_start(catalogs: &Arc<dyn CatalogSource>, org: &str) -> CatalogAtStart {
    let (catalogs, org) = (catalogs.clone(), org.to_string());
    let read = tokio::spawn({
        let (catalogs, org) = (catalogs.clone(), org.clone());
        async move { catalogs.catalog(&org).await }
    });
    async move {
        match read.await {
            Ok(catalog) => catalog,
            Err(_) => catalogs.catalog(&org).await,
        }
    }
    .boxed()
    .shared()
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

/// The call a resume of `saved` with `action` would decide, or the answer
/// instead: the settled result (or a refusal), `when_idle` when nothing is
/// pending, expired when the window has closed.
fn still_waiting(
    saved: &SavedExecution,
    action: Action,
    when_idle: ResumeRefusal,
) -> Result<crate::execution::PendingCall, Value> {
    if let Some(answer) = settled_answer(saved, action) {
        return Err(answer);
    }
    match saved.state.pending() {
        None => Err(when_idle.envelope(&saved.id)),
        Some(p) if p.expires_at_ms <= now_ms() => Err(ResumeRefusal::Expired.envelope(&saved.id)),
        Some(p) => Ok(p.clone()),
    }
}

/// The answer for a resume of an execution that is already settled: the
/// same result for the same action (idempotent), a refusal for another.
fn settled_answer(saved: &SavedExecution, action: Action) -> Option<Value> {
    let ExecutionState::Settled {
        action: settled_with,
        envelope: answer,
    } = &saved.state
    else {
        return None;
    };
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

/// See [`Engine::integration_inventory`].
fn inventory_of(catalog: &Catalog) -> Vec<String> {
    catalog
        .integrations()
        .iter()
        .filter(|i| i.namespace != core_tools::NAMESPACE)
        .map(|i| match (&i.unavailable, i.tool_count) {
            (Some(_), _) => format!("{} (unavailable)", i.namespace),
            (None, 1) => format!("{} (1 tool)", i.namespace),
            (None, n) => format!("{} ({n} tools)", i.namespace),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC §10 across the reply paths: only the answer of the call that
    /// started a run, logged by a flushed write, carries its record's
    /// durability; a run that waited for a human flushes its record itself.
    #[test]
    fn a_record_waits_for_its_flush_unless_its_starters_logged_answer_carries_it() {
        assert_eq!(record_durability(Reply::Logged, false), Reply::Logged);
        assert_eq!(record_durability(Reply::Logged, true), Reply::Direct);
        assert_eq!(record_durability(Reply::Direct, false), Reply::Direct);
        assert_eq!(record_durability(Reply::Direct, true), Reply::Direct);
    }
}
