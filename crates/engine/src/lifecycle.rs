//! The execution lifecycle: its states and every transition between them,
//! in one place (SPEC §5, §9, §10).
//!
//! ```text
//!                 execute
//!                    │ admitted (fair share), program normalised
//!                    ▼
//!   resume ─────► Running ──(a tool call needs approval)──► Waiting
//!   decide           │  ▲                                      │
//!   (posted,         │  └──────────(decide: accept)────────────┤
//!    inline)         │          decline / cancel / window ends: │
//!                    │          the call throws, the run goes on│
//!                    ▼                                          │
//!                 Settled ◄──────(program ends)─────────────────┘
//! ```
//!
//! The boxes are [`ExecutionState`]'s variants (`execution.rs` holds the
//! run's model: its saved form, the approval gate, the registry of paused
//! runs); the arrows are the methods here. `execute` admits a run and
//! starts it ([`Engine::start`], the run itself on its own task:
//! `runner.rs`); `advance` waits for it to pause or finish; a pause is
//! saved and answered ([`ToolOutcome::Paused`]); `decide` hands a decision
//! to the waiting call, in place when the run is in this process's memory,
//! else after a claim and a replay (`restore`), or to the node that holds
//! it (`hand_to_holder`). A run that never pauses is never registered.
//!
//! A paused run keeps its sandbox thread blocked inside the tool call (its
//! compute clock stopped) and is continued in place. Its state is also
//! saved to the store with a journal of every tool-call answer so far, so
//! that after a restart a decision can replay the program deterministically
//! up to the pending call (answering earlier calls from the journal, not
//! upstream) and apply the decision there.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use executor_call::{
    Action, ApprovalMode, ApprovalPrompt, CallContext, ClientGone, Holder, Reply, args_preview,
};
use executor_sandbox::{AgentError, RunOutcome};
use executor_store::{
    ApprovalChannel, ExecutionClaim, ExecutionRecord, ExecutionStatus, FIRST_EPOCH, Fence, Notice,
    StoreError, next_notice, now_ms,
};
use futures::FutureExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::admission::Slot;
use crate::engine::Engine;
use crate::envelope::{self, internal_error_id};
use crate::execution::{
    ApprovalGate, Decider, Decision, ExecutionState, LiveExecution, PendingApproval, PendingCall,
    Reader, ResumeRefusal, RunEvent, RunLease, SavedExecution, approval_request, paused_envelope,
};
use crate::invoke::policy_set;
use crate::invoke::{CatalogAtStart, ExecutionBridge};
use crate::normalize::normalize;
use crate::outcome::{PausedCall, ToolOutcome};
use crate::runner::{Runner, execution_record, persist_journal, save_state, write_record};
use executor_catalog::{CatalogSource, HostBudget};

/// A tool error the agent reads (SPEC §7): the program was refused or
/// cannot go on.
fn refusal(message: &str, logs: &[String]) -> ToolOutcome {
    ToolOutcome::Answered(envelope::tool_error(message, logs))
}

/// `Internal tool error [id]`, with the detail in the server log only.
fn failed_internally(what: &str, detail: &dyn std::fmt::Display) -> ToolOutcome {
    let id = internal_error_id();
    tracing::error!(error_id = %id, error = %detail, "{what}");
    refusal(&format!("Internal tool error [{id}]"), &[])
}

