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
