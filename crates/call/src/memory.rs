//! Giving freed memory back to the system.

/// Hands memory the process has freed back to the OS. glibc keeps freed
/// allocations in its arenas otherwise, so a process that once parsed a
/// large answer, loaded a large catalog or held many sessions would keep
/// that peak as its size. The server's own allocations go through mimalloc
/// (the binary's global allocator), which returns freed memory by itself;
/// what glibc still holds is what C code allocated with `malloc` (SQLite's
/// page cache). Walks the arenas: call it off the async workers, after
/// something large was freed.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}
