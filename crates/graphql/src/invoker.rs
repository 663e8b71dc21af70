//! Runs a GraphQL integration's tools: the call's operation (see
//! [`crate::operation`]) POSTed to the endpoint through the guarded client
//! with the connection's credential; the root field's value back, or
//! `graphql_errors` with the errors and whatever data came with them.

use std::sync::Arc;

use executor_catalog::{
    HostHold, ToolEntry, ToolError, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess,
};
use executor_outbound::{
    BuildRequest, Connection, Credential, CredentialSource, HttpClient, HttpFailure,
    INVALID_TOOL_ARGUMENTS, OutboundRequest, Placement, UPSTREAM_HTTP_ERROR,
};
use futures::future::BoxFuture;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value, json};

use crate::operation::{CallShape, operation_name, operation_text};
use crate::tools::{ArgSpec, OperationKind, SELECT};

/// The error code of an answer that carries `errors` (SPEC §7).
pub const GRAPHQL_ERRORS: &str = "graphql_errors";

/// What a call needs of one tool.
#[derive(Debug, Clone)]
pub struct Operation {
    pub operation: OperationKind,
    pub field: String,
    pub args: Vec<ArgSpec>,
    pub default_selection: Option<String>,
    pub takes_select: bool,
}

impl<'a> From<&'a Operation> for CallShape<'a> {
    fn from(operation: &'a Operation) -> Self {
        CallShape {
            operation: operation.operation,
            field: &operation.field,
            args: &operation.args,
            default_selection: operation.default_selection.as_deref(),
        }
    }
}

impl Operation {
    /// The operation text and the variables of a call with `args`.
    pub fn request(&self, args: &Value) -> Result<(String, Map<String, Value>), ToolError> {
        let mut variables = args.as_object().cloned().unwrap_or_default();
        let select = if self.takes_select {
            match variables.remove(SELECT) {
                Some(Value::String(text)) => Some(text),
                Some(Value::Null) | None => None,
                Some(_) => {
                    return Err(ToolError::new(
                        INVALID_TOOL_ARGUMENTS,
                        "`select` must be a string",
                    ));
                }
            }
        } else {
            None
        };
        // Variables only for the arguments given: one not given keeps the
        // API's default.
        variables.retain(|name, _| self.args.iter().any(|a| &a.name == name));
        let given: Vec<&str> = variables.keys().map(String::as_str).collect();
        let text = operation_text(self, &given, select.as_deref())
            .map_err(|e| ToolError::new(INVALID_TOOL_ARGUMENTS, e.0))?;
        Ok((text, variables))
    }
}

/// A GraphQL integration as its invoker sees it.
pub struct GraphqlService {
    pub namespace: String,
    pub endpoint: String,
    /// By the tools' slots.
    pub operations: Vec<Operation>,
}

pub struct GraphqlInvoker {
    org_id: String,
    namespace: String,
    endpoint: String,
    operations: Arc<[Operation]>,
    http: Arc<HttpClient>,
    credentials: Arc<dyn CredentialSource>,
}

impl GraphqlInvoker {
    pub fn new(
        org_id: &str,
        service: GraphqlService,
        http: Arc<HttpClient>,
        credentials: Arc<dyn CredentialSource>,
    ) -> Self {
        GraphqlInvoker {
            org_id: org_id.to_string(),
            namespace: service.namespace,
            endpoint: service.endpoint,
            operations: service.operations.into(),
            http,
            credentials,
        }
    }
}

impl ToolInvoker for GraphqlInvoker {
    /// A bad `select` is refused before approval is asked for.
    fn check(&self, entry: &ToolEntry, args: &Value) -> Result<(), ToolError> {
        match self.operations.get(entry.slot) {
            Some(operation) => operation.request(args).map(|_| ()),
            None => Ok(()),
        }
    }

    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let operations = self.operations.clone();
        let slot = call.tool.slot;
        let (org_id, namespace, endpoint) = (
            self.org_id.clone(),
            self.namespace.clone(),
            self.endpoint.clone(),
        );
        let (http, credentials) = (self.http.clone(), self.credentials.clone());
        Box::pin(async move {
            let operation = operations.get(slot).ok_or_else(|| {
                ToolError::new(
                    "tool_not_found",
                    format!("Tool not found: {}", call.tool.path),
                )
            })?;
            let (query, variables) = operation.request(&call.args)?;
            let body = json!({
                "query": query,
                "operationName": operation_name(&operation.field),
                "variables": variables,
            });
            let credential = credentials
                .credential(&org_id, &namespace)
                .await?
                .unwrap_or(Credential::None);
            let connection = Connection::new(&*credentials, &org_id, &namespace, &credential);
            let answer = http
                .send_renewing(&endpoint, &Post(&body), connection, &call.budget)
                .await?;
            answered(&operation.field, answer.data, answer.status, answer.held)
        })
    }
}