impl ResumeRefusal {
    /// The refusal as the agent reads it.
    fn outcome(self, execution_id: &str) -> ToolOutcome {
        ToolOutcome::Answered(self.envelope(execution_id))
    }
}
/// How often a console-mode `resume` looks at the run it waits for.
const CONSOLE_DECISION_POLL: Duration = Duration::from_millis(250);
/// How long past its deadline a waiting call may take to be declined by
/// its holder's timeout before a console-mode `resume` stops waiting.
const EXPIRY_GRACE_MS: i64 = 2_000;
/// How often a server looks for decisions posted by `executor resume`.
const POSTED_DECISION_POLL: Duration = Duration::from_millis(200);
/// The same poll behind a store's decision notices, for a lost one.
const POSTED_DECISION_FALLBACK: Duration = Duration::from_secs(2);
/// How often `executor resume` reads the state of a run it posted a
/// decision for.
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// How long `executor resume` follows a run a server has taken over.
const FOLLOW_RESUMED_RUN: Duration = Duration::from_secs(600);
/// How long the node holding a paused run has to take a decision posted
/// for it by another node (a notice wakes it at once; SQLite's poll is
/// 200 ms) before the decision is taken back.
const HOLDER_TAKES_DECISION: Duration = Duration::from_secs(5);

impl Engine {
    /// The run paused at `pending`, told to whoever reads it.
    fn paused(&self, execution_id: &str, pending: &PendingCall, reader: Reader) -> ToolOutcome {
        let preview = self.approval_preview_chars;
        ToolOutcome::Paused(PausedCall {
            request: approval_request(execution_id, pending, preview),
            envelope: paused_envelope(
                execution_id,
                pending,
                preview,
                reader,
                self.console_approvals_url.as_deref(),
            ),
        })
    }

