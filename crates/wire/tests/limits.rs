//! SPEC §12 limits and the hardening of the side routes, driven through
//! `router()`: batch size, body size, body stalls, SSE keepalive and
//! rotation, session and GET-stream caps, the Host check of the
//! protected-resource metadata, the `/metrics` token.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{Request, Response, StatusCode, header};
use executor_sessions::{OutboundStream, SessionsConfig};
use executor_store::{ExecutionFilter, PageRequest};
use executor_wire::{FIRST_EVENT_WINDOW, MetricsToken, WireConfig};
use futures::StreamExt;
use serde_json::{Value, json};

mod common;
use common::{fixture, json_of, mcp};

fn tool_calls(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                    "name": "execute", "arguments": {"code": "return 1;"}
                }})
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_the_limit_is_refused_and_nothing_runs() {
    let f = fixture(
        WireConfig {
            max_batch: 3,
            ..WireConfig::default()
        },
        SessionsConfig::default(),
    )
    .await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-03-26").await.unwrap();
    let res = f.post(&alice, Some(&session), tool_calls(4)).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let body = json_of(res).await;
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 3 messages"), "{body}");
    assert!(
        f.store
            .list_executions(None, &ExecutionFilter::default(), &PageRequest::first(10))
            .await
            .unwrap()
            .is_empty(),
        "no call of the refused batch ran"
    );
    // At the limit the batch is answered in full.
    let res = f.post(&alice, Some(&session), tool_calls(3)).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(json_of(res).await.as_array().map(Vec::len), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_configured_limit_is_413_and_nothing_runs() {
    let f = fixture(
        WireConfig {
            max_body_bytes: 400,
            ..WireConfig::default()
        },
        SessionsConfig::default(),
    )
    .await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let call = |code: String| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "execute", "arguments": {"code": code}
        }})
    };
    let big = call(format!("return '{}';", "x".repeat(400)));
    let res = f.post(&alice, Some(&session), big).await;
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = json_of(res).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over 400 bytes"),
        "{body}"
    );
    assert!(
        f.store
            .list_executions(None, &ExecutionFilter::default(), &PageRequest::first(10))
            .await
            .unwrap()
            .is_empty(),
        "the refused call never ran"
    );
    let small = f
        .post(&alice, Some(&session), call("return 1;".into()))
        .await;
    assert_eq!(small.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stream_keeps_alive_and_rotates_at_the_configured_times() {
    let f = fixture(
        WireConfig {
            sse_keepalive: Duration::from_millis(50),
            get_stream_rotation: Duration::from_millis(400),
            ..WireConfig::default()
        },
        SessionsConfig::default(),
    )
    .await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let res = f.send(mcp(&alice, "GET", Some(&session))).await;
    assert_eq!(res.status(), StatusCode::OK);
    let started = Instant::now();
    let mut frames = res.into_body().into_data_stream();
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), frames.next())
        .await
        .unwrap_or_else(|_| panic!("the stream never rotated; got {text:?}"))
    {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains(": keepalive\n\n"), "{text:?}");
    assert!(text.ends_with(": reconnect\n\n"), "{text:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_within_the_body_timeout() {
    let stall = Duration::from_millis(300);
    let f = fixture(
        WireConfig {
            body_read_timeout: stall,
            ..WireConfig::default()
        },
        SessionsConfig::default(),
    )
    .await;
    let alice = f.bearer("alice@example.com").await;
    // One chunk, then nothing: the client stopped sending.
    let first =
        futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{\"jsonrpc\""))]);
    let mut request = mcp(&alice, "POST", None);
    *request.body_mut() = Body::from_stream(first.chain(futures::stream::pending()));
    let started = Instant::now();
    let res = tokio::time::timeout(Duration::from_secs(10), f.send(request))
        .await
        .expect("the server gave up on the body");
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    assert!(started.elapsed() < stall * 5, "{:?}", started.elapsed());
    let body = json_of(res).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("300 ms"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_over_the_session_cap_is_429_for_that_principal_only() {
    let f = fixture(
        WireConfig::default(),
        SessionsConfig {
            max_sessions_per_principal: 2,
            ..SessionsConfig::default()
        },
    )
    .await;
    let (alice, bob) = (
        f.bearer("alice@example.com").await,
        f.bearer("bob@example.com").await,
    );
    let first = f.initialize(&alice, "2025-06-18").await.unwrap();
    f.initialize(&alice, "2025-06-18").await.unwrap();
    let refused = f.initialize(&alice, "2025-06-18").await.unwrap_err();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = json_of(refused).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too many live sessions for this account and org (limit 2)"),
        "{body}"
    );
    f.initialize(&bob, "2025-06-18").await.unwrap();
    // Alice's sessions still work.
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"});
    assert_eq!(
        f.post(&alice, Some(&first), ping).await.status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_streams_over_the_cap_are_429_and_leave_undelivered_events() {
    let f = fixture(
        WireConfig::default(),
        SessionsConfig {
            max_get_streams_per_session: 2,
            ..SessionsConfig::default()
        },
    )
    .await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let open: Vec<Response<Body>> = vec![
        f.send(mcp(&alice, "GET", Some(&session))).await,
        f.send(mcp(&alice, "GET", Some(&session))).await,
    ];
    assert!(open.iter().all(|r| r.status() == StatusCode::OK));
    // An answer whose POST stream died: the next GET replays it.
    let mut lost = OutboundStream::new(f.store.clone(), &session, "lost".into(), 0);
    lost.log(&json!({"jsonrpc": "2.0", "id": 9, "result": {}}))
        .await
        .unwrap();
    let refused = f.send(mcp(&alice, "GET", Some(&session))).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body = json_of(refused).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too many open GET streams on this session (limit 2)"),
        "{body}"
    );
    // Another session is not affected, and a closed stream frees a place.
    let other = f.initialize(&alice, "2025-06-18").await.unwrap();
    assert_eq!(
        f.send(mcp(&alice, "GET", Some(&other))).await.status(),
        StatusCode::OK
    );
    drop(open);
    let res = f.send(mcp(&alice, "GET", Some(&session))).await;
    assert_eq!(res.status(), StatusCode::OK);
    // The refused GET left the undelivered answer for this one.
    read_until(res.into_body(), "id: lost:1").await;
}

/// Reads `body` until its text holds `needle` (5 s at most per chunk).
async fn read_until(body: Body, needle: &str) -> String {
    read_until_in(&mut body.into_data_stream(), needle).await
}

async fn read_until_in(
    frames: &mut (impl futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin),
    needle: &str,
) -> String {
    let mut text = String::new();
    while !text.contains(needle) {
        let chunk = tokio::time::timeout(Duration::from_secs(5), frames.next())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} within 5 s; got {text:?}"))
            .expect("the stream ended")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

/// A tools/call answered on its own SSE stream whose reader stops after the
/// priming event: returns the body, its stream id, once the answer is
/// logged (and queued for that body). The answer comes after the window in
/// which it would have left with the priming event.
async fn a_post_stream_holding_its_answer(
    f: &common::Fixture,
    bearer: &str,
    session: &str,
) -> (impl futures::Stream + Unpin, String) {
    let code = format!(
        "await new Promise((r) => setTimeout(r, {})); return 41 + 1;",
        FIRST_EVENT_WINDOW.as_millis() * 10
    );
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"code": code}
    }});
    let post = f.post(bearer, Some(session), call).await;
    assert_eq!(post.status(), StatusCode::OK);
    let mut frames = post.into_body().into_data_stream();
    let priming = String::from_utf8_lossy(&frames.next().await.unwrap().unwrap()).to_string();
    let stream_id = priming
        .strip_prefix("id: ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id.to_string())
        .unwrap_or_else(|| panic!("no priming event: {priming:?}"));
    assert!(
        !priming.contains("42"),
        "the answer came with the priming event: {priming:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while f
        .store
        .events_after(session, &stream_id, 0)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "the answer was never logged");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (frames, stream_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_answer_leaves_in_one_chunk_with_its_priming_event() {
    // A window no run of this test outlasts, however loaded the machine.
    let wire = WireConfig {
        first_event_window: Duration::from_secs(20),
        ..WireConfig::default()
    };
    let f = fixture(wire, SessionsConfig::default()).await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"code": "return 41 + 1;"}
    }});
    let post = f.post(&alice, Some(&session), call).await;
    assert_eq!(post.status(), StatusCode::OK);
    let mut frames = post.into_body().into_data_stream();
    let first = String::from_utf8_lossy(&frames.next().await.unwrap().unwrap()).to_string();
    let (priming, answer) = first
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("not an event: {first:?}"));
    assert!(
        priming.starts_with("id: ") && priming.ends_with("data: "),
        "{first:?}"
    );
    assert!(
        answer.contains("event: message") && answer.contains("42"),
        "{first:?}"
    );
}

