//! Runs an OpenAPI integration's tools: looks the operation up, resolves
//! the connection's credential in host code at call time, and sends the
//! request through the shared HTTP client (with its SSRF guard).

use std::sync::Arc;

use executor_catalog::{
    ToolEntry, ToolError, ToolInvocation, ToolInvoker, ToolResult, ToolSuccess,
};
use executor_store::Store;
use executor_store::secrets::{self, SecretKey, SecretRef};
use futures::future::BoxFuture;
use serde_json::json;

use crate::AuthMethod;
use crate::HttpOperation;
use crate::catalog_source::OpenApiService;
use crate::http::{Credential, HttpFailure, HttpInvoker};

/// Where credentials come from: the org's connections in the store,
/// unsealed with the data dir's key.
pub struct Credentials {
    pub store: Arc<dyn Store>,
    pub key: Option<Arc<SecretKey>>,
}

impl Credentials {
    /// The credential for `namespace`, or None when no connection is set.
    async fn for_integration(
        &self,
        org_id: &str,
        namespace: &str,
    ) -> Result<Option<Credential>, ToolError> {
        let unavailable = || {
            ToolError::new(
                "connection_missing",
                format!("the connection of {namespace} could not be read"),
            )
        };
        let connection = self
            .store
            .get_connection(org_id, namespace)
            .await
            .map_err(|_| unavailable())?;
        let Some(connection) = connection else {
            return Ok(None);
        };
        let reference = SecretRef::parse(&connection.secret).map_err(|_| unavailable())?;
        let key = self.key.as_deref().ok_or_else(unavailable)?;
        let secret = secrets::resolve(key, &reference, &secrets::connection_aad(org_id, namespace))
            .map_err(|e| {
                // The error names a missing variable or a bad seal, never a value.
                ToolError::new(
                    "connection_missing",
                    format!("the credential of {namespace} cannot be used: {e}"),
                )
            })?;
        // The resolved secret moves into the credential, never copied.
        Ok(Some(match connection.kind.as_str() {
            "basic" => Credential::Basic {
                username: connection.username.unwrap_or_default(),
                password: secret,
            },
            "bearer" => Credential::Bearer(secret),
            _ => Credential::ApiKey(secret),
        }))
    }
}

pub struct OpenApiInvoker {
    org_id: String,
    namespace: String,
    base_url: Option<String>,
    auth_methods: Arc<Vec<AuthMethod>>,
    /// By the tools' slots.
    tools: Arc<[HttpOperation]>,
    http: Arc<HttpInvoker>,
    credentials: Arc<Credentials>,
}

impl OpenApiInvoker {
    pub fn new(
        org_id: &str,
        service: OpenApiService,
        http: Arc<HttpInvoker>,
        credentials: Arc<Credentials>,
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
            Some(tool) => crate::http::check_args(tool, args).map_err(tool_error),
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
            let credential = match credentials.for_integration(&org_id, &namespace).await? {
                Some(c) => c,
                None if needs_credential(tool) => {
                    return Err(ToolError::new(
                        "connection_missing",
                        format!(
                            "{namespace} needs a credential: executor connections set {namespace} --api-key … (or --bearer, --basic)"
                        ),
                    ));
                }
                None => Credential::None,
            };
            match http
                .invoke_within(&base, tool, &auth, &credential, &call.args, &call.budget)
                .await
            {
                Ok(ok) => Ok(ToolSuccess {
                    data: ok.data,
                    http: Some(json!({ "status": ok.status, "headers": ok.headers })),
                    held: ok.held.map(Arc::new),
                }),
                Err(failure) => Err(tool_error(failure)),
            }
        })
    }
}

/// Whether the operation declares security that a missing connection
/// cannot satisfy. No `security` anywhere means no requirement (OpenAPI's
/// rule), even when schemes are declared; a connection, if set, is still
/// sent for such operations, since documents often forget `security`.
fn needs_credential(tool: &HttpOperation) -> bool {
    tool.security.as_ref().is_some_and(|s| !s.is_empty())
}

fn tool_error(f: HttpFailure) -> ToolError {
    ToolError {
        code: f.code,
        message: f.message,
        status: f.status,
        details: f.details,
        retryable: f.retryable,
    }
}
