//! Runs an upstream MCP integration's tools: a `tools/call` on a pooled
//! session, its result as `{content, structuredContent?}`, `isError` as
//! `mcp_tool_error`, every form of the credential scrubbed from what comes
//! back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use executor_catalog::{
    HumanQuestions, ToolError, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess,
};
use executor_outbound::{Credential, HttpFailure, UPSTREAM_TIMEOUT, renewed, scrub_value};
use executor_store::secrets::SecretString;
use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ErrorCode, InputRequiredResult,
    ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};

use crate::env::scrub_env;
use crate::error::OpenError;
use crate::pool::{Lease, Upstreams};
use crate::questions::{self, MAX_INPUT_ROUNDS};
use crate::stored::Endpoint;

/// The error code of a tool result the upstream marked `isError` (SPEC §7).
pub const MCP_TOOL_ERROR: &str = "mcp_tool_error";
/// SPEC §7: a stdio server that is not allowed or cannot start, an
/// upstream that cannot be reached.
pub const INTEGRATION_UNAVAILABLE: &str = "integration_unavailable";
/// SPEC §7: the integration needs a login first.
pub const CONNECTION_MISSING: &str = "connection_missing";

/// The message of a stdio call on a server that does not allow them.
pub fn stdio_refused() -> String {
    "stdio MCP integrations are not allowed on this server: start it with \
     --allow-stdio-integrations (or EXECUTOR_ALLOW_STDIO_INTEGRATIONS=true) to run them"
        .into()
}

/// An upstream MCP integration as its invoker sees it.
pub struct UpstreamInvoker {
    pub(crate) org_id: String,
    pub(crate) namespace: String,
    pub(crate) endpoint: Endpoint,
    /// The upstream's tool names, by the tools' slots.
    pub(crate) upstream_names: Arc<[String]>,
    pub(crate) upstreams: Arc<Upstreams>,
    /// A stdio command's `--env` values, opened once when the integration
    /// is loaded: scrubbed from every answer like the credential, since
    /// the command may echo what it was started with.
    pub(crate) env_secrets: Arc<[(String, SecretString)]>,
}

impl ToolInvoker for UpstreamInvoker {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let upstream_name = self.upstream_names.get(call.tool.slot).cloned();
        let (org_id, namespace, endpoint) = (
            self.org_id.clone(),
            self.namespace.clone(),
            self.endpoint.clone(),
        );
        let upstreams = self.upstreams.clone();
        let env = self.env_secrets.clone();
        Box::pin(async move {
            let name = upstream_name.ok_or_else(|| {
                ToolError::new(
                    "tool_not_found",
                    format!("Tool not found: {}", call.tool.path),
                )
            })?;
            if matches!(endpoint, Endpoint::Stdio { .. }) && !upstreams.settings().allow_stdio {
                return Err(ToolError::new(INTEGRATION_UNAVAILABLE, stdio_refused()));
            }
            let mut credential = upstreams
                .credentials
                .credential(&org_id, &namespace)
                .await?
                .unwrap_or(Credential::None);
            let arguments = match call.args {
                Value::Object(map) => map,
                Value::Null => Map::new(),
                _ => {
                    return Err(ToolError::new(
                        executor_outbound::INVALID_TOOL_ARGUMENTS,
                        "arguments must be an object",
                    ));
                }
            };
            // A refused credential is offered back to its source once (an
            // OAuth connection refreshes its token), then the call retried.
            let mut refused_once = false;
            let questions = call.questions.clone();
            let result = loop {
                let called = call_answering(
                    &upstreams,
                    &org_id,
                    &namespace,
                    &endpoint,
                    &credential,
                    CallToolRequestParams::new(name.clone()).with_arguments(arguments.clone()),
                    questions.as_ref(),
                )
                .await;
                let challenge = match called {
                    Err(CallError::Refused { challenge }) => challenge,
                    Err(CallError::Tool(error)) => break Err(error),
                    Ok(value) => break Ok(value),
                };
                if refused_once || matches!(credential, Credential::None) {
                    break Err(refused_error(&namespace, &credential));
                }
                refused_once = true;
                // rmcp keeps the challenge, not the status: a scope
                // challenge is a 403, any other a 401.
                let scope = challenge
                    .as_deref()
                    .is_some_and(|c| c.contains("insufficient_scope"));
                let status = Some(if scope { 403 } else { 401 });
                let source = &*upstreams.credentials;
                match renewed(
                    source,
                    &org_id,
                    &namespace,
                    &credential,
                    status,
                    challenge.as_deref(),
                )
                .await
                {
                    Ok(Some(renewed)) => credential = renewed,
                    Ok(None) => break Err(refused_error(&namespace, &credential)),
                    Err(error) => break Err(error),
                }
            };
            let scrub = |value: &mut Value| {
                scrub_value(&credential, value);
                scrub_env(&env, value);
            };
            let mut result = match result {
                Ok(value) => value,
                Err(mut error) => {
                    let mut message = Value::String(std::mem::take(&mut error.message));
                    scrub(&mut message);
                    error.message = message.as_str().unwrap_or_default().to_string();
                    if let Some(details) = error.details.as_mut() {
                        scrub(details);
                    }
                    return Err(error);
                }
            };
            scrub(&mut result);
            // Held as an OpenAPI answer is: the estimate of what its parsed
            // form takes (text plus a value's overhead per value). rmcp has
            // parsed it already; its bytes were bounded before that.
            let size = executor_outbound::parsed_size_estimate(result.to_string().as_bytes(), true);
            let held = call.budget.hold(size).await.map_err(|e| {
                ToolError::new(executor_outbound::UPSTREAM_HTTP_ERROR, e.to_string())
            })?;
            answered(result, held)
        })
    }
}

