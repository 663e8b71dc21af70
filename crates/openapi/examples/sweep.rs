//! Imports every OpenAPI document under a directory and reports how many
//! import, why the others fail (grouped by cause, every spec named), what
//! the imports warn about and the slowest ones. `bench/openapi-directory`
//! runs it over the APIs.guru directory:
//!
//! ```sh
//! cargo run --release --example sweep -- DIR [--json FILE] [--min-success PCT] [--slowest N] [--timeout SECS]
//! ```
//!
//! A document is one API version: when the same name exists as `.json` and
//! `.yaml`/`.yml` (the same spec in two formats), only the `.json` one is
//! imported and the others are counted as skipped duplicates.
//!
//! An import that returns an error, panics (the importer promises not to)
//! or runs past `--timeout` (default 60 s; the thread is left behind) is a
//! failure. Exits 1 when the share of documents that import is below
//! `--min-success` (default 0: report only), 2 on bad usage.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use executor_openapi::{ImportError, ImportOptions, import};
use serde_json::{Value, json};

/// The path-item keys that are operations.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

struct Args {
    root: PathBuf,
    json: Option<PathBuf>,
    min_success: f64,
    slowest: usize,
    timeout: Duration,
}

enum Outcome {
    Imported {
        tools: usize,
        /// Operations the document declares (None when it cannot be
        /// counted, e.g. path items behind `$ref`).
        operations: Option<usize>,
        warnings: Vec<String>,
        no_base_url: bool,
    },
    Failed {
        cause: String,
        message: String,
    },
}

struct Report {
    name: String,
    bytes: usize,
    elapsed: Duration,
    outcome: Outcome,
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            eprintln!(
                "usage: sweep DIR [--json FILE] [--min-success PCT] [--slowest N] [--timeout SECS]"
            );
            return ExitCode::from(2);
        }
    };
    // The importer must not panic; when it does, say so once per spec
    // (below) rather than with the default hook's backtrace noise.
    std::panic::set_hook(Box::new(|_| {}));

    let mut files = Vec::new();
    collect(&args.root, &mut files);
    let (files, duplicates) = one_per_api(&args.root, files);

    let started = Instant::now();
    let mut reports = Vec::with_capacity(files.len());
    for (name, path) in &files {
        reports.push(sweep_one(name, path, args.timeout));
    }
    let wall = started.elapsed();

    let text = render(&args, &reports, duplicates.len(), wall);
    print!("{text}");
    if let Some(path) = &args.json {
        let doc = to_json(&args, &reports, &duplicates, wall);
        let body = serde_json::to_string_pretty(&doc).expect("serialisable");
        if let Err(e) = std::fs::write(path, body + "\n") {
            eprintln!("{}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if success_rate(&reports) < args.min_success {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut root = None;
    let mut parsed = Args {
        root: PathBuf::new(),
        json: None,
        min_success: 0.0,
        slowest: 10,
        timeout: Duration::from_secs(60),
    };
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--json" => parsed.json = Some(value("--json")?.into()),
            "--min-success" => {
                parsed.min_success = value("--min-success")?
                    .parse()
                    .map_err(|e| format!("--min-success: {e}"))?;
            }
            "--slowest" => {
                parsed.slowest = value("--slowest")?
                    .parse()
                    .map_err(|e| format!("--slowest: {e}"))?;
            }
            "--timeout" => {
                let secs: f64 = value("--timeout")?
                    .parse()
                    .map_err(|e| format!("--timeout: {e}"))?;
                parsed.timeout = Duration::from_secs_f64(secs);
            }
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            dir if root.is_none() => root = Some(PathBuf::from(dir)),
            extra => return Err(format!("unexpected argument {extra}")),
        }
    }
    parsed.root = root.ok_or("a directory is required")?;
    if !parsed.root.is_dir() {
        return Err(format!("{}: not a directory", parsed.root.display()));
    }
    Ok(parsed)
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if format_rank(&path).is_some() {
            files.push(path);
        }
    }
}

/// `.json` before `.yaml` before `.yml`; None for anything else.
fn format_rank(path: &Path) -> Option<u8> {
    match path.extension()?.to_str()? {
        "json" => Some(0),
        "yaml" => Some(1),
        "yml" => Some(2),
        _ => None,
    }
}

