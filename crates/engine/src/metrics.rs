//! Counters for `/metrics` (SPEC §11): executions by status, tool calls by
//! outcome, execution records by how they were made durable, time spent
//! running executions, and the running and paused executions at scrape
//! time.
//!
//! They are `prometheus-client` metrics: `/metrics` registers them, with the
//! sessions' series, in one registry and the crate's encoder writes the text,
//! so the exposition is never formatted by hand.

use executor_sandbox::RunOutcome;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::admission::{QueueTotals, Refused};
use crate::invoke::ToolCallTrace;
use executor_call::Reply;
use executor_store::ToolCallOutcome;

/// One fixed label, like `status="completed"`.
type OneLabel = [(&'static str, &'static str); 1];

/// Counters of one label, like executions by status.
type ByLabel = Family<OneLabel, Counter>;

/// The engine's counters. Every labelled series is created up front, so each
/// is exposed (at 0) from the first scrape as before, and a handle to each is
/// kept so that counting is one atomic add, never a family lookup.
#[derive(Debug)]
pub struct EngineMetrics {
    executions: ByLabel,
    tool_calls: ByLabel,
    executions_completed: Counter,
    executions_failed: Counter,
    tool_calls_ok: Counter,
    tool_calls_failed: Counter,
    tool_calls_threw: Counter,
    records: ByLabel,
    records_flushed: Counter,
    records_with_answer: Counter,
    /// Wall time of executions (sandbox plus tool calls), in seconds.
    execution_seconds: Counter<f64>,
    /// Executions that waited for a turn in their org's queue, and how
    /// long they waited in all, in seconds.
    queue_waits: Counter,
    queue_wait_seconds: Counter<f64>,
    /// Executions that left their org's queue without running, by why.
    queue_refusals: ByLabel,
    queue_full: Counter,
    queue_timed_out: Counter,
    queue_client_gone: Counter,
}

impl Default for EngineMetrics {
    fn default() -> Self {
        let executions = ByLabel::default();
        let tool_calls = ByLabel::default();
        let records = ByLabel::default();
        let queue_refusals = ByLabel::default();
        EngineMetrics {
            queue_full: series(&queue_refusals, "reason", "full"),
            queue_timed_out: series(&queue_refusals, "reason", "timed_out"),
            queue_client_gone: series(&queue_refusals, "reason", "client_gone"),
            queue_refusals,
            records_flushed: series(&records, "durability", "flushed"),
            records_with_answer: series(&records, "durability", "with_answer"),
            records,
            executions_completed: series(&executions, "status", "completed"),
            executions_failed: series(&executions, "status", "error"),
            tool_calls_ok: series(&tool_calls, "outcome", "ok"),
            tool_calls_failed: series(&tool_calls, "outcome", "error"),
            tool_calls_threw: series(&tool_calls, "outcome", "threw"),
            executions,
            tool_calls,
            execution_seconds: Counter::default(),
            queue_waits: Counter::default(),
            queue_wait_seconds: Counter::default(),
        }
    }
}

/// Creates the series `key="value"` of `family` and returns a handle to it:
/// the handle and the family share the one atomic.
fn series(family: &ByLabel, key: &'static str, value: &'static str) -> Counter {
    family.get_or_create_owned(&[(key, value)])
}

impl EngineMetrics {
    pub(crate) fn record(&self, outcome: &RunOutcome, trace: &[ToolCallTrace], micros: u64) {
        let execution = match outcome.result {
            Ok(_) => &self.executions_completed,
            Err(_) => &self.executions_failed,
        };
        execution.inc();
        self.execution_seconds.inc_by(micros as f64 / 1e6);
        for call in trace {
            let bucket = if call.threw {
                &self.tool_calls_threw
            } else if call.outcome == ToolCallOutcome::Ok {
                &self.tool_calls_ok
            } else {
                &self.tool_calls_failed
            };
            bucket.inc();
        }
    }

