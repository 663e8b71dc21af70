//! The run of one execution on its own task (`Runner`): the program on the
//! sandbox pool under its wall clock, then its record written before its
//! answer is handed back, so a pause can answer the `execute` call while
//! the program waits inside its tool call. Also the writes a run makes to
//! the store: its record, its saved state, its journal while paused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_call::{CallContext, Hold, Reply};
use executor_catalog::HostBudget;
use executor_sandbox::{HostBridge, Pool, RunOutcome, SandboxError, Stop};
use executor_store::{ExecutionRecord, ExecutionStatus, Store, StoreError, ToolCallRecord, now_ms};

use tokio::sync::mpsc;

use crate::envelope::internal_error_id;
use crate::execution::{
    ApprovalGate, Executions, LiveExecution, RunEvent, RunLease, SavedExecution,
};
use crate::invoke::{ExecutionBridge, LEASE_LOST, ToolCallTrace};
use crate::metrics::EngineMetrics;

/// How often a running execution's wall clock is read.
const WALL_CLOCK_TICK: Duration = Duration::from_millis(100);
/// How long a finished run that had paused stays in memory (see
/// `Executions::forget_after`).
const FINISHED_RUN_KEPT: Duration = Duration::from_secs(30);

/// Runs one execution to its end on its own task, so a pause can answer the
/// `execute` call while the program waits inside its tool call.
pub(crate) struct Runner {
    pub(crate) pool: Pool,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) metrics: Arc<EngineMetrics>,
    pub(crate) executions: Arc<Executions>,
    /// Holds the run's fair-share slot; released when the run ends.
    pub(crate) gate: Arc<ApprovalGate>,
    pub(crate) wall_clock: Duration,
    pub(crate) budget: HostBudget,
    /// How the answer of the call that started the run leaves the server.
    pub(crate) reply: Reply,
}

