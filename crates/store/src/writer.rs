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

use crate::{DatabaseError, StoreError, StoreResult};

/// Writes taken into one transaction at most.
const MAX_BATCH: usize = 512;

/// Writes that may wait for the writer, by default (SPEC §12: bounded). A
/// group commit takes up to [`MAX_BATCH`] at once, so this is several
/// commits' worth; past it a write waits [`QUEUE_WAIT`] for room, then
/// fails with [`StoreError::Busy`].
pub const MAX_QUEUED_WRITES: usize = 8 * MAX_BATCH;

/// How long a write waits for room in a full queue before it is refused:
/// it may record work already done (an execution whose calls reached
/// upstreams), which a refusal would turn into an error the agent retries.
const QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// How often a waiting write looks for room.
const QUEUE_RETRY: std::time::Duration = std::time::Duration::from_millis(5);

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
    queue_wait: std::time::Duration,
}

impl Writer {
    /// `max_queued`: writes that may wait before one is refused as busy.
    pub(crate) fn start(
        path: &Path,
        open: fn(&Path) -> StoreResult<Connection>,
        max_queued: usize,
    ) -> StoreResult<Self> {
        Self::start_with(open(path)?, max_queued.max(1), QUEUE_WAIT)
    }

    fn start_with(
        conn: Connection,
        capacity: usize,
        queue_wait: std::time::Duration,
    ) -> StoreResult<Self> {
        let (jobs, queue) = crossbeam_channel::bounded(capacity);
        std::thread::Builder::new()
            .name("executor-store-writer".into())
            .spawn(move || run(conn, queue))
            .map_err(|e| StoreError::database_caused("cannot start the store writer", e))?;
        Ok(Writer { jobs, queue_wait })
    }

    /// Runs `f` inside the next group transaction and waits for its commit.
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let work: Work = Box::new(move |c| f(c).map(|v| Box::new(v) as Output));
        let mut job = Job {
            work,
            reply: Some(reply),
        };
        // A full queue is waited out for a moment (see QUEUE_WAIT).
        let deadline = tokio::time::Instant::now() + self.queue_wait;
        loop {
            match self.jobs.try_send(job) {
                Ok(()) => break,
                Err(crossbeam_channel::TrySendError::Disconnected(_)) => return Err(writer_gone()),
                Err(crossbeam_channel::TrySendError::Full(back)) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(StoreError::Busy);
                    }
                    job = back;
                    tokio::time::sleep(QUEUE_RETRY).await;
                }
            }
        }
        let out = answer.await.map_err(|_| writer_gone())??;
        out.downcast::<T>()
            .map(|b| *b)
            .map_err(|_| StoreError::database("store writer returned the wrong type"))
    }

    /// Whether the queue is at its bound: the next write would wait.
    pub(crate) fn is_full(&self) -> bool {
        self.jobs.is_full()
    }

    /// Queues a write without waiting for it (a lost one must be harmless).
    pub(crate) fn write_later<F>(&self, f: F)
    where
        F: FnOnce(&Connection) -> StoreResult<()> + Send + 'static,
    {
        let work: Work = Box::new(move |c| f(c).map(|()| Box::new(()) as Output));
        // A full queue drops it, as the contract allows.
        let _ = self.jobs.try_send(Job { work, reply: None });
    }
}

fn writer_gone() -> StoreError {
    StoreError::database("the store writer stopped")
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
    if let Err(e) = run_cached(conn, "BEGIN IMMEDIATE") {
        let error = DatabaseError::caused(e.to_string(), e);
        for job in batch {
            reply(job.reply, Err(StoreError::Database(error.clone())));
        }
        return;
    }
    // Each job runs under its own savepoint, so one failing write is
    // rolled back alone and the rest of the batch still commits.
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        let out = match run_cached(conn, "SAVEPOINT job") {
            Err(e) => Err(StoreError::from(e)),
            Ok(()) => {
                // A panicking job fails alone: its savepoint is rolled back
                // and the writer thread lives on for every later write.
                let work = job.work;
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(conn)))
                    .unwrap_or_else(|_| {
                        tracing::error!("a store write panicked; it was rolled back");
                        Err(StoreError::database("the write failed unexpectedly"))
                    });
                let end = if out.is_ok() {
                    run_cached(conn, "RELEASE job")
                } else {
                    conn.execute_batch("ROLLBACK TO job; RELEASE job")
                };
                match end {
                    Ok(()) => out,
                    Err(e) => Err(StoreError::from(e)),
                }
            }
        };
        results.push((job.reply, out));
    }
    let committed = run_cached(conn, "COMMIT");
    if let Err(e) = &committed {
        let _ = conn.execute_batch("ROLLBACK");
        tracing::error!(error = %e, "group commit failed");
    }
    for (reply_to, out) in results {
        let out = match &committed {
            Ok(()) => out,
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) => {
                Err(StoreError::Full)
            }
            Err(e) => Err(StoreError::database(format!("commit failed: {e}"))),
        };
        reply(reply_to, out);
    }
}

/// Runs one statement through the connection's statement cache: the
/// transaction statements run for every write, and preparing them each
/// time was a tenth of the writer's work.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn reply(to: Option<oneshot::Sender<StoreResult<Output>>>, out: StoreResult<Output>) {
    if let Some(to) = to {
        let _ = to.send(out);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn writer(capacity: usize) -> Writer {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER)").unwrap();
        Writer::start_with(conn, capacity, std::time::Duration::from_millis(100)).unwrap()
    }

    fn count(w: &Writer) -> impl std::future::Future<Output = StoreResult<i64>> + '_ {
        w.write(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_write_fails_alone() {
        let w = writer(64);
        let insert = || {
            w.write(|c| {
                c.execute("INSERT INTO t VALUES (1)", [])?;
                Ok(())
            })
        };
        insert().await.unwrap();
        // The panicking job wrote a row before panicking: rolled back.
        let failed = w
            .write::<(), _>(|c| {
                c.execute("INSERT INTO t VALUES (2)", []).unwrap();
                panic!("an injected fault");
            })
            .await;
        assert!(matches!(failed, Err(StoreError::Database(_))), "{failed:?}");
        for _ in 0..3 {
            insert().await.unwrap();
        }
        assert_eq!(count(&w).await.unwrap(), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_refuses_at_once() {
        let w = writer(2);
        // Hold the writer thread, then fill its queue.
        let (started, is_started) = std::sync::mpsc::channel();
        let holder = w.clone();
        let held = tokio::spawn(async move {
            holder
                .write(move |_| {
                    let _ = started.send(());
                    std::thread::sleep(Duration::from_millis(500));
                    Ok(())
                })
                .await
        });
        is_started.recv().unwrap();
        let queued: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                tokio::spawn(async move { w.write(|_| Ok(())).await })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(w.write(|_| Ok(())).await, Err(StoreError::Busy)));
        held.await.unwrap().unwrap();
        for q in queued {
            q.await.unwrap().unwrap();
        }
        // Once drained, writes go through again.
        w.write(|_| Ok(())).await.unwrap();
    }
}
