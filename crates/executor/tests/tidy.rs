//! Docs that check themselves: the layout the README and ARCHITECTURE.md
//! describe is the layout of `crates/`, every crate says what it is, and
//! the protocol's words (JSON-RPC shapes and codes) live in `mcp` only.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crate directories under `crates/`, sorted.
fn crates() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join("crates"))
        .expect("crates/")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_crate_root_opens_with_its_doc() {
    for name in crates() {
        let src = root().join("crates").join(&name).join("src");
        let file = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{name}: no lib.rs or main.rs"));
        assert!(
            read(&file).starts_with("//!"),
            "{} must open with a `//!` doc saying what the crate does",
            file.display()
        );
    }
}

#[test]
fn every_manifest_has_a_description() {
    for name in crates() {
        let manifest = read(&root().join("crates").join(&name).join("Cargo.toml"));
        let described = manifest
            .lines()
            .any(|l| l.starts_with("description = \"") && l.len() > "description = \"\"".len());
        assert!(described, "crates/{name}/Cargo.toml has no description");
    }
}

#[test]
fn the_readme_lists_exactly_the_crates() {
    let readme = read(&root().join("README.md"));
    let layout = readme
        .split("## Layout")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has a Layout section");
    // "… of the crates (`store`, `sandbox`, …, and the `executor` binary)".
    let list = layout
        .split_once("of the crates")
        .and_then(|(_, rest)| rest.split_once('('))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
        .expect("the Layout section lists the crates in parentheses");
    let mut listed: Vec<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    listed.sort();
    assert_eq!(listed, crates(), "README.md's Layout list against crates/");
}

#[test]
fn architecture_maps_every_crate() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    for name in crates() {
        assert!(
            architecture.contains(&format!("### `crates/{name}`")),
            "ARCHITECTURE.md's code map has no section for crates/{name}"
        );
    }
}

