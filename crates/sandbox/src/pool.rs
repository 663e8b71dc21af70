//! Dedicated sandbox threads: a base of one per core, started with the
//! pool, grown on demand.
//!
//! Each thread owns one QuickJS runtime, made when the thread starts, with
//! its first run's context ready before any job waits for it. Short
//! executions share the base threads (more threads than cores would only
//! add context switches and tail latency). When a job has waited
//! [`SLOW_LANE_DELAY`] without a thread picking it up — every thread is
//! busy with a long script — another thread is started, up to the
//! ceiling, so a CPU-bound script never holds up a fast one for long.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::oneshot;

use crate::run::{RunContext, ThreadRuntime};
use crate::{HostBridge, Limits, RunOutcome, SandboxError, Stop};

/// Native stack of a sandbox thread: above the JS stack cap so QuickJS hits
/// its own limit (a catchable "stack overflow") long before the OS guard page.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

/// How long a run may outlive its compute deadline before it is abandoned,
/// by default (SPEC §12): the interrupt handler ends a run long before; this
/// only catches one stuck where the handler cannot fire.
pub const BACKSTOP_GRACE: Duration = Duration::from_secs(30);

/// Shortest wait between two backstop checks, so that a tiny grace never
/// turns the wait for a run with tool calls in flight into a busy loop.
const BACKSTOP_RECHECK: Duration = Duration::from_millis(100);

/// How long a queued job waits before the pool grows for it.
const SLOW_LANE_DELAY: Duration = Duration::from_millis(10);

/// Jobs that may wait for a thread, per thread of the ceiling, unless
/// [`Limits::max_queued_jobs`] sets a total. Admission control above keeps
/// the queue short; past this bound a run is refused (`SandboxError::Busy`,
/// a 503 to the client) instead of queueing without bound.
pub const QUEUED_PER_THREAD: usize = 4;

struct Job {
    code: String,
    context: RunContext,
    started: Arc<AtomicBool>,
    reply: oneshot::Sender<Result<RunOutcome, SandboxError>>,
}

struct Shared {
    limits: Limits,
    jobs: Receiver<Job>,
    threads: AtomicUsize,
    base_threads: usize,
    max_threads: usize,
}

/// A handle to the sandbox threads; cheap to clone.
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
    submit: Sender<Job>,
}

impl Pool {
    /// `max_threads` bounds concurrent executions; jobs beyond it queue, up
    /// to `limits.max_queued_jobs`.
    pub fn new(limits: Limits, max_threads: usize) -> Self {
        let max_threads = max_threads.max(1);
        let queued = limits
            .max_queued_jobs
            .unwrap_or(max_threads * QUEUED_PER_THREAD)
            .max(1);
        let (submit, jobs) = crossbeam_channel::bounded(queued);
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        let pool = Pool {
            shared: Arc::new(Shared {
                limits,
                jobs,
                threads: AtomicUsize::new(0),
                base_threads: cores.clamp(1, max_threads),
                max_threads,
            }),
            submit,
        };
        // The base threads start now, each with its runtime made and its
        // first context ready, so the first executions after a start do
        // not pay for them.
        for _ in 0..pool.shared.base_threads {
            pool.grow();
        }
        pool
    }

    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Whether the queue of jobs waiting for a thread is at its bound: the
    /// next run would be refused as [`SandboxError::Busy`].
    pub fn queue_full(&self) -> bool {
        self.submit.is_full()
    }

    /// Runs `code` (an async function body) on a sandbox thread; `bridge`
    /// answers its `tools.*` calls.
    pub async fn run(
        &self,
        code: String,
        bridge: Option<Arc<dyn HostBridge>>,
    ) -> Result<RunOutcome, SandboxError> {
        self.run_until(code, bridge, Stop::default()).await
    }

