//! One execution inside one QuickJS context.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rquickjs::module::WriteOptions;
use rquickjs::{
    Context, Ctx, Function, Module, Object, Persistent, Promise, Runtime, Value,
    promise::PromiseState,
};

use crate::{HostBridge, Limits, RunOutcome, SandboxError, Stop};

const PRELUDE: &str = include_str!("prelude.js");

/// Longest single wait for a tool call before the loop checks its clocks.
const MAX_WAIT: Duration = Duration::from_millis(500);

/// Runs between full collections of the runtime. Dropping a context frees
/// what reference counting can; only cycles wait for a collection, which
/// costs as much as a small run, so it is amortised. A run that fails (it
/// may have hit the memory cap) is always followed by one, and QuickJS
/// collects on its own past the GC threshold.
const RUNS_PER_GC: u32 = 8;

/// What one execution is given besides its code.
pub(crate) struct RunContext {
    pub bridge: Option<Arc<dyn HostBridge>>,
    pub handle: tokio::runtime::Handle,
    /// The compute deadline as Unix ms, published for the host backstop.
    pub deadline_ms: Arc<AtomicI64>,
    /// Set by the host to end the run early.
    pub stop: Stop,
}

/// A call's answer, and what the host keeps alive until it is taken.
type Reply = (u64, crate::HeldAnswer);

/// A QuickJS runtime owned by one worker thread, reused across executions;
/// each execution gets a fresh [`Context`], so no state crosses runs.
///
/// The work around a run that its answer does not need — freeing the spent
/// context, collecting, and making the next run's context with the prelude
/// loaded — happens in [`ThreadRuntime::tidy`], after the answer is sent.
pub(crate) struct ThreadRuntime {
    /// The next run's context, never used by a run yet. Declared (so
    /// dropped) before the runtime, like `spent`.
    spare: RefCell<Option<Spare>>,
    /// The last run's context, freed by `tidy`.
    spent: RefCell<Option<Context>>,
    /// A full collection is due at the next `tidy`.
    gc_due: Cell<bool>,
    runtime: Runtime,
    deadline: Rc<Cell<Option<Instant>>>,
    /// The current run's stop request, read by the interrupt handler.
    stop: Rc<RefCell<Option<Stop>>>,
    /// Set when host code panicked inside a callback of this runtime; the
    /// pool then replaces the runtime rather than trust its state.
    poisoned: Rc<Cell<bool>>,
    /// Runs since the last full collection.
    runs_since_gc: Cell<u32>,
    limits: Limits,
    /// The prelude, compiled once per runtime: loading bytecode into a
    /// fresh context is several times cheaper than parsing the source.
    prelude: Vec<u8>,
}

impl ThreadRuntime {
    pub(crate) fn new(limits: Limits) -> Result<Self, SandboxError> {
        let runtime = Runtime::new().map_err(|e| SandboxError::Runtime(e.to_string()))?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        runtime.set_gc_threshold(limits.memory_bytes / 4);
        let deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let stop: Rc<RefCell<Option<Stop>>> = Rc::new(RefCell::new(None));
        let (probe, stop_probe) = (deadline.clone(), stop.clone());
        // Once the deadline passes (or the host asks the run to stop), every
        // check interrupts: the exception QuickJS raises for an interrupt is
        // uncatchable, and `finally` blocks that try to keep running are
        // interrupted too.
        runtime.set_interrupt_handler(Some(Box::new(move || {
            probe.get().is_some_and(|d| Instant::now() >= d)
                || stop_probe.borrow().as_ref().is_some_and(Stop::is_requested)
        })));
        let prelude = compile_prelude(&runtime)?;
        Ok(ThreadRuntime {
            spare: RefCell::new(None),
            spent: RefCell::new(None),
            gc_due: Cell::new(false),
            runtime,
            deadline,
            stop,
            poisoned: Rc::new(Cell::new(false)),
            runs_since_gc: Cell::new(0),
            limits,
            prelude,
        })
    }

