//! One execution inside one QuickJS context.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime, Value, promise::PromiseState};

use crate::{Limits, RunOutcome, SandboxError};

const PRELUDE: &str = include_str!("prelude.js");

/// A QuickJS runtime owned by one worker thread, reused across executions;
/// each execution gets a fresh [`Context`], so no state crosses runs.
pub(crate) struct Engine {
    runtime: Runtime,
    deadline: Rc<Cell<Option<Instant>>>,
    limits: Limits,
}

impl Engine {
    pub(crate) fn new(limits: Limits) -> Result<Self, SandboxError> {
        let runtime = Runtime::new().map_err(|e| SandboxError::Runtime(e.to_string()))?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        runtime.set_gc_threshold(limits.memory_bytes / 4);
        let deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let probe = deadline.clone();
        // Once the deadline passes, every check interrupts: the exception
        // QuickJS raises for an interrupt is uncatchable, and `finally`
        // blocks that try to keep running are interrupted too.
        runtime.set_interrupt_handler(Some(Box::new(move || {
            probe.get().is_some_and(|d| Instant::now() >= d)
        })));
        Ok(Engine {
            runtime,
            deadline,
            limits,
        })
    }

    pub(crate) fn run(&self, code: &str) -> Result<RunOutcome, SandboxError> {
        let context =
            Context::full(&self.runtime).map_err(|e| SandboxError::Runtime(e.to_string()))?;
        let started = Instant::now();
        self.deadline.set(Some(started + self.limits.timeout));
        let outcome = context.with(|ctx| self.run_in(&ctx, code));
        self.deadline.set(None);
        drop(context);
        self.runtime.run_gc();
        outcome
    }

