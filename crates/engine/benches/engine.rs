//! Engine-level figures (no HTTP): `cargo bench -p executor-engine`.
//! Prints p50/p99 for an execution, a 100-tool-call script, and
//! `tools.search` over a synthetic 3,300-tool catalog.

use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_call::CallContext;
use executor_catalog::{Catalog, StaticCatalog};
use executor_catalog::{
    ToolEntry, ToolInvocation, ToolInvoker, ToolResult, ToolSchema, ToolSuccess,
};
use executor_engine::{CoreTool, Engine, EngineConfig};
use executor_store::{SqliteStore, Store};
use futures::future::BoxFuture;
use serde_json::json;

struct Echo;

impl ToolInvoker for Echo {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        Box::pin(async move {
            Ok(ToolSuccess {
                data: call.args,
                http: None,
                held: None,
            })
        })
    }
}

const VERBS: [&str; 8] = [
    "list", "get", "create", "update", "delete", "search", "archive", "restore",
];
const NOUNS: [&str; 15] = [
    "issues",
    "pullRequests",
    "repos",
    "users",
    "teams",
    "projects",
    "releases",
    "commits",
    "branches",
    "webhooks",
    "invoices",
    "customers",
    "payments",
    "messages",
    "channels",
];

/// 3,300 tools across 22 integrations, named like real API operations.
fn synthetic_catalog() -> Catalog {
    let invoker: Arc<dyn ToolInvoker> = Arc::new(Echo);
    let mut tools = Vec::new();
    for ns in 0..22 {
        let namespace = format!("service{ns}");
        for n in 0..150 {
            let (verb, noun) = (
                VERBS[n % VERBS.len()],
                NOUNS[(n / VERBS.len()) % NOUNS.len()],
            );
            let name = format!("{noun}.{verb}{}", n / (VERBS.len() * NOUNS.len()));
            tools.push(ToolEntry {
                path: format!("{namespace}.{name}").into(),
                description: Some(format!(
                    "{verb} {noun} in {namespace}; returns a page of results with cursors"
                )),
                input_schema: Some(ToolSchema::from_value(
                    &json!({"type": "object", "properties": {"id": {"type": "string"}}}),
                )),
                output_schema: None,
                definitions: None,
                requires_approval: false,
                invoker: invoker.clone(),
                slot: 0,
            });
        }
    }
    Catalog::new(tools)
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| {
        samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

fn report(label: &str, samples: Vec<Duration>) {
    let (p50, p99) = percentiles(samples);
    println!("{label:<52} p50 {p50:>8.3} ms   p99 {p99:>8.3} ms");
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = std::env::temp_dir().join(format!("executor-bench-{}", std::process::id()));
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("executor.db")).expect("store"));
        let principal = store.ensure_account("bench@example.com", None).await.expect("account");
        let catalog = Arc::new(synthetic_catalog());
        let engine = Engine::with_catalogs(store, EngineConfig::default(), Arc::new(StaticCatalog(catalog.clone())));
        let ctx = CallContext { principal, session_id: None, approval: Default::default(), holder: None };
        let execute = |code: &'static str| {
            let (engine, ctx) = (&engine, &ctx);
            async move {
                let started = Instant::now();
                let out = engine.call_tool(ctx, CoreTool::Execute, &json!({ "code": code })).await.into_result();
                assert!(out.get("isError").is_none(), "{out}");
                started.elapsed()
            }
        };

        for _ in 0..50 {
            execute("return 1;").await;
        }
        let mut samples = Vec::new();
        for _ in 0..1000 {
            samples.push(execute("return 1;").await);
        }
        report("execute \"return 1;\" (normalise, context, record)", samples);

        let pool = executor_sandbox::Pool::new(executor_sandbox::Limits::default(), 4);
        let mut samples = Vec::new();
        for _ in 0..1000 {
            let started = Instant::now();
            let out = pool.run("return 1;".into(), None).await.expect("sandbox");
            samples.push(started.elapsed());
            assert!(out.result.is_ok());
        }
        report("sandbox only: fresh context + prelude + run", samples);

        let mut samples = Vec::new();
        for _ in 0..1000 {
            let started = Instant::now();
            let _ = executor_engine::normalize("const x: number = 1; return x;");
            samples.push(started.elapsed());
        }
        report("normalise a TypeScript snippet (oxc)", samples);

        let script = "for (let i = 0; i < 100; i++) { const r = await tools.service3.issues.list0({ id: String(i) }); if (!r.ok) throw new Error('call failed'); } return 'done';";
        let mut samples = Vec::new();
        for _ in 0..50 {
            samples.push(execute(script).await);
        }
        report("script with 100 sequential tool calls", samples);

        let queries = ["create issue", "list pull requests", "service7 payments", "archive", "delete webhook", "restore branches in service12", "customers get"];
        let mut samples = Vec::new();
        for _ in 0..200 {
            for q in queries {
                let started = Instant::now();
                let found = catalog.search(q, None);
                samples.push(started.elapsed());
                assert!(!found.is_empty(), "{q}");
            }
        }
        report(&format!("tools.search ranking over {} tools", catalog.len()), samples);

        let mut samples = Vec::new();
        for _ in 0..200 {
            samples.push(execute("return (await tools.search({ query: 'list pull requests', limit: 12 })).items.length;").await);
        }
        report("execute calling tools.search once (3,300 tools)", samples);
        let _ = std::fs::remove_dir_all(&dir);
    });
}