    pub(crate) fn run(&self, code: &str, rc: &RunContext) -> Result<RunOutcome, SandboxError> {
        let spare = self.spare.take();
        let Spare { factory, context } = match spare {
            Some(spare) => spare,
            None => self.prepare()?,
        };
        self.set_deadline(Instant::now() + self.limits.timeout, rc);
        *self.stop.borrow_mut() = Some(rc.stop.clone());
        let outcome = context.with(|ctx| match factory.restore(&ctx) {
            Ok(factory) => self.run_in(&ctx, factory, code, rc),
            Err(e) => Err(SandboxError::Engine(format!("prelude: {e}"))),
        });
        self.deadline.set(None);
        *self.stop.borrow_mut() = None;
        *self.spent.borrow_mut() = Some(context);
        let runs = self.runs_since_gc.get() + 1;
        let failed = !matches!(&outcome, Ok(o) if o.result.is_ok());
        if failed || runs >= RUNS_PER_GC {
            self.gc_due.set(true);
            self.runs_since_gc.set(0);
        } else {
            self.runs_since_gc.set(runs);
        }
        outcome
    }

    /// What follows a run once its answer is on its way: frees the spent
    /// context, collects when due (always after a failed run, which may
    /// have hit the memory cap), then makes the next run's context. A
    /// failure to make it is left for the next run to meet and report.
    pub(crate) fn tidy(&self) {
        drop(self.spent.take());
        if self.gc_due.replace(false) {
            self.runtime.run_gc();
        }
        if self.spare.borrow().is_none() {
            *self.spare.borrow_mut() = self.prepare().ok();
        }
    }

    /// A fresh context with the prelude's module loaded and its factory
    /// kept for the run.
    fn prepare(&self) -> Result<Spare, SandboxError> {
        let context =
            Context::full(&self.runtime).map_err(|e| SandboxError::Runtime(e.to_string()))?;
        let factory = context.with(|ctx| {
            self.load_prelude(&ctx)
                .map(|factory| Persistent::save(&ctx, factory))
                .map_err(|e| SandboxError::Engine(format!("prelude: {}", exception_text(&ctx, e))))
        })?;
        Ok(Spare { factory, context })
    }

    fn set_deadline(&self, deadline: Instant, rc: &RunContext) {
        self.deadline.set(Some(deadline));
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as i64;
        rc.deadline_ms
            .store(unix_ms() + remaining, Ordering::Release);
    }

    /// Stops the compute clock for `waited` (a tool call was in flight).
    fn extend_deadline(&self, waited: Duration, rc: &RunContext) {
        if let Some(d) = self.deadline.get() {
            self.set_deadline(d + waited, rc);
        }
    }

