//! The three MCP tools and their dispatch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use executor_sandbox::{Limits, Pool};
use executor_store::{ElicitationMode, NODE_LEASE, NodeLease, Store};
use serde_json::{Value, json};

use crate::admission::{Admission, QueueLimits, Refused, ShareLimits};
use crate::core_tools;
use crate::envelope::{self, MAX_EMITTED_TEXT_CHARS, MAX_RESULT_TEXT_CHARS, TextLimits};
use crate::execution::{Executions, MAX_ARGS_PREVIEW_CHARS, Reader};
use crate::invoke::CallBounds;
use crate::metrics::EngineMetrics;
use crate::outcome::ToolOutcome;
use crate::policy_cache::PolicyCache;
use crate::skills::SKILLS;
use executor_call::{ApprovalMode, ApprovalPrompt, CallContext, ClientGone, Reply};
use executor_catalog::{Catalog, CatalogSource, StaticCatalog};

/// Integration namespaces listed in the `execute` description, at most.
const MAX_LISTED_INTEGRATIONS: usize = 50;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub limits: Limits,
    /// Running executions in all and per org (SPEC §4, §12).
    pub share: ShareLimits,
    /// An org's executions over its share wait in its queue, this long
    /// and this many (SPEC §4, §12).
    pub queue: QueueLimits,
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
    /// Where the console shows one paused execution, without its id
    /// (`<public URL>/console/approvals/`): a console-mode session's
    /// paused text links there (SPEC §14). None outside a server.
    pub console_approvals_url: Option<String>,
}

/// SPEC §12's execution wall clock.
pub const WALL_CLOCK: Duration = Duration::from_secs(10 * 60);

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            share: ShareLimits::default(),
            queue: QueueLimits::default(),
            approval_window: crate::execution::APPROVAL_WINDOW,
            wall_clock: WALL_CLOCK,
            max_journal_bytes: crate::execution::MAX_JOURNAL_BYTES,
            max_tool_path_bytes: crate::invoke::MAX_TOOL_PATH_BYTES,
            max_result_text_chars: MAX_RESULT_TEXT_CHARS,
            max_emitted_text_chars: MAX_EMITTED_TEXT_CHARS,
            max_approval_preview_chars: MAX_ARGS_PREVIEW_CHARS,
            console_approvals_url: None,
        }
    }
}

/// The engine's MCP tools (SPEC §5), parsed from a `tools/call` name once,
/// at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreTool {
    Execute,
    Skills,
    Resume,
}

impl CoreTool {
    pub fn as_str(self) -> &'static str {
        match self {
            CoreTool::Execute => "execute",
            CoreTool::Skills => "skills",
            CoreTool::Resume => "resume",
        }
    }
}

impl std::str::FromStr for CoreTool {
    type Err = ToolCallError;
    fn from_str(name: &str) -> Result<Self, ToolCallError> {
        match name {
            "execute" => Ok(CoreTool::Execute),
            "skills" => Ok(CoreTool::Skills),
            "resume" => Ok(CoreTool::Resume),
            other => Err(ToolCallError::UnknownTool(other.to_string())),
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
    pub(crate) store: Arc<dyn Store>,
    pub(crate) pool: Pool,
    /// Fair share of running and paused executions between orgs.
    pub(crate) admission: Arc<Admission>,
    pub(crate) wall_clock: Duration,
    pub(crate) max_journal_bytes: usize,
    pub(crate) call_bounds: CallBounds,
    pub(crate) catalogs: Arc<dyn CatalogSource>,
    pub(crate) metrics: Arc<EngineMetrics>,
    pub(crate) executions: Arc<Executions>,
    /// Serialises restores of paused executions after a restart.
    pub(crate) restoring: tokio::sync::Mutex<()>,
    pub(crate) approval_window: std::time::Duration,
    /// How much text a rendered outcome may hold.
    pub(crate) text_limits: TextLimits,
    /// Longest argument preview of a paused call, in characters.
    pub(crate) approval_preview_chars: usize,
    /// See [`EngineConfig::console_approvals_url`].
    pub(crate) console_approvals_url: Option<String>,
    /// This process as a node on the store: the holder of the paused runs
    /// in its memory (shared with the sessions in a server, see
    /// [`Engine::attach_node`]).
    pub(crate) node: std::sync::OnceLock<Arc<NodeLease>>,
    /// Whether this process keeps holding the runs it pauses: set once a
    /// server's node is attached (its sessions renew the lease) or posted
    /// decisions are applied here. A one-shot command keeps neither and
    /// releases a run as soon as it has paused (see `report_pause`).
    pub(crate) holds_paused_runs: AtomicBool,
    /// Each org's policies at the store's access revision.
    pub(crate) policies: PolicyCache,
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
            admission: Admission::new(config.share, config.queue),
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
            console_approvals_url: config.console_approvals_url,
            node: std::sync::OnceLock::new(),
            holds_paused_runs: AtomicBool::new(false),
            policies: PolicyCache::default(),
        }
    }

    /// Makes `node` (the server's, renewed by its sessions) the holder of
    /// the runs this engine pauses. Without it, an engine (a CLI command)
    /// registers a node of its own when it first needs one.
    pub fn attach_node(&self, node: Arc<NodeLease>) {
        let _ = self.node.set(node);
        self.holds_paused_runs.store(true, Ordering::Release);
    }

    /// Counts running executions against the bounds the nodes sharing
    /// `shares`' store hold together (SPEC §4, §12), from now on.
    pub fn share_with(&self, shares: Arc<executor_store::Shares>) {
        self.admission.share_with(shares);
    }