/// The source of a file before its test module.
fn non_test_source(path: &Path) -> String {
    // A crate's `#[cfg(test)] mod tests;` file is all test.
    if path.file_name().is_some_and(|name| name == "tests.rs") {
        return String::new();
    }
    let text = read(path);
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a line of code holds a JSON-RPC error code (`-32xxx`).
fn has_error_code(code: &str) -> bool {
    code.match_indices("-32").any(|(at, _)| {
        let digits: String = code[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.len() == 5
    })
}

#[test]
fn json_rpc_shapes_and_codes_live_in_mcp() {
    let mut found = Vec::new();
    for name in crates().into_iter().filter(|n| n != "mcp") {
        let mut files = Vec::new();
        rust_files(&root().join("crates").join(&name).join("src"), &mut files);
        for file in files {
            for (n, line) in non_test_source(&file).lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                if code.contains("\"jsonrpc\"") || has_error_code(code) {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "JSON-RPC literals outside crates/mcp (build them with executor_mcp):\n{}",
        found.join("\n")
    );
    assert!(has_error_code("code: -32001,") && !has_error_code("-3200 or -320011"));
}

/// The docs a newcomer reads first, whose names are checked against the tree.
const CHECKED_DOCS: &[&str] = &["README.md", "ARCHITECTURE.md"];

/// Names the docs cite that belong to other projects (dependencies, the
/// protocol, tools), not to this one.
const FOREIGN_NAMES: &[&str] = &[
    "Arc",
    "AsyncFunction",
    "Authorization",
    "BTreeMap",
    "CallToolResult",
    "EnvFilter",
    "Host",
    "JoinSet",
    "Origin",
    "StreamableHttpService",
];

/// Backticked spans of `text` (inline code, not fenced blocks).
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
    }
    spans
}

/// Relative link targets of `text` (`](path)`, anchors dropped).
fn link_targets(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| text[at + 2..].split_once(')'))
        .map(|(target, _)| target.split('#').next().unwrap_or_default().to_string())
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// Whether a code span names a file or directory of this repository.
fn looks_like_repo_path(span: &str) -> bool {
    const TOP: &[&str] = &[
        "crates/", "tests/", "bench/", "docs/", "scripts/", "fuzz/", ".ci/",
    ];
    TOP.iter().any(|top| span.starts_with(top))
        && !span.contains(|c: char| c.is_whitespace() || "<>*…{}$|".contains(c))
}

#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    for doc in CHECKED_DOCS {
        let text = read(&root().join(doc));
        let spans = code_spans(&text)
            .into_iter()
            .filter(|s| looks_like_repo_path(s));
        for path in spans.chain(link_targets(&text)) {
            // `crates/x/src/a.rs:12` and `path/` name the same file.
            let file = path.split(':').next().unwrap_or_default();
            if !root().join(file).exists() {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Every `.rs` file's text under `crates/`, read once.
fn all_sources() -> String {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    rust_files(&root().join("fuzz"), &mut files);
    files.iter().map(|f| read(f)).collect::<Vec<_>>().join("\n")
}

/// Whether `sources` define `name` as a type, trait, fn, const or variant.
fn defines(sources: &str, name: &str) -> bool {
    let keyword = [
        "struct",
        "enum",
        "trait",
        "type",
        "fn",
        "const",
        "static",
        "mod",
        "macro_rules!",
    ]
    .iter()
    .any(|k| {
        sources.contains(&format!("{k} {name}<"))
            || sources.contains(&format!("{k} {name}("))
            || sources.contains(&format!("{k} {name} "))
            || sources.contains(&format!("{k} {name};"))
            || sources.contains(&format!("{k} {name}:"))
    });
    // An enum variant (`Name,`, `Name {`, `Name(`, or a word enum of
    // `stored_words!`: `Name ("…") {`), or a public field.
    keyword
        || sources.lines().any(|l| {
            let l = l.trim_start();
            let field = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .and_then(|rest| rest.strip_prefix(name))
                .is_some_and(|rest| rest.starts_with(':'));
            let variant = l.strip_prefix(name).is_some_and(|rest| {
                rest.starts_with(',')
                    || rest.starts_with(" {")
                    || rest.starts_with(" (\"")
                    || rest.starts_with('(')
            });
            field || variant
        })
}

/// A code span that names a Rust item: `Type`, `Type::item`, `function()`.
fn rust_item_names(span: &str) -> Vec<String> {
    let span = span.trim_end_matches("()");
    let is_ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let parts: Vec<&str> = span.split("::").collect();
    if parts.len() > 3 || !parts.iter().all(|p| is_ident(p)) {
        return Vec::new();
    }
    let camel = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars().any(|c| c.is_ascii_lowercase())
            && !s.contains('_')
    };
    match parts.as_slice() {
        // `Store`, `SessionRecord`: CamelCase with a lower-case letter.
        [one] if camel(one) => vec![one.to_string()],
        // `Sessions::acquire`, `Slot::Live`.
        [ty, item] if camel(ty) => vec![ty.to_string(), item.to_string()],
        _ => Vec::new(),
    }
}

#[test]
fn every_rust_name_the_docs_cite_exists() {
    let sources = all_sources();
    let mut missing = Vec::new();
    for doc in CHECKED_DOCS {
        for span in code_spans(&read(&root().join(doc))) {
            for name in rust_item_names(&span) {
                if !FOREIGN_NAMES.contains(&name.as_str()) && !defines(&sources, &name) {
                    missing.push(format!("{doc}: `{span}` ({name})"));
                }
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "names the docs cite that no crate defines:\n{}",
        missing.join("\n")
    );
}

/// A code span that names a function, field, column or setting the way
/// the code spells it: snake_case with an underscore (`claim_session`,
/// `stream_one()`, `alive_until`); a plain word (`state`) says too little.
fn snake_case_name(span: &str) -> Option<&str> {
    let name = span.trim_end_matches("()");
    let snake = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.contains('_')
        && !name.ends_with('_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    snake.then_some(name)
}

/// A function renamed or removed leaves its old name in no source file, so
/// every snake_case name the docs cite must still stand in one (SQL columns
/// and settings stand in the stores' and binary's sources alike).
#[test]
fn every_function_name_the_docs_cite_is_in_the_sources() {
    let sources = all_sources();
    let mut missing = Vec::new();
    for doc in CHECKED_DOCS {
        for span in code_spans(&read(&root().join(doc))) {
            if let Some(name) = snake_case_name(&span)
                && !sources.contains(name)
            {
                missing.push(format!("{doc}: `{span}`"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "names the docs cite that no source holds:\n{}",
        missing.join("\n")
    );
    assert_eq!(snake_case_name("stream_one()"), Some("stream_one"));
    assert_eq!(snake_case_name("state"), None);
    assert_eq!(snake_case_name("ns.*.tool"), None);
}

/// `### \`crates/NAME\`` sections of ARCHITECTURE.md, by crate name.
fn architecture_sections() -> Vec<(String, String)> {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    architecture
        .split("\n### `crates/")
        .skip(1)
        .filter_map(|section| {
            let (name, body) = section.split_once("`\n")?;
            let body = body.split("\n## ").next().unwrap_or(body);
            let body = body.split("\n### ").next().unwrap_or(body);
            Some((name.to_string(), body.to_string()))
        })
        .collect()
}

#[test]
fn every_crate_section_says_what_the_crate_must_never_do() {
    let sections = architecture_sections();
    for name in crates() {
        let (_, body) = sections
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section for crates/{name}"));
        assert!(
            body.contains("Must never"),
            "ARCHITECTURE.md's section on crates/{name} has no \"Must never\" line"
        );
    }
}

/// The `executor-*` crates a manifest's `[dependencies]` name, by short name.
fn internal_dependencies(name: &str) -> Vec<String> {
    let manifest = read(&root().join("crates").join(name).join("Cargo.toml"));
    let dependencies = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .map(|rest| rest.split("\n[").next().unwrap_or(rest))
        .unwrap_or_default();
    let mut names: Vec<String> = dependencies
        .lines()
        .filter_map(|l| l.strip_prefix("executor-"))
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn the_dependency_table_is_the_manifests_arrows() {
    let architecture = read(&root().join("ARCHITECTURE.md"));
    let table = architecture
        .split("| crate | depends on |")
        .nth(1)
        .expect("ARCHITECTURE.md has the crate dependency table");
    let mut rows = Vec::new();
    for line in table.lines().skip(2) {
        let Some(row) = line.strip_prefix("| `") else {
            break;
        };
        let (name, rest) = row.split_once('`').expect("a crate name in backticks");
        let mut arrows: Vec<String> = rest
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        arrows.sort();
        rows.push((name.to_string(), arrows, rest.contains("every crate above")));
    }
    let mut listed: Vec<String> = rows.iter().map(|(n, _, _)| n.clone()).collect();
    listed.sort();
    assert_eq!(listed, crates(), "the table's rows against crates/");
    for (name, arrows, every) in rows {
        let mut actual = internal_dependencies(&name);
        if every {
            let mut others: Vec<String> = crates().into_iter().filter(|c| *c != name).collect();
            others.sort();
            assert_eq!(actual, others, "crates/{name} is said to use every crate");
            continue;
        }
        actual.retain(|d| *d != name);
        assert_eq!(
            arrows, actual,
            "ARCHITECTURE.md's arrows from {name} against its Cargo.toml"
        );
    }
}

/// The long flags of `executor serve --help`, `--help` and `--version` aside.
fn serve_flags() -> Vec<String> {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_executor"))
        .args(["serve", "--help"])
        .output()
        .expect("executor serve --help runs");
    let text = String::from_utf8_lossy(&help.stdout);
    let mut flags: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim_start().split_once("--"))
        .filter(|(before, _)| before.is_empty() || before.ends_with(", "))
        .filter_map(|(_, rest)| {
            rest.split([' ', '=', '<', '\t'])
                .next()
                .map(|f| format!("--{f}"))
        })
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn the_configuration_doc_lists_exactly_the_flags_of_serve() {
    let doc = read(&root().join("docs/configuration.md"));
    let mut documented: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `--"))
        .filter_map(|l| l.split([' ', '`']).next().map(|f| format!("--{f}")))
        .collect();
    documented.sort();
    documented.dedup();
    assert_eq!(
        documented,
        serve_flags(),
        "docs/configuration.md's flags against `executor serve --help`"
    );
}