    fn run_in<'js>(
        &self,
        ctx: &Ctx<'js>,
        factory: Function<'js>,
        code: &str,
        rc: &RunContext,
    ) -> Result<RunOutcome, SandboxError> {
        let (reply_tx, replies) = crossbeam_channel::unbounded::<Reply>();
        let pending: Pending<'js> = Rc::new(RefCell::new(HashMap::new()));
        let host_call = host_call_function(
            ctx,
            pending.clone(),
            rc,
            reply_tx,
            &self.limits,
            self.poisoned.clone(),
        )?;
        let host: Object = factory
            .call((self.limits.max_log_bytes as f64, host_call))
            .map_err(|e| {
                SandboxError::Engine(format!("prelude init: {}", exception_text(ctx, e)))
            })?;

        let mut driver = Driver {
            runtime: self,
            ctx,
            host: &host,
            pending: &pending,
            replies: &replies,
            rc,
        };
        let settled = driver.start_and_settle(code);
        let result = match settled {
            Settled::Value(value) => self.serialize(ctx, &host, value),
            Settled::Thrown(message) => Err(message),
        };
        // Calls still in flight are abandoned: their host tasks are aborted
        // (no upstream request outlives the run), and their resolvers, which
        // hold JS values the context must not outlive, are dropped.
        for (_, call) in pending.borrow_mut().drain() {
            call.task.abort();
        }
        // Emitted values reach the agent like the result does, so they pass
        // the same checks; a violation fails the run.
        let (result, emitted) = match self.check_emitted(&take_strings(&host, "takeEmitted")) {
            Ok(emitted) => (result, emitted),
            Err(message) => (Err(message), Vec::new()),
        };
        Ok(RunOutcome {
            result,
            logs: take_strings(&host, "takeLogs"),
            emitted,
        })
    }

    fn load_prelude<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
        // SAFETY: the bytes are what `compile_prelude` wrote with this very
        // runtime, from our own source; they are never read from outside.
        let module = unsafe { Module::load(ctx.clone(), &self.prelude) }?;
        let (module, _) = module.eval()?;
        module.namespace()?.get("default")
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
                "result is too large: {} bytes of JSON (limit {} bytes); return less, or page through it",
                json.len(),
                self.limits.max_result_bytes
            ));
        }
        parse_result_json(&json).map(Some)
    }

    /// Parses the emitted JSON texts under the result's limits (size in
    /// total, depth, lone surrogates).
    fn check_emitted(&self, texts: &[String]) -> Result<Vec<serde_json::Value>, String> {
        let total: usize = texts.iter().map(String::len).sum();
        if total > self.limits.max_result_bytes {
            return Err(format!(
                "emitted values are too large: {total} bytes of JSON (limit {} bytes); emit less",
                self.limits.max_result_bytes
            ));
        }
        texts
            .iter()
            .map(|text| parse_result_json(text).map_err(|e| format!("emit: {e}")))
            .collect()
    }

    /// Turns a pending exception into an agent-facing message.
    fn thrown<'js>(&self, ctx: &Ctx<'js>, host: &Object<'js>, err: rquickjs::Error) -> String {
        if let Some(message) = self.stop_message() {
            return message;
        }
        if self.past_deadline() {
            return self.timeout_message();
        }
        match err {
            rquickjs::Error::Exception => {
                let value = ctx.catch();
                if is_out_of_memory(&value, self.memory_nearly_exhausted(ctx)) {
                    return "out of memory: the program exceeded the sandbox memory limit".into();
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

    /// Whether the runtime is near its memory cap. Called with the runtime
    /// already locked by `Context::with`, so it reads the statistics through
    /// the context's raw runtime pointer instead of `Runtime::memory_usage`.
    fn memory_nearly_exhausted(&self, ctx: &Ctx<'_>) -> bool {
        let mut stats = std::mem::MaybeUninit::<rquickjs::qjs::JSMemoryUsage>::uninit();
        // SAFETY: the context is alive for the duration of this call, so its
        // runtime pointer is valid; JS_ComputeMemoryUsage only reads runtime
        // statistics and fully initialises `stats`.
        let used = unsafe {
            let rt = rquickjs::qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
            rquickjs::qjs::JS_ComputeMemoryUsage(rt, stats.as_mut_ptr());
            stats.assume_init().malloc_size
        };
        used.max(0) as usize >= self.limits.memory_bytes / 10 * 9
    }

    /// The host's message when it asked the run to stop.
    fn stop_message(&self) -> Option<String> {
        let stop = self.stop.borrow();
        stop.as_ref()
            .filter(|s| s.is_requested())
            .map(Stop::message)
    }

    /// Whether host code panicked inside this runtime.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.get()
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

/// Compiles the prelude (an expression) as a module whose default export
/// is the prelude's factory function. Without its source and debug
/// information: no position inside the prelude is ever shown, and reading
/// them into every fresh context was 4% of an `execute`.
fn compile_prelude(runtime: &Runtime) -> Result<Vec<u8>, SandboxError> {
    let source = format!("export default {};\n", PRELUDE.trim_end());
    let context = Context::full(runtime).map_err(|e| SandboxError::Runtime(e.to_string()))?;
    context.with(|ctx| {
        Module::declare(ctx.clone(), "prelude.js", source.as_str())
            .and_then(|m| {
                m.write(WriteOptions {
                    strip_source: true,
                    strip_debug: true,
                    ..WriteOptions::default()
                })
            })
            .map_err(|e| SandboxError::Engine(format!("prelude: {}", exception_text(&ctx, e))))
    })
}

/// A context made ahead of its run, and the prelude's factory loaded in it.
/// The factory is declared (so dropped) before the context it lives in.
struct Spare {
    factory: Persistent<Function<'static>>,
    context: Context,
}

/// A tool call in flight: its promise's resolvers and the host task that
/// answers it (aborted if the run ends first).
struct PendingCall<'js> {
    resolve: Function<'js>,
    reject: Function<'js>,
    task: tokio::task::AbortHandle,
}

/// Tool calls in flight, by call id.
type Pending<'js> = Rc<RefCell<HashMap<u64, PendingCall<'js>>>>;

/// The `hostCall(path, argsJson)` function the prelude's proxy calls: it
/// returns a promise and hands the call to the bridge on the async runtime.
fn host_call_function<'js>(
    ctx: &Ctx<'js>,
    pending: Pending<'js>,
    rc: &RunContext,
    replies: Sender<Reply>,
    limits: &Limits,
    poisoned: Rc<Cell<bool>>,
) -> Result<Function<'js>, SandboxError> {
    let bridge = rc.bridge.clone();
    let handle = rc.handle.clone();
    let next_id = Cell::new(0u64);
    let (max_in_flight, max_calls) = (limits.max_calls_in_flight, limits.max_calls);
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, path: String, args: String| {
            let (promise, resolve, reject) = ctx.promise()?;
            // SPEC §12: calls in flight and in all are bounded; a call over
            // either bound is rejected at once and never leaves the sandbox.
            let refusal = if next_id.get() >= max_calls as u64 {
                Some(format!(
                    "this execution has made {max_calls} tool calls, the most one execution may make; \
                     split the work across executions"
                ))
            } else if pending.borrow().len() >= max_in_flight {
                Some(format!(
                    "{max_in_flight} tool calls are already in flight, the most one execution may have; \
                     await some before starting more"
                ))
            } else {
                None
            };
            if let Some(message) = refusal {
                let error = rquickjs::Exception::from_message(ctx.clone(), &message)?;
                reject.call::<_, ()>((error,))?;
                return Ok::<_, rquickjs::Error>(promise);
            }
            let id = next_id.get();
            next_id.set(id + 1);
            let args = serde_json::from_str(&args).unwrap_or(serde_json::Value::Null);
            let replies = replies.clone();
            let task = match &bridge {
                Some(bridge) => {
                    // A panic here would unwind through QuickJS; it costs
                    // this call, and the runtime is replaced after the run.
                    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        bridge.call_held(path, args)
                    }));
                    let call = match made {
                        Ok(call) => call,
                        Err(_) => {
                            poisoned.set(true);
                            Box::pin(async {
                                let failed: crate::HeldAnswer = (
                                    Err(crate::AgentError::new(
                                        "the host failed while making this tool call",
                                    )),
                                    None,
                                );
                                failed
                            })
                        }
                    };
                    handle.spawn(async move {
                        let _ = replies.send((id, call.await));
                    })
                }
                None => handle.spawn(async move {
                    let none = Err(crate::AgentError::new(
                        "tools are not available in this sandbox",
                    ));
                    let _ = replies.send((id, (none, None)));
                }),
            };
            pending.borrow_mut().insert(
                id,
                PendingCall {
                    resolve,
                    reject,
                    task: task.abort_handle(),
                },
            );
            Ok::<_, rquickjs::Error>(promise)
        },
    )
    .map_err(|e| SandboxError::Engine(format!("host function: {e}")))
}

