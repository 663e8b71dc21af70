//! Answers MCP requests. One instance serves every session; per-session
//! state comes in through [`RequestScope`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_call::{CallContext, ClientGone, Reply};
use executor_engine::{CoreTool, ElicitationMode, Engine, Overload, ToolCallError, ToolOutcome};
use serde_json::{Value, json};

use crate::ProtocolVersion;
use crate::approvals::{self, Approvals};
use crate::jsonrpc::{
    Method, Request, RpcError, error_response, result_response, result_response_text,
};
use crate::request_state::{RequestStateKey, StateClaims};
use crate::tool_list::ToolList;

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// What one request is answered with: who asks, in which session, on which
/// protocol version, against which tool-list snapshot, and how approvals
/// reach the human.
pub struct RequestScope<'a> {
    pub ctx: &'a CallContext,
    pub protocol_version: ProtocolVersion,
    pub tools: Arc<ToolList>,
    pub approvals: Approvals<'a>,
    /// How the answer leaves the server: logged to the session's event log
    /// before it is sent, or sent as it is.
    pub reply: Reply,
    /// Resolves when the client went away, for a transport whose work
    /// outlives its client (see [`ClientGone`]).
    pub gone: Option<ClientGone>,
}

pub struct McpServer {
    engine: Arc<Engine>,
    /// Tool lists by (inventory, elicitation mode): sessions with the same
    /// integrations share one snapshot instead of a copy each.
    tool_lists: Mutex<HashMap<ToolListKey, Arc<ToolList>>>,
    /// Signs the `requestState` of `input_required` results.
    state_key: RequestStateKey,
}

/// (integration inventory, elicitation mode).
type ToolListKey = (Vec<String>, ElicitationMode);

/// Distinct tool lists kept; past this the cache starts over.
const TOOL_LIST_CACHE: usize = 256;

impl McpServer {
    /// A server whose request states are good in this process only (see
    /// [`McpServer::with_state_key`]).
    pub fn new(engine: Arc<Engine>) -> Self {
        McpServer {
            engine,
            tool_lists: Mutex::new(HashMap::new()),
            state_key: RequestStateKey::random(),
        }
    }