impl Runner {
    pub(crate) async fn run(
        self,
        ctx: CallContext,
        saved: SavedExecution,
        bridge: ExecutionBridge,
        events: mpsc::UnboundedSender<RunEvent>,
    ) {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let host: Arc<dyn HostBridge> = Arc::new(bridge.clone());
        let stop = bridge.stop();
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
        // SPEC §10: the record is committed before the result is returned,
        // by the run's holder only.
        let reply = record_durability(self.reply, self.gate.has_paused());
        let written = match still_holder(&ctx, self.gate.lease().as_deref()).await {
            Hold::Held => match write_record(&self.store, record, reply).await {
                Ok(()) => {
                    self.metrics.record_written(reply);
                    Ok(())
                }
                Err(StoreError::Full) => {
                    tracing::error!(execution = %saved.id, "could not record execution: the store's disk is full");
                    outcome = RunOutcome::failed(STORE_FULL);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            },
            Hold::Lost => {
                tracing::warn!(execution = %saved.id, "the run's lease was lost; its record is not written here");
                outcome = RunOutcome::failed(LEASE_LOST);
                Ok(())
            }
            Hold::Unknown(e) => Err(e),
        };
        if let Err(e) = written {
            let id = internal_error_id();
            tracing::error!(error_id = %id, error = %e, "could not record execution");
            outcome = RunOutcome::failed(format!("Internal tool error [{id}]"));
        }
        self.executions.forget_after(&saved.id, FINISHED_RUN_KEPT);
        let _ = events.send(RunEvent::Finished(outcome));
    }
}

/// What a run whose record the store had no room for ends with.
const STORE_FULL: &str = "this execution ran, but the server's storage is full: its record and result could not be kept; retry once an operator has freed space";

/// Whether the run's holder is still this node, asked before its record
/// is written: a paused run's own lease on the store when it has one (a
/// node that takes the run over writes the same record); else, by this
/// node's own clock, its session's (a record names its own execution,
/// which no other node writes, so the round trip its calls pay is not
/// needed; none: a sessionless run or the CLI's, which hold nothing).
async fn still_holder(ctx: &CallContext, lease: Option<&RunLease>) -> Hold {
    if let Some(lease) = lease {
        let held = lease
            .store
            .holds_execution(&lease.execution_id, &lease.fence)
            .await;
        return Hold::answered(held);
    }
    match &ctx.holder {
        Some(holder) => holder.check_locally(),
        None => Hold::Held,
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
pub(crate) async fn write_record(
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
pub(crate) async fn save_state(
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
pub(crate) async fn persist_journal(store: Arc<dyn Store>, live: std::sync::Weak<LiveExecution>) {
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

pub(crate) fn execution_record(
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
        tool_calls: trace
            .into_iter()
            .map(|call| tool_call_record(ctx, id, call))
            .collect(),
        started_at_ms,
        duration_ms,
    }
}

/// One call of execution `id` as the audit trail keeps it: its id is
/// `<execution id>.<call index>`, its who and where the execution's.
fn tool_call_record(ctx: &CallContext, id: &str, call: ToolCallTrace) -> ToolCallRecord {
    ToolCallRecord {
        id: format!("{id}.{}", call.index),
        org_id: ctx.principal.org_id.clone(),
        execution_id: id.to_string(),
        session_id: ctx.session_id.clone(),
        account_id: ctx.principal.account_id.clone(),
        tool_path: call.path,
        outcome: call.outcome,
        error_code: call.error_code,
        policy_action: call.audit.policy_action,
        policy_rule: call.audit.policy_rule,
        approval: call.audit.approval,
        decided_by: call.audit.decided_by,
        decided_via: call.audit.decided_via,
        approval_wait_ms: millis(call.audit.approval_wait),
        arg_names: call.arg_names,
        started_at_ms: call.started_at_ms,
        duration_ms: millis(call.duration),
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invoke::{CallAudit, arg_names};
    use executor_store::{Principal, ToolCallOutcome};
    use proptest::prelude::*;
    use serde_json::Value;

    proptest! {
        /// SPEC §13: a tool call's row holds its argument names, never a
        /// value, wherever the value sits.
        #[test]
        fn no_argument_value_reaches_a_tool_call_row(
            value in "V[a-zA-Z0-9 _.:/@-]{6,40}",
            name in "[a-z_]{1,12}",
        ) {
            let args = serde_json::json!({
                name.clone(): value,
                "nested": { "deep": [value] },
                "other": { "key": 1 },
            });
            let ctx = CallContext {
                principal: Principal { account_id: "acc_1".into(), org_id: "org_1".into() },
                session_id: Some("sess_1".into()),
                approval: Default::default(),
                holder: None,
            };
            let trace = ToolCallTrace {
                index: 3,
                path: "ns.tool".into(),
                outcome: ToolCallOutcome::Ok,
                error_code: None,
                threw: false,
                audit: CallAudit::default(),
                arg_names: arg_names(&args),
                started_at_ms: 1,
                duration: Duration::from_millis(2),
            };
            let row = tool_call_record(&ctx, "exec_1", trace);
            let mut expected = vec![name.clone(), "nested".to_string(), "other".to_string()];
            expected.sort();
            expected.dedup();
            prop_assert_eq!(&row.arg_names, &expected);
            let text = serde_json::to_string(&row).unwrap_or_default();
            prop_assert!(!text.contains(&value), "{}", text);
            prop_assert_eq!(row.id, "exec_1.3");
        }
    }

    #[test]
    fn argument_names_are_sorted_and_bounded() {
        let many: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("{i:03}{}", "é".repeat(100)), Value::Null))
            .collect();
        let names = arg_names(&Value::Object(many));
        assert_eq!(names.len(), crate::invoke::MAX_ARG_NAMES);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        assert!(
            names
                .iter()
                .all(|n| n.len() <= crate::invoke::MAX_ARG_NAME_BYTES)
        );
        assert!(arg_names(&serde_json::json!([1, 2])).is_empty());
    }

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