/// Why a call failed: an answer for the agent, or a refusal of the
/// credential (401/403 with its challenge) that its source may mend.
enum CallError {
    Tool(ToolError),
    Refused { challenge: Option<String> },
}

impl From<ToolError> for CallError {
    fn from(error: ToolError) -> Self {
        CallError::Tool(error)
    }
}

/// The answer when the upstream keeps refusing the credential.
fn refused_error(namespace: &str, credential: &Credential) -> ToolError {
    match credential {
        Credential::None => ToolError::new(
            CONNECTION_MISSING,
            format!("{namespace} needs a login: run `executor connections login {namespace}`"),
        ),
        _ => ToolError::new(
            executor_outbound::CONNECTION_REJECTED,
            format!("{namespace} refused the connection's credential"),
        ),
    }
}

/// A `tools/call` through every `input_required` round the upstream asks
/// for (see `questions.rs`): each retry carries the answers and the
/// upstream's `requestState` unchanged, with a new JSON-RPC id, on a
/// session leased for that round only (nobody holds one while a person
/// decides).
async fn call_answering(
    upstreams: &Arc<Upstreams>,
    org_id: &str,
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    mut params: CallToolRequestParams,
    questions: Option<&Arc<dyn HumanQuestions>>,
) -> Result<Value, CallError> {
    for round in 0..MAX_INPUT_ROUNDS {
        let called = call_upstream(
            upstreams,
            org_id,
            namespace,
            endpoint,
            credential,
            params.clone(),
        )
        .await?;
        let asked = match called {
            Reply::Done(value) => return Ok(value),
            Reply::Asked(asked) => asked,
        };
        let retry = questions::answer(namespace, asked, questions, round).await?;
        params.input_responses = retry.input_responses;
        params.request_state = retry.request_state;
    }
    Err(ToolError::new(
        MCP_TOOL_ERROR,
        format!("{namespace} asked for input {MAX_INPUT_ROUNDS} times without finishing the call"),
    )
    .into())
}

/// What one `tools/call` came back with.
enum Reply {
    Done(Value),
    /// `input_required`: answer, then send the call again.
    Asked(InputRequiredResult),
}

