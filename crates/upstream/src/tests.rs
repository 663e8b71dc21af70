//! Calls through [`UpstreamInvoker`] to an MCP server on this machine
//! (a small streamable-HTTP server on 127.0.0.1, one request per
//! connection), with and without `--allow-local-network`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use executor_call::CallContext;
use executor_catalog::{
    Catalog, HostBudget, ToolEntry, ToolError, ToolInvocation, ToolInvoker, ToolResult,
};
use executor_outbound::{
    Credential, CredentialSource, HttpClient, HttpConfig, UPSTREAM_HTTP_ERROR,
};
use executor_store::Principal;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::invoker::UpstreamInvoker;
use crate::pool::{UpstreamSettings, Upstreams};
use crate::stored::{Endpoint, HttpTransport};

/// An MCP server over streamable HTTP on 127.0.0.1 with one tool, `ping`
/// (it answers "pong"); counts the connections made to it.
struct LocalServer {
    port: u16,
    connections: Arc<AtomicUsize>,
}

async fn local_server() -> LocalServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer(stream));
        }
    });
    LocalServer { port, connections }
}

/// Answers one request: `initialize` and `tools/call` with JSON, a
/// notification with 202, anything else (the GET stream) with 405.
async fn answer(mut stream: TcpStream) {
    let request = read_request(&mut stream).await;
    let body = request.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let message: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let result = match message["method"].as_str() {
        Some("initialize") => Some(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "local", "version": "1"},
        })),
        Some("tools/call") => Some(json!({"content": [{"type": "text", "text": "pong"}]})),
        _ => None,
    };
    let response = match (request.starts_with("POST"), result) {
        (true, Some(result)) => {
            let body = json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
            let body = body.to_string();
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        }
        (true, None) => {
            "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into()
        }
        (false, _) => {
            "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .into()
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
}

async fn read_request(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&bytes).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|line| {
                    let lower = line.to_ascii_lowercase();
                    let value = lower.strip_prefix("content-length:")?;
                    value.trim().parse::<usize>().ok()
                })
                .unwrap_or(0);
            if bytes.len() >= end + 4 + length {
                return text;
            }
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return text,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
        }
    }
}

struct NoCredentials;

impl CredentialSource for NoCredentials {
    fn credential<'a>(
        &'a self,
        _org_id: &'a str,
        _namespace: &'a str,
    ) -> BoxFuture<'a, Result<Option<Credential>, ToolError>> {
        Box::pin(async { Ok(None) })
    }
}

/// `local.ping` called at `url` over `transport`, on a server that allows
/// the local network or not.
async fn call_ping(url: &str, transport: HttpTransport, allow_local_network: bool) -> ToolResult {
    let (store, _dir) = executor_store::testing::sqlite_store();
    let http = HttpClient::new(HttpConfig {
        allow_local_network,
        ..HttpConfig::default()
    })
    .unwrap();
    let upstreams = Upstreams::new(
        Arc::new(http),
        Arc::new(NoCredentials),
        store,
        UpstreamSettings::default(),
        None,
    );
    let invoker = Arc::new(UpstreamInvoker {
        org_id: "org".into(),
        namespace: "local".into(),
        endpoint: Endpoint::Http {
            url: url.to_string(),
            transport,
        },
        upstream_names: vec!["ping".to_string()].into(),
        upstreams,
        env_secrets: Vec::new().into(),
    });
    let tool = Arc::new(ToolEntry {
        path: "local.ping".into(),
        description: None,
        input_schema: None,
        output_schema: None,
        definitions: None,
        requires_approval: false,
        invoker: invoker.clone(),
        slot: 0,
    });
    let call = ToolInvocation {
        tool,
        args: json!({}),
        ctx: CallContext {
            principal: Principal {
                account_id: "account".into(),
                org_id: "org".into(),
            },
            session_id: None,
            approval: Default::default(),
            holder: None,
        },
        catalog: Arc::new(Catalog::new(Vec::<ToolEntry>::new())),
        policies: Arc::new(Vec::new()),
        budget: HostBudget::new(1 << 20),
        questions: None,
    };
    invoker.invoke(call).await
}

/// Issue 37: an upstream MCP server on the local network is refused by
/// the guard with the message that names the flag, never as retryable,
/// whether the URL names a literal IP (refused before rmcp starts) or a
/// name that resolves to one (refused inside rmcp's transport, or the
/// legacy SSE stream), and nothing reaches the server.
#[tokio::test]
async fn issue_37_a_local_upstream_is_refused_naming_the_flag_and_not_retryable() {
    let server = local_server().await;
    let port = server.port;
    let cases = [
        ("127.0.0.1", HttpTransport::StreamableHttp),
        ("127.0.0.1", HttpTransport::Auto),
        ("localhost", HttpTransport::StreamableHttp),
        ("localhost", HttpTransport::Sse),
        ("localhost", HttpTransport::Auto),
    ];
    for (host, transport) in cases {
        let url = format!("http://{host}:{port}/mcp");
        let case = format!("{url} over {transport:?}");
        let error = match call_ping(&url, transport, false).await {
            Ok(success) => panic!("{case}: the call went through: {:?}", success.data),
            Err(error) => error,
        };
        assert_eq!(error.code, UPSTREAM_HTTP_ERROR, "{case}: {error:?}");
        assert_eq!(
            error.message,
            format!(
                "local: the request to {host} was refused: the address is on a local network; \
                 the operator can allow it with --allow-local-network"
            ),
            "{case}"
        );
        assert_ne!(error.retryable, Some(true), "{case}");
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);
}

/// With the local network allowed, the same server answers the call.
#[tokio::test]
async fn issue_37_a_local_upstream_answers_when_the_local_network_is_allowed() {
    let server = local_server().await;
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("http://{host}:{}/mcp", server.port);
        let answer = call_ping(&url, HttpTransport::StreamableHttp, true).await;
        let success = answer.unwrap_or_else(|error| panic!("{url}: {error:?}"));
        assert_eq!(
            success.data,
            json!({"content": [{"type": "text", "text": "pong"}]})
        );
    }
    assert!(server.connections.load(Ordering::SeqCst) > 0);
}