    /// Who reads what a call of `ctx` answers: a person at a shell when
    /// the call has no MCP session and this engine is a one-shot command
    /// (`executor call`; stdio and sessionless HTTP callers are agents
    /// without a session, in processes that hold their paused runs).
    pub(crate) fn reader(&self, ctx: &CallContext) -> Reader {
        match (&ctx.session_id, self.holds_paused_runs(), ctx.approval) {
            (None, false, _) => Reader::Shell,
            (_, _, ApprovalMode::InConsole) => Reader::ConsoleAgent,
            _ => Reader::Agent,
        }
    }

    /// Whether the runs this engine pauses stay held by its node (see
    /// `holds_paused_runs`).
    pub(crate) fn holds_paused_runs(&self) -> bool {
        self.holds_paused_runs.load(Ordering::Acquire)
    }

    pub(crate) fn node(&self) -> &Arc<NodeLease> {
        self.node
            .get_or_init(|| Arc::new(NodeLease::new(None, NODE_LEASE)))
    }

    /// Longest argument preview of a paused call: what a transport that
    /// asks the human itself cuts the arguments at.
    /// How long a paused call waits for a human.
    pub fn approval_window(&self) -> std::time::Duration {
        self.approval_window
    }

    pub fn approval_preview_chars(&self) -> usize {
        self.approval_preview_chars
    }

    pub fn metrics(&self) -> &EngineMetrics {
        &self.metrics
    }

    /// Whether a new execution of `org` would be refused because the whole
    /// server is at its limit (not the org's share): a transport that can
    /// still choose its status answers 503 with `Retry-After` then.
    fn server_full_for(&self, org_id: &str) -> bool {
        matches!(
            self.admission.would_refuse(org_id),
            Some(Refused::ServerFull(_))
        )
    }

    /// Why a request of `org_id` would only wait and then be refused as
    /// busy, if it would (SPEC §12): the store's writes are backed up to
    /// their bound, or — for a request that starts an execution — the
    /// server runs as many executions as it may, or the sandbox's queue is
    /// full. The transports answer 503 `Retry-After` before they take the
    /// request on; a queue that fills after this check answers inside the
    /// result.
    pub fn overloaded(&self, org_id: &str, starts_execution: bool) -> Option<Overload> {
        if self.store.writes_backed_up() {
            Some(Overload::StoreWrites)
        } else if !starts_execution {
            None
        } else if self.server_full_for(org_id) {
            Some(Overload::Executions)
        } else if self.pool.queue_full() {
            Some(Overload::SandboxQueue)
        } else {
            None
        }
    }

    /// Registers the engine's `/metrics` series: the counters, and running
    /// and paused executions now (read here, so a scrape sees this moment).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        let (running, paused) = self.admission.totals();
        let queues = self.admission.queues();
        self.metrics.register(registry, running, paused, queues);
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
    pub fn tool_definitions(&self, inventory: &[String], mode: ElicitationMode) -> Vec<Value> {
        let mut tools = vec![
            json!({
                "name": CoreTool::Execute.as_str(),
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
                "name": CoreTool::Skills.as_str(),
                "description": "How-to guides for this server. Call with no name for the index, or with {\"name\":\"execute\"} before writing code.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "name": { "type": "string", "description": "The skill to read." } },
                    "additionalProperties": false
                }
            }),
        ];
        match mode {
            ElicitationMode::Model => tools.push(json!({
                "name": CoreTool::Resume.as_str(),
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
            })),
            // The human decides in the console; `resume` only waits.
            ElicitationMode::Console => tools.push(json!({
                "name": CoreTool::Resume.as_str(),
                "description": "Waits for the user's decision, made in the console, on an execution that paused for approval, and returns what happened next: the program's result, or its next pause. It does not decide.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "executionId": { "type": "string", "description": "The exec_… id from the paused result." }
                    },
                    "required": ["executionId"]
                }
            })),
            // Asked inline; nothing for the agent to resume.
            ElicitationMode::Native => {}
        }
        tools
    }

    /// Runs one tool. Tool-level failures are answers with `isError`.
    /// Approvals use model mode: a pause answers [`ToolOutcome::Paused`].
    pub async fn call_tool(&self, ctx: &CallContext, tool: CoreTool, args: &Value) -> ToolOutcome {
        self.call_tool_asking(ctx, tool, args, None, Reply::Direct, None)
            .await
    }

    /// [`Engine::call_tool`], with approvals asked through `prompt` inline
    /// (native elicitation) when there is one: the call then answers only
    /// when the program has finished. `reply` says how the answer leaves
    /// the server (see [`Reply`]); `gone`, when the transport can tell,
    /// that its client went away (an execution still waiting for its turn
    /// then leaves its org's queue).
    pub async fn call_tool_asking(
        &self,
        ctx: &CallContext,
        tool: CoreTool,
        args: &Value,
        prompt: Option<&dyn ApprovalPrompt>,
        reply: Reply,
        gone: Option<&ClientGone>,
    ) -> ToolOutcome {
        match tool {
            CoreTool::Execute => self.execute(ctx, args, prompt, reply, gone).await,
            CoreTool::Skills => ToolOutcome::Answered(self.skills(ctx, args).await),
            CoreTool::Resume => self.resume(ctx, args).await,
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

/// What the server is too busy for now (see [`Engine::overloaded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Overload {
    #[error("the server is running as many executions as it may")]
    Executions,
    #[error("the sandbox's queue of executions waiting for a thread is full")]
    SandboxQueue,
    #[error("the store has as many writes queued as it may")]
    StoreWrites,
}