    pub(crate) async fn execute(
        &self,
        ctx: &CallContext,
        args: &Value,
        prompt: Option<&dyn ApprovalPrompt>,
        reply: Reply,
        gone: Option<&ClientGone>,
    ) -> ToolOutcome {
        let Some(code) = args.get("code").and_then(Value::as_str) else {
            return refusal("execute needs {\"code\": string}: the program to run", &[]);
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
        // SPEC §4: over the org's share the execution waits its turn in the
        // org's queue; past the queue's bounds (or over the server's
        // limit) the answer comes at once, before anything runs or is
        // recorded. A client that goes away while its run waits takes the
        // run out of the queue.
        let slot = match self
            .admission
            .admit_in_turn(&ctx.principal.org_id, gone)
            .await
        {
            Ok((slot, waited)) => {
                if let Some(waited) = waited {
                    self.metrics.queue_waited(waited);
                }
                slot
            }
            Err(refused) => {
                self.metrics.queue_refused(&refused);
                return refusal(&refused.to_string(), &[]);
            }
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
            approved_by_caller: ctx.approval == ApprovalMode::GivenByCaller,
        };
        match self
            .start(saved, None, slot, None, ctx.holder.clone(), reply)
            .await
        {
            Ok(live) => {
                let mut events = live.events.lock().await;
                let answer = self.advance(&live, &mut events, self.reader(ctx)).await;
                match prompt {
                    Some(prompt) => {
                        self.ask_inline(ctx, &live, &mut events, answer, prompt)
                            .await
                    }
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
        ctx: &CallContext,
        live: &Arc<LiveExecution>,
        events: &mut mpsc::UnboundedReceiver<RunEvent>,
        mut answer: ToolOutcome,
        prompt: &dyn ApprovalPrompt,
    ) -> ToolOutcome {
        while matches!(answer, ToolOutcome::Paused(_)) {
            let Some(saved) = live.snapshot() else {
                return failed_internally("execution state lock poisoned", &"poisoned");
            };
            let ExecutionState::Waiting(pending) = saved.state else {
                return answer;
            };
            let request = approval_request(&saved.id, &pending, self.approval_preview_chars);
            let window = Duration::from_millis((pending.expires_at_ms - now_ms()).max(0) as u64);
            live.asked_inline.store(true, Ordering::Release);
            let mut posted = live.posted.subscribe();
            // Who decided: the caller's human when the client answered;
            // for a decision posted from outside, whoever posted it.
            let asked = async {
                let posted = async {
                    posted
                        .wait_for(Option::is_some)
                        .await
                        .ok()
                        .and_then(|a| a.clone())
                };
                let native = Decider::new(
                    Some(ctx.principal.account_id.clone()),
                    ApprovalChannel::Native,
                );
                tokio::select! {
                    action = prompt.ask(request) => action.map(|a| (a, Some(native))),
                    Some((action, decider)) = posted => Some((action, decider)),
                }
            };
            let asked = tokio::time::timeout(window, asked).await;
            live.posted.send_replace(None);
            let action = match asked {
                Ok(Some((action, decider))) => {
                    live.gate.set_decider(pending.index, decider);
                    action
                }
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
            answer = self.advance(live, events, Reader::Agent).await;
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
    ) -> ToolOutcome {
        let outcome = RunOutcome::failed(message);
        self.metrics.record(&outcome, &[], 0);
        let record = execution_record(ctx, id, code, &outcome, Vec::new(), now_ms(), 0);
        if let Err(e) = write_record(&self.store, record, reply).await {
            return failed_internally("could not record execution", &e);
        }
        ToolOutcome::Answered(envelope::render(&outcome, self.text_limits))
    }

    /// Starts (or, after a restart, replays) the run of `saved`. With a
    /// `decision` (and who made it, when known), the pending call of
    /// `saved` receives it when reached. `reply`: how the answer of the
    /// call that starts it leaves the server.
    async fn start(
        &self,
        saved: SavedExecution,
        decision: Option<(Decision, Option<Decider>)>,
        slot: Slot,
        claimed: Option<(Fence, i64)>,
        holder: Option<Holder>,
        reply: Reply,
    ) -> Result<Arc<LiveExecution>, ToolOutcome> {
        let org = saved.owner.org_id.clone();
        let catalog = catalog_at_start(&self.catalogs, &org);
        let policies = self
            .policies
            .policies(self.store.as_ref(), &org)
            .await
            .map_err(|e| failed_internally("could not read policies", &e))?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (decision, decider) = decision.unzip();
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
        if let Some(pending) = saved.state.pending() {
            gate.set_decider(pending.index, decider.flatten());
        }
        // A session's new run asks its session's holder before each call;
        // a continued one is fenced by its own lease (`claimed`).
        let ctx = CallContext {
            holder,
            ..saved.owner_context()
        };
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
        reader: Reader,
    ) -> ToolOutcome {
        loop {
            let pending = match events.recv().await {
                Some(RunEvent::Paused(pending)) => pending,
                Some(RunEvent::Finished(outcome)) => {
                    return ToolOutcome::Answered(envelope::render(&outcome, self.text_limits));
                }
                None => {
                    return failed_internally(
                        "execution runner stopped without an answer",
                        &"closed",
                    );
                }
            };
            // Calls accepted a moment ago answer first, so that the journal
            // saved with the pause holds them. Meanwhile this call may have
            // stopped waiting (timed out, or the run ended): then its pause
            // is stale, and the next event says what happened.
            live.gate.until_paused_or_idle().await;
            if live.gate.is_waiting(pending.index) {
                return self.report_pause(live, &pending, reader).await;
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
        reader: Reader,
    ) -> ToolOutcome {
        let journal = live.gate.journal_entries();
        let dropped = live.gate.journal_overflowed();
        let Some(saved) = live.update(|s| {
            s.state = ExecutionState::Waiting(pending.clone());
            s.journal = journal;
            s.journal_dropped = dropped;
        }) else {
            return failed_internally("execution state lock poisoned", &"poisoned");
        };
        self.executions.register(&saved.id, live.clone());
        // Paused, the run is this node's to hold (SPEC §10).
        if let Err(e) = self.node().ensure_alive(self.store.as_ref()).await {
            return failed_internally("could not register this node", &e);
        }
        // A one-shot command (`executor call`, `executor resume`) exits
        // with the run paused in its memory, and nobody renews its node's
        // lease: held by it, the run could be claimed only once that lease
        // ran out (`executor resume` waited up to 10 s for it). So it holds
        // no run: a fresh pause is saved without a holder, and a run it had
        // claimed is let go once saved; a decision replays it elsewhere.
        let holds = self.holds_paused_runs();
        let lease = match holds {
            true => live.gate.lease_or(|| RunLease {
                store: self.store.clone(),
                execution_id: saved.id.clone(),
                fence: Fence {
                    node: self.node().id().to_string(),
                    epoch: FIRST_EPOCH,
                },
            }),
            false => live.gate.lease(),
        };
        if let Err(e) = save_state(&self.store, &saved, lease.as_deref()).await {
            return failed_internally("could not save paused execution", &e);
        }
        if !holds
            && let Some(lease) = live.gate.take_lease()
            && let Err(e) = self
                .store
                .release_execution(&lease.execution_id, &lease.fence)
                .await
        {
            tracing::warn!(error = %e, "could not release a paused execution");
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
            return failed_internally("could not record execution", &e);
        }
        self.paused(&saved.id, pending, reader)
    }

    /// `resume {executionId, action}` (SPEC §9).
    pub(crate) async fn resume(&self, ctx: &CallContext, args: &Value) -> ToolOutcome {
        if ctx.approval == ApprovalMode::InConsole {
            return match args.get("executionId").and_then(Value::as_str) {
                Some(id) => self.await_console_decision(ctx, id).await,
                None => refusal("resume expects { executionId: string }", &[]),
            };
        }
        let shape =
            "resume expects { executionId: string, action: \"accept\" | \"decline\" | \"cancel\" }";
        let Some(id) = args.get("executionId").and_then(Value::as_str) else {
            return refusal(shape, &[]);
        };
        let action: Action = match args.get("action").and_then(Value::as_str).map(str::parse) {
            Some(Ok(a)) => a,
            _ => return refusal(shape, &[]),
        };
        self.decide(ctx, id, action).await
    }

    /// `resume` in console mode (SPEC §14): decides nothing, and waits for
    /// the decision a human makes in the console on the call execution
    /// `id` waits at — on this node or another, read from the run in
    /// memory or its saved state — then answers what the run did next: its
    /// result, or its next pause. The wait ends with the approval window
    /// (the call is then declined by timeout, and the run goes on) and,
    /// once decided, with the run's wall clock.
    async fn await_console_decision(&self, ctx: &CallContext, id: &str) -> ToolOutcome {
        let mut saved = match self.current_state(id, &ctx.principal.org_id).await {
            Ok(saved) => saved,
            Err(answer) => return answer,
        };
        if saved.owner != ctx.principal {
            return ResumeRefusal::Forbidden.outcome(id);
        }
        let waited = saved.state.pending().map(|p| p.index);
        // A decided run goes on for at most its wall clock.
        let window = self.approval_window.saturating_add(self.wall_clock);
        let give_up_at =
            now_ms().saturating_add(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));
        loop {
            match &saved.state {
                ExecutionState::Settled { envelope, .. } => {
                    return ToolOutcome::Answered(envelope.clone());
                }
                ExecutionState::Waiting(p) if Some(p.index) != waited => {
                    return self.paused(id, p, Reader::ConsoleAgent);
                }
                // Nobody decided within the window.
                ExecutionState::Waiting(p)
                    if now_ms() > p.expires_at_ms.saturating_add(EXPIRY_GRACE_MS) =>
                {
                    return ResumeRefusal::Expired.outcome(id);
                }
                _ if now_ms() >= give_up_at => {
                    let action = saved.decided.last().map_or(Action::Accept, |d| d.1);
                    return ResumeRefusal::AlreadyDecided {
                        action,
                        settled: false,
                    }
                    .outcome(id);
                }
                // Still waiting for the human, or running after the decision.
                _ => {}
            }
            tokio::time::sleep(CONSOLE_DECISION_POLL).await;
            saved = match self.current_state(id, &ctx.principal.org_id).await {
                Ok(saved) => saved,
                Err(answer) => return answer,
            };
        }
    }

    /// Execution `id`'s state as it is now: the run in this process's
    /// memory, else its saved state (held elsewhere, or by nobody).
    async fn current_state(&self, id: &str, org: &str) -> Result<SavedExecution, ToolOutcome> {
        match self.executions.get(id) {
            Some(live) => live
                .snapshot()
                .ok_or_else(|| failed_internally("execution state lock poisoned", &"poisoned")),
            None => self.load_saved(id, Some(org)).await,
        }
    }

    /// Applies the human's decision on the call execution `id` waits at,
    /// for `ctx` (its owner), and waits for the run to finish or pause
    /// again: `resume`, a retried `input_required`. The audit trail records
    /// `ctx`'s account as who decided.
    pub async fn decide(&self, ctx: &CallContext, id: &str, action: Action) -> ToolOutcome {
        let decider = Decider::new(
            Some(ctx.principal.account_id.clone()),
            ApprovalChannel::Resume,
        );
        self.decide_as(ctx, id, action, Some(decider), self.reader(ctx))
            .await
    }

    /// [`Engine::decide`], with who decided as far as it is known (None
    /// for a decision posted from outside, which carries only its action)
    /// and who reads the answer.
    pub(crate) async fn decide_as(
        &self,
        ctx: &CallContext,
        id: &str,
        action: Action,
        decider: Option<Decider>,
        reader: Reader,
    ) -> ToolOutcome {
        // A paused run still in memory waits inside its tool call; after a
        // restart the run is replayed with the decision preset instead.
        let (live, replayed) = match self.executions.get(id) {
            Some(live) => (live, false),
            None => match self.restore(ctx, id, action, decider.clone(), reader).await {
                Ok(live) => (live, true),
                Err(answer) => return answer,
            },
        };
        let Some(saved) = live.snapshot() else {
            return failed_internally("execution state lock poisoned", &"poisoned");
        };
        if saved.owner != ctx.principal {
            return ResumeRefusal::Forbidden.outcome(id);
        }
        // Concurrent duplicates queue here and then see the first's result.
        let mut events = live.events.lock().await;
        let Some(saved) = live.snapshot() else {
            return failed_internally("execution state lock poisoned", &"poisoned");
        };
        if let Err(answer) = still_waiting(&saved, action, ResumeRefusal::AlreadySettled) {
            return answer;
        }
        let index = saved.state.pending().map_or(0, |p| p.index);
        if !replayed {
            live.gate.set_decider(index, decider);
            if !live.gate.answer(index, decision_of(action)) {
                return ResumeRefusal::Expired.outcome(id);
            }
        }
        live.update(|s| {
            s.state = ExecutionState::Running;
            s.decided.push((index, action));
        });
        let answer = self.advance(&live, &mut events, reader).await;
        self.settle_if_finished(&live, action, &answer).await;
        answer
    }

    /// The org's executions waiting for a human's decision now (SPEC §13's
    /// pending approvals), most recently paused first, at most
    /// [`executor_store::MAX_PAUSED_LISTED`]: read from their saved states,
    /// so those paused on every node (and by a CLI command) are listed. The
    /// rule is the one of the org's rules that matches the tool now (None:
    /// the tool's default asked for approval).
    pub async fn pending_approvals(
        &self,
        org_id: &str,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let rows = self.store.list_paused_executions(org_id).await?;
        let policies = policy_set(&self.policies.policies(self.store.as_ref(), org_id).await?);
        let now = now_ms();
        let window = i64::try_from(self.approval_window.as_millis()).unwrap_or(i64::MAX);
        let mut pending: Vec<PendingApproval> = rows
            .into_iter()
            .filter_map(|row| {
                let saved: SavedExecution = serde_json::from_str(&row.state)
                    .inspect_err(|e| {
                        tracing::warn!(execution = %row.id, error = %e, "skipping a saved execution that does not parse");
                    })
                    .ok()?;
                let call = saved.state.pending().filter(|p| p.expires_at_ms > now)?;
                Some(PendingApproval {
                    policy_rule: policies.resolve_rule(&call.path, true).1.map(|r| r.id.clone()),
                    execution_id: saved.id.clone(),
                    session_id: saved.session_id.clone(),
                    account_id: saved.owner.account_id.clone(),
                    tool_path: call.path.clone(),
                    args_preview: args_preview(&call.args, self.approval_preview_chars),
                    question: call.question.clone(),
                    paused_at_ms: call.expires_at_ms.saturating_sub(window),
                    expires_at_ms: call.expires_at_ms,
                })
            })
            .collect();
        pending.sort_by(|a, b| {
            (b.paused_at_ms, &b.execution_id).cmp(&(a.paused_at_ms, &a.execution_id))
        });
        Ok(pending)
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
        // This process takes decisions for the runs it holds from now on.
        self.holds_paused_runs
            .store(true, std::sync::atomic::Ordering::Release);
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
                let posted = match self.store.take_execution_decision(&saved.id).await {
                    Ok(Some(text)) => Decider::parse_posted(&text),
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read posted decisions");
                        continue;
                    }
                };
                let Some((action, decider)) = posted else {
                    tracing::warn!(execution = %saved.id, "ignoring a malformed posted decision");
                    continue;
                };
                if live.asked_inline.load(Ordering::Acquire) {
                    live.posted.send_replace(Some((action, decider)));
                    continue;
                }
                let engine = self.clone();
                tokio::spawn(async move {
                    let ctx = saved.owner_context();
                    engine
                        .decide_as(&ctx, &saved.id, action, decider, Reader::Shell)
                        .await;
                });
            }
        }
    }

    /// `executor resume`: decides a paused execution from another process.
    /// With a `wait`, the decision is posted to the store, the server
    /// holding the run applies it and this follows the run until it settles
    /// or pauses again; when no server takes it within `wait` (none is
    /// running, or none holds the run since a restart), it is taken back
    /// and applied here by replay. With no `wait`, it is applied at once:
    /// here when no live node holds the run, else handed to its holder.
    /// `decider` is who decided and through what, for the audit trail.
    pub async fn resume_from_outside(
        &self,
        id: &str,
        action: Action,
        wait: Duration,
        decider: Decider,
    ) -> ToolOutcome {
        let saved = match self.load_saved(id, None).await {
            Ok(saved) => saved,
            Err(answer) => return answer,
        };
        let pending = match still_waiting(&saved, action, ResumeRefusal::NotFound) {
            Ok(pending) => pending,
            Err(answer) => return answer,
        };
        let owner = saved.owner_context();
        if wait.is_zero() {
            return self
                .decide_as(&owner, id, action, Some(decider), Reader::Shell)
                .await;
        }
        if let Err(answer) = self.post_decision(id, action, &decider).await {
            return answer;
        }
        // Taken by a server within `wait`: follow the run until it settles
        // or pauses again (bounded by the execution's own limits).
        let mut deadline = Instant::now() + wait;
        let mut taken = false;
        loop {
            tokio::time::sleep(FOLLOW_POLL).await;
            if let Ok(saved) = self.load_saved(id, None).await {
                if let Some(answer) = settled_answer(&saved, action) {
                    return answer;
                }
                match saved.state.pending() {
                    Some(next) if next.index != pending.index => {
                        return self.paused(id, next, Reader::Shell);
                    }
                    _ => {}
                }
            }
            if Instant::now() < deadline {
                continue;
            }
            if taken {
                return refusal(
                    &format!(
                        "{id} was resumed by the server but has not finished yet; see `executor executions show {id}`"
                    ),
                    &[],
                );
            }
            match self.store.take_execution_decision(id).await {
                // Nobody took it: apply it in this process.
                Ok(Some(_)) => {
                    return self
                        .decide_as(&owner, id, action, Some(decider.clone()), Reader::Shell)
                        .await;
                }
                Ok(None) => {
                    taken = true;
                    deadline = Instant::now() + FOLLOW_RESUMED_RUN;
                }
                Err(e) => return failed_internally("could not take the decision back", &e),
            }
        }
    }

    /// The saved state of execution `id`. None found: the refusal says
    /// whether it finished without waiting (its record, of `org` when
    /// given, says so) or is unknown.
    /// The decision an execution has already been given, when it has one
    /// (its run settled with it, or goes on after it): for a surface that
    /// says a repeated decision is one, where the `resume` tool answers it
    /// again (idempotent for an agent that retries). None when it waits for
    /// one, or is not known here.
    pub async fn decision_of(&self, id: &str) -> Option<Action> {
        let saved = self.load_saved(id, None).await.ok()?;
        if let ExecutionState::Settled { action, .. } = &saved.state {
            return Some(*action);
        }
        match saved.state.pending() {
            None => saved.decided.last().map(|&(_, action)| action),
            Some(_) => None,
        }
    }

    async fn load_saved(&self, id: &str, org: Option<&str>) -> Result<SavedExecution, ToolOutcome> {
        let state = self
            .store
            .load_execution_state(id)
            .await
            .map_err(|e| failed_internally("could not load execution", &e))?;
        match state.as_deref().map(serde_json::from_str) {
            Some(Ok(saved)) => Ok(saved),
            _ => Err(self.not_waiting(id, org).await),
        }
    }

    /// Why execution `id`, with no saved state, cannot be decided: it has
    /// finished (its record says so), else it is not found.
    async fn not_waiting(&self, id: &str, org: Option<&str>) -> ToolOutcome {
        match self.store.get_execution(id).await {
            Ok(Some(record))
                if record.status != ExecutionStatus::WaitingForInteraction
                    && org.is_none_or(|org| org == record.org_id) =>
            {
                ResumeRefusal::Finished.outcome(id)
            }
            _ => ResumeRefusal::NotFound.outcome(id),
        }
    }

    /// After a restart: rebuilds a paused execution from the store and
    /// replays it up to its pending call, which receives the decision.
    async fn restore(
        &self,
        ctx: &CallContext,
        id: &str,
        action: Action,
        decider: Option<Decider>,
        reader: Reader,
    ) -> Result<Arc<LiveExecution>, ToolOutcome> {
        let saved = self.load_saved(id, Some(&ctx.principal.org_id)).await?;
        if saved.owner != ctx.principal {
            return Err(ResumeRefusal::Forbidden.outcome(id));
        }
        still_waiting(&saved, action, ResumeRefusal::NotFound)?;
        if saved.journal_dropped {
            return Err(ResumeRefusal::NotReplayable.outcome(id));
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
                    match self
                        .hand_to_holder(id, action, decider.as_ref(), &holder.id, reader)
                        .await
                    {
                        Handed::Answered(answer) => return Err(answer),
                        Handed::HolderGone => self.evict(&holder.id).await,
                    }
                }
                Ok(ExecutionClaim::NotFound) => return Err(ResumeRefusal::NotFound.outcome(id)),
                Ok(ExecutionClaim::Lapsed) => {
                    return Err(failed_internally(
                        "this node is not alive on the store",
                        &"lapsed",
                    ));
                }
                Err(e) => return Err(failed_internally("could not claim the execution", &e)),
            }
        }
        let Some(claimed) = claimed else {
            return Err(failed_internally(
                "could not claim the execution",
                &"claims kept failing",
            ));
        };
        // Read again as its holder: the journal as the last holder left it
        // (or the answer it settled with meanwhile).
        let saved = self.load_saved(id, Some(&ctx.principal.org_id)).await?;
        still_waiting(&saved, action, ResumeRefusal::NotFound)?;
        if saved.journal_dropped {
            return Err(ResumeRefusal::NotReplayable.outcome(id));
        }
        let slot = self.admission.readmit(&saved.owner.org_id);
        let live = self
            .start(
                saved,
                Some((decision_of(action), decider)),
                slot,
                Some(claimed),
                None,
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
    async fn hand_to_holder(
        &self,
        id: &str,
        action: Action,
        decider: Option<&Decider>,
        holder: &str,
        reader: Reader,
    ) -> Handed {
        let answered = |answer| Handed::Answered(answer);
        let pending_index = match self.load_saved(id, None).await {
            Ok(saved) => match still_waiting(&saved, action, ResumeRefusal::NotFound) {
                Ok(pending) => pending.index,
                Err(answer) => return answered(answer),
            },
            Err(answer) => return answered(answer),
        };
        let unknown = Decider::new(None, ApprovalChannel::Resume);
        if let Err(answer) = self
            .post_decision(id, action, decider.unwrap_or(&unknown))
            .await
        {
            return answered(answer);
        }
        let give_up = Instant::now() + HOLDER_TAKES_DECISION + 2 * self.node().ttl();
        let mut next_liveness_check = Instant::now();
        let mut taken_at: Option<Instant> = None;
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Ok(saved) = self.load_saved(id, None).await {
                if let Some(answer) = settled_answer(&saved, action) {
                    return answered(answer);
                }
                if let Some(next) = saved.state.pending()
                    && next.index != pending_index
                {
                    return answered(self.paused(id, next, reader));
                }
            }
            if taken_at.is_some_and(|t| t.elapsed() >= FOLLOW_RESUMED_RUN) {
                return answered(refusal(
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
                    return answered(refusal(
                        &format!(
                            "{id} is held by a node that did not take the decision; it was not applied: retry resume"
                        ),
                        &[],
                    ));
                }
                // Taken meanwhile: the holder runs it; follow it.
                Ok(None) => taken_at = Some(Instant::now()),
                Err(e) => {
                    return answered(failed_internally("could not take the decision back", &e));
                }
            }
        }
    }

    /// Posts a decision for the process holding the run to apply.
    async fn post_decision(
        &self,
        id: &str,
        action: Action,
        decider: &Decider,
    ) -> Result<(), ToolOutcome> {
        match self
            .store
            .post_execution_decision(id, &Decider::posted_text(action, decider))
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(refusal(
                &format!("a decision for {id} is already waiting to be applied"),
                &[],
            )),
            Err(e) => Err(failed_internally("could not post the decision", &e)),
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
    async fn settle_if_finished(
        &self,
        live: &Arc<LiveExecution>,
        action: Action,
        answer: &ToolOutcome,
    ) {
        let ToolOutcome::Answered(answer) = answer else {
            return;
        };
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
}

/// What handing a decision to a paused run's holder came to.
enum Handed {
    Answered(ToolOutcome),
    /// The holder's lease lapsed before it took the decision.
    HolderGone,
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
) -> Result<PendingCall, ToolOutcome> {
    if let Some(answer) = settled_answer(saved, action) {
        return Err(answer);
    }
    match saved.state.pending() {
        // Decided, and its run goes on: says which decision it was.
        None => Err(match saved.decided.last() {
            Some(&(_, action)) => ResumeRefusal::AlreadyDecided {
                action,
                settled: false,
            },
            None => when_idle,
        }
        .outcome(&saved.id)),
        Some(p) if p.expires_at_ms <= now_ms() => Err(ResumeRefusal::Expired.outcome(&saved.id)),
        Some(p) => Ok(p.clone()),
    }
}

/// The answer for a resume of an execution that is already settled: the
/// same result for the same action (idempotent), a refusal for another.
fn settled_answer(saved: &SavedExecution, action: Action) -> Option<ToolOutcome> {
    let ExecutionState::Settled {
        action: settled_with,
        envelope: answer,
    } = &saved.state
    else {
        return None;
    };
    Some(if *settled_with == action {
        ToolOutcome::Answered(answer.clone())
    } else {
        ResumeRefusal::AlreadyDecided {
            action: *settled_with,
            settled: true,
        }
        .outcome(&saved.id)
    })
}
