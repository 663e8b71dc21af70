//! What the router tests share: a real store, engine and sessions behind
//! `router()`, bearers minted in the store, and requests to `/mcp`.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use executor_engine::{Engine, EngineConfig};
use executor_mcp::McpServer;
use executor_sessions::{Sessions, SessionsConfig};
use executor_store::{SqliteStore, Store, now_ms, tokens};
use executor_wire::{App, InFlight, WireConfig, router};
use serde_json::{Value, json};
use tower::ServiceExt;

pub struct Fixture {
    pub app: App,
    pub store: Arc<dyn Store>,
    /// Removed when the fixture is dropped.
    pub dir: tempfile::TempDir,
}

pub async fn fixture(wire: WireConfig, sessions: SessionsConfig) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("executor.db")).expect("store"));
    let engine = Arc::new(Engine::new(store.clone(), EngineConfig::default()));
    let server = Arc::new(McpServer::new(engine));
    let app = App {
        sessions: Sessions::new(store.clone(), server, sessions),
        config: Arc::new(wire),
        in_flight: InFlight::default(),
        tokens: Default::default(),
        oauth: None,
        extra: None,
    };
    Fixture { app, store, dir }
}

impl Fixture {
    pub async fn bearer(&self, email: &str) -> String {
        let principal = self.store.ensure_account(email, None).await.unwrap();
        let minted = tokens::mint(principal, now_ms(), None);
        self.store.insert_token(minted.record).await.unwrap();
        minted.plaintext
    }

    pub async fn send(&self, request: Request<Body>) -> Response<Body> {
        router(self.app.clone()).oneshot(request).await.unwrap()
    }

    pub async fn post(&self, bearer: &str, session: Option<&str>, body: Value) -> Response<Body> {
        let mut request = mcp(bearer, "POST", session);
        *request.body_mut() = Body::from(body.to_string());
        self.send(request).await
    }

    /// `initialize`; the session id, or the refusal.
    pub async fn initialize(&self, bearer: &str, version: &str) -> Result<String, Response<Body>> {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}
        }});
        let res = self.post(bearer, None, init).await;
        match res.status() {
            StatusCode::OK => Ok(res.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_string()),
            _ => Err(res),
        }
    }
}

pub fn mcp(bearer: &str, method: &str, session: Option<&str>) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(header::HOST, "127.0.0.1:4788")
        .header(header::AUTHORIZATION, format!("Bearer {bearer}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(
            header::ACCEPT,
            if method == "GET" {
                "text/event-stream"
            } else {
                "application/json, text/event-stream"
            },
        );
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.body(Body::empty()).unwrap()
}

pub async fn json_of(res: Response<Body>) -> Value {
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}
