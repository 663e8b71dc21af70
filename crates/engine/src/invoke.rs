//! What `tools.<path>(args)` does for one execution: the built-in helpers
//! (`search`, `describe.tool`, `executor.integrations.list`) and the
//! invocation pipeline of SPEC §7 for catalog tools.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use executor_sandbox::{AgentError, HeldAnswer, HostBridge, Stop};
use executor_store::{
    ApprovalChannel, ApprovalDecision, PolicyRecord, StoreError, ToolCallOutcome, now_ms,
};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::{Value, json};

use crate::describe::ToolDescription;
use crate::envelope::internal_error_id;
use crate::execution::{ApprovalGate, Decider, Decision, declined_message};
use crate::policy::{PolicyAction, PolicySet, Rule};
use executor_call::{ApprovalMode, CallContext, Hold};
use executor_catalog::{
    Catalog, HostBudget, HostHold, HumanAnswer, HumanQuestions, ToolError, ToolInvocation,
    ToolResult, result_value,
};

/// Longest tool path accepted (SPEC §12).
pub const MAX_TOOL_PATH_BYTES: usize = 512;

/// Bounds of one execution's tool calls that the bridge enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallBounds {
    pub max_path_bytes: usize,
}

/// Most argument names a tool call's record keeps.
pub const MAX_ARG_NAMES: usize = 64;
/// Longest argument name a record keeps (longer ones are cut, at a
/// character boundary).
pub const MAX_ARG_NAME_BYTES: usize = 128;

/// One tool call of an execution, for its record and the audit trail.
#[derive(Debug, Clone)]
pub struct ToolCallTrace {
    /// The call's position among the execution's calls.
    pub index: usize,
    pub path: String,
    pub outcome: ToolCallOutcome,
    /// Why it was not ok: a SPEC §7 code, or a decline's reason.
    pub error_code: Option<String>,
    /// The answer threw inside the sandbox (metrics count these apart).
    pub threw: bool,
    /// What decided the call (policy, approval); empty where the pipeline
    /// did not get that far.
    pub audit: CallAudit,
    /// The top-level argument names (see [`arg_names`]); never values.
    pub arg_names: Vec<String>,
    pub started_at_ms: i64,
    /// The call's own time, the approval wait excluded.
    pub duration: Duration,
}

/// What the pipeline decided about one call, for the audit trail.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallAudit {
    /// The policy action that applied (a rule's or the tool's default).
    pub policy_action: Option<PolicyAction>,
    /// The rule that decided it; None for the default.
    pub policy_rule: Option<String>,
    pub approval: Option<ApprovalDecision>,
    /// The account that decided, when known.
    pub decided_by: Option<String>,
    /// How it was decided, when an approval was asked.
    pub decided_via: Option<ApprovalChannel>,
    pub approval_wait: Duration,
    /// A decline's reason (`declined`, `cancelled`, `approval_timeout`)
    /// when a decline made the call throw.
    pub declined: Option<&'static str>,
}

/// SPEC §7's error codes as the audit trail's outcomes: the one place they
/// map. `failed` is an answer about the call (its tool, its arguments, its
/// upstream's reply, a credential to fix); `error` is a call that could not
/// be made (an integration that cannot start or be reached) or a code this
/// release does not know.
pub fn outcome_of_code(code: &str) -> ToolCallOutcome {
    match code {
        "tool_blocked" => ToolCallOutcome::Blocked,
        "upstream_timeout" => ToolCallOutcome::TimedOut,
        "tool_not_found"
        | "invalid_tool_arguments"
        | "connection_missing"
        | "connection_rejected"
        | "upstream_http_error"
        | "mcp_tool_error"
        | "graphql_errors"
        | "oauth_reauth_required" => ToolCallOutcome::Failed,
        _ => ToolCallOutcome::Error,
    }
}

/// A call that threw inside the sandbox: a decline (its reason), or
/// anything else (misuse of a helper, an internal failure).
fn outcome_of_throw(declined: Option<&str>) -> ToolCallOutcome {
    match declined {
        Some("approval_timeout") => ToolCallOutcome::TimedOut,
        Some(_) => ToolCallOutcome::Declined,
        None => ToolCallOutcome::Error,
    }
}

