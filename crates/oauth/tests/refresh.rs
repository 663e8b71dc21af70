//! Token refresh against a real token endpoint (an axum server on
//! loopback that rotates refresh tokens and revokes the grant when a spent
//! one is used again, as oidc-provider does): one request for many
//! concurrent callers, also across two store handles of one file (the
//! server and a CLI process), the rotated token saved, refusals mapped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Form, Json, Router};
use executor_oauth::{
    AuthMethod, ClientSource, Flow, Grant, GrantStatus, OAUTH_REAUTH_REQUIRED, OAuth, Secrets,
    ServerMetadata,
};
use executor_outbound::{HttpClient, HttpConfig};
use executor_store::secrets::SecretKey;
use executor_store::testing::TestStore;
use executor_store::{ConnectionRecord, CredentialKind, Store, now_ms};
use serde_json::{Value, json};

#[derive(Default)]
struct TokenServer {
    requests: AtomicUsize,
    /// The one refresh token that works; spending it issues the next.
    live: Mutex<String>,
    revoked: Mutex<bool>,
    /// The scope of the last client-credentials request.
    last_scope: Mutex<String>,
}

async fn token(
    State(server): State<Arc<TokenServer>>,
    Form(form): Form<Vec<(String, String)>>,
) -> (axum::http::StatusCode, Json<Value>) {
    let n = server.requests.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if field("grant_type").as_deref() == Some("client_credentials") {
        let scope = field("scope").unwrap_or_default();
        *server.last_scope.lock().unwrap() = scope.clone();
        return (
            axum::http::StatusCode::OK,
            Json(
                json!({"access_token": format!("cc-{n}"), "token_type": "Bearer", "expires_in": 3600, "scope": scope}),
            ),
        );
    }
    let given = form
        .iter()
        .find(|(k, _)| k == "refresh_token")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut live = server.live.lock().unwrap();
    let mut revoked = server.revoked.lock().unwrap();
    if *revoked || given != *live {
        // A spent refresh token revokes the whole grant.
        *revoked = true;
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        );
    }
    *live = format!("rt-{}", n + 1);
    (
        axum::http::StatusCode::OK,
        Json(json!({
            "access_token": format!("at-{}", n + 1),
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": *live,
        })),
    )
}

async fn start(server: Arc<TokenServer>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/token", post(token))
        .with_state(server);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/token")
}

struct Fixture {
    db: TestStore,
    key: Arc<SecretKey>,
    server: Arc<TokenServer>,
    token_url: String,
}

impl Fixture {
    async fn new() -> Fixture {
        let db = TestStore::from_env().await;
        let server = Arc::new(TokenServer::default());
        *server.live.lock().unwrap() = "rt-1".into();
        let token_url = start(server.clone()).await;
        Fixture {
            db,
            key: Arc::new(SecretKey::from_env_value(&"42".repeat(32)).unwrap()),
            server,
            token_url,
        }
    }

    /// A handle on the fixture's store, as another process would open.
    async fn store(&self) -> Arc<dyn Store> {
        self.db.reopen().await
    }

    fn oauth(&self, store: Arc<dyn Store>) -> OAuth {
        let http = HttpClient::new(HttpConfig {
            allow_local_network: true,
            ..HttpConfig::default()
        })
        .unwrap();
        OAuth::new(store, self.key.clone(), http)
    }

    /// A connection whose access token expired a minute ago.
    async fn expired_connection(&self, store: &dyn Store) {
        self.connection(store, Flow::AuthorizationCode).await
    }

    async fn connection(&self, store: &dyn Store, flow: Flow) {
        let now = now_ms();
        let grant = Grant {
            flow,
            status: GrantStatus::Ready,
            server: ServerMetadata {
                token_endpoint: Some(self.token_url.clone()),
                ..ServerMetadata::default()
            },
            client_id: "client".into(),
            client_source: ClientSource::Dynamic,
            auth_method: AuthMethod::None,
            resource: Some("http://api.example/".into()),
            resource_metadata_url: None,
            scopes_granted: vec!["read".into()],
            scopes_required: vec![],
            expires_at_ms: Some(now - 60_000),
            obtained_at_ms: now - 3_660_000,
        };
        let secrets = Secrets {
            access_token: String::from("at-1").into(),
            refresh_token: Some(String::from("rt-1").into()),
            client_secret: None,
        };
        store
            .set_connection(ConnectionRecord {
                org_id: "org".into(),
                namespace: "api".into(),
                kind: CredentialKind::OAuth,
                username: None,
                secret: secrets.seal(&self.key, "org", "api").unwrap(),
                updated_at_ms: now,
                oauth: Some(grant.to_json()),
                generation: 0,
            })
            .await
            .unwrap();
    }
}