/// One file per API version, named by its path under the root without the
/// extension (the APIs.guru spec id, e.g. `amazonaws.com/s3`); the other
/// formats of the same name are returned as skipped duplicates.
fn one_per_api(root: &Path, files: Vec<PathBuf>) -> (Vec<(String, PathBuf)>, Vec<PathBuf>) {
    let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for path in files {
        let relative = path.strip_prefix(root).unwrap_or(&path).with_extension("");
        by_name
            .entry(relative.to_string_lossy().into_owned())
            .or_default()
            .push(path);
    }
    let mut kept = Vec::with_capacity(by_name.len());
    let mut skipped = Vec::new();
    for (name, mut paths) in by_name {
        paths.sort_by_key(|p| format_rank(p));
        let mut paths = paths.into_iter();
        kept.push((name, paths.next().expect("at least one")));
        skipped.extend(paths);
    }
    (kept, skipped)
}

fn sweep_one(name: &str, path: &Path, timeout: Duration) -> Report {
    let failed = |cause: &str, message: String, bytes, elapsed| Report {
        name: name.to_owned(),
        bytes,
        elapsed,
        outcome: Outcome::Failed {
            cause: cause.to_owned(),
            message,
        },
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return failed("unreadable", e.to_string(), 0, Duration::ZERO),
    };
    let bytes = text.len();
    let operations = count_operations(&text);
    let (send, receive) = mpsc::channel();
    let started = Instant::now();
    // Its own thread (main-thread-sized stack), so that a hang is a
    // reported timeout rather than a stuck sweep.
    let spawned = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| {
                import(&text, &ImportOptions::new("api"))
            }));
            let elapsed = started.elapsed();
            let _ = send.send((result, elapsed));
        });
    if let Err(e) = spawned {
        return failed(
            "could not start a thread",
            e.to_string(),
            bytes,
            Duration::ZERO,
        );
    }
    match receive.recv_timeout(timeout) {
        Ok((Ok(Ok(integration)), elapsed)) => Report {
            name: name.to_owned(),
            bytes,
            elapsed,
            outcome: Outcome::Imported {
                tools: integration.tools.len(),
                operations,
                no_base_url: integration.base_url.is_none(),
                warnings: integration.warnings,
            },
        },
        Ok((Ok(Err(e)), elapsed)) => failed(&cause(&e), e.to_string(), bytes, elapsed),
        Ok((Err(payload), elapsed)) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            failed("importer panicked", message, bytes, elapsed)
        }
        Err(_) => failed(
            "timed out",
            format!("no result after {timeout:?}"),
            bytes,
            timeout,
        ),
    }
}

/// The kind of error, without the detail that differs from spec to spec
/// (positions, names), so that failures group.
fn cause(error: &ImportError) -> String {
    let detail = |d: &str| {
        let cut = d.find(" at line").unwrap_or(d.len());
        d[..cut].chars().take(90).collect::<String>()
    };
    match error {
        ImportError::InvalidNamespace(_) => "invalid namespace".into(),
        ImportError::TooLarge { limit, .. } => format!("larger than the {limit}-byte limit"),
        ImportError::Parse(d) => format!("neither JSON nor YAML: {}", detail(d)),
        ImportError::NotOpenApi(d) => format!("not an OpenAPI document: {}", detail(d)),
        ImportError::UnsupportedVersion(_) => "unsupported OpenAPI version".into(),
    }
}

/// Operations the document declares under `paths` (path items behind a
/// local `$ref` followed), counted independently of the importer so that
/// dropped operations show. None when the document does not parse.
fn count_operations(text: &str) -> Option<usize> {
    let doc: Value = serde_json::from_str(text)
        .ok()
        .or_else(|| serde_norway::from_str(text).ok())?;
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        return Some(0);
    };
    let unescape = |s: &str| s.replace("~1", "/").replace("~0", "~");
    let count = paths
        .values()
        .filter_map(|item| match item.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference.strip_prefix('#')?;
                let pointer: Vec<String> = pointer.split('/').map(unescape).collect();
                let mut target = &doc;
                for key in pointer.iter().skip(1) {
                    target = target.get(key.as_str())?;
                }
                target.as_object()
            }
            None => item.as_object(),
        })
        .map(|item| {
            item.iter()
                .filter(|(k, v)| {
                    METHODS.contains(&k.to_ascii_lowercase().as_str()) && v.is_object()
                })
                .count()
        })
        .sum();
    Some(count)
}