/// The names of a call's top-level arguments (an object's keys), sorted,
/// at most [`MAX_ARG_NAMES`] of at most [`MAX_ARG_NAME_BYTES`] each. Never
/// a value: the audit trail holds no argument's content (SPEC §13).
pub fn arg_names(args: &Value) -> Vec<String> {
    let Some(object) = args.as_object() else {
        return Vec::new();
    };
    let mut names: Vec<String> = object
        .keys()
        .map(|name| {
            let mut end = name.len().min(MAX_ARG_NAME_BYTES);
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            name[..end].to_string()
        })
        .collect();
    names.sort();
    names.dedup();
    names.truncate(MAX_ARG_NAMES);
    names
}

/// The sandbox's bridge for one execution.
#[derive(Clone)]
pub struct ExecutionBridge {
    inner: Arc<BridgeInner>,
}

/// The org's catalog as of the execution's start. Its read (a round trip
/// on Postgres) starts with the execution and goes on while the sandbox
/// compiles and runs the program: the first call that needs the catalog
/// waits for it, and a program that calls no tool never does.
pub(crate) type CatalogAtStart = Shared<BoxFuture<'static, Arc<Catalog>>>;

struct BridgeInner {
    catalog: CatalogAtStart,
    ctx: CallContext,
    /// Approvals, call numbering and the replay journal of this execution.
    gate: Arc<ApprovalGate>,
    policies: PolicySet,
    policy_records: Arc<Vec<PolicyRecord>>,
    trace: Mutex<Vec<ToolCallTrace>>,
    /// Host memory the execution's parsed answers may hold.
    budget: HostBudget,
    bounds: CallBounds,
    /// Ends the run early: the wall-clock cap, or the session's lease
    /// found lost before a call (SPEC §10).
    stop: Stop,
}

/// What a run that finds its session's lease gone ends with.
pub(crate) const LEASE_LOST: &str = "this server lost its lease on the session (another server may hold it now); the run stops here and sends no further call";

impl ExecutionBridge {
    pub(crate) fn new(
        catalog: CatalogAtStart,
        ctx: CallContext,
        policy_records: Vec<PolicyRecord>,
        gate: Arc<ApprovalGate>,
        budget: HostBudget,
        bounds: CallBounds,
    ) -> Self {
        ExecutionBridge {
            inner: Arc::new(BridgeInner {
                catalog,
                ctx,
                gate,
                policies: policy_set(&policy_records),
                policy_records: Arc::new(policy_records),
                trace: Mutex::new(Vec::new()),
                budget,
                bounds,
                stop: Stop::default(),
            }),
        }
    }

    /// What ends the run early.
    pub(crate) fn stop(&self) -> Stop {
        self.inner.stop.clone()
    }

    pub fn trace(&self) -> Vec<ToolCallTrace> {
        self.inner
            .trace
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }
}

impl HostBridge for ExecutionBridge {
    fn call(&self, path: String, args: Value) -> BoxFuture<'static, Result<Value, AgentError>> {
        let held = self.call_held(path, args);
        Box::pin(async move { held.await.0 })
    }

    /// The pipeline; the answer's room in the host budget travels with it
    /// until the sandbox has parsed it.
    fn call_held(&self, path: String, args: Value) -> BoxFuture<'static, HeldAnswer> {
        let inner = self.inner.clone();
        // SPEC §12: a path this long is no tool's; it is neither numbered,
        // journaled, recorded nor echoed.
        let max = inner.bounds.max_path_bytes;
        if path.len() > max {
            let message = AgentError::new(format!(
                "a tool path is at most {max} bytes; this one has {}",
                path.len()
            ));
            return Box::pin(async move { (Err(message), None) });
        }
        // Numbered now, in the order the program made the calls (the
        // sandbox calls this synchronously), not when the tasks first run:
        // a replay after a restart must give each call the same number.
        let index = inner.gate.next_call_index();
        let active = inner.gate.call_started();
        async move {
            let _active = active;
            let started = (Instant::now(), now_ms());
            // After a restart, calls made before the pause are answered from
            // the journal instead of being run again.
            if let Some(answer) = inner.gate.replayed(index, &path, &args) {
                inner.record(index, &path, &args, &answer, started, CallAudit::default());
                return (answer, None);
            }
            // Started by a node that stopped before it journaled an answer:
            // never sent twice (SPEC §10), so it is answered, not sent.
            if inner.gate.in_doubt(index) {
                let answer = Ok(result_value(Err(ToolError::new(
                    "integration_unavailable",
                    format!(
                        "{path}: the node running this execution stopped while this call was in flight; it may or may not have reached the integration, and it is not sent again"
                    ),
                ))));
                inner.gate.remember(index, &path, &args, &answer);
                inner.record(index, &path, &args, &answer, started, CallAudit::default());
                return (answer, None);
            }
            let answered = std::panic::AssertUnwindSafe(inner.answer(index, &path, args.clone()))
                .catch_unwind()
                .await;
            let (answer, held, audit) = answered.unwrap_or_else(|_| {
                let id = internal_error_id();
                tracing::error!(error_id = %id, %path, "tool call panicked");
                (
                    Err(AgentError::new(format!("Internal tool error [{id}]"))),
                    None,
                    CallAudit::default(),
                )
            });
            inner.gate.remember(index, &path, &args, &answer);
            inner.record(index, &path, &args, &answer, started, audit);
            let held = held.map(|h| Box::new(h) as Box<dyn std::any::Any + Send>);
            (answer, held)
        }
        .boxed()
    }
}

