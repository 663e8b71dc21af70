//! WAL checkpoints on a thread of their own.
//!
//! SQLite checkpoints a WAL database from whichever connection commits
//! past `wal_autocheckpoint` (1,000 pages), and a checkpoint flushes the
//! WAL and the database file to disk: on the store's writer, that held up
//! every queued write — a request's execution record behind an `fsync` of
//! up to 150 ms under load. Here the writer does not checkpoint (only as a
//! backstop, at [`WRITER_BACKSTOP_PAGES`]); this thread watches the
//! wal-index from memory and runs a passive checkpoint, which never blocks
//! the writer, once [`CHECKPOINT_FRAMES`] frames wait.

use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rusqlite::Connection;

use crate::wal_probe::WalProbe;
use crate::{StoreError, StoreResult};

/// Frames (pages) waiting in the WAL that start a checkpoint: SQLite's own
/// default threshold.
const CHECKPOINT_FRAMES: u32 = 1_000;
/// How often the thread looks at the WAL.
const PERIOD: Duration = Duration::from_millis(100);
/// The writer connection's own `wal_autocheckpoint`: should this thread
/// fall behind (or be unable to read the wal-index), the writer still
/// bounds the WAL, as SQLite would.
pub(crate) const WRITER_BACKSTOP_PAGES: u32 = 20_000;

/// Keeps the checkpoint thread running; it stops when its store is dropped.
pub(crate) struct Checkpointer {
    _alive: Sender<()>,
}

impl Checkpointer {
    pub(crate) fn start(conn: Connection) -> StoreResult<Self> {
        // A read first, so the connection has the wal-index mapped.
        conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))?;
        let (alive, stopped) = crossbeam_channel::bounded(0);
        std::thread::Builder::new()
            .name("executor-store-checkpoint".into())
            .spawn(move || run(conn, stopped))
            .map_err(|e| StoreError::database_caused("cannot start the checkpointer", e))?;
        Ok(Checkpointer { _alive: alive })
    }
}

fn run(conn: Connection, stopped: Receiver<()>) {
    // SAFETY: the probe is read only in this function, while `conn` is open.
    let probe = unsafe { WalProbe::of(&conn) };
    // Without a wal-index there is nothing to watch: the writer's backstop
    // checkpoints alone.
    let Some(probe) = probe else { return };
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(PERIOD) {
        if probe.frames_to_checkpoint().unwrap_or(0) < CHECKPOINT_FRAMES {
            continue;
        }
        let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(0));
        if let Err(e) = done {
            tracing::warn!(error = %e, "WAL checkpoint failed; trying again later");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_checkpoints_what_a_writer_without_autocheckpoint_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.db");
        let writer = crate::sqlite::connect(&path).unwrap();
        writer
            .execute_batch("PRAGMA wal_autocheckpoint=0; CREATE TABLE t (b BLOB);")
            .unwrap();
        let _checkpointer = Checkpointer::start(crate::sqlite::connect(&path).unwrap()).unwrap();
        // SAFETY: read only while `writer` is open.
        let probe = unsafe { WalProbe::of(&writer) }.unwrap();
        // 1,200 commits of a page each: past the threshold.
        for _ in 0..1_200 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(3000))", [])
                .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while probe.frames_to_checkpoint().unwrap_or(u32::MAX) >= CHECKPOINT_FRAMES {
            assert!(
                std::time::Instant::now() < deadline,
                "the checkpointer left {:?} frames",
                probe.frames_to_checkpoint()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
