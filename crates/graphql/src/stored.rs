//! The stored form of a GraphQL integration (format [`FORMAT`]): the
//! endpoint, each tool's operation and schemas, and the definitions they
//! share, once. The server loads it without building JSON trees: schemas
//! stay compact text, the definitions one `Arc` for all the tools.

use std::collections::HashMap;
use std::sync::Arc;

use executor_catalog::{
    Definitions, NewTool, RouteHint, SchemaInterner, SchemaText, ToolEntry, ToolInvoker,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::import::ImportedGraphql;
use crate::invoker::GraphqlService;
use crate::tools::{GraphqlTool, OperationKind};

/// This release's stored format; written first in the document.
pub const FORMAT: u32 = 1;

/// A GraphQL integration as `integrations add` stores it.
#[derive(Debug, Serialize)]
pub struct StoredGraphqlRef<'a> {
    pub format: u32,
    pub namespace: &'a str,
    pub endpoint: &'a str,
    pub tools: &'a [GraphqlTool],
    pub definitions: &'a Map<String, Value>,
}

/// The stored text of an import.
pub fn store(imported: &ImportedGraphql, namespace: &str, endpoint: &str) -> String {
    let stored = StoredGraphqlRef {
        format: FORMAT,
        namespace,
        endpoint,
        tools: &imported.tools,
        definitions: &imported.definitions,
    };
    // Strings and JSON values always serialise.
    serde_json::to_string(&stored).unwrap_or_default()
}

/// A stored integration, loaded: schemas as compact text.
#[derive(Deserialize)]
pub struct StoredGraphql {
    pub format: u32,
    pub namespace: String,
    pub endpoint: String,
    pub tools: Vec<StoredTool>,
    #[serde(default)]
    pub definitions: HashMap<Box<str>, SchemaText>,
}

/// One stored tool, its schemas as text.
#[derive(Deserialize)]
pub struct StoredTool {
    pub name: String,
    pub description: Option<String>,
    pub operation: OperationKind,
    pub field: String,
    pub args: Vec<crate::tools::ArgSpec>,
    pub default_selection: Option<String>,
    pub takes_select: bool,
    pub input_schema: SchemaText,
    pub output_schema: SchemaText,
    pub requires_approval: bool,
}

/// The format a stored document was written in (0 when it names none).
pub fn format_of(document: &str) -> u32 {
    executor_catalog::stored_format(document).unwrap_or(0)
}

/// Loads a stored document of this release's format; Err says why not,
/// for `integrations list` and the agent.
pub fn load(document: &str) -> Result<StoredGraphql, String> {
    executor_catalog::load_stored(document, FORMAT)
}

impl StoredGraphql {
    /// The catalog entries of this integration, invoked by the invoker
    /// `invoker` makes of its operations.
    pub fn into_entries(
        self,
        invoker: impl FnOnce(GraphqlService) -> Arc<dyn ToolInvoker>,
    ) -> Vec<NewTool> {
        let definitions = Arc::new(Definitions::new(self.definitions));
        let mut schemas = SchemaInterner::default();
        let mut parts = Vec::with_capacity(self.tools.len());
        let mut operations = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            let route = route_hint(&tool);
            parts.push((
                tool.name,
                tool.description,
                schemas.schema(&tool.input_schema),
                schemas.schema(&tool.output_schema),
                tool.requires_approval,
                route,
            ));
            operations.push(crate::invoker::Operation {
                operation: tool.operation,
                field: tool.field,
                args: tool.args,
                default_selection: tool.default_selection,
                takes_select: tool.takes_select,
            });
        }
        let namespace = self.namespace;
        let invoker = invoker(GraphqlService {
            namespace: namespace.clone(),
            endpoint: self.endpoint,
            operations,
        });
        parts
            .into_iter()
            .enumerate()
            .map(
                |(slot, (name, description, input, output, requires_approval, route))| NewTool {
                    entry: ToolEntry {
                        path: format!("{namespace}.{name}").into(),
                        description,
                        input_schema: Some(input),
                        output_schema: Some(output),
                        definitions: Some(definitions.clone()),
                        requires_approval,
                        invoker: invoker.clone(),
                        slot,
                    },
                    route: Some(route),
                },
            )
            .collect()
    }
}

/// What a root field does, in words search matches: a query reads (`get
/// repository`, or `list` for a field returning a list), a mutation names
/// its own verb (`createIssue`).
fn route_hint(tool: &StoredTool) -> RouteHint {
    let words = match tool.operation {
        OperationKind::Mutation => tool.field.clone(),
        OperationKind::Query => {
            // The output schema of a list starts with its type (tools.rs).
            let shape = tool.output_schema.get();
            let list = shape.starts_with("{\"type\":\"array\"")
                || shape.starts_with("{\"type\":[\"array\"");
            format!("{} {}", if list { "list" } else { "get" }, tool.field)
        }
    };
    RouteHint { words, depth: 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_stores_and_loads_and_other_records_say_why_not() {
        let imported = crate::import("type Query { version: String! }").unwrap();
        let text = store(&imported, "api", "https://example.com/graphql");
        assert_eq!(format_of(&text), FORMAT);
        let loaded = load(&text).unwrap();
        assert_eq!((loaded.namespace.as_str(), loaded.tools.len()), ("api", 1));
        assert!(
            load(r#"{"format":9,"tools":[]}"#)
                .err()
                .unwrap()
                .contains("newer release")
        );
        assert!(
            load(r#"{"format":1,"tools":"#)
                .err()
                .unwrap()
                .contains("cannot be read")
        );
        assert!(load("{}").err().unwrap().contains("cannot be read"));
    }
}