/// The engine's side of an integration's question about call `index`
/// (SPEC §8): the call waits in the approval gate as a policy's approval
/// does, with the question shown beside the call.
struct CallQuestions {
    gate: Arc<ApprovalGate>,
    index: usize,
    path: String,
    args: Value,
    approval: ApprovalMode,
    /// How the latest question was decided, for the call's audit.
    decided: Arc<Mutex<Option<QuestionDecided>>>,
}

struct QuestionDecided {
    approval: ApprovalDecision,
    by: Option<String>,
    via: Option<ApprovalChannel>,
    wait: Duration,
}

impl HumanQuestions for CallQuestions {
    fn ask(&self, question: String) -> BoxFuture<'static, HumanAnswer> {
        if self.approval == ApprovalMode::GivenByCaller {
            // The operator's call by name approves the call, not a
            // question they never saw.
            let refusal = format!(
                "{} asks: {question} — a call by name from the management API cannot answer it; run it from an agent or `executor call`",
                self.path
            );
            return Box::pin(async move { HumanAnswer::Unavailable(refusal) });
        }
        let waiting = Instant::now();
        let decision = self
            .gate
            .decide(self.index, &self.path, &self.args, Some(question));
        let (gate, index) = (self.gate.clone(), self.index);
        let decided = self.decided.clone();
        Box::pin(async move {
            let decision = decision.await;
            let decider = gate.decider(index);
            let via = decided_via(decider.as_ref(), &decision);
            let (approval, answer) = match decision {
                Decision::Accept => (ApprovalDecision::Approved, HumanAnswer::Accepted),
                Decision::Decline { reason } => {
                    (ApprovalDecision::Declined, HumanAnswer::Declined { reason })
                }
                Decision::Unavailable(why) => return HumanAnswer::Unavailable(why),
            };
            if let Ok(mut decided) = decided.lock() {
                *decided = Some(QuestionDecided {
                    approval,
                    by: decider.and_then(|d| d.by),
                    via,
                    wait: waiting.elapsed(),
                });
            }
            answer
        })
    }
}

/// How a waiting call was decided, for the audit: by whoever decided it,
/// else — nobody decided a call whose window closed — by the timeout.
fn decided_via(decider: Option<&Decider>, decision: &Decision) -> Option<ApprovalChannel> {
    decider.map(|d| d.via).or(match decision {
        Decision::Decline {
            reason: "approval_timeout",
        } => Some(ApprovalChannel::Timeout),
        _ => None,
    })
}

impl BridgeInner {
    /// The call's answer, the host-budget room it holds (if any), and what
    /// decided it.
    async fn answer(
        &self,
        index: usize,
        path: &str,
        args: Value,
    ) -> (Result<Value, AgentError>, Option<Arc<HostHold>>, CallAudit) {
        let catalog = self.catalog.clone().await;
        let mut audit = CallAudit::default();
        let (answer, held) = match path {
            "search" => (search(&catalog, &self.policies, &args), None),
            "describe.tool" => (describe_tool(&catalog, &self.policies, &args), None),
            "executor.integrations.list" => (list_integrations(&catalog, &args), None),
            _ => match self.invoke(&catalog, index, path, args, &mut audit).await {
                Ok(result) => {
                    let held = result.as_ref().ok().and_then(|s| s.held.clone());
                    (Ok(result_value(result)), held)
                }
                Err(thrown) => (Err(thrown), None),
            },
        };
        (answer, held, audit)
    }