/// How much host memory an introspection answer may take once parsed (it
/// is read by the CLI, not inside an execution).
const INTROSPECTION_BUDGET: usize = 1 << 30;

/// The endpoint's schema, asked with the standard introspection query
/// through the guarded client, with `credential` placed as a call's is;
/// the answer as JSON text for [`crate::import`].
pub async fn introspect(
    http: &HttpClient,
    endpoint: &str,
    credential: &Credential,
) -> Result<String, HttpFailure> {
    let body = json!({ "query": crate::introspection::INTROSPECTION_QUERY });
    let budget = executor_catalog::HostBudget::new(INTROSPECTION_BUDGET);
    let answer = http
        .send(
            endpoint,
            post(&body),
            credential,
            placement(credential),
            &budget,
        )
        .await?;
    Ok(answer.data.to_string())
}

/// A call's JSON POST, with the credential as [`placement`] puts it.
struct Post<'a>(&'a Value);

impl BuildRequest for Post<'_> {
    fn build<'a>(
        &'a self,
        credential: &'a Credential,
    ) -> Result<(OutboundRequest, Option<Placement<'a>>), HttpFailure> {
        Ok((post(self.0), placement(credential)))
    }
}

/// A JSON POST to the endpoint itself.
fn post(body: &Value) -> OutboundRequest {
    let mut request = OutboundRequest::new(Method::POST, String::new());
    request
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // Plain JSON: a GraphQL-over-HTTP server then answers a request it
    // could not run with 200 and `errors`, which are kept.
    request
        .headers
        .insert(ACCEPT, HeaderValue::from_static("application/json"));
    request.body = Some(body.to_string().into_bytes());
    request
}

/// GraphQL declares no auth schemes: a bearer token or API key goes as
/// `Authorization: Bearer`, a user and password as Basic.
pub fn placement(credential: &Credential) -> Option<Placement<'_>> {
    match credential {
        Credential::None => None,
        Credential::Basic { username, password } => {
            Some(Placement::Basic(username, password.expose()))
        }
        Credential::ApiKey(secret) | Credential::Bearer(secret) => {
            Some(Placement::Bearer(secret.expose()))
        }
    }
}

/// The root field's value, or the errors with the data that came along.
fn answered(field: &str, mut answer: Value, status: u16, held: Option<HostHold>) -> ToolResult {
    let Some(response) = answer.as_object_mut() else {
        return Err(not_graphql(status));
    };
    let (data, errors) = (response.remove("data"), response.remove("errors"));
    if data.is_none() && errors.is_none() {
        return Err(not_graphql(status));
    }
    let value = match data {
        Some(Value::Object(mut fields)) => fields.remove(field).unwrap_or(Value::Null),
        Some(Value::Null) | None => Value::Null,
        Some(_) => return Err(not_graphql(status)),
    };
    match errors {
        Some(Value::Array(errors)) if !errors.is_empty() => {
            let message = errors
                .first()
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the GraphQL endpoint answered with errors")
                .to_string();
            Err(ToolError::new(GRAPHQL_ERRORS, message)
                .with_details(json!({"errors": errors, "data": value})))
        }
        _ => Ok(success(value, status, held)),
    }
}

fn success(data: Value, status: u16, held: Option<HostHold>) -> ToolSuccess {
    ToolSuccess {
        data,
        http: Some(json!({ "status": status })),
        held: held.map(Arc::new),
    }
}

