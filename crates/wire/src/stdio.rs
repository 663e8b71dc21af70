//! MCP over stdio: one JSON-RPC message (or batch) per line, for clients
//! that spawn `executor mcp`. The process is the session; it acts for one
//! principal, resolved by the caller.

use std::sync::Arc;

use executor_call::{CallContext, Reply};
use executor_mcp::{
    Approvals, Incoming, McpServer, Message, Method, ProtocolVersion, RequestScope, error_response,
    result_response,
};
use executor_store::{ElicitationMode, Principal};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub async fn serve_stdio(server: Arc<McpServer>, principal: Principal) -> std::io::Result<()> {
    let ctx = CallContext {
        principal,
        session_id: None,
        approval: Default::default(),
        holder: None,
    };
    let mut version = ProtocolVersion::NEWEST_SESSION_BASED;
    let mut tools = server
        .build_tool_list(&ctx.principal.org_id, ElicitationMode::Model)
        .await;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = executor_mcp::parse(line.as_bytes(), executor_mcp::MAX_BATCH);
        let answers: Vec<Value> = match parsed {
            Err(e) => vec![error_response(&Value::Null, &e)],
            Ok(incoming) => {
                let mut out = Vec::new();
                for message in incoming.messages() {
                    let Message::Request(req) = message else {
                        continue;
                    };
                    if req.method == Method::Initialize {
                        version = ProtocolVersion::negotiate(
                            req.params.get("protocolVersion").and_then(Value::as_str),
                        );
                        tools = server
                            .build_tool_list(&ctx.principal.org_id, ElicitationMode::Model)
                            .await;
                        out.push(result_response(
                            &req.id,
                            McpServer::initialize_result(version),
                        ));
                        continue;
                    }
                    let scope = RequestScope {
                        ctx: &ctx,
                        protocol_version: version,
                        tools: tools.clone(),
                        // One request at a time on stdio: nothing could
                        // read the client's answer to an elicitation.
                        approvals: Approvals::Model,
                        reply: Reply::Direct,
                        gone: None,
                    };
                    out.push(server.handle(&scope, req).await);
                }
                if matches!(incoming, Incoming::Batch(_)) && !out.is_empty() {
                    vec![Value::Array(out)]
                } else {
                    out
                }
            }
        };
        for answer in answers {
            let mut text = answer.to_string();
            text.push('\n');
            stdout.write_all(text.as_bytes()).await?;
        }
        stdout.flush().await?;
    }
    Ok(())
}