/// Drives one run: the job queue, timers and tool-call replies.
struct Driver<'a, 'js> {
    runtime: &'a ThreadRuntime,
    ctx: &'a Ctx<'js>,
    host: &'a Object<'js>,
    pending: &'a Pending<'js>,
    replies: &'a Receiver<Reply>,
    rc: &'a RunContext,
}

enum Settled<'js> {
    Value(Value<'js>),
    Thrown(String),
}

impl<'js> Driver<'_, 'js> {
    fn start_and_settle(&mut self, code: &str) -> Settled<'js> {
        let compiled = self
            .host
            .get::<_, Function>("compile")
            .and_then(|compile| compile.call::<_, Function>((code,)));
        let body = match compiled {
            Ok(f) => f,
            Err(e) => return self.thrown(e),
        };
        let promise: Promise = match body.call(()) {
            Ok(p) => p,
            Err(e) => return self.thrown(e),
        };
        loop {
            while self.ctx.execute_pending_job() {}
            if let Some(message) = self.runtime.stop_message() {
                return Settled::Thrown(message);
            }
            if self.runtime.past_deadline() {
                return Settled::Thrown(self.runtime.timeout_message());
            }
            match promise.state() {
                PromiseState::Resolved => {
                    return match promise.result::<Value>() {
                        Some(Ok(v)) => Settled::Value(v),
                        Some(Err(e)) => self.thrown(e),
                        None => Settled::Thrown(
                            "the program's promise changed state unexpectedly".into(),
                        ),
                    };
                }
                PromiseState::Rejected => {
                    return match promise.result::<Value>() {
                        Some(Err(e)) => self.thrown(e),
                        _ => Settled::Thrown("the program was rejected".into()),
                    };
                }
                PromiseState::Pending => {}
            }
            if let Err(stop) = self.wait_for_progress() {
                return stop;
            }
        }
    }

    /// Waits for a tool-call reply or the next timer and applies it.
    fn wait_for_progress(&mut self) -> Result<(), Settled<'js>> {
        let next_timer = self
            .host
            .get::<_, Function>("nextTimer")
            .and_then(|f| f.call::<_, f64>(()))
            .unwrap_or(-1.0);
        let calls_in_flight = !self.pending.borrow().is_empty();
        if !calls_in_flight && next_timer < 0.0 {
            return Err(Settled::Thrown(
                "the program is waiting on a promise that can never settle (no pending timers or tool calls)".into(),
            ));
        }
        let timer_wait = (next_timer >= 0.0).then(|| Duration::from_millis(next_timer as u64));
        if calls_in_flight {
            // The compute clock stops while a tool call is in flight.
            let wait = timer_wait.unwrap_or(MAX_WAIT).min(MAX_WAIT);
            let started = Instant::now();
            let reply = self.replies.recv_timeout(wait);
            self.runtime.extend_deadline(started.elapsed(), self.rc);
            match reply {
                Ok(reply) => return self.settle_call(reply),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Settled::Thrown("tool calls are no longer answered".into()));
                }
            }
        } else if let Some(wait) = timer_wait {
            let remaining = self.runtime.remaining();
            if wait >= remaining && remaining <= MAX_WAIT {
                std::thread::sleep(remaining);
                return Err(Settled::Thrown(self.runtime.timeout_message()));
            }
            // Sleep in slices, so a stop request is seen within MAX_WAIT;
            // firing timers early is harmless (only due ones fire).
            std::thread::sleep(wait.min(MAX_WAIT));
        }
        if timer_wait.is_some() {
            let fired = self
                .host
                .get::<_, Function>("fireDue")
                .and_then(|f| f.call::<_, ()>(()));
            if let Err(e) = fired {
                return Err(self.thrown(e));
            }
        }
        Ok(())
    }

    /// Hands a call's answer to its promise. What the host kept alive for
    /// the answer (`_held`) is released once the answer is in the heap.
    fn settle_call(&mut self, (id, (outcome, _held)): Reply) -> Result<(), Settled<'js>> {
        let Some(PendingCall {
            resolve, reject, ..
        }) = self.pending.borrow_mut().remove(&id)
        else {
            return Ok(());
        };
        let settled = match outcome {
            Ok(value) => {
                let text = value.to_string();
                drop(value);
                self.ctx
                    .json_parse(text)
                    .and_then(|v| resolve.call::<_, ()>((v,)))
            }
            Err(message) => self
                .host
                .get::<_, Function>("makeError")
                .and_then(|make| make.call::<_, Value>((message.message(),)))
                .and_then(|err| reject.call::<_, ()>((err,))),
        };
        settled.map_err(|e| self.thrown(e))
    }

    fn thrown(&self, e: rquickjs::Error) -> Settled<'js> {
        Settled::Thrown(self.runtime.thrown(self.ctx, self.host, e))
    }
}