/// One `tools/call` on a leased session.
async fn call_upstream(
    upstreams: &Arc<Upstreams>,
    org_id: &str,
    namespace: &str,
    endpoint: &Endpoint,
    credential: &Credential,
    params: CallToolRequestParams,
) -> Result<Reply, CallError> {
    let pool = upstreams.pool(org_id, namespace, endpoint, credential);
    let lease = match upstreams.lease(&pool, credential).await {
        Ok(lease) => lease,
        Err(OpenError::NeedsLogin(challenge)) => return Err(CallError::Refused { challenge }),
        Err(e) => return Err(open_error(namespace, e).into()),
    };
    let timeout = upstreams.settings().call_timeout;
    let called = call_with_progress(&lease, params, timeout).await;
    if let Err(e) = &called
        && let Some(challenge) = e.auth_challenge()
    {
        // The session carries the refused token: none of its calls can pass.
        let challenge = Some(challenge.to_string());
        lease.discard();
        return Err(CallError::Refused { challenge });
    }
    let answer = match called {
        Err(ServiceError::Timeout { .. }) => Err(ToolError {
            retryable: Some(true),
            ..ToolError::new(
                UPSTREAM_TIMEOUT,
                format!("{namespace} did not answer within {} s", timeout.as_secs()),
            )
        }),
        Ok(ServerResult::CallToolResult(result)) => {
            serde_json::to_value(result).map(Reply::Done).map_err(|e| {
                ToolError::new(
                    MCP_TOOL_ERROR,
                    format!("{namespace} answered a result that cannot be read: {e}"),
                )
            })
        }
        Ok(ServerResult::InputRequiredResult(asked)) => Ok(Reply::Asked(asked)),
        Ok(_) => Err(ToolError::new(
            MCP_TOOL_ERROR,
            format!("{namespace} answered tools/call with something else than a tool result"),
        )),
        Err(ServiceError::McpError(error)) => {
            if is_unknown_tool(error.code) {
                // Its tools changed under us: list them again.
                pool.resync_wanted.store(true, Ordering::Relaxed);
            }
            Err(
                ToolError::new(MCP_TOOL_ERROR, format!("{namespace}: {}", error.message))
                    .with_details(serde_json::json!({
                        "code": error.code.0,
                        "data": error.data,
                    })),
            )
        }
        Err(e) => {
            // The session is no good for another call.
            let refused = lease.session.refused_target();
            lease.discard();
            if let Some(failure) = refused {
                // Its host resolves to a local network now: a new session
                // would be refused too.
                return Err(target_error(namespace, failure).into());
            }
            Err(ToolError {
                retryable: Some(true),
                ..ToolError::new(
                    INTEGRATION_UNAVAILABLE,
                    format!(
                        "{namespace}: the MCP server's session ended during the call ({e}); the next call opens a new one"
                    ),
                )
            })
        }
    };
    answer.map_err(CallError::Tool)
}

/// Sends the call with a progress token: the upstream's progress
/// notifications restart its clock, so a long tool that reports progress
/// runs as long as it needs (the execution's wall clock still bounds it).
async fn call_with_progress(
    lease: &Lease,
    params: CallToolRequestParams,
    timeout: Duration,
) -> Result<ServerResult, ServiceError> {
    let mut options = PeerRequestOptions::with_timeout(timeout);
    options.reset_timeout_on_progress = true;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    lease
        .session
        .service
        .send_request_with_option(request, options)
        .await?
        .await_response()
        .await
}

/// JSON-RPC answers that mean "no such tool" from common servers.
fn is_unknown_tool(code: ErrorCode) -> bool {
    code == ErrorCode::METHOD_NOT_FOUND || code == ErrorCode::INVALID_PARAMS
}

fn open_error(namespace: &str, error: OpenError) -> ToolError {
    match error {
        OpenError::NeedsLogin(_) => ToolError::new(
            CONNECTION_MISSING,
            format!("{namespace} needs a login: run `executor connections login {namespace}`"),
        ),
        OpenError::Refused(why) => ToolError::new(
            executor_outbound::CONNECTION_REJECTED,
            format!("{namespace}: {why}"),
        ),
        OpenError::Unavailable(why) => ToolError {
            retryable: Some(true),
            ..ToolError::new(INTEGRATION_UNAVAILABLE, format!("{namespace}: {why}"))
        },
        OpenError::Target(failure) => target_error(namespace, failure),
    }
}

/// A refused address (on a local network, not HTTP) as the outbound path
/// shaped it — the same code, message and `retryable` as an OpenAPI or
/// GraphQL call to it — naming the integration.
fn target_error(namespace: &str, failure: HttpFailure) -> ToolError {
    let mut error = ToolError::from(failure);
    error.message = format!("{namespace}: {}", error.message);
    error
}

/// `{content, structuredContent?}`, or `mcp_tool_error` with the first
/// text of an `isError` result as its message and the result as details.
fn answered(mut result: Value, held: executor_catalog::HostHold) -> ToolResult {
    let object = result.as_object_mut();
    let is_error = object
        .as_ref()
        .and_then(|o| o.get("isError"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut data = Map::new();
    if let Some(object) = object {
        for key in ["content", "structuredContent"] {
            if let Some(value) = object.remove(key) {
                data.insert(key.to_string(), value);
            }
        }
    }
    data.entry("content")
        .or_insert_with(|| Value::Array(Vec::new()));
    if is_error {
        let message = first_text(&data)
            .unwrap_or("the tool reported an error")
            .to_string();
        return Err(ToolError::new(MCP_TOOL_ERROR, message).with_details(Value::Object(data)));
    }
    Ok(ToolSuccess {
        data: Value::Object(data),
        http: None,
        held: Some(Arc::new(held)),
    })
}

fn first_text(data: &Map<String, Value>) -> Option<&str> {
    data.get("content")?
        .as_array()?
        .iter()
        .find(|block| block.get("type").and_then(Value::as_str) == Some("text"))?
        .get("text")?
        .as_str()
}
