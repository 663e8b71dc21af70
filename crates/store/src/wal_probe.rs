//! "Has anything committed since I last looked?" for a SQLite database in
//! WAL mode, answered from memory without a system call.
//!
//! Every connection to a WAL database, in any process, shares the
//! wal-index through the `-shm` file, and every commit rewrites the
//! wal-index header at its start (its `iChange` counter moves, and with
//! it the header's checksum; <https://sqlite.org/walformat.html>). Reading
//! that header from a read-only mapping tells whether a commit happened
//! since the last look. Why not `PRAGMA data_version`: it needs a read
//! transaction, whose WAL read lock is two `fcntl` calls; per request,
//! those two calls cost a fifth of `tools/list`'s throughput under load.
//!
//! The header is only a hint to skip work: when it cannot be read, or its
//! two copies disagree (a commit is writing it), the caller does the full
//! check.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering, fence};

use memmap2::{Mmap, MmapOptions};

/// 32-bit words in one copy of the header (`WalIndexHdr`, 48 bytes).
const HEADER_WORDS: usize = 12;
/// The two copies SQLite keeps at the start of the `-shm` file.
const MAPPED_BYTES: usize = 2 * HEADER_WORDS * 4;

/// One copy of the wal-index header, word for word.
pub(crate) type WalHeader = [u32; HEADER_WORDS];

/// A read-only mapping of the wal-index header of one database.
pub(crate) struct WalProbe {
    map: Mmap,
}

impl WalProbe {
    /// Maps the header of `<db>-shm`, or `None` where there is none (not
    /// WAL mode, not initialised). Call it while a connection of this
    /// process has the database open and has read from it: SQLite resets
    /// (truncates) the `-shm` file only when no connection has it open, and
    /// an open connection holds a shared lock that says so, so the mapping
    /// stays valid for as long as that connection lives. Drop the probe
    /// before that connection.
    pub(crate) fn open(db: &Path) -> Option<Self> {
        let mut name = db.as_os_str().to_owned();
        name.push("-shm");
        let file = File::open(&name).ok()?;
        if file.metadata().ok()?.len() < MAPPED_BYTES as u64 {
            return None;
        }
        // SAFETY: a read-only shared mapping of the file's first 96 bytes,
        // which exist (checked above) and are not truncated while the
        // caller's connection is open (see above). Other processes write
        // them, so they are only ever read through atomics.
        let map = unsafe { MmapOptions::new().len(MAPPED_BYTES).map(&file) }.ok()?;
        Some(WalProbe { map })
    }

    /// The current header, or `None` while a commit is writing it.
    ///
    /// SQLite's writer stores the second copy, then a barrier, then the
    /// first; reading the first, a barrier, then the second, and requiring
    /// them equal, sees either a whole header or a disagreement (the same
    /// protocol SQLite's readers use).
    pub(crate) fn header(&self) -> Option<WalHeader> {
        let words = self.words();
        let mut first = [0u32; HEADER_WORDS];
        for (word, shared) in first.iter_mut().zip(&words[..HEADER_WORDS]) {
            *word = shared.load(Ordering::Acquire);
        }
        fence(Ordering::Acquire);
        let agree = first
            .iter()
            .zip(&words[HEADER_WORDS..])
            .all(|(word, shared)| *word == shared.load(Ordering::Acquire));
        agree.then_some(first)
    }

    fn words(&self) -> &[AtomicU32] {
        // SAFETY: the mapping is page-aligned and MAPPED_BYTES long, which
        // is 2 * HEADER_WORDS aligned u32s; AtomicU32 has u32's layout.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().cast::<AtomicU32>(), 2 * HEADER_WORDS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn wal_connection(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL;").unwrap();
        conn
    }

    #[test]
    fn the_header_moves_with_every_commit_of_any_connection_and_stands_still_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.db");
        let watcher = wal_connection(&path);
        watcher
            .execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        let probe = WalProbe::open(&path).expect("a WAL database has a -shm header");
        let before = probe.header().unwrap();

        // Reads, here and by another connection, leave it alone.
        let other = wal_connection(&path);
        let _: i64 = other
            .query_row("SELECT n FROM t", [], |r| r.get(0))
            .unwrap();
        let _: i64 = watcher
            .query_row("SELECT n FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(probe.header(), Some(before));

        // A commit by another connection moves it, and so does the next.
        other.execute("UPDATE t SET n = 2", []).unwrap();
        let after_one = probe.header().unwrap();
        assert_ne!(after_one, before);
        other.execute("UPDATE t SET n = 3", []).unwrap();
        assert_ne!(probe.header().unwrap(), after_one);

        // Even after a checkpoint restarts the WAL from its beginning.
        let now = probe.header().unwrap();
        other
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE); UPDATE t SET n = 4;")
            .unwrap();
        assert_ne!(probe.header().unwrap(), now);
        drop(probe);
    }

    #[test]
    fn a_database_without_a_wal_index_has_no_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER);").unwrap();
        assert!(WalProbe::open(&path).is_none());
    }
}
