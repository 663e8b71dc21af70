//! Runs an OpenAPI integration's tools.

use std::collections::HashMap;

use executor_engine::{ToolError, ToolInvocation, ToolInvoker, ToolResult};
use futures::future::BoxFuture;

use crate::{ImportedIntegration, OperationTool};

pub struct OpenApiInvoker {
    base_url: Option<String>,
    tools: HashMap<String, OperationTool>,
}

impl OpenApiInvoker {
    pub fn new(integration: ImportedIntegration) -> Self {
        OpenApiInvoker {
            base_url: integration.base_url,
            tools: integration
                .tools
                .into_iter()
                .map(|t| (t.name.clone(), t))
                .collect(),
        }
    }
}

impl ToolInvoker for OpenApiInvoker {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let known = self.tools.contains_key(&call.tool.name) && self.base_url.is_some();
        let path = call.tool.path.clone();
        Box::pin(async move {
            let reason = if known {
                "calling upstream HTTP APIs is not available on this server yet"
            } else {
                "the integration has no base URL: add it again with --base-url"
            };
            Err(ToolError::new(
                "upstream_http_error",
                format!("{path}: {reason}"),
            ))
        })
    }
}
