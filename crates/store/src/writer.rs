//! Group commit: one thread owns the write connection and commits every
//! write that is queued at that moment in one transaction.
//!
//! Under load, a request's writes (its execution record, its SSE event, the
//! delivery marks of earlier events) share a commit with other requests'
//! instead of each paying for its own; no async worker ever waits on the
//! database's write lock. A caller's future resolves only after the commit
//! that holds its write, so "durable before answered" holds.

use std::any::Any;
use std::path::Path;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::{StoreError, StoreResult};

/// Writes taken into one transaction at most.
const MAX_BATCH: usize = 512;

type Output = Box<dyn Any + Send>;
type Work = Box<dyn FnOnce(&Connection) -> StoreResult<Output> + Send>;

struct Job {
    work: Work,
    /// None for fire-and-forget writes.
    reply: Option<oneshot::Sender<StoreResult<Output>>>,
}

#[derive(Clone)]
pub(crate) struct Writer {
    jobs: Sender<Job>,
}

impl Writer {
    pub(crate) fn start(
        path: &Path,
        open: fn(&Path) -> StoreResult<Connection>,
    ) -> StoreResult<Self> {
        let conn = open(path)?;
        let (jobs, queue) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("executor-store-writer".into())
            .spawn(move || run(conn, queue))
            .map_err(|e| StoreError::Database(format!("cannot start the store writer: {e}")))?;
        Ok(Writer { jobs })
    }

    /// Runs `f` inside the next group transaction and waits for its commit.
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let work: Work = Box::new(move |c| f(c).map(|v| Box::new(v) as Output));
        self.jobs
            .send(Job {
                work,
                reply: Some(reply),
            })
            .map_err(|_| writer_gone())?;
        let out = answer.await.map_err(|_| writer_gone())??;
        out.downcast::<T>()
            .map(|b| *b)
            .map_err(|_| StoreError::Database("store writer returned the wrong type".into()))
    }

    /// Queues a write without waiting for it (a lost one must be harmless).
    pub(crate) fn write_later<F>(&self, f: F)
    where
        F: FnOnce(&Connection) -> StoreResult<()> + Send + 'static,
    {
        let work: Work = Box::new(move |c| f(c).map(|()| Box::new(()) as Output));
        let _ = self.jobs.send(Job { work, reply: None });
    }
}

fn writer_gone() -> StoreError {
    StoreError::Database("the store writer stopped".into())
}

fn run(conn: Connection, queue: Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit_batch(&conn, batch);
    }
}

fn commit_batch(conn: &Connection, batch: Vec<Job>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let msg = e.to_string();
        for job in batch {
            reply(job.reply, Err(StoreError::Database(msg.clone())));
        }
        return;
    }
    // Each job runs under its own savepoint, so one failing write is
    // rolled back alone and the rest of the batch still commits.
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        let out = match conn.execute_batch("SAVEPOINT job") {
            Err(e) => Err(StoreError::from(e)),
            Ok(()) => {
                let out = (job.work)(conn);
                let end = if out.is_ok() {
                    "RELEASE job"
                } else {
                    "ROLLBACK TO job; RELEASE job"
                };
                match conn.execute_batch(end) {
                    Ok(()) => out,
                    Err(e) => Err(StoreError::from(e)),
                }
            }
        };
        results.push((job.reply, out));
    }
    let committed = conn.execute_batch("COMMIT");
    if let Err(e) = &committed {
        let _ = conn.execute_batch("ROLLBACK");
        tracing::error!(error = %e, "group commit failed");
    }
    for (reply_to, out) in results {
        let out = match &committed {
            Ok(()) => out,
            Err(e) => Err(StoreError::Database(format!("commit failed: {e}"))),
        };
        reply(reply_to, out);
    }
}

fn reply(to: Option<oneshot::Sender<StoreResult<Output>>>, out: StoreResult<Output>) {
    if let Some(to) = to {
        let _ = to.send(out);
    }
}
