//! Counters for `/metrics` (SPEC §11): executions by status, tool calls by
//! outcome, time spent running executions.

use std::sync::atomic::{AtomicU64, Ordering};

use executor_sandbox::RunOutcome;

use crate::invoke::ToolCallTrace;

#[derive(Debug, Default)]
pub struct EngineMetrics {
    pub executions_completed: AtomicU64,
    pub executions_failed: AtomicU64,
    pub tool_calls_ok: AtomicU64,
    pub tool_calls_failed: AtomicU64,
    pub tool_calls_threw: AtomicU64,
    /// Wall time of executions (sandbox plus tool calls), in microseconds.
    pub execution_micros_total: AtomicU64,
}

impl EngineMetrics {
    pub(crate) fn record(&self, outcome: &RunOutcome, trace: &[ToolCallTrace], micros: u64) {
        let bucket = match outcome.result {
            Ok(_) => &self.executions_completed,
            Err(_) => &self.executions_failed,
        };
        bucket.fetch_add(1, Ordering::Relaxed);
        self.execution_micros_total
            .fetch_add(micros, Ordering::Relaxed);
        for call in trace {
            let bucket = match call.outcome.as_str() {
                "ok" => &self.tool_calls_ok,
                "threw" => &self.tool_calls_threw,
                _ => &self.tool_calls_failed,
            };
            bucket.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Prometheus text exposition of these counters.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# TYPE executor_executions_total counter\n\
             executor_executions_total{{status=\"completed\"}} {}\n\
             executor_executions_total{{status=\"error\"}} {}\n\
             # TYPE executor_tool_calls_total counter\n\
             executor_tool_calls_total{{outcome=\"ok\"}} {}\n\
             executor_tool_calls_total{{outcome=\"error\"}} {}\n\
             executor_tool_calls_total{{outcome=\"threw\"}} {}\n\
             # TYPE executor_execution_seconds_total counter\n\
             executor_execution_seconds_total {}\n",
            get(&self.executions_completed),
            get(&self.executions_failed),
            get(&self.tool_calls_ok),
            get(&self.tool_calls_failed),
            get(&self.tool_calls_threw),
            get(&self.execution_micros_total) as f64 / 1e6,
        )
    }
}