    /// [`Pool::run`], ended early when `stop` is requested. Dropping the
    /// returned future before the job starts drops the job too.
    pub async fn run_until(
        &self,
        code: String,
        bridge: Option<Arc<dyn HostBridge>>,
        stop: Stop,
    ) -> Result<RunOutcome, SandboxError> {
        let (reply, mut answer) = oneshot::channel();
        let started = Arc::new(AtomicBool::new(false));
        let deadline_ms = Arc::new(AtomicI64::new(0));
        let context = RunContext {
            bridge,
            handle: tokio::runtime::Handle::current(),
            deadline_ms: deadline_ms.clone(),
            stop,
        };
        // The base threads started with the pool; one that could not be
        // spawned then is tried again here.
        if self.shared.threads.load(Ordering::Acquire) < self.shared.base_threads {
            self.grow();
        }
        self.submit
            .try_send(Job {
                code,
                context,
                started: started.clone(),
                reply,
            })
            .map_err(|e| match e {
                crossbeam_channel::TrySendError::Full(_) => SandboxError::Busy,
                crossbeam_channel::TrySendError::Disconnected(_) => SandboxError::WorkerLost,
            })?;
        // The host backstop (SPEC §6): a run still going `backstop_grace`
        // (30 s) after its compute deadline (which moves while tool calls
        // are in flight) is abandoned; its thread is left to finish on its own.
        let grace = self.shared.limits.backstop_grace;
        let mut backstop = Box::pin(tokio::time::sleep(self.shared.limits.timeout + grace));
        let mut slow_lane = Box::pin(tokio::time::sleep(SLOW_LANE_DELAY));
        loop {
            tokio::select! {
                result = &mut answer => return result.unwrap_or(Err(SandboxError::WorkerLost)),
                _ = &mut slow_lane, if !started.load(Ordering::Acquire) => {
                    if !started.load(Ordering::Acquire) {
                        self.grow();
                    }
                    // Check again later: growth may have hit the ceiling.
                    slow_lane = Box::pin(tokio::time::sleep(SLOW_LANE_DELAY * 4));
                }
                _ = &mut backstop => {
                    let deadline = deadline_ms.load(Ordering::Acquire);
                    let overdue = deadline > 0 && unix_ms() > deadline + grace.as_millis() as i64;
                    if overdue {
                        return Ok(RunOutcome::failed(format!(
                            "execution timed out after {} ms",
                            self.shared.limits.timeout.as_millis()
                        )));
                    }
                    backstop = Box::pin(tokio::time::sleep(grace.max(BACKSTOP_RECHECK)));
                }
            }
        }
    }

    /// Starts one more thread unless the pool is at its ceiling.
    fn grow(&self) {
        let s = &self.shared;
        let reserved = s
            .threads
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < s.max_threads).then_some(n + 1)
            })
            .is_ok();
        if !reserved {
            return;
        }
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("executor-sandbox".into())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || worker(shared));
        if spawned.is_err() {
            self.shared.threads.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn worker(shared: Arc<Shared>) {
    let mut runtime = ThreadRuntime::new(shared.limits.clone());
    if let Ok(e) = &runtime {
        // The first run's context, made before any job waits for it.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.tidy())).is_err() {
            runtime = ThreadRuntime::new(shared.limits.clone());
        }
    }
    while let Ok(job) = shared.jobs.recv() {
        // The requester gave up while the job was queued: nobody would
        // read the outcome, so the program never runs.
        if job.reply.is_closed() {
            continue;
        }
        job.started.store(true, Ordering::Release);
        let result = match &runtime {
            // A panic inside the runtime must cost one execution, not the thread.
            Ok(e) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                e.run(&job.code, &job.context)
            })) {
                Ok(result) => {
                    if e.is_poisoned() {
                        runtime = ThreadRuntime::new(shared.limits.clone());
                    }
                    result
                }
                Err(_) => {
                    // The runtime may be half-way through anything: it is
                    // never reused, the next job gets a fresh one.
                    runtime = ThreadRuntime::new(shared.limits.clone());
                    Err(SandboxError::Engine("the sandbox engine panicked".into()))
                }
            },
            Err(e) => Err(SandboxError::Runtime(e.to_string())),
        };
        let _ = job.reply.send(result);
        // Housekeeping after the answer, off the request's path (no host
        // code runs there); a panic costs the runtime, which is replaced,
        // and no run.
        if let Ok(e) = &runtime {
            let tidied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.tidy()));
            if tidied.is_err() {
                runtime = ThreadRuntime::new(shared.limits.clone());
            }
        }
    }
    shared.threads.fetch_sub(1, Ordering::AcqRel);
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_threads_start_with_the_pool_not_with_its_first_run() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let pool = Pool::new(Limits::default(), 64);
        assert_eq!(
            pool.shared.threads.load(Ordering::Acquire),
            cores.clamp(1, 64)
        );
        // Never more than the ceiling, however many cores.
        let small = Pool::new(Limits::default(), 1);
        assert_eq!(small.shared.threads.load(Ordering::Acquire), 1);
    }
}
