//! SPEC §2's table of cases, one test per row, driven through `router()`
//! with a real store, engine and sessions behind it. (The same table is
//! exercised end to end by the TypeScript and Python clients.)

use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use executor_sessions::SessionsConfig;
use executor_wire::WireConfig;
use serde_json::{Value, json};

mod common;
use common::{Fixture, fixture, json_of, mcp};

const VERSION: &str = "2025-06-18";

/// A loopback server on port 4788, the port every request's `Host` names.
async fn setup() -> (Fixture, String) {
    let config = WireConfig {
        public: executor_authz::PublicOrigin::new(None, "http://127.0.0.1:4788"),
        ..WireConfig::default()
    };
    let f = fixture(config, SessionsConfig::default()).await;
    let bearer = f.bearer("alice@example.com").await;
    (f, bearer)
}

/// A POST to `/mcp` with these headers and body.
fn post_with(
    bearer: Option<&str>,
    headers: &[(&str, &str)],
    body: impl Into<Body>,
) -> Request<Body> {
    let mut request = Request::builder()
        .method("POST")
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:4788");
    if let Some(bearer) = bearer {
        request = request.header(header::AUTHORIZATION, format!("Bearer {bearer}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body.into()).unwrap()
}

const JSON_POST: &[(&str, &str)] = &[
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
];

fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})
}

