//! GitHub's real GraphQL schema (`@octokit/graphql-schema`, installed by
//! `tests/specs/install` into `EXECUTOR_SPECS_DIR`), in both forms it
//! ships: SDL and introspection JSON. Without the package every test here
//! fails and says what to do.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use executor_catalog::{Catalog, ToolError, ToolInvocation, ToolInvoker, ToolResult};
use executor_graphql::{ImportedGraphql, import, operation_text, store};
use futures::future::BoxFuture;

fn schema_file(name: &str) -> String {
    let Some(dir) = std::env::var_os("EXECUTOR_SPECS_DIR") else {
        panic!("set EXECUTOR_SPECS_DIR to the directory tests/specs/install prints");
    };
    let path = PathBuf::from(dir)
        .join("node_modules/@octokit/graphql-schema")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run tests/specs/install)", path.display()))
}

fn imported(name: &str) -> ImportedGraphql {
    let text = schema_file(name);
    let started = Instant::now();
    let imported = import(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    println!(
        "{name}: {} tools, {} definitions, {} warnings in {:.0} ms",
        imported.tools.len(),
        imported.definitions.len(),
        imported.warnings.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    imported
}

struct NotCalled;

impl ToolInvoker for NotCalled {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async { Err(ToolError::new("not_called", "test")) })
    }
}

#[test]
fn sdl_and_introspection_json_give_the_same_tools() {
    let from_sdl = imported("schema.graphql");
    let from_json = imported("schema.json");
    println!("warnings: {:?}", from_sdl.warnings);
    let names = |i: &ImportedGraphql| -> std::collections::BTreeSet<String> {
        i.tools.iter().map(|t| t.name.clone()).collect()
    };
    let (sdl_names, json_names) = (names(&from_sdl), names(&from_json));
    assert!(json_names.len() > 250, "{} tools", json_names.len());
    // The package's two files are not one snapshot (each has a few
    // mutations the other lacks): all but a handful of tools are in both.
    let common = json_names.intersection(&sdl_names).count();
    assert!(
        common + 10 > json_names.len() && common + 10 > sdl_names.len(),
        "{common} in common"
    );
    for name in ["query.repository", "mutation.createIssue"] {
        let find = |i: &ImportedGraphql| i.tools.iter().find(|t| t.name == name).cloned().unwrap();
        let (mut a, mut b) = (find(&from_sdl), find(&from_json));
        // The SDL lists arguments by name, the JSON as declared.
        a.args.sort_by(|x, y| x.name.cmp(&y.name));
        b.args.sort_by(|x, y| x.name.cmp(&y.name));
        assert_eq!(a.args, b.args, "{name}");
        assert_eq!(a.default_selection, b.default_selection, "{name}");
    }
    let repository = from_sdl
        .tools
        .iter()
        .find(|t| t.name == "query.repository")
        .unwrap();
    let required: Vec<&str> = repository.input_schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        required.contains(&"owner") && required.contains(&"name"),
        "{required:?}"
    );
    let create = from_sdl
        .tools
        .iter()
        .find(|t| t.name == "mutation.createIssue")
        .unwrap();
    assert!(create.requires_approval);
    let input = create.input_schema["properties"]["input"].to_string();
    assert!(input.contains("\"#/$defs/CreateIssueInput\""), "{input}");
    assert!(from_sdl.definitions.contains_key("CreateIssueInput"));
}

#[test]
fn every_tool_makes_an_operation_the_parser_accepts() {
    let github = imported("schema.graphql");
    for tool in &github.tools {
        let all: Vec<&str> = tool.args.iter().map(|a| a.name.as_str()).collect();
        let text =
            operation_text(tool, &all, None).unwrap_or_else(|e| panic!("{}: {}", tool.name, e.0));
        assert!(text.starts_with(tool.operation.as_str()), "{text}");
    }
}

#[test]
fn search_finds_the_operation_a_user_means() {
    let github = imported("schema.graphql");
    let stored = store(&github, "github", "https://api.github.com/graphql");
    let loaded = executor_graphql::stored::load(&stored).unwrap();
    let catalog = Catalog::new(loaded.into_entries(|_| Arc::new(NotCalled)));
    for (query, expected) in [
        ("create an issue", "github.mutation.createIssue"),
        ("add a star to a repository", "github.mutation.addStar"),
        ("get a repository", "github.query.repository"),
        ("close a pull request", "github.mutation.closePullRequest"),
    ] {
        let hits = catalog.search(query, None);
        let top: Vec<&str> = hits.iter().take(3).map(|(t, _)| t.path.as_ref()).collect();
        assert_eq!(top.first(), Some(&expected), "{query:?} found {top:?}");
    }
}