    /// The key that signs `requestState`s: one every node shares, so that
    /// a retry may reach any of them.
    pub fn with_state_key(mut self, key: RequestStateKey) -> Self {
        self.state_key = key;
        self
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub fn capabilities() -> Value {
        json!({ "tools": { "listChanged": true }, "logging": {} })
    }

    /// The server's `Implementation` (name, title, version).
    pub(crate) fn server_info() -> Value {
        json!({ "name": "executor", "title": "Executor", "version": env!("CARGO_PKG_VERSION") })
    }

    /// The result of `initialize` for the negotiated `version`.
    pub fn initialize_result(version: ProtocolVersion) -> Value {
        json!({
            "protocolVersion": version.as_str(),
            "capabilities": Self::capabilities(),
            "serverInfo": Self::server_info(),
            "instructions": "Use the `execute` tool to run TypeScript that calls the connected integrations through `tools.*`. Read the `skills` tool (name: \"execute\") first.",
        })
    }

    /// The tool list for a caller, built from the engine and the caller's
    /// integration inventory (used when a runtime is built, and per request
    /// on the sessionless path).
    pub async fn build_tool_list(&self, org_id: &str, mode: ElicitationMode) -> Arc<ToolList> {
        let inventory = self.engine.integration_inventory(org_id).await;
        let key = (inventory, mode);
        let mut cache = self.tool_lists.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = cache.get(&key) {
            return list.clone();
        }
        if cache.len() >= TOOL_LIST_CACHE {
            cache.clear();
        }
        let list = Arc::new(ToolList::new(self.engine.tool_definitions(&key.0, mode)));
        cache.insert(key, list.clone());
        list
    }

    /// Why `req` would find the server too busy, if it would (SPEC §4,
    /// §12): the store's writes are backed up, or `req` starts an
    /// execution while the server runs as many as it may or the sandbox's
    /// queue is full. The transport then answers 503 with `Retry-After`
    /// before anything runs. An org over its own share waits in its queue
    /// instead (the engine's answer).
    pub fn refused_for_load(&self, ctx: &CallContext, req: &Request) -> Option<Overload> {
        let starts_execution = req.method == Method::ToolsCall
            && req.params.get("name").and_then(Value::as_str) == Some(CoreTool::Execute.as_str());
        self.engine
            .overloaded(&ctx.principal.org_id, starts_execution)
    }

    /// Answers one request with a full JSON-RPC response.
    pub async fn handle(&self, scope: &RequestScope<'_>, req: &Request) -> Value {
        match self.dispatch(scope, req).await {
            Ok(result) => result_response(
                &req.id,
                decorate(scope.protocol_version, &req.method, result),
            ),
            Err(e) => error_response(&req.id, &e),
        }
    }

    /// [`McpServer::handle`], written out as JSON text. `tools/list` on a
    /// session-based revision copies the snapshot's text written once
    /// (see [`ToolList`]) instead of building and serialising a tree.
    pub async fn handle_text(&self, scope: &RequestScope<'_>, req: &Request) -> String {
        if req.method == Method::ToolsList && !scope.protocol_version.is_sessionless() {
            return result_response_text(&req.id, scope.tools.result_json());
        }
        self.handle(scope, req).await.to_string()
    }

    async fn dispatch(&self, scope: &RequestScope<'_>, req: &Request) -> Result<Value, RpcError> {
        match &req.method {
            Method::Ping => Ok(json!({})),
            Method::LoggingSetLevel => {
                let level = req.params.get("level").and_then(Value::as_str);
                match level {
                    Some(l) if LOG_LEVELS.contains(&l) => Ok(json!({})),
                    _ => Err(RpcError::invalid_params(format!(
                        "logging/setLevel needs params.level, one of {}",
                        LOG_LEVELS.join(", ")
                    ))),
                }
            }
            Method::ToolsList => Ok(json!({ "tools": scope.tools.tools() })),
            Method::ToolsCall => self.call_tool(scope, &req.params).await,
            Method::ServerDiscover => Ok(json!({
                "supportedVersions": ProtocolVersion::ALL.map(ProtocolVersion::as_str),
                "capabilities": Self::capabilities(),
                "serverInfo": Self::server_info(),
            })),
            Method::Initialize => Err(RpcError::invalid_request(
                "initialize is only valid as the first request of a session",
            )),
            Method::Other(other) => Err(RpcError::new(
                RpcError::METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            )),
        }
    }

    async fn call_tool(&self, scope: &RequestScope<'_>, params: &Value) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call needs params.name (string)"))?;
        let tool: CoreTool = name
            .parse()
            .map_err(|e: ToolCallError| RpcError::invalid_params(e.to_string()))?;
        let empty = json!({});
        let args = params.get("arguments").unwrap_or(&empty);
        if !args.is_object() {
            return Err(RpcError::invalid_params(
                "tools/call params.arguments must be an object",
            ));
        }
        let engine = &self.engine;
        let outcome = match scope.approvals {
            Approvals::Model => {
                engine
                    .call_tool_asking(
                        scope.ctx,
                        tool,
                        args,
                        None,
                        scope.reply,
                        scope.gone.as_ref(),
                    )
                    .await
            }
            Approvals::Elicit(prompt) => {
                engine
                    .call_tool_asking(
                        scope.ctx,
                        tool,
                        args,
                        Some(prompt),
                        scope.reply,
                        scope.gone.as_ref(),
                    )
                    .await
            }
            Approvals::InputRequired => {
                // A retry carries the answer to our elicitation: it decides
                // the execution its requestState names.
                let principal = &scope.ctx.principal;
                let outcome = match approvals::retried(params)? {
                    Some((state, action)) => {
                        let execution_id = self.state_key.open(
                            state,
                            &principal.account_id,
                            &principal.org_id,
                            Method::ToolsCall.as_str(),
                            now_ms(),
                        )?;
                        engine.decide(scope.ctx, &execution_id, action).await
                    }
                    None => engine.call_tool(scope.ctx, tool, args).await,
                };
                return Ok(match outcome {
                    ToolOutcome::Paused(paused) => {
                        let window =
                            i64::try_from(engine.approval_window().as_millis()).unwrap_or(i64::MAX);
                        let state = self.state_key.sign(&StateClaims {
                            execution_id: paused.request.execution_id.clone(),
                            account_id: principal.account_id.clone(),
                            org_id: principal.org_id.clone(),
                            method: Method::ToolsCall.as_str().to_string(),
                            expires_at_ms: now_ms().saturating_add(window),
                        });
                        approvals::input_required(&paused.request, state)
                    }
                    ToolOutcome::Answered(result) => result,
                });
            }
        };
        Ok(outcome.into_result())
    }
}

/// Milliseconds since the epoch (a request state's expiry).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Results on the sessionless revision carry `resultType`, and cacheable
/// ones a cache hint; earlier revisions get the plain result.
fn decorate(version: ProtocolVersion, method: &Method, mut result: Value) -> Value {
    if !version.is_sessionless() {
        return result;
    }
    if let Some(obj) = result.as_object_mut() {
        obj.entry("resultType").or_insert(json!("complete"));
        if matches!(method, Method::ToolsList | Method::ServerDiscover) {
            obj.insert("ttlMs".into(), json!(0));
            obj.insert("cacheScope".into(), json!("private"));
        }
        obj.insert(
            "_meta".into(),
            json!({ "io.modelcontextprotocol/serverInfo": McpServer::server_info() }),
        );
    }
    result
}