fn not_graphql(status: u16) -> ToolError {
    ToolError {
        status: Some(status),
        ..ToolError::new(
            UPSTREAM_HTTP_ERROR,
            "the endpoint's answer is not a GraphQL response",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use executor_call::CallContext;
    use executor_catalog::{Catalog, HostBudget};
    use executor_outbound::HttpConfig;
    use executor_store::Principal;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn the_root_fields_value_is_the_result() {
        let ok = answered("user", json!({"data": {"user": {"id": "1"}}}), 200, None).unwrap();
        assert_eq!(ok.data, json!({"id": "1"}));
        let null = answered("user", json!({"data": {"user": null}}), 200, None).unwrap();
        assert_eq!(null.data, Value::Null);
    }

    #[test]
    fn errors_keep_the_partial_data() {
        let answer = json!({
            "errors": [{"message": "no avatar", "path": ["user", "avatar"]}, {"message": "second"}],
            "data": {"user": {"id": "1", "avatar": null}}
        });
        let error = answered("user", answer, 200, None).unwrap_err();
        assert_eq!(error.code, GRAPHQL_ERRORS);
        assert_eq!(error.message, "no avatar");
        let details = error.details.unwrap();
        assert_eq!(details["data"], json!({"id": "1", "avatar": null}));
        assert_eq!(details["errors"].as_array().unwrap().len(), 2);
        let only_errors = answered("user", json!({"errors": [{"message": "bad"}]}), 200, None);
        assert_eq!(
            only_errors.unwrap_err().details.unwrap()["data"],
            Value::Null
        );
    }

    #[test]
    fn an_answer_that_is_not_graphql_says_so() {
        for answer in [json!("text"), json!({"hello": 1}), json!({"data": [1]})] {
            let error = answered("user", answer, 200, None).unwrap_err();
            assert_eq!(error.code, UPSTREAM_HTTP_ERROR);
        }
    }

    #[test]
    fn select_leaves_the_variables_and_only_arguments_become_variables() {
        let operation = Operation {
            operation: OperationKind::Query,
            field: "user".into(),
            args: vec![ArgSpec {
                name: "id".into(),
                ty: "ID!".into(),
            }],
            default_selection: Some("id".into()),
            takes_select: true,
        };
        let (text, variables) = operation
            .request(&json!({"id": "7", "select": "id name"}))
            .unwrap();
        assert_eq!(text, "query User($id: ID!) { user(id: $id) { id name } }");
        assert_eq!(Value::Object(variables), json!({"id": "7"}));
        let bad = operation.request(&json!({"id": "7", "select": "id } mutation X { y"}));
        assert_eq!(bad.unwrap_err().code, INVALID_TOOL_ARGUMENTS);
        let not_text = operation.request(&json!({"id": "7", "select": 3}));
        assert_eq!(not_text.unwrap_err().code, INVALID_TOOL_ARGUMENTS);
    }

    /// A GraphQL endpoint on 127.0.0.1 whose `ping` answers "pong"; counts
    /// the connections made to it.
    async fn local_endpoint() -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // The request ends with its JSON body's closing brace.
                    while !request.ends_with(b"}") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body = r#"{"data":{"ping":"pong"}}"#;
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        (port, connections)
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

    /// `local.ping` called at `endpoint`, on a server that allows the
    /// local network or not.
    async fn call_ping(endpoint: &str, allow_local_network: bool) -> ToolResult {
        let http = HttpClient::new(HttpConfig {
            allow_local_network,
            ..HttpConfig::default()
        })
        .unwrap();
        let service = GraphqlService {
            namespace: "local".into(),
            endpoint: endpoint.to_string(),
            operations: vec![Operation {
                operation: OperationKind::Query,
                field: "ping".into(),
                args: Vec::new(),
                default_selection: None,
                takes_select: false,
            }],
        };
        let invoker = Arc::new(GraphqlInvoker::new(
            "org",
            service,
            Arc::new(http),
            Arc::new(NoCredentials),
        ));
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

    /// Issue 37: an endpoint on the local network is refused by the guard
    /// with the message that names the flag, never as retryable, whether
    /// its URL names a literal IP (refused before sending) or a name that
    /// resolves to one (refused by the resolver); nothing reaches it.
    #[tokio::test]
    async fn issue_37_a_local_endpoint_is_refused_naming_the_flag_and_not_retryable() {
        let (port, connections) = local_endpoint().await;
        for host in ["127.0.0.1", "localhost"] {
            let endpoint = format!("http://{host}:{port}/graphql");
            let error = match call_ping(&endpoint, false).await {
                Ok(success) => panic!("{endpoint}: the call went through: {:?}", success.data),
                Err(error) => error,
            };
            assert_eq!(error.code, UPSTREAM_HTTP_ERROR, "{endpoint}: {error:?}");
            assert_eq!(
                error.message,
                format!(
                    "the request to {host} was refused: the address is on a local network; \
                     the operator can allow it with --allow-local-network"
                ),
                "{endpoint}"
            );
            assert_eq!(error.retryable, Some(false), "{endpoint}");
        }
        assert_eq!(connections.load(Ordering::SeqCst), 0);
    }

    /// With the local network allowed, the same endpoint answers the call.
    #[tokio::test]
    async fn issue_37_a_local_endpoint_answers_when_the_local_network_is_allowed() {
        let (port, connections) = local_endpoint().await;
        for host in ["127.0.0.1", "localhost"] {
            let endpoint = format!("http://{host}:{port}/graphql");
            let answer = call_ping(&endpoint, true).await;
            let success = answer.unwrap_or_else(|error| panic!("{endpoint}: {error:?}"));
            assert_eq!(success.data, json!("pong"));
        }
        assert_eq!(connections.load(Ordering::SeqCst), 2);
    }
}