/// Status and the JSON-RPC error's code and message.
async fn refusal(res: Response<Body>) -> (StatusCode, i64, String) {
    let status = res.status();
    let body = json_of(res).await;
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], Value::Null, "{body}");
    let code = body["error"]["code"].as_i64().unwrap_or(0);
    let message = body["error"]["message"].as_str().unwrap_or("").to_string();
    (status, code, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_is_a_cors_preflight_before_auth() {
    let (f, _) = setup().await;
    let request = Request::builder()
        .method("OPTIONS")
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:4788")
        .body(Body::empty())
        .unwrap();
    let res = f.send(request).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let h = res.headers();
    assert_eq!(h["access-control-allow-origin"], "*");
    let methods = h["access-control-allow-methods"].to_str().unwrap();
    for m in ["GET", "POST", "DELETE", "OPTIONS"] {
        assert!(methods.contains(m), "{methods}");
    }
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    for name in [
        "authorization",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "accept",
    ] {
        assert!(allowed.contains(name), "{allowed}");
    }
    let exposed = h["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(exposed.contains("mcp-session-id") && exposed.contains("www-authenticate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_method_is_405_before_auth() {
    let (f, _) = setup().await;
    let request = Request::builder()
        .method("PATCH")
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:4788")
        .body(Body::empty())
        .unwrap();
    let (status, code, message) = refusal(f.send(request).await).await;
    assert_eq!((status, code), (StatusCode::METHOD_NOT_ALLOWED, -32001));
    assert_eq!(message, "Method not allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_origin_is_403() {
    let (f, bearer) = setup().await;
    let mut request = mcp(&bearer, "POST", None);
    request
        .headers_mut()
        .insert(header::HOST, "evil.example".parse().unwrap());
    let (status, _, _) = refusal(f.send(request).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut request = mcp(&bearer, "POST", None);
    request
        .headers_mut()
        .insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    let (status, _, _) = refusal(f.send(request).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bearer_is_401_with_the_resource_metadata_challenge() {
    let (f, _) = setup().await;
    let res = f.send(post_with(None, JSON_POST, ping().to_string())).await;
    let challenge = res.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"http://127.0.0.1:4788/.well-known/oauth-protected-resource/mcp\""
    );
    let status = res.status();
    let body = json_of(res).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"jsonrpc": "2.0", "error": {"code": -32001, "message": "Unauthorized"}, "id": null})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_bearer_is_401_with_invalid_token() {
    let (f, _) = setup().await;
    let res = f
        .send(post_with(
            Some("exe_not-a-token"),
            JSON_POST,
            ping().to_string(),
        ))
        .await;
    let challenge = res.headers()[header::WWW_AUTHENTICATE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(challenge.contains("error_description=\""), "{challenge}");
    let (status, code, message) = refusal(res).await;
    assert_eq!(
        (status, code, message.as_str()),
        (StatusCode::UNAUTHORIZED, -32001, "Unauthorized")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_is_404() {
    let (f, bearer) = setup().await;
    let (status, code, message) =
        refusal(f.post(&bearer, Some("no-such-session"), ping()).await).await;
    assert_eq!((status, code), (StatusCode::NOT_FOUND, -32001));
    assert_eq!(message, "Session not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_is_404_and_delete_is_200() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    let deleted = f.send(mcp(&bearer, "DELETE", Some(&session))).await;
    assert_eq!(deleted.status(), StatusCode::OK);
    let (status, code, message) = refusal(f.post(&bearer, Some(&session), ping()).await).await;
    assert_eq!((status, code), (StatusCode::NOT_FOUND, -32001));
    assert_eq!(message, "Session terminated, please reconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owners_session_is_403_and_stays_usable() {
    let (f, alice) = setup().await;
    let bob = f.bearer("bob@example.com").await;
    let session = f.initialize(&alice, VERSION).await.unwrap();
    let (status, code, message) = refusal(f.post(&bob, Some(&session), ping()).await).await;
    assert_eq!((status, code), (StatusCode::FORBIDDEN, -32003));
    assert_eq!(message, "MCP session does not belong to the current bearer");
    let own = f.post(&alice, Some(&session), ping()).await;
    assert_eq!(own.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_checks_of_a_post() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    let cases: [(&[(&str, &str)], StatusCode); 2] = [
        (
            &[
                ("content-type", "application/json"),
                ("accept", "text/html"),
            ],
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            &[
                ("content-type", "text/plain"),
                ("accept", "application/json"),
            ],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ];
    for (headers, expected) in cases {
        let mut headers = headers.to_vec();
        headers.push(("mcp-session-id", &session));
        let res = f
            .send(post_with(Some(&bearer), &headers, ping().to_string()))
            .await;
        let (status, code, _) = refusal(res).await;
        assert_eq!((status, code), (expected, -32000), "{headers:?}");
    }
    let big = "x".repeat(4 * 1024 * 1024 + 1);
    let headers = [JSON_POST, &[("mcp-session-id", session.as_str())]].concat();
    let (status, code, _) = refusal(f.send(post_with(Some(&bearer), &headers, big)).await).await;
    assert_eq!((status, code), (StatusCode::PAYLOAD_TOO_LARGE, -32000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_400() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    let headers = [JSON_POST, &[("mcp-session-id", session.as_str())]].concat();
    let (status, code, message) = refusal(
        f.send(post_with(Some(&bearer), &headers, "{\"jsonrpc\": "))
            .await,
    )
    .await;
    assert_eq!(
        (status, code, message.as_str()),
        (StatusCode::BAD_REQUEST, -32700, "Parse error")
    );
    for body in [json!({"hello": 1}), json!([ping(), 5])] {
        let (status, code, message) = refusal(f.post(&bearer, Some(&session), body).await).await;
        assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32600));
        assert!(message.starts_with("Invalid Request"), "{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_with_a_session_or_in_a_batch_is_400() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, "2025-03-26").await.unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}
    }});
    let (status, code, _) = refusal(f.post(&bearer, Some(&session), init.clone()).await).await;
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32600));
    let (status, code, _) = refusal(f.post(&bearer, None, json!([init])).await).await;
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_session_id_is_400() {
    let (f, bearer) = setup().await;
    let (status, code, message) = refusal(f.post(&bearer, None, ping()).await).await;
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32000));
    assert_eq!(message, "Bad Request: Mcp-Session-Id header is required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_needs_event_stream_and_a_session() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    let mut request = mcp(&bearer, "GET", Some(&session));
    request
        .headers_mut()
        .insert(header::ACCEPT, "application/json".parse().unwrap());
    assert_eq!(f.send(request).await.status(), StatusCode::NOT_ACCEPTABLE);
    let res = f.send(mcp(&bearer, "GET", None)).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_202_and_requests_200() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let res = f.post(&bearer, Some(&session), note).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let bytes = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
    assert!(bytes.is_empty());
    let res = f.post(&bearer, Some(&session), ping()).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body = json_of(res).await;
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": 7, "result": {}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_are_for_2025_03_26_sessions_only() {
    let (f, bearer) = setup().await;
    let old = f.initialize(&bearer, "2025-03-26").await.unwrap();
    let res = f.post(&bearer, Some(&old), json!([ping()])).await;
    assert_eq!(res.status(), StatusCode::OK);
    let newer = f.initialize(&bearer, VERSION).await.unwrap();
    let (status, code, _) = refusal(f.post(&bearer, Some(&newer), json!([ping()])).await).await;
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, -32600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_fault_is_500_and_never_sticky() {
    let (f, bearer) = setup().await;
    let session = f.initialize(&bearer, VERSION).await.unwrap();
    // A real fault in the real store: the event log's table is gone, so
    // opening the session's stream (which replays the log) fails inside.
    let db = rusqlite::Connection::open(f.dir.path().join("executor.db")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    db.execute_batch("ALTER TABLE events RENAME TO events_away")
        .unwrap();
    let res = f.send(mcp(&bearer, "GET", Some(&session))).await;
    let (status, code, message) = refusal(res).await;
    assert_eq!(
        (status, code, message.as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, -32603, "Internal error")
    );
    // The fault is mended: the very next requests on the session work.
    db.execute_batch("ALTER TABLE events_away RENAME TO events")
        .unwrap();
    let res = f.post(&bearer, Some(&session), ping()).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(json_of(res).await["result"], json!({}));
    let res = f.send(mcp(&bearer, "GET", Some(&session))).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
}