async fn access_token(oauth: &OAuth, store: &dyn Store) -> Result<String, String> {
    let record = store.get_connection("org", "api").await.unwrap().unwrap();
    oauth
        .access_token(&record)
        .await
        .map(|t| t.expose().to_string())
        .map_err(|e| e.code.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_concurrent_callers_cause_one_refresh() {
    let f = Fixture::new().await;
    let store = f.store().await;
    f.expired_connection(store.as_ref()).await;
    let oauth = Arc::new(f.oauth(store.clone()));
    let mut calls = Vec::new();
    for _ in 0..100 {
        let (oauth, store) = (oauth.clone(), store.clone());
        calls.push(tokio::spawn(async move {
            access_token(&oauth, store.as_ref()).await
        }));
    }
    for call in calls {
        assert_eq!(call.await.unwrap().as_deref(), Ok("at-2"));
    }
    assert_eq!(f.server.requests.load(Ordering::SeqCst), 1);
    // Saved before use: the rotated refresh token is the stored one.
    let record = store.get_connection("org", "api").await.unwrap().unwrap();
    let secrets = Secrets::open(&f.key, &record.secret, "org", "api").unwrap();
    assert_eq!(secrets.refresh_token.unwrap().expose(), "rt-2");
    assert_eq!(secrets.access_token.expose(), "at-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_on_one_store_refresh_once() {
    let f = Fixture::new().await;
    let (first, second) = (f.store().await, f.store().await);
    f.expired_connection(first.as_ref()).await;
    let a = Arc::new(f.oauth(first.clone()));
    let b = Arc::new(f.oauth(second.clone()));
    let mut calls = Vec::new();
    for i in 0..40 {
        let (oauth, store) = if i % 2 == 0 {
            (a.clone(), first.clone())
        } else {
            (b.clone(), second.clone())
        };
        calls.push(tokio::spawn(async move {
            access_token(&oauth, store.as_ref()).await
        }));
    }
    for call in calls {
        assert_eq!(call.await.unwrap().as_deref(), Ok("at-2"));
    }
    assert_eq!(f.server.requests.load(Ordering::SeqCst), 1);
    assert!(
        !*f.server.revoked.lock().unwrap(),
        "no refresh token was spent twice"
    );
}

#[tokio::test]
async fn a_revoked_grant_asks_for_a_new_login_and_says_how() {
    let f = Fixture::new().await;
    let store = f.store().await;
    f.expired_connection(store.as_ref()).await;
    *f.server.revoked.lock().unwrap() = true;
    let oauth = f.oauth(store.clone());
    let record = store.get_connection("org", "api").await.unwrap().unwrap();
    let error = oauth.access_token(&record).await.err().unwrap();
    assert_eq!(error.code, OAUTH_REAUTH_REQUIRED);
    assert!(
        error.message.contains("executor connections login api"),
        "{}",
        error.message
    );
    // Remembered: the next call needs no token request to know.
    let before = f.server.requests.load(Ordering::SeqCst);
    assert_eq!(
        access_token(&oauth, store.as_ref()).await,
        Err(OAUTH_REAUTH_REQUIRED.into())
    );
    assert_eq!(f.server.requests.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn a_rejected_token_is_refreshed_once_and_a_missing_scope_needs_a_login() {
    let f = Fixture::new().await;
    let store = f.store().await;
    f.expired_connection(store.as_ref()).await;
    let oauth = f.oauth(store.clone());
    let first = access_token(&oauth, store.as_ref()).await.unwrap();
    // The upstream refuses the fresh token: one forced refresh.
    let renewed = oauth
        .refused(
            "org",
            "api",
            &first.clone().into(),
            401,
            Some("Bearer error=\"invalid_token\""),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renewed.expose(), "at-3");
    // A caller holding the old token gets the new one without a request.
    let again = oauth
        .refused("org", "api", &first.into(), 401, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.expose(), "at-3");
    assert_eq!(f.server.requests.load(Ordering::SeqCst), 2);
    // 403 for a scope the grant lacks: remembered, and a login is needed.
    let error = oauth
        .refused(
            "org",
            "api",
            &renewed,
            403,
            Some(r#"Bearer error="insufficient_scope", scope="read write""#),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(error.code, OAUTH_REAUTH_REQUIRED);
    assert!(error.message.contains("write"), "{}", error.message);
    let record = store.get_connection("org", "api").await.unwrap().unwrap();
    let grant = Grant::from_record(&record).unwrap();
    assert_eq!(grant.scopes_required, vec!["read", "write"]);
    // Calls the grant covers go on with the token it has.
    assert_eq!(
        access_token(&oauth, store.as_ref()).await.as_deref(),
        Ok("at-3")
    );
}

#[tokio::test]
async fn a_client_credentials_grant_asks_for_a_missing_scope_itself() {
    let f = Fixture::new().await;
    let store = f.store().await;
    f.connection(store.as_ref(), Flow::ClientCredentials).await;
    let oauth = f.oauth(store.clone());
    let first = access_token(&oauth, store.as_ref()).await.unwrap();
    assert_eq!(f.server.last_scope.lock().unwrap().as_str(), "read");
    let widened = oauth
        .refused(
            "org",
            "api",
            &first.into(),
            403,
            Some(r#"Bearer error="insufficient_scope", scope="write""#),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(widened.expose().starts_with("cc-"));
    assert_eq!(f.server.last_scope.lock().unwrap().as_str(), "read write");
    // A refusal for scopes it holds cannot be mended by asking again.
    let error = oauth
        .refused(
            "org",
            "api",
            &widened,
            403,
            Some(r#"Bearer error="insufficient_scope", scope="write""#),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(error.code, "connection_rejected");
}
