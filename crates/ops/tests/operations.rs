//! Operations against a real SQLite store, as a surface calls them:
//! describing a tool, for the actor's org only.

use std::sync::Arc;

use executor_engine::core_tool_entries;
use executor_integrations::{Credentials, Kinds, StoreCatalogs};
use executor_ops::{Actor, AddIntegration, DocumentSource, ErrorKind, Operations, Parts, Surface};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::Store;
use executor_store::testing::sqlite_store;
use executor_upstream::{UpstreamSettings, Upstreams};
use serde_json::json;

/// A store of its own, the operations over it, and two orgs' actors.
struct Fixture {
    ops: Operations,
    alice: Actor,
    bob: Actor,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let (store, dir) = sqlite_store();
    let store: Arc<dyn Store> = store;
    let http = HttpConfig::default();
    let client = Arc::new(HttpClient::new(http.clone()).expect("an HTTP client"));
    let credentials = Arc::new(Credentials {
        store: store.clone(),
        key: None,
        oauth: None,
    });
    let kinds = || {
        let upstreams = Upstreams::new(
            client.clone(),
            credentials.clone(),
            store.clone(),
            UpstreamSettings::default(),
        );
        Kinds::new(client.clone(), credentials.clone(), upstreams)
    };
    let catalogs = Arc::new(StoreCatalogs::new(
        store.clone(),
        kinds(),
        core_tool_entries(store.clone()),
    ));
    let ops = Operations::new(Parts {
        store: store.clone(),
        kinds: kinds(),
        credentials,
        key: None,
        catalogs,
        engine: None,
        http,
        surface: Surface {
            allow_local_network: false,
            may_read_files: false,
            may_start_commands: false,
        },
    });
    let alice = store.ensure_account("alice@ops.test", None).await.unwrap();
    let bob = store.ensure_account("bob@ops.test", None).await.unwrap();
    Fixture {
        ops,
        alice,
        bob,
        _dir: dir,
    }
}

/// Adds a small OpenAPI document as `namespace` for `actor`.
async fn add_pets(ops: &Operations, actor: &Actor, namespace: &str) {
    let document = json!({
        "openapi": "3.0.3",
        "info": { "title": "pets", "version": "1" },
        "servers": [{ "url": "https://pets.example/v1" }],
        "components": { "schemas": { "Pet": {
            "type": "object",
            "description": "A pet in the store",
            "required": ["name"],
            "properties": { "name": { "type": "string" }, "age": { "type": "integer" } }
        } } },
        "paths": { "/pets": {
            "get": {
                "operationId": "listPets",
                "tags": ["pets"],
                "summary": "List the pets",
                "parameters": [{ "name": "limit", "in": "query", "schema": { "type": "integer" } }],
                "responses": { "200": { "description": "ok", "content": { "application/json": {
                    "schema": { "type": "array", "items": { "$ref": "#/components/schemas/Pet" } }
                } } } }
            },
            "post": {
                "operationId": "addPet",
                "tags": ["pets"],
                "requestBody": { "content": { "application/json": {
                    "schema": { "$ref": "#/components/schemas/Pet" }
                } } },
                "responses": { "200": { "description": "ok" } }
            }
        } }
    });
    let input = AddIntegration::OpenApi {
        namespace: namespace.to_string(),
        spec: DocumentSource::Text(document.to_string()),
        base_url: None,
    };
    ops.add_integration(actor, input, false, &mut |_, _| {})
        .await
        .expect("the document imports");
}

/// What `describe_tool` should say of `path`: a line the TypeScript holds
/// and whether a call waits for approval, or that it is not found.
enum Described {
    Found {
        typescript: &'static [&'static str],
        requires_approval: bool,
    },
    NotFound,
}

async fn check_describe(ops: &Operations, actor: &Actor, path: &str, expected: Described) {
    let described = ops.describe_tool(actor, path).await;
    match (expected, described) {
        (
            Described::Found {
                typescript,
                requires_approval,
            },
            Ok(tool),
        ) => {
            assert_eq!(tool.path, path);
            assert_eq!(tool.requires_approval, requires_approval, "{path}");
            for line in typescript {
                assert!(
                    tool.type_script.contains(line),
                    "{path}: {line:?} missing from:\n{}",
                    tool.type_script
                );
            }
            assert!(tool.input_schema.is_some(), "{path} has its input schema");
            assert!(
                tool.type_script_definitions.contains_key("ToolError"),
                "{path}: the envelope's types are named"
            );
        }
        (Described::NotFound, Err(e)) => {
            assert_eq!(e.kind, ErrorKind::NotFound, "{path}: {e}");
            assert_eq!(e.code, "not_found");
        }
        (Described::Found { .. }, Err(e)) => panic!("{path}: not described: {e}"),
        (Described::NotFound, Ok(tool)) => panic!("{path}: described: {tool:?}"),
    }
}

#[tokio::test]
async fn describe_tool_shows_what_agents_read_in_the_actors_org_only() {
    let f = fixture().await;
    add_pets(&f.ops, &f.alice, "pets").await;
    let cases = [
        (
            "pets.pets.listPets",
            Described::Found {
                typescript: &[
                    "type Input = { limit?: number };",
                    "type Output = { ok: true; data: Pet[]; http?: ToolHttpMeta } | { ok: false; error: ToolError };",
                    "/** A pet in the store */",
                    "type Pet = { name: string; age?: number };",
                ],
                requires_approval: false,
            },
        ),
        (
            "pets.pets.addPet",
            Described::Found {
                typescript: &["type Pet = "],
                requires_approval: true,
            },
        ),
        (
            "executor.coreTools.connections.list",
            Described::Found {
                typescript: &["type Output = "],
                requires_approval: false,
            },
        ),
        ("pets.pets.nothing", Described::NotFound),
        ("nothing.at.all", Described::NotFound),
    ];
    for (path, expected) in cases {
        check_describe(&f.ops, &f.alice, path, expected).await;
    }
    // Bob's org has no `pets`: alice's tools are not found for him.
    check_describe(&f.ops, &f.bob, "pets.pets.listPets", Described::NotFound).await;
    check_describe(
        &f.ops,
        &f.bob,
        "executor.coreTools.connections.list",
        Described::Found {
            typescript: &["type Output = "],
            requires_approval: false,
        },
    )
    .await;
}