/// Reads `body` until `needle`, then 300 ms more; how often `needle` came.
async fn count_on(body: Body, needle: &str) -> (usize, String) {
    let mut frames = body.into_data_stream();
    let mut text = read_until_in(&mut frames, needle).await;
    while let Ok(Some(Ok(chunk))) =
        tokio::time::timeout(Duration::from_millis(300), frames.next()).await
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    (text.matches(needle).count(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_queued_on_a_post_stream_that_goes_reaches_the_open_get_stream() {
    let f = fixture(WireConfig::default(), SessionsConfig::default()).await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let (post, stream_id) = a_post_stream_holding_its_answer(&f, &alice, &session).await;
    // A GET opened now leaves the answer to its POST stream, still open.
    let get = f.send(mcp(&alice, "GET", Some(&session))).await;
    assert_eq!(get.status(), StatusCode::OK);
    // The POST's reader goes: the open GET stream gets the answer, once.
    drop(post);
    let (count, text) = count_on(get.into_body(), &format!("id: {stream_id}:1")).await;
    assert!(text.contains("42"), "{text}");
    assert_eq!(count, 1, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_resuming_a_post_stream_sends_its_answer_once() {
    let f = fixture(WireConfig::default(), SessionsConfig::default()).await;
    let alice = f.bearer("alice@example.com").await;
    let session = f.initialize(&alice, "2025-06-18").await.unwrap();
    let (post, stream_id) = a_post_stream_holding_its_answer(&f, &alice, &session).await;
    // The client resumes the POST's stream from its priming event: the
    // replay sends the answer, and the POST's body, gone, hands it to
    // this stream (named like it) too.
    let mut resume = mcp(&alice, "GET", Some(&session));
    resume
        .headers_mut()
        .insert("last-event-id", format!("{stream_id}:0").parse().unwrap());
    let get = f.send(resume).await;
    assert_eq!(get.status(), StatusCode::OK);
    drop(post);
    let (count, text) = count_on(get.into_body(), &format!("id: {stream_id}:1")).await;
    assert!(text.contains("42"), "{text}");
    assert_eq!(count, 1, "sent twice: {text}");
}

fn get(path: &str, host: &str) -> Request<Body> {
    Request::builder()
        .uri(path)
        .header(header::HOST, host)
        .body(Body::empty())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_resource_metadata_checks_the_host() {
    // A loopback server on 4788: a loopback spelling on its port names it.
    let config = WireConfig {
        public: executor_authz::PublicOrigin::new(None, "http://127.0.0.1:4788"),
        ..WireConfig::default()
    };
    let f = fixture(config, SessionsConfig::default()).await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let res = f.send(get(path, "evil.example")).await;
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "{path}");
        let body = json_of(res).await;
        assert!(!body.to_string().contains("evil.example"), "{body}");
        let res = f.send(get(path, "localhost:4788")).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert_eq!(json_of(res).await["resource"], "http://localhost:4788/mcp");
    }
    // Any origin may read the document (CORS), only the Host is checked.
    let mut request = get(
        "/.well-known/oauth-protected-resource/mcp",
        "127.0.0.1:4788",
    );
    request
        .headers_mut()
        .insert(header::ORIGIN, "https://client.example".parse().unwrap());
    assert_eq!(f.send(request).await.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_needs_the_metrics_token_when_one_is_set() {
    let open = fixture(WireConfig::default(), SessionsConfig::default()).await;
    assert_eq!(
        open.send(get("/metrics", "127.0.0.1")).await.status(),
        StatusCode::OK
    );
    let f = fixture(
        WireConfig {
            metrics_token: Some(MetricsToken::new("s3cret-metrics")),
            ..WireConfig::default()
        },
        SessionsConfig::default(),
    )
    .await;
    let with = |auth: Option<&str>| {
        let mut request = get("/metrics", "127.0.0.1");
        if let Some(auth) = auth {
            request
                .headers_mut()
                .insert(header::AUTHORIZATION, auth.parse().unwrap());
        }
        request
    };
    for refused in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-metric"),
        Some("Basic s3cret-metrics"),
    ] {
        let res = f.send(with(refused)).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{refused:?}");
        assert!(res.headers().contains_key(header::WWW_AUTHENTICATE));
    }
    let res = f.send(with(Some("Bearer s3cret-metrics"))).await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&text).contains("executor_sessions_live"));
    assert!(
        !format!("{:?}", f.app.config).contains("s3cret"),
        "Debug hides the token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_a_request_id_and_a_clients_own_is_kept() {
    use tower::ServiceExt;
    let f = fixture(WireConfig::default(), SessionsConfig::default()).await;
    let alice = f.bearer("alice@example.com").await;
    // One router, as a server has: ours are one prefix and a counter, a
    // new id per request, on every route (a refusal too).
    let router = executor_wire::router(f.app.clone());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let res = router
            .clone()
            .oneshot(mcp(&alice, "GET", None))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        ids.push(res.headers()["x-request-id"].to_str().unwrap().to_string());
    }
    let health = Request::get("/healthz").body(Body::empty()).unwrap();
    let res = router.clone().oneshot(health).await.unwrap();
    ids.push(res.headers()["x-request-id"].to_str().unwrap().to_string());
    let prefix = ids[0].rsplit_once('-').map(|(p, _)| p.to_string()).unwrap();
    let counters: Vec<u64> = ids
        .iter()
        .map(|id| {
            let (p, n) = id.rsplit_once('-').unwrap();
            assert_eq!(p, prefix, "{ids:?}");
            n.parse().unwrap()
        })
        .collect();
    assert!(counters.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    // The client's own is echoed back.
    let mut request = mcp(&alice, "GET", None);
    request
        .headers_mut()
        .insert("x-request-id", "client-trace-42".parse().unwrap());
    let res = router.oneshot(request).await.unwrap();
    assert_eq!(res.headers()["x-request-id"], "client-trace-42");
}
