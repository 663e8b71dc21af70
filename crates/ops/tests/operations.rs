//! Operations against a real SQLite store, as a surface calls them:
//! describing a tool and ending a session, each for the actor's org only.

use std::sync::{Arc, Mutex};

use executor_engine::core_tool_entries;
use executor_integrations::{Credentials, Kinds, StoreCatalogs};
use executor_ops::{
    Actor, AddIntegration, DocumentSource, ErrorKind, OpResult, Operations, Parts, SessionControl,
    SessionFuture, Surface,
};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::testing::sqlite_store;
use executor_store::{ElicitationMode, SessionRecord, Store};
use executor_upstream::{UpstreamSettings, Upstreams};
use serde_json::json;

/// A store of its own, the operations over it, and two orgs' actors.
struct Fixture {
    ops: Operations,
    alice: Actor,
    bob: Actor,
    _dir: tempfile::TempDir,
}

async fn fixture(sessions: Option<Arc<dyn SessionControl>>) -> Fixture {
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
            None,
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
        sessions,
        http,
        surface: Surface {
            allow_local_network: false,
            may_read_files: false,
            may_start_commands: false,
        },
        login_callback: None,
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
    let f = fixture(None).await;
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

/// A session of `owner`, as `initialize` stores it.
async fn open_session(ops: &Operations, owner: &Actor, id: &str) {
    let record = SessionRecord {
        id: id.to_string(),
        owner: owner.clone(),
        protocol_version: "2025-11-25".into(),
        client_info: json!({ "name": "ops-test", "version": "1" }),
        client_capabilities: json!({}),
        elicitation_mode: ElicitationMode::Model,
        created_at_ms: 1,
        last_activity_at_ms: 1,
        terminated_at_ms: None,
    };
    ops.store()
        .insert_session(record, "node_test")
        .await
        .unwrap();
}

async fn terminated_at(ops: &Operations, id: &str) -> Option<i64> {
    let record = ops.store().get_session(id).await.unwrap();
    record.expect("the record stays").terminated_at_ms
}

#[tokio::test]
async fn terminate_session_ends_the_actors_own_sessions_only() {
    let f = fixture(None).await;
    open_session(&f.ops, &f.alice, "alice_session").await;
    for (who, id) in [(&f.bob, "alice_session"), (&f.alice, "no_such_session")] {
        let e = f.ops.terminate_session(who, id).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound, "{id}: {e}");
        let owner = [f.alice.account_id.as_str(), "alice@ops.test"];
        assert!(
            !owner.iter().any(|o| e.message.contains(o)),
            "says nothing of the owner: {e}"
        );
    }
    assert_eq!(terminated_at(&f.ops, "alice_session").await, None);

    f.ops
        .terminate_session(&f.alice, "alice_session")
        .await
        .unwrap();
    let at = terminated_at(&f.ops, "alice_session").await;
    assert!(at.is_some(), "the record is marked terminated");
    // Again: nothing more happens, and the time stays.
    f.ops
        .terminate_session(&f.alice, "alice_session")
        .await
        .unwrap();
    assert_eq!(terminated_at(&f.ops, "alice_session").await, at);
    let listed = f
        .ops
        .list_sessions(&f.alice, &Default::default())
        .await
        .unwrap();
    assert_eq!(listed.items[0].terminated_at_ms, at);
}

/// A server's hold on its live sessions, as the test sees it: which
/// sessions it was asked to end.
#[derive(Default)]
struct Recorded(Mutex<Vec<String>>);

impl SessionControl for Recorded {
    fn terminate<'a>(&'a self, session_id: &'a str) -> SessionFuture<'a> {
        Box::pin(async move {
            self.0.lock().unwrap().push(session_id.to_string());
            OpResult::Ok(())
        })
    }
}

#[tokio::test]
async fn on_a_server_the_live_sessions_end_it_after_the_org_is_checked() {
    let control = Arc::new(Recorded::default());
    let f = fixture(Some(control.clone())).await;
    open_session(&f.ops, &f.alice, "alice_session").await;
    let e = f
        .ops
        .terminate_session(&f.bob, "alice_session")
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(
        control.0.lock().unwrap().is_empty(),
        "another org's session was handed on"
    );
    f.ops
        .terminate_session(&f.alice, "alice_session")
        .await
        .unwrap();
    assert_eq!(*control.0.lock().unwrap(), ["alice_session"]);
}

/// Issue 37: an update is a refresh with new settings — an uploaded
/// document's integration moves to a new base URL, keeping its tools; a
/// bad URL names its field; another org's namespace is not found.
#[tokio::test]
async fn update_integration_moves_the_base_url_of_the_actors_own_integration() {
    let f = fixture(None).await;
    add_pets(&f.ops, &f.alice, "pets").await;
    let update = |url: &str| executor_ops::UpdateIntegration {
        base_url: Some(url.to_string()),
    };
    let moved = f
        .ops
        .update_integration(
            &f.alice,
            "pets",
            update("https://mirror.example/v2"),
            false,
            &mut |_, _| {},
        )
        .await
        .expect("the update applies");
    assert_eq!(
        moved.integration.base_url.as_deref(),
        Some("https://mirror.example/v2")
    );
    assert_eq!(moved.integration.tool_count, 2);
    let listed = f.ops.get_integration(&f.alice, "pets").await.unwrap();
    assert_eq!(
        listed.base_url.as_deref(),
        Some("https://mirror.example/v2")
    );
    let bad = f
        .ops
        .update_integration(
            &f.alice,
            "pets",
            update("ftp://nope"),
            false,
            &mut |_, _| {},
        )
        .await
        .expect_err("not an http(s) URL");
    assert_eq!(bad.field, Some("baseUrl"));
    let hidden = f
        .ops
        .update_integration(
            &f.bob,
            "pets",
            update("https://x.example"),
            false,
            &mut |_, _| {},
        )
        .await
        .expect_err("bob has no pets");
    assert_eq!(hidden.kind, executor_ops::ErrorKind::NotFound);
}