    /// SPEC §7: lookup → policy → validation → approval → credential →
    /// invoke. `Err` is a throw inside the sandbox (a declined approval);
    /// every other failure is a `{ok: false}` result.
    async fn invoke(
        &self,
        catalog: &Arc<Catalog>,
        index: usize,
        path: &str,
        args: Value,
        audit: &mut CallAudit,
    ) -> Result<ToolResult, AgentError> {
        let Some(tool) = catalog.get(path).cloned() else {
            if let Some(why) = catalog.unavailable(path) {
                return Ok(Err(ToolError::new(
                    why.code,
                    format!("{path} cannot be called: {}", why.message),
                )));
            }
            return Ok(Err(ToolError::new(
                "tool_not_found",
                format!("Tool not found: {path}"),
            )
            .with_details(
                json!({ "path": path, "suggestions": suggestions(catalog, &self.policies, path) }),
            )));
        };
        let (action, rule) = self.policies.resolve_rule(path, tool.requires_approval);
        audit.policy_action = Some(action);
        audit.policy_rule = rule.map(|r| r.id.clone());
        if action == PolicyAction::Block {
            return Ok(Err(ToolError::new(
                "tool_blocked",
                format!("Tool {path} is blocked by policy"),
            )));
        }
        // Validation comes before approval: a call that can only fail never pauses.
        if !args.is_object() {
            return Ok(Err(ToolError::new(
                "invalid_tool_arguments",
                format!("{path} expects an object as its input"),
            )));
        }
        if let Err(problems) = catalog.validate(&tool, &args) {
            return Ok(Err(ToolError::new(
                "invalid_tool_arguments",
                format!("{path}: the input does not match its schema: {problems}"),
            )));
        }
        if let Err(refused) = tool.invoker.check(&tool, &args) {
            return Ok(Err(refused));
        }
        if action == PolicyAction::RequireApproval
            && self.ctx.approval == ApprovalMode::GivenByCaller
        {
            // The operator calling one tool by name approves it by calling.
            audit.approval = Some(ApprovalDecision::Approved);
            audit.decided_by = Some(self.ctx.principal.account_id.clone());
            audit.decided_via = Some(ApprovalChannel::Caller);
        } else if action == PolicyAction::RequireApproval {
            // Measured apart: the wait is not the call's duration.
            let waiting = Instant::now();
            let decision = self.gate.decide(index, path, &args, None).await;
            audit.approval_wait = waiting.elapsed();
            let decider = self.gate.decider(index);
            audit.decided_by = decider.as_ref().and_then(|d| d.by.clone());
            audit.decided_via = decided_via(decider.as_ref(), &decision);
            match decision {
                Decision::Accept => audit.approval = Some(ApprovalDecision::Approved),
                Decision::Decline { reason } => {
                    audit.approval = Some(ApprovalDecision::Declined);
                    audit.declined = Some(reason);
                    return Err(AgentError::new(declined_message(path, reason)));
                }
                Decision::Unavailable(message) => return Err(AgentError::new(message)),
            }
        }
        // A run that has paused is held through its lease: the call is
        // recorded as started, fenced, before it leaves (SPEC §10).
        if let Some(lease) = self.gate.lease() {
            match lease
                .store
                .advance_execution(&lease.execution_id, &lease.fence, index as i64)
                .await
            {
                Ok(()) => {}
                Err(StoreError::Fenced { .. }) => {
                    return Err(AgentError::new(
                        "this execution was taken over by another node; its run here stops",
                    ));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not record a tool call as started");
                    return Ok(Err(ToolError::new(
                        "integration_unavailable",
                        format!("{path} was not called: the store could not record the call first"),
                    )));
                }
            }
        } else if let Some(holder) = &self.ctx.holder {
            // A session's run: the call leaves only while this node still
            // holds the session's lease (SPEC §10).
            match holder.check().await {
                Hold::Held => {}
                Hold::Lost => {
                    tracing::warn!(
                        session = self.ctx.session_id.as_deref().unwrap_or_default(),
                        "a run's session lease was lost before a call; the run stops"
                    );
                    self.stop.request(LEASE_LOST);
                    return Err(AgentError::new(LEASE_LOST));
                }
                Hold::Unknown(e) => {
                    tracing::warn!(error = %e, "could not confirm the session's lease before a call");
                    return Ok(Err(ToolError::new(
                        "integration_unavailable",
                        format!(
                            "{path} was not called: the store could not confirm this server still holds the session"
                        ),
                    )));
                }
            }
        }
        let questions = Arc::new(CallQuestions {
            gate: self.gate.clone(),
            index,
            path: path.to_string(),
            args: args.clone(),
            approval: self.ctx.approval,
            decided: Arc::default(),
        });
        let invocation = ToolInvocation {
            tool: tool.clone(),
            args,
            ctx: self.ctx.clone(),
            catalog: catalog.clone(),
            policies: self.policy_records.clone(),
            budget: self.budget.clone(),
            questions: Some(questions.clone()),
        };
        let result = tool.invoker.invoke(invocation).await;
        // The integration's questions were decided as an approval is: the
        // audit trail says so (the last decision, its wait added).
        if let Some(asked) = questions.decided.lock().ok().and_then(|mut d| d.take()) {
            audit.approval = Some(asked.approval);
            audit.decided_by = asked.by.or(audit.decided_by.take());
            audit.decided_via = asked.via.or(audit.decided_via);
            audit.approval_wait += asked.wait;
        }
        Ok(result)
    }

