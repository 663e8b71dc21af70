//! Built-in tools under `executor.coreTools.*`, so an agent can inspect its
//! own setup: integrations, connections (never their secrets) and policies.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use executor_store::Store;

use executor_catalog::{
    ToolEntry, ToolError, ToolInvocation, ToolInvoker, ToolResult, ToolSchema, ToolSuccess,
};

/// The namespace of the built-in tools.
pub const NAMESPACE: &str = "executor";

struct CoreInvoker {
    store: Arc<dyn Store>,
}

impl ToolInvoker for CoreInvoker {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
        let store = self.store.clone();
        Box::pin(async move {
            let data = match call.tool.name() {
                "coreTools.integrations.list" => {
                    json!({ "integrations": call.catalog.integrations() })
                }
                "coreTools.connections.list" => {
                    connections(store.as_ref(), &call.ctx.principal.org_id).await?
                }
                "coreTools.policies.list" => json!({ "policies": *call.policies }),
                _ => Value::Null,
            };
            Ok(ToolSuccess {
                data,
                http: None,
                held: None,
            })
        })
    }
}

/// The org's connections, without their secrets.
async fn connections(store: &dyn Store, org_id: &str) -> Result<Value, ToolError> {
    let list = store.list_connections(org_id).await.map_err(|_| {
        ToolError::new(
            "upstream_http_error",
            "the connection list is unavailable right now",
        )
    })?;
    let items: Vec<Value> = list
        .iter()
        .map(|c| json!({ "integration": c.namespace, "kind": c.kind }))
        .collect();
    Ok(json!({ "connections": items }))
}

fn list_output(key: &str, item: Value) -> Value {
    json!({
        "type": "object",
        "properties": { key: { "type": "array", "items": item } },
        "required": [key]
    })
}

/// The core tools' catalog entries.
pub fn entries(store: Arc<dyn Store>) -> Vec<ToolEntry> {
    let invoker: Arc<dyn ToolInvoker> = Arc::new(CoreInvoker { store });
    let no_input = json!({ "type": "object", "properties": {}, "additionalProperties": false });
    let entry = |name: &str, description: &str, output: Value| ToolEntry {
        path: format!("{NAMESPACE}.{name}").into(),
        description: Some(description.to_string()),
        input_schema: Some(ToolSchema::from_value(&no_input)),
        output_schema: Some(ToolSchema::from_value(&output)),
        definitions: None,
        requires_approval: false,
        invoker: invoker.clone(),
        slot: 0,
    };
    vec![
        entry(
            "coreTools.integrations.list",
            "List the integrations this org has connected, with how many tools each provides.",
            list_output(
                "integrations",
                json!({ "type": "object", "properties": { "namespace": { "type": "string" }, "toolCount": { "type": "integer" } }, "required": ["namespace", "toolCount"] }),
            ),
        ),
        entry(
            "coreTools.connections.list",
            "List saved connections (the credential of one integration). Never returns the credential itself.",
            list_output(
                "connections",
                json!({ "type": "object", "properties": { "integration": { "type": "string" }, "kind": { "type": "string" } }, "required": ["integration", "kind"] }),
            ),
        ),
        entry(
            "coreTools.policies.list",
            "List the policy rules (pattern → allow, require_approval or block), first match wins.",
            list_output(
                "policies",
                json!({ "type": "object", "properties": { "id": { "type": "string" }, "pattern": { "type": "string" }, "action": { "type": "string", "enum": ["allow", "require_approval", "block"] }, "position": { "type": "integer" } }, "required": ["id", "pattern", "action", "position"] }),
            ),
        ),
    ]
}
