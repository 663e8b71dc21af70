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
//!
//! The probe reads SQLite's own mapping of the `-shm` file, asked for with
//! the VFS's `xShmMap`, and never opens the file itself: a process that
//! closes any descriptor of a file loses every POSIX lock it holds on it,
//! SQLite's included, and without its locks on the `-shm` another process
//! may reset the file under every connection that uses it (which a first
//! version of this probe, mapping the file by itself, did).

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering, fence};

use rusqlite::{Connection, ffi};

/// 32-bit words in one copy of the header (`WalIndexHdr`, 48 bytes).
const HEADER_WORDS: usize = 12;
/// The two copies SQLite keeps at the start of the wal-index, then the
/// checkpoint information (`WalCkptInfo`), whose first word is `nBackfill`.
const READ_WORDS: usize = 2 * HEADER_WORDS + 1;
/// Word index of `mxFrame` in a header: the last valid frame of the WAL.
const MX_FRAME: usize = 4;
/// Word index of `nBackfill`: frames already copied into the database.
const N_BACKFILL: usize = 2 * HEADER_WORDS;
/// The size of a wal-index region (`WALINDEX_PGSZ`); region 0 starts with
/// the headers.
const REGION_BYTES: c_int = 32 * 1024;

/// One copy of the wal-index header, word for word.
pub(crate) type WalHeader = [u32; HEADER_WORDS];

/// The wal-index header of one database, read through the mapping of one
/// of its connections.
pub(crate) struct WalProbe {
    words: *const AtomicU32,
}

// SAFETY: the pointer is into memory shared between processes, which the
// probe only reads through atomics; it stays valid for as long as the
// connection it came from is open, wherever the probe is used from (see
// `WalProbe::of`).
unsafe impl Send for WalProbe {}

impl WalProbe {
    /// The probe of `conn`'s database, or `None` where it has no wal-index
    /// yet (not WAL mode, or nothing read).
    ///
    /// # Safety
    ///
    /// The probe must not be read after `conn` is closed: region 0 of the
    /// wal-index stays mapped while a connection of this process has it
    /// open, and no longer.
    pub(crate) unsafe fn of(conn: &Connection) -> Option<Self> {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: `conn.handle()` is an open connection; FILE_POINTER
        // writes the main database's `sqlite3_file` into `file`.
        let rc = unsafe {
            ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&raw mut file).cast::<c_void>(),
            )
        };
        if rc != ffi::SQLITE_OK || file.is_null() {
            return None;
        }
        // SAFETY: `file` is the open database file of `conn`, whose methods
        // SQLite's own WAL code calls the same way (region 0, its size, no
        // extending); a region that does not exist yet comes back null.
        let region = unsafe {
            let methods = (*file).pMethods;
            let map = methods.as_ref()?.xShmMap?;
            let mut region: *mut c_void = std::ptr::null_mut();
            if map(file, 0, REGION_BYTES, 0, &raw mut region) != ffi::SQLITE_OK {
                return None;
            }
            region
        };
        if region.is_null() {
            return None;
        }
        Some(WalProbe {
            words: region.cast::<AtomicU32>(),
        })
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
            .zip(&words[HEADER_WORDS..2 * HEADER_WORDS])
            .all(|(word, shared)| *word == shared.load(Ordering::Acquire));
        agree.then_some(first)
    }

    /// Frames in the WAL not yet copied into the database by a checkpoint,
    /// or `None` while a commit is writing the header.
    pub(crate) fn frames_to_checkpoint(&self) -> Option<u32> {
        let header = self.header()?;
        let backfilled = self.words()[N_BACKFILL].load(Ordering::Acquire);
        Some(header[MX_FRAME].saturating_sub(backfilled))
    }

    fn words(&self) -> &[AtomicU32] {
        // SAFETY: region 0 is REGION_BYTES long and page-aligned, so it
        // holds READ_WORDS aligned u32s; AtomicU32 has u32's layout; the
        // region is mapped while the probe lives (see `WalProbe::of`).
        unsafe { std::slice::from_raw_parts(self.words, READ_WORDS) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::path::Path;

    fn wal_connection(path: &Path) -> Connection {
        crate::sqlite::connect(path).unwrap()
    }

    /// SQLite's "dead man switch" byte in the `-shm` (`UNIX_SHM_DMS`):
    /// every process with the wal-index open holds a shared lock on it,
    /// and a process that can lock it exclusively resets the file.
    const SHM_DMS_BYTE: i64 = (22 + 8) * 4 + 8;

    /// Whether this process holds a lock on `byte` of `<db>-shm`, asked
    /// with an open-file-description lock query, which (unlike `F_GETLK`)
    /// sees the process's own POSIX locks as conflicts.
    fn shm_byte_locked(db: &Path, byte: i64) -> bool {
        let mut name = db.as_os_str().to_owned();
        name.push("-shm");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&name)
            .unwrap();
        // SAFETY: a plain C struct, then filled in below.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as _;
        lock.l_whence = libc::SEEK_SET as _;
        lock.l_start = byte;
        lock.l_len = 1;
        // SAFETY: an open descriptor and a valid `flock`.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
        assert_eq!(rc, 0, "F_OFD_GETLK failed");
        // Never closed: closing a descriptor of the file would drop this
        // process's POSIX locks on it, the very fault this looks for.
        std::mem::forget(file);
        lock.l_type != libc::F_UNLCK as libc::c_short
    }

    #[test]
    fn an_open_store_keeps_its_locks_on_the_wal_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let store = crate::SqliteStore::open(&path).unwrap();
        // Opening the store took two probes (the revision watch, the
        // checkpointer). Had either opened and closed the `-shm` itself, the
        // process would have lost this lock, and another process could
        // reset the file under the server.
        assert!(shm_byte_locked(&path, SHM_DMS_BYTE));
        drop(store);
    }

    #[test]
    fn the_header_moves_with_every_commit_of_any_connection_and_stands_still_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probe.db");
        let watcher = wal_connection(&path);
        watcher
            .execute_batch("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        // SAFETY (here and below): each probe is read only while its connection is open.
        let probe = unsafe { WalProbe::of(&watcher) }.expect("a WAL database has a wal-index");
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
    }

    #[test]
    fn frames_to_checkpoint_count_commits_and_fall_to_zero_after_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frames.db");
        let conn = wal_connection(&path);
        conn.execute_batch("PRAGMA wal_autocheckpoint=0; CREATE TABLE t (n INTEGER);")
            .unwrap();
        let probe = unsafe { WalProbe::of(&conn) }.unwrap();
        let before = probe.frames_to_checkpoint().unwrap();
        for n in 0..10 {
            conn.execute("INSERT INTO t VALUES (?1)", [n]).unwrap();
        }
        assert!(probe.frames_to_checkpoint().unwrap() >= before + 10);
        conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);")
            .unwrap();
        assert_eq!(probe.frames_to_checkpoint(), Some(0));
    }

    #[test]
    fn a_database_without_a_wal_index_has_no_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER);").unwrap();
        assert!(unsafe { WalProbe::of(&conn) }.is_none());
    }
}