    fn record(
        &self,
        index: usize,
        path: &str,
        args: &Value,
        answer: &Result<Value, AgentError>,
        (started, started_at_ms): (Instant, i64),
        audit: CallAudit,
    ) {
        let (outcome, error_code) = match answer {
            Err(_) => (
                outcome_of_throw(audit.declined),
                audit.declined.map(str::to_string),
            ),
            Ok(v) => match v.get("ok") {
                Some(Value::Bool(false)) => {
                    let code = v.pointer("/error/code").and_then(Value::as_str);
                    (
                        code.map_or(ToolCallOutcome::Error, outcome_of_code),
                        Some(code.unwrap_or("error").to_string()),
                    )
                }
                _ => (ToolCallOutcome::Ok, None),
            },
        };
        let duration = started.elapsed().saturating_sub(audit.approval_wait);
        if let Ok(mut trace) = self.trace.lock() {
            trace.push(ToolCallTrace {
                index,
                path: path.to_string(),
                outcome,
                error_code,
                threw: answer.is_err(),
                audit,
                arg_names: arg_names(args),
                started_at_ms,
                duration,
            });
        }
    }
}

/// Reads an optional field of a helper's input, or explains the shape.
fn field<'a>(
    args: &'a Value,
    key: &str,
    helper: &str,
    shape: &str,
) -> Result<Option<&'a Value>, AgentError> {
    if !args.is_object() {
        return Err(AgentError::new(format!(
            "{helper} expects an object: {shape}"
        )));
    }
    Ok(args.get(key).filter(|v| !v.is_null()))
}

fn opt_str(
    args: &Value,
    key: &str,
    helper: &str,
    shape: &str,
) -> Result<Option<String>, AgentError> {
    match field(args, key, helper, shape)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(AgentError::new(format!(
            "{helper}: {key} must be a string: {shape}"
        ))),
    }
}

fn opt_count(
    args: &Value,
    key: &str,
    default: u64,
    max: u64,
    helper: &str,
    shape: &str,
) -> Result<u64, AgentError> {
    match field(args, key, helper, shape)? {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .map(|n| n.min(max))
            .ok_or_else(|| {
                AgentError::new(format!(
                    "{helper}: {key} must be a non-negative integer: {shape}"
                ))
            }),
    }
}

const SEARCH_SHAPE: &str =
    "{ query?: string; namespace?: string; limit?: number; offset?: number }";