fn take_strings(host: &Object<'_>, method: &str) -> Vec<String> {
    host.get::<_, Function>(method)
        .and_then(|f| f.call::<_, Vec<String>>(()))
        .unwrap_or_default()
}

fn exception_text(ctx: &Ctx<'_>, err: rquickjs::Error) -> String {
    match err {
        rquickjs::Error::Exception => format!("{:?}", ctx.catch()),
        other => other.to_string(),
    }
}

fn error_message(value: &Value<'_>) -> Option<String> {
    value.as_object()?.get::<_, String>("message").ok()
}

fn is_out_of_memory(value: &Value<'_>, memory_nearly_exhausted: bool) -> bool {
    // QuickJS throws `null` when it cannot even allocate the error object;
    // a script may also `throw null` itself, so `null` counts only when
    // memory is actually near the cap.
    (value.is_null() && memory_nearly_exhausted)
        || error_message(value).is_some_and(|m| m == "out of memory")
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Deepest result accepted: the result is re-parsed and later serialised
/// recursively on threads with ordinary stacks.
const MAX_RESULT_DEPTH: usize = 100;

/// Parses the program's `JSON.stringify` output. JavaScript strings may hold
/// lone surrogates, which JSON text can carry but Rust strings cannot; they
/// become U+FFFD, as a UTF-8 encoder would make them.
fn parse_result_json(json: &str) -> Result<serde_json::Value, String> {
    if nesting_depth(json) > MAX_RESULT_DEPTH {
        return Err(format!(
            "result is nested more than {MAX_RESULT_DEPTH} levels deep: flatten it, or return it as a string"
        ));
    }
    match serde_json::from_str(json) {
        Ok(v) => Ok(v),
        Err(_) => serde_json::from_str(&replace_lone_surrogates(json))
            .map_err(|_| "result is not JSON-serialisable".to_string()),
    }
}

/// Bracket depth of JSON text, ignoring brackets inside strings.
fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Rewrites `\uD800`–`\uDFFF` escapes that are not part of a valid pair.
fn replace_lone_surrogates(json: &str) -> String {
    let bytes = json.as_bytes();
    let mut out = String::with_capacity(json.len());
    let mut i = 0;
    let unit_at = |i: usize| -> Option<u16> {
        let esc = bytes.get(i..i + 6)?;
        if esc[0] != b'\\' || (esc[1] != b'u' && esc[1] != b'U') {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&esc[2..6]).ok()?, 16).ok()
    };
    while i < bytes.len() {
        // Escapes of other characters (`\\`, `\"`) are copied whole so a
        // backslash is never mistaken for the start of a `\u`.
        if bytes[i] == b'\\' && bytes.get(i + 1) != Some(&b'u') {
            out.push_str(&json[i..(i + 2).min(json.len())]);
            i += 2;
            continue;
        }
        match unit_at(i) {
            Some(hi @ 0xD800..=0xDBFF) if matches!(unit_at(i + 6), Some(0xDC00..=0xDFFF)) => {
                let _ = hi;
                out.push_str(&json[i..i + 12]);
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.push_str("\\ufffd");
                i += 6;
            }
            _ => {
                let ch = json[i..].chars().next().unwrap_or('\u{fffd}');
                out.push(ch);
                i += ch.len_utf8().max(1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let v = parse_result_json(r#"["x\ud83dy", "\ud83d\ude00", "\\ud83d"]"#).unwrap();
        assert_eq!(v, serde_json::json!(["x\u{fffd}y", "😀", "\\ud83d"]));
    }

    #[test]
    fn depth_is_bounded_with_a_clear_message() {
        let deep = format!("{}1{}", "[".repeat(150), "]".repeat(150));
        assert!(
            parse_result_json(&deep)
                .unwrap_err()
                .contains("nested more than 100 levels")
        );
        let ok = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_result_json(&ok).is_ok());
        assert_eq!(nesting_depth(r#"{"a":"[[[[["}"#), 1);
    }

    /// Panics while making the call, as a broken host bridge would.
    struct Panicking;

    impl HostBridge for Panicking {
        fn call(
            &self,
            _path: String,
            _args: serde_json::Value,
        ) -> futures::future::BoxFuture<'static, Result<serde_json::Value, crate::AgentError>>
        {
            panic!("an injected fault");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_code_that_panics_poisons_the_runtime() {
        let runtime = ThreadRuntime::new(Limits::default()).unwrap();
        let context = RunContext {
            bridge: Some(Arc::new(Panicking)),
            handle: tokio::runtime::Handle::current(),
            deadline_ms: Arc::new(AtomicI64::new(0)),
            stop: Stop::default(),
        };
        assert!(!runtime.is_poisoned());
        // The program itself only sees the call fail.
        let outcome = tokio::task::block_in_place(|| runtime.run("await tools.x()", &context));
        let message = outcome.unwrap().result.unwrap_err();
        assert!(message.contains("the host failed"), "{message}");
        // The pool must not run another program on this runtime.
        assert!(runtime.is_poisoned());
    }
}
