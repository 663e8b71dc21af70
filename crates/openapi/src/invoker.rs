//! Runs an OpenAPI integration's tools: looks the operation up, resolves
//! the connection's credential in host code at call time, and sends the
//! request through the shared HTTP client (with its SSRF guard).

use std::sync::Arc;

use executor_catalog::{
    ToolEntry, ToolError, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess,
};
use executor_outbound::{Connection, Credential, CredentialSource, HttpClient};
use futures::future::BoxFuture;
use serde_json::json;

use crate::model::{AuthMethod, HttpOperation};
use crate::request::{OperationCall, check_args};

/// An OpenAPI integration as its invoker sees it: where to send requests,
/// how to authenticate, and each tool's request shape, by the tool's
/// [`ToolEntry::slot`].
pub struct OpenApiService {
    pub namespace: String,
    pub base_url: Option<String>,
    pub auth_methods: Vec<AuthMethod>,
    pub operations: Vec<HttpOperation>,
}

pub struct OpenApiInvoker {
    org_id: String,
    namespace: String,
    base_url: Option<String>,
    auth_methods: Arc<Vec<AuthMethod>>,
    /// By the tools' slots.
    tools: Arc<[HttpOperation]>,
    http: Arc<HttpClient>,
    credentials: Arc<dyn CredentialSource>,
}

impl OpenApiInvoker {
    pub fn new(
        org_id: &str,
        service: OpenApiService,
        http: Arc<HttpClient>,
        credentials: Arc<dyn CredentialSource>,
    ) -> Self {
        OpenApiInvoker {
            org_id: org_id.to_string(),
            namespace: service.namespace,
            base_url: service.base_url,
            auth_methods: Arc::new(service.auth_methods),
            tools: service.operations.into(),
            http,
            credentials,
        }
    }
}

impl ToolInvoker for OpenApiInvoker {
    fn check(&self, entry: &ToolEntry, args: &serde_json::Value) -> Result<(), ToolError> {
        match self.tools.get(entry.slot) {
            Some(tool) => check_args(tool, args).map_err(ToolError::from),
            None => Ok(()),
        }
    }

    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let tools = self.tools.clone();
        let slot = call.tool.slot;
        let base_url = self.base_url.clone();
        let (org_id, namespace) = (self.org_id.clone(), self.namespace.clone());
        let (auth, http, credentials) = (
            self.auth_methods.clone(),
            self.http.clone(),
            self.credentials.clone(),
        );
        Box::pin(async move {
            let tool = tools.get(slot).ok_or_else(|| {
                ToolError::new(
                    "tool_not_found",
                    format!("Tool not found: {}", call.tool.path),
                )
            })?;
            let base = tool.base_url.clone().or(base_url).ok_or_else(|| {
                ToolError::new(
                    "upstream_http_error",
                    format!(
                        "{namespace} has no base URL: add the integration again with --base-url"
                    ),
                )
            })?;
            let credential = match credentials.credential(&org_id, &namespace).await? {
                Some(c) => c,
                None if needs_credential(tool) => {
                    return Err(missing_connection(&namespace, tool, &auth));
                }
                None => Credential::None,
            };
            let request = OperationCall {
                tool,
                auth: &auth,
                args: &call.args,
            };
            let connection = Connection::new(&*credentials, &org_id, &namespace, &credential);
            let ok = http
                .send_renewing(&base, &request, connection, &call.budget)
                .await?;
            Ok(ToolSuccess {
                data: ok.data,
                http: Some(json!({ "status": ok.status, "headers": ok.headers })),
                held: ok.held.map(Arc::new),
            })
        })
    }
}

/// What a call says when its integration has no connection: the login
/// command when the operation's schemes are all OAuth, else `set`.
fn missing_connection(namespace: &str, tool: &HttpOperation, auth: &[AuthMethod]) -> ToolError {
    let named = tool.security.as_deref().unwrap_or_default();
    let oauth_only = !named.is_empty()
        && named.iter().all(|scheme| {
            auth.iter()
                .any(|m| m.scheme() == scheme && matches!(m, AuthMethod::OAuth2 { .. }))
        });
    let how = if oauth_only {
        format!("an operator can log in with `executor connections login {namespace}`")
    } else {
        format!("executor connections set {namespace} --api-key … (or --bearer, --basic)")
    };
    ToolError::new(
        "connection_missing",
        format!("{namespace} needs a credential: {how}"),
    )
}

/// Whether the operation declares security that a missing connection
/// cannot satisfy. No `security` anywhere means no requirement (OpenAPI's
/// rule), even when schemes are declared; a connection, if set, is still
/// sent for such operations, since documents often forget `security`.
fn needs_credential(tool: &HttpOperation) -> bool {
    tool.security.as_ref().is_some_and(|s| !s.is_empty())
}
