//! Figures over GitHub's real spec (`cargo bench -p executor-openapi --bench github`,
//! with `EXECUTOR_SPECS_DIR` set as for the tests): import time, and
//! `tools.search` p50/p99 over the imported catalog for the plain-language
//! query set of tests/e2e/fixtures/github-search-queries.json. Without the
//! spec it fails, saying what to do, rather than printing no figures.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_catalog::{Catalog, ToolError, ToolInvocation, ToolInvoker, ToolResult};
use executor_openapi::{ImportOptions, import, tool_entries};
use futures::future::BoxFuture;
use serde_json::Value;

struct NotCalled;

impl ToolInvoker for NotCalled {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { Err(ToolError::new("not_called", "benchmark")) })
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn main() {
    let Some(dir) = std::env::var_os("EXECUTOR_SPECS_DIR") else {
        panic!("set EXECUTOR_SPECS_DIR to the directory tests/specs/install prints");
    };
    let path =
        PathBuf::from(dir).join("node_modules/@octokit/openapi/generated/api.github.com.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no GitHub spec at {}: {e} (run tests/specs/install)",
            path.display()
        )
    });
    let mut imports = Vec::new();
    let mut github = None;
    for _ in 0..5 {
        let started = Instant::now();
        github = import(&text, &ImportOptions::new("github")).ok();
        imports.push(started.elapsed());
    }
    let Some(github) = github else {
        panic!("GitHub's spec did not import");
    };
    imports.sort();
    let started = Instant::now();
    let catalog = Catalog::new(tool_entries(&github, Arc::new(NotCalled)).expect("loads"));
    let indexed = started.elapsed();
    let queries: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/e2e/fixtures/github-search-queries.json"),
        )
        .expect("the query set"),
    )
    .expect("the query set is JSON");
    let queries: Vec<&str> = queries.iter().filter_map(|q| q["query"].as_str()).collect();
    let mut times = Vec::new();
    for _ in 0..50 {
        for q in &queries {
            let started = Instant::now();
            let hits = catalog.search(q, None).len();
            times.push(started.elapsed());
            std::hint::black_box(hits);
        }
    }
    times.sort();
    println!(
        "import GitHub's spec ({} tools): {:.0} ms median of 5",
        github.tools.len(),
        percentile(&imports, 0.5).as_secs_f64() * 1e3
    );
    println!(
        "build the catalog and its search index: {:.1} ms",
        indexed.as_secs_f64() * 1e3
    );
    println!(
        "tools.search over it ({} queries x 50): p50 {:.3} ms, p99 {:.3} ms",
        queries.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3
    );
}