    /// Counts an execution that waited `waited` in its org's queue.
    pub(crate) fn queue_waited(&self, waited: std::time::Duration) {
        self.queue_waits.inc();
        self.queue_wait_seconds.inc_by(waited.as_secs_f64());
    }

    /// Counts an execution that was refused a place in its org's queue or
    /// left it without running; other refusals are not the queue's.
    pub(crate) fn queue_refused(&self, refused: &Refused) {
        match refused {
            Refused::OrgQueueFull { .. } => self.queue_full.inc(),
            Refused::OrgQueueTimeout { .. } => self.queue_timed_out.inc(),
            Refused::ClientGone => self.queue_client_gone.inc(),
            _ => return,
        };
    }

    /// Counts a record written: flushed as it was written ([`Reply::Direct`])
    /// or made durable by the flushed write of the answer that carries it
    /// ([`Reply::Logged`]; on SQLite the two are the same kind of commit).
    pub(crate) fn record_written(&self, durability: Reply) {
        match durability {
            Reply::Direct => self.records_flushed.inc(),
            Reply::Logged => self.records_with_answer.inc(),
        };
    }

    /// Registers the engine's series for `/metrics`: these counters, then
    /// `running`, `paused` and `queued` executions, read by the caller at
    /// scrape time. Queues are summed over orgs: a label per org would
    /// grow without bound.
    ///
    /// Counters are named without `_total`: the encoder appends it (and the
    /// registry refuses a counter named with it in debug builds), so the
    /// exposed names stay `executor_executions_total` and so on.
    pub fn register(
        &self,
        registry: &mut Registry,
        running: usize,
        paused: usize,
        queues: QueueTotals,
    ) {
        registry.register(
            "executor_executions",
            "Executions finished, by status",
            self.executions.clone(),
        );
        registry.register(
            "executor_tool_calls",
            "Tool calls made by executions, by outcome",
            self.tool_calls.clone(),
        );
        registry.register(
            "executor_execution_records",
            "Execution records written, by durability: flushed as written, or with the answer that carries them",
            self.records.clone(),
        );
        registry.register(
            "executor_execution_seconds",
            "Wall time of executions (sandbox and tool calls), in seconds",
            self.execution_seconds.clone(),
        );
        registry.register(
            "executor_executions_running",
            "Executions running now",
            ConstGauge::new(running),
        );
        registry.register(
            "executor_executions_paused",
            "Executions paused for approval now",
            ConstGauge::new(paused),
        );
        registry.register(
            "executor_executions_queued",
            "Executions waiting for a turn in their org's queue now",
            ConstGauge::new(queues.waiting),
        );
        registry.register(
            "executor_execution_queue_orgs",
            "Organisations with executions waiting for a turn now",
            ConstGauge::new(queues.orgs),
        );
        registry.register(
            "executor_execution_queue_longest",
            "The longest one organisation's queue of executions now",
            ConstGauge::new(queues.longest),
        );
        registry.register(
            "executor_execution_queue_waits",
            "Executions that waited for a turn in their org's queue",
            self.queue_waits.clone(),
        );
        registry.register(
            "executor_execution_queue_wait_seconds",
            "Time executions waited for a turn in their org's queue, in seconds",
            self.queue_wait_seconds.clone(),
        );
        registry.register(
            "executor_execution_queue_refusals",
            "Executions refused a place in their org's queue or that left it without running, by reason",
            self.queue_refusals.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::prometheus_text::encode;

    fn exposition(metrics: &EngineMetrics, running: usize, paused: usize) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry, running, paused, QueueTotals::default());
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    fn assert_lines(text: &str, expected: &[&str]) {
        for line in expected {
            assert!(
                text.lines().any(|l| l == *line),
                "{line:?} missing from:\n{text}"
            );
        }
    }

    fn call(outcome: &str) -> ToolCallTrace {
        ToolCallTrace {
            index: 0,
            path: "demo.tool".to_string(),
            outcome: match outcome {
                "ok" => ToolCallOutcome::Ok,
                "threw" => ToolCallOutcome::Declined,
                _ => ToolCallOutcome::Failed,
            },
            error_code: None,
            threw: outcome == "threw",
            audit: Default::default(),
            arg_names: Vec::new(),
            started_at_ms: 0,
            duration: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn every_series_is_exposed_from_the_start_under_todays_names() {
        let text = exposition(&EngineMetrics::default(), 0, 0);
        let expected = [
            "# TYPE executor_executions_total counter",
            "executor_executions_total{status=\"completed\"} 0",
            "executor_executions_total{status=\"error\"} 0",
            "# TYPE executor_tool_calls_total counter",
            "executor_tool_calls_total{outcome=\"ok\"} 0",
            "executor_tool_calls_total{outcome=\"error\"} 0",
            "executor_tool_calls_total{outcome=\"threw\"} 0",
            "# TYPE executor_execution_records_total counter",
            "executor_execution_records_total{durability=\"flushed\"} 0",
            "executor_execution_records_total{durability=\"with_answer\"} 0",
            "# TYPE executor_execution_seconds_total counter",
            "executor_execution_seconds_total 0.0",
            "# TYPE executor_executions_running gauge",
            "executor_executions_running 0",
            "# TYPE executor_executions_paused gauge",
            "executor_executions_paused 0",
            "# TYPE executor_executions_queued gauge",
            "executor_executions_queued 0",
            "# TYPE executor_execution_queue_waits_total counter",
            "executor_execution_queue_waits_total 0",
            "executor_execution_queue_wait_seconds_total 0.0",
            "executor_execution_queue_orgs 0",
            "executor_execution_queue_longest 0",
            "executor_execution_queue_refusals_total{reason=\"full\"} 0",
            "executor_execution_queue_refusals_total{reason=\"timed_out\"} 0",
            "executor_execution_queue_refusals_total{reason=\"client_gone\"} 0",
        ];
        assert_lines(&text, &expected);
        // Prometheus text format 0.0.4, as before: no OpenMetrics trailer.
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn record_counts_executions_by_status_and_calls_by_outcome() {
        let metrics = EngineMetrics::default();
        let completed = RunOutcome {
            result: Ok(None),
            logs: Vec::new(),
            emitted: Vec::new(),
        };
        let calls = [call("ok"), call("ok"), call("threw"), call("not_found")];
        metrics.record(&completed, &calls, 1_500_000);
        metrics.record(&RunOutcome::failed("boom"), &[], 0);
        let text = exposition(&metrics, 3, 1);
        let expected = [
            "executor_executions_total{status=\"completed\"} 1",
            "executor_executions_total{status=\"error\"} 1",
            "executor_tool_calls_total{outcome=\"ok\"} 2",
            "executor_tool_calls_total{outcome=\"error\"} 1",
            "executor_tool_calls_total{outcome=\"threw\"} 1",
            "executor_execution_seconds_total 1.5",
            "executor_executions_running 3",
            "executor_executions_paused 1",
        ];
        assert_lines(&text, &expected);
    }

    #[test]
    fn queue_refusals_are_counted_by_reason_and_other_refusals_are_not() {
        let metrics = EngineMetrics::default();
        metrics.queue_refused(&Refused::ClientGone);
        metrics.queue_refused(&Refused::ClientGone);
        metrics.queue_refused(&Refused::OrgQueueFull {
            running: 1,
            queued: 1,
        });
        metrics.queue_refused(&Refused::ServerFull(1));
        let text = exposition(&metrics, 0, 0);
        assert_lines(
            &text,
            &[
                "executor_execution_queue_refusals_total{reason=\"full\"} 1",
                "executor_execution_queue_refusals_total{reason=\"timed_out\"} 0",
                "executor_execution_queue_refusals_total{reason=\"client_gone\"} 2",
            ],
        );
    }
}