    fn run_in<'js>(&self, ctx: &Ctx<'js>, code: &str) -> Result<RunOutcome, SandboxError> {
        let factory: Function = ctx.eval(PRELUDE).map_err(|e| {
            SandboxError::Engine(format!("prelude: {}", self.exception_text(ctx, e)))
        })?;
        let host: Object = factory
            .call((self.limits.max_log_bytes as f64,))
            .map_err(|e| {
                SandboxError::Engine(format!("prelude init: {}", self.exception_text(ctx, e)))
            })?;
        let take_logs = |host: &Object<'js>| -> Vec<String> {
            host.get::<_, Function>("takeLogs")
                .and_then(|f| f.call::<_, Vec<String>>(()))
                .unwrap_or_default()
        };

        let settled = self.start_and_settle(ctx, &host, code);
        let logs = take_logs(&host);
        Ok(match settled {
            Settled::Value(value) => match self.serialize(ctx, &host, value) {
                Ok(value) => RunOutcome::Completed { value, logs },
                Err(message) => RunOutcome::Failed { message, logs },
            },
            Settled::Thrown(message) => RunOutcome::Failed { message, logs },
        })
    }

    /// Compiles the body, calls it, and drives jobs and timers until its
    /// promise settles or a limit ends the run.
    fn start_and_settle<'js>(
        &self,
        ctx: &Ctx<'js>,
        host: &Object<'js>,
        code: &str,
    ) -> Settled<'js> {
        let compiled = host
            .get::<_, Function>("compile")
            .and_then(|compile| compile.call::<_, Function>((code,)));
        let body = match compiled {
            Ok(f) => f,
            Err(e) => return Settled::Thrown(self.thrown(ctx, host, e)),
        };
        let promise: Promise = match body.call(()) {
            Ok(p) => p,
            Err(e) => return Settled::Thrown(self.thrown(ctx, host, e)),
        };
        loop {
            while ctx.execute_pending_job() {}
            if self.past_deadline() {
                return Settled::Thrown(self.timeout_message());
            }
            match promise.state() {
                PromiseState::Resolved => {
                    return match promise.result::<Value>() {
                        Some(Ok(v)) => Settled::Value(v),
                        Some(Err(e)) => Settled::Thrown(self.thrown(ctx, host, e)),
                        None => Settled::Thrown("promise state changed unexpectedly".into()),
                    };
                }
                PromiseState::Rejected => {
                    let reason = match promise.result::<Value>() {
                        Some(Err(e)) => self.thrown(ctx, host, e),
                        _ => "the program was rejected".into(),
                    };
                    return Settled::Thrown(reason);
                }
                PromiseState::Pending => {}
            }
            // Nothing runnable: wait for the next timer, or give up.
            let next = host
                .get::<_, Function>("nextTimer")
                .and_then(|f| f.call::<_, f64>(()))
                .unwrap_or(-1.0);
            if next < 0.0 {
                return Settled::Thrown(
                    "the program is waiting on a promise that can never settle (no pending timers or tool calls)".into(),
                );
            }
            let wait = Duration::from_millis(next as u64);
            let remaining = self.remaining();
            if wait >= remaining {
                std::thread::sleep(remaining);
                return Settled::Thrown(self.timeout_message());
            }
            std::thread::sleep(wait);
            if let Err(e) = host
                .get::<_, Function>("fireDue")
                .and_then(|f| f.call::<_, ()>(()))
            {
                return Settled::Thrown(self.thrown(ctx, host, e));
            }
        }
    }

    fn serialize<'js>(
        &self,
        ctx: &Ctx<'js>,
        host: &Object<'js>,
        value: Value<'js>,
    ) -> Result<Option<serde_json::Value>, String> {
        let json: Option<String> = host
            .get::<_, Function>("serialize")
            .and_then(|f| f.call::<_, Option<String>>((value,)))
            .map_err(|e| self.thrown(ctx, host, e))?;
        let Some(json) = json else { return Ok(None) };
        if json.len() > self.limits.max_result_bytes {
            return Err(format!(
                "result is too large: {} bytes of JSON (limit {} bytes)",
                json.len(),
                self.limits.max_result_bytes
            ));
        }
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| format!("result is not JSON-serialisable: {e}"))
    }

    /// Turns a pending exception into an agent-facing message.
    fn thrown<'js>(&self, ctx: &Ctx<'js>, host: &Object<'js>, err: rquickjs::Error) -> String {
        if self.past_deadline() {
            return self.timeout_message();
        }
        match err {
            rquickjs::Error::Exception => {
                let value = ctx.catch();
                if is_out_of_memory(&value) {
                    return "out of memory: the program exceeded the sandbox memory limit".into();
                }
                if is_stack_overflow(&value) {
                    return "stack overflow: the program exceeded the sandbox stack limit".into();
                }
                // Describing the value runs JS; with memory exhausted that
                // can fail too, so fall back to a plain message.
                host.get::<_, Function>("describe")
                    .and_then(|f| f.call::<_, String>((value,)))
                    .unwrap_or_else(|_| "the program threw a value that cannot be described".into())
            }
            rquickjs::Error::Allocation => {
                "out of memory: the program exceeded the sandbox memory limit".into()
            }
            other => format!("{other}"),
        }
    }

    fn exception_text<'js>(&self, ctx: &Ctx<'js>, err: rquickjs::Error) -> String {
        match err {
            rquickjs::Error::Exception => format!("{:?}", ctx.catch()),
            other => other.to_string(),
        }
    }

    fn past_deadline(&self) -> bool {
        self.deadline.get().is_some_and(|d| Instant::now() >= d)
    }

    fn remaining(&self) -> Duration {
        self.deadline
            .get()
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or_default()
    }

    fn timeout_message(&self) -> String {
        format!(
            "execution timed out after {} ms",
            self.limits.timeout.as_millis()
        )
    }
}

enum Settled<'js> {
    Value(Value<'js>),
    Thrown(String),
}

fn error_message(value: &Value<'_>) -> Option<String> {
    value.as_object()?.get::<_, String>("message").ok()
}

fn is_out_of_memory(value: &Value<'_>) -> bool {
    // QuickJS throws `null` when it cannot even allocate the error object.
    value.is_null() || error_message(value).is_some_and(|m| m == "out of memory")
}

fn is_stack_overflow(value: &Value<'_>) -> bool {
    error_message(value).is_some_and(|m| m.contains("stack overflow"))
}