/// A warning with its operation label, quoted names and `{parameters}`
/// taken out, so that the same kind of warning from different operations
/// counts together.
fn warning_kind(warning: &str) -> String {
    let mut rest = warning;
    // "GET /pets: …", "path /x: …", "security scheme \"k\": …"
    let upper = rest.split(' ').next().unwrap_or("");
    let labelled = (!upper.is_empty() && upper.chars().all(|c| c.is_ascii_uppercase()))
        || rest.starts_with("path ");
    if labelled && let Some(i) = rest.find(": ") {
        rest = &rest[i + 2..];
    }
    let mut kind = String::with_capacity(rest.len());
    let mut in_name = false;
    for c in rest.chars() {
        match c {
            '"' | '}' if in_name => {
                in_name = false;
                kind.push_str(if c == '"' { "\"…\"" } else { "{…}" });
            }
            '"' | '{' => in_name = true,
            _ if in_name => {}
            c if c.is_ascii_digit() => {
                if !kind.ends_with('N') {
                    kind.push('N');
                }
            }
            c => kind.push(c),
        }
    }
    if kind.starts_with("… and N more warnings") {
        return "(more warnings dropped by the importer's cap)".into();
    }
    kind.chars().take(110).collect()
}

fn success_rate(reports: &[Report]) -> f64 {
    let imported = reports
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Imported { .. }))
        .count();
    100.0 * imported as f64 / reports.len().max(1) as f64
}

struct Totals {
    imported: usize,
    clean: usize,
    zero_tools: usize,
    no_base_url: usize,
    tools: usize,
    operations: usize,
    short: Vec<(String, usize, usize)>,
    failures: BTreeMap<String, Vec<(String, String)>>,
    warning_kinds: HashMap<String, (usize, String)>,
    import_time: Duration,
}

fn totals(reports: &[Report]) -> Totals {
    let mut t = Totals {
        imported: 0,
        clean: 0,
        zero_tools: 0,
        no_base_url: 0,
        tools: 0,
        operations: 0,
        short: Vec::new(),
        failures: BTreeMap::new(),
        warning_kinds: HashMap::new(),
        import_time: Duration::ZERO,
    };
    for r in reports {
        t.import_time += r.elapsed;
        match &r.outcome {
            Outcome::Imported {
                tools,
                operations,
                warnings,
                no_base_url,
            } => {
                t.imported += 1;
                t.clean += usize::from(warnings.is_empty());
                t.zero_tools += usize::from(*tools == 0);
                t.no_base_url += usize::from(*no_base_url);
                t.tools += tools;
                if let Some(ops) = operations {
                    t.operations += ops;
                    if tools < ops {
                        t.short.push((r.name.clone(), *tools, *ops));
                    }
                }
                let mut seen = std::collections::HashSet::new();
                for w in warnings {
                    let kind = warning_kind(w);
                    if seen.insert(kind.clone()) {
                        t.warning_kinds
                            .entry(kind)
                            .or_insert_with(|| (0, r.name.clone()))
                            .0 += 1;
                    }
                }
            }
            Outcome::Failed { cause, message } => t
                .failures
                .entry(cause.clone())
                .or_default()
                .push((r.name.clone(), message.clone())),
        }
    }
    t
}