/// `tools.search({query?, namespace?, limit = 12, offset = 0})`.
fn search(catalog: &Catalog, policies: &PolicySet, args: &Value) -> Result<Value, AgentError> {
    let helper = "tools.search";
    let query = opt_str(args, "query", helper, SEARCH_SHAPE)?.unwrap_or_default();
    let namespace = opt_str(args, "namespace", helper, SEARCH_SHAPE)?;
    let limit = opt_count(args, "limit", 12, 100, helper, SEARCH_SHAPE)? as usize;
    let offset = opt_count(args, "offset", 0, u64::MAX, helper, SEARCH_SHAPE)? as usize;
    // Blocked tools never appear (SPEC §6).
    let mut matches = catalog.search(&query, namespace.as_deref());
    matches.retain(|(t, _)| !policies.is_blocked(&t.path));
    let total = matches.len();
    let items: Vec<Value> = matches
        .iter()
        .skip(offset)
        .take(limit)
        .map(|(t, score)| {
            let mut item = serde_json::Map::new();
            item.insert("path".into(), json!(&*t.path));
            item.insert("name".into(), json!(t.name()));
            if let Some(d) = &t.description {
                item.insert("description".into(), json!(d));
            }
            item.insert("integration".into(), json!(t.integration()));
            item.insert("score".into(), json!(round2(*score)));
            Value::Object(item)
        })
        .collect();
    let next = offset.saturating_add(items.len());
    let has_more = next < total;
    Ok(json!({
        "items": items,
        "total": total,
        "hasMore": has_more,
        "nextOffset": if has_more { json!(next) } else { Value::Null },
    }))
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `tools.describe.tool({path})`.
fn describe_tool(
    catalog: &Catalog,
    policies: &PolicySet,
    args: &Value,
) -> Result<Value, AgentError> {
    let shape = "{ path: string }";
    let path = opt_str(args, "path", "tools.describe.tool", shape)?
        .ok_or_else(|| AgentError::new(format!("tools.describe.tool expects {shape}")))?;
    let Some(tool) = catalog.get(&path).filter(|t| !policies.is_blocked(&t.path)) else {
        return Ok(json!({
            "path": path,
            "error": {
                "code": "tool_not_found",
                "message": format!("Tool not found: {path}"),
                "suggestions": suggestions(catalog, policies, &path),
            }
        }));
    };
    Ok(ToolDescription::of(tool).to_agent_value())
}

/// `tools.executor.integrations.list({query?, limit?, offset?})`.
fn list_integrations(catalog: &Catalog, args: &Value) -> Result<Value, AgentError> {
    let helper = "tools.executor.integrations.list";
    let shape = "{ query?: string; limit?: number; offset?: number }";
    let query = opt_str(args, "query", helper, shape)?.map(|q| q.to_lowercase());
    let limit = opt_count(args, "limit", 50, 500, helper, shape)? as usize;
    let offset = opt_count(args, "offset", 0, u64::MAX, helper, shape)? as usize;
    let all: Vec<_> = catalog
        .integrations()
        .iter()
        .filter(|i| {
            query
                .as_deref()
                .is_none_or(|q| i.namespace.to_lowercase().contains(q))
        })
        .collect();
    let total = all.len();
    let items: Vec<_> = all.into_iter().skip(offset).take(limit).collect();
    let next = offset.saturating_add(items.len());
    Ok(json!({
        "items": items,
        "total": total,
        "hasMore": next < total,
        "nextOffset": if next < total { json!(next) } else { Value::Null },
    }))
}

/// Up to five unblocked paths near a missing one.
fn suggestions(catalog: &Catalog, policies: &PolicySet, path: &str) -> Vec<String> {
    catalog
        .suggestions(path)
        .into_iter()
        .filter(|p| !policies.is_blocked(p))
        .collect()
}

/// Stored rules as a policy set; a rule that no longer parses is skipped
/// (and logged) rather than failing every call.
pub(crate) fn policy_set(records: &[PolicyRecord]) -> PolicySet {
    let rules = records
        .iter()
        .filter_map(|r| match r.pattern.parse() {
            Ok(pattern) => Some(Rule {
                id: r.id.clone(),
                pattern,
                action: r.action,
            }),
            Err(_) => {
                tracing::warn!(policy = %r.id, "skipping a stored policy that does not parse");
                None
            }
        })
        .collect();
    PolicySet::new(rules)
}
