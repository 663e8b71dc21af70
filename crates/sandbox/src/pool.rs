//! Dedicated sandbox threads that grow on demand.
//!
//! Each thread owns one QuickJS runtime. A job goes to an idle thread; when
//! none is idle and the pool is below its ceiling, a new thread is started,
//! so a CPU-bound script occupies its own thread and never delays a fast one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender};
use tokio::sync::oneshot;

use crate::run::Engine;
use crate::{Limits, RunOutcome, SandboxError};

/// Native stack of a sandbox thread: above the JS stack cap so QuickJS hits
/// its own limit (a catchable "stack overflow") long before the OS guard page.
const THREAD_STACK_BYTES: usize = 16 * 1024 * 1024;

struct Job {
    code: String,
    reply: oneshot::Sender<Result<RunOutcome, SandboxError>>,
}

struct Shared {
    limits: Limits,
    jobs: Receiver<Job>,
    idle: AtomicUsize,
    threads: AtomicUsize,
    max_threads: usize,
}

/// A handle to the sandbox threads; cheap to clone.
#[derive(Clone)]
pub struct Pool {
    shared: Arc<Shared>,
    submit: Sender<Job>,
}

impl Pool {
    /// `max_threads` bounds concurrent executions; jobs beyond it queue.
    pub fn new(limits: Limits, max_threads: usize) -> Self {
        let (submit, jobs) = crossbeam_channel::unbounded();
        Pool {
            shared: Arc::new(Shared {
                limits,
                jobs,
                idle: AtomicUsize::new(0),
                threads: AtomicUsize::new(0),
                max_threads: max_threads.max(1),
            }),
            submit,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.shared.limits
    }

    /// Runs `code` (an async function body) on a sandbox thread.
    pub async fn run(&self, code: String) -> Result<RunOutcome, SandboxError> {
        let (reply, answer) = oneshot::channel();
        self.ensure_worker();
        self.submit
            .send(Job { code, reply })
            .map_err(|_| SandboxError::WorkerLost)?;
        // The host backstop (SPEC §6): a run that outlives its deadline by
        // 30 s is abandoned; its thread is left to finish on its own.
        let backstop = self.shared.limits.timeout + std::time::Duration::from_secs(30);
        match tokio::time::timeout(backstop, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(SandboxError::WorkerLost),
            Err(_) => Ok(RunOutcome::Failed {
                message: format!(
                    "execution timed out after {} ms",
                    self.shared.limits.timeout.as_millis()
                ),
                logs: Vec::new(),
            }),
        }
    }

    fn ensure_worker(&self) {
        let s = &self.shared;
        // Claim an idle worker if one exists; otherwise start one.
        let claimed = s
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if claimed {
            return;
        }
        let started = s
            .threads
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < s.max_threads).then_some(n + 1)
            })
            .is_ok();
        if started {
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
}

fn worker(shared: Arc<Shared>) {
    let engine = Engine::new(shared.limits.clone());
    // The job that caused this thread to start is taken without an idle
    // claim; after each job the thread announces itself idle again.
    while let Ok(job) = shared.jobs.recv() {
        let result = match &engine {
            // A panic inside the engine must cost one execution, not the thread.
            Ok(engine) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.run(&job.code)))
                    .unwrap_or_else(|_| {
                        Err(SandboxError::Engine("the sandbox engine panicked".into()))
                    })
            }
            Err(e) => Err(SandboxError::Runtime(e.to_string())),
        };
        let _ = job.reply.send(result);
        shared.idle.fetch_add(1, Ordering::AcqRel);
    }
    shared.threads.fetch_sub(1, Ordering::AcqRel);
}
