//! Where a loaded integration's memory goes: imports a spec, stores it as
//! the server would, then loads it and reports the live heap after each
//! step (a counting allocator, so the figures are bytes asked for, without
//! the allocator's own overhead).
//!
//!     cargo run --release -p executor-openapi --example catalog_memory -- SPEC.json

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use executor_catalog::{ToolError, ToolGroup, ToolInvocation, ToolInvoker, ToolResult};
use executor_openapi::{ImportOptions, import, load};
use futures::future::BoxFuture;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_mb() -> f64 {
    LIVE.load(Ordering::Relaxed) as f64 / 1024.0 / 1024.0
}

struct NotCalled;
impl ToolInvoker for NotCalled {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { Err(ToolError::new("not_called", "not called")) })
    }
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: catalog_memory SPEC.json");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let imported = import(&text, &ImportOptions::new("api")).unwrap_or_else(|e| panic!("{e}"));
    drop(text);
    let tools = imported.tools.len();
    let stored = serde_json::to_string(&imported)
        .unwrap_or_default()
        .into_boxed_str();
    drop(imported);
    // What is live besides the stored text.
    let base = live_mb() - stored.len() as f64 / 1024.0 / 1024.0;
    println!(
        "stored form: {:.1} MB, {tools} tools",
        stored.len() as f64 / 1024.0 / 1024.0
    );
    let started = Instant::now();
    let loaded = load(&stored).unwrap_or_else(|e| panic!("{e}"));
    let parsed = started.elapsed();
    println!(
        "parsed:            {:7.1} MB live  ({:?})",
        live_mb() - base,
        parsed
    );
    // The service is what the real invoker keeps: it counts too.
    let mut kept = None;
    let entries = loaded.into_entries(|service| {
        kept = Some(service);
        Arc::new(NotCalled)
    });
    println!(
        "entries:           {:7.1} MB live  ({:?})",
        live_mb() - base,
        started.elapsed()
    );
    let group = ToolGroup::new("api", entries);
    println!(
        "indexed group:     {:7.1} MB live  ({:?})",
        live_mb() - base,
        started.elapsed()
    );
    drop(stored);
    println!(
        "without the text:  {:7.1} MB live, {} tools",
        live_mb() - base,
        group.len()
    );
    drop(kept);
    println!(
        "of which requests: {:7.1} MB freed with the service",
        live_mb() - base
    );
}