fn render(args: &Args, reports: &[Report], duplicates: usize, wall: Duration) -> String {
    let t = totals(reports);
    let total = reports.len();
    let failed = total - t.imported;
    let rate = success_rate(reports);
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(o, "OpenAPI sweep of {}", args.root.display());
    let _ = writeln!(
        o,
        "documents: {total} (one per API version; {duplicates} other-format duplicates skipped)"
    );
    let _ = writeln!(o, "imported:  {} ({rate:.2}%)", t.imported);
    let _ = writeln!(
        o,
        "  without warnings: {}; with warnings: {}; no tools: {}; no usable base URL: {}",
        t.clean,
        t.imported - t.clean,
        t.zero_tools,
        t.no_base_url
    );
    let _ = writeln!(
        o,
        "  tools: {}; operations declared (where countable): {}; specs with fewer tools than operations: {}",
        t.tools,
        t.operations,
        t.short.len()
    );
    for (name, tools, ops) in &t.short {
        let _ = writeln!(o, "    {name}: {tools} tools for {ops} operations");
    }
    let _ = writeln!(o, "failed:    {failed}");
    let mut causes: Vec<_> = t.failures.iter().collect();
    causes.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    for (cause, specs) in causes {
        let _ = writeln!(o, "  {} × {cause}", specs.len());
        for (name, message) in specs {
            let _ = writeln!(o, "      {name}: {}", one_line(message, 160));
        }
    }
    let mut kinds: Vec<_> = t.warning_kinds.iter().collect();
    kinds.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    let _ = writeln!(o, "most common warnings (specs affected, e.g.):");
    for (kind, (count, example)) in kinds.iter().take(12) {
        let _ = writeln!(o, "  {count:>5} × {kind} (e.g. {example})");
    }
    let mut slow: Vec<&Report> = reports.iter().collect();
    slow.sort_by_key(|r| std::cmp::Reverse(r.elapsed));
    let _ = writeln!(o, "slowest:");
    for r in slow.iter().take(args.slowest) {
        let tools = match &r.outcome {
            Outcome::Imported { tools, .. } => format!("{tools} tools"),
            Outcome::Failed { .. } => "failed".into(),
        };
        let _ = writeln!(
            o,
            "  {:>9.1} ms  {:>7.1} MB  {tools:>12}  {}",
            r.elapsed.as_secs_f64() * 1e3,
            r.bytes as f64 / 1e6,
            r.name
        );
    }
    let _ = writeln!(
        o,
        "time: {:.1} s in all ({:.1} s importing, {:.1} s reading and counting)",
        wall.as_secs_f64(),
        t.import_time.as_secs_f64(),
        wall.saturating_sub(t.import_time).as_secs_f64()
    );
    if args.min_success > 0.0 {
        let verdict = if rate < args.min_success {
            "FAIL"
        } else {
            "PASS"
        };
        let _ = writeln!(
            o,
            "{verdict}: {rate:.2}% imported (threshold {}%)",
            args.min_success
        );
    }
    out
}

fn one_line(message: &str, max: usize) -> String {
    let flat: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max).collect::<String>() + "…"
    }
}

fn to_json(args: &Args, reports: &[Report], duplicates: &[PathBuf], wall: Duration) -> Value {
    let t = totals(reports);
    let specs: Vec<Value> = reports
        .iter()
        .map(|r| {
            let mut one = json!({
                "name": r.name,
                "bytes": r.bytes,
                "ms": r.elapsed.as_secs_f64() * 1e3,
            });
            match &r.outcome {
                Outcome::Imported {
                    tools,
                    operations,
                    warnings,
                    no_base_url,
                } => {
                    one["ok"] = json!(true);
                    one["tools"] = json!(tools);
                    one["operations"] = json!(operations);
                    one["warnings"] = json!(warnings.len());
                    one["no_base_url"] = json!(no_base_url);
                }
                Outcome::Failed { cause, message } => {
                    one["ok"] = json!(false);
                    one["cause"] = json!(cause);
                    one["error"] = json!(message);
                }
            }
            one
        })
        .collect();
    let failures: serde_json::Map<String, Value> = t
        .failures
        .iter()
        .map(|(cause, specs)| {
            let names: Vec<&str> = specs.iter().map(|(n, _)| n.as_str()).collect();
            (cause.clone(), json!(names))
        })
        .collect();
    json!({
        "root": args.root.display().to_string(),
        "documents": reports.len(),
        "duplicates_skipped": duplicates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "imported": t.imported,
        "failed": reports.len() - t.imported,
        "success_rate": success_rate(reports),
        "min_success": args.min_success,
        "clean": t.clean,
        "zero_tools": t.zero_tools,
        "no_base_url": t.no_base_url,
        "tools": t.tools,
        "operations_declared": t.operations,
        "fewer_tools_than_operations": t.short.iter().map(|(n, tools, ops)| json!({"name": n, "tools": tools, "operations": ops})).collect::<Vec<_>>(),
        "failures": failures,
        "wall_seconds": wall.as_secs_f64(),
        "import_seconds": t.import_time.as_secs_f64(),
        "specs": specs,
    })
}
