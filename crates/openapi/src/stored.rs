//! The stored form of an OpenAPI integration, as the server loads it.
//!
//! `integrations add` imports a document once and stores the
//! [`ImportedIntegration`] as JSON, in format [`FORMAT`]: each tool's
//! request shape and schema roots, and the definitions the roots share,
//! once. The server never re-reads the source document: [`load`] reads the
//! stored text without building JSON trees — schemas stay compact text
//! (`RawValue`) and the definitions become one `Arc` all the tools share —
//! so a 22k-tool API is ready in a fraction of a second and costs about its
//! stored size.
//!
//! A record in an older format is upgraded ([`upgrade`]); one in a format
//! this build does not know (written by a newer release) cannot be served,
//! and says so.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use executor_catalog::schema::node_count;
use executor_catalog::{Definitions, NewTool, SchemaInterner, SchemaText, ToolEntry, ToolInvoker};
use rustc_hash::FxHashSet;
use serde::Deserialize;
use serde_json::Value;

use crate::invoker::OpenApiService;
use crate::model::{AuthMethod, BodySpec, FORMAT, HttpOperation, ImportedIntegration, ParamSpec};
use crate::route::route_hint;

/// A stored integration, loaded: schemas as compact text.
#[derive(Deserialize)]
pub struct StoredIntegration {
    pub namespace: String,
    pub base_url: Option<String>,
    #[serde(default)]
    pub auth_methods: Vec<AuthMethod>,
    pub tools: Vec<StoredTool>,
    #[serde(default)]
    pub definitions: HashMap<Box<str>, SchemaText>,
}

/// One stored tool (what [`crate::model::OperationTool`] writes; absent fields
/// take their defaults).
#[derive(Deserialize)]
pub struct StoredTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub method: String,
    pub path_template: String,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub parameters: Vec<ParamSpec>,
    #[serde(default)]
    pub body: Option<BodySpec>,
    pub input_schema: SchemaText,
    #[serde(default)]
    pub output_schema: Option<SchemaText>,
    pub requires_approval: bool,
    #[serde(default)]
    pub security: Option<Vec<String>>,
}

/// Why a stored record cannot be loaded as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// Written in an older format: [`upgrade`] it.
    Older(u32),
    /// Written by a newer release.
    Newer(u32),
    /// Not a stored integration of any format (damaged).
    Damaged(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Older(n) => write!(
                f,
                "stored in format {n}, older than this release's {FORMAT}"
            ),
            LoadError::Newer(n) => write!(
                f,
                "stored in format {n} by a newer release (this one reads format {FORMAT}); run `executor integrations refresh` with this release"
            ),
            LoadError::Damaged(why) => write!(
                f,
                "its stored record cannot be read ({why}); run `executor integrations refresh`"
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// The format a stored document was written in. [`ImportedIntegration`]
/// serialises `format` first; a document without it is format 1.
pub fn format_of(document: &str) -> u32 {
    executor_catalog::stored_format(document).unwrap_or(1)
}

/// Loads a stored document of the current format.
pub fn load(document: &str) -> Result<StoredIntegration, LoadError> {
    match format_of(document) {
        FORMAT => serde_json::from_str(document).map_err(|e| LoadError::Damaged(e.to_string())),
        n if n < FORMAT => Err(LoadError::Older(n)),
        n => Err(LoadError::Newer(n)),
    }
}

/// A stored document of an older format in the current one.
///
/// Format 1 gave every tool schema its own `$defs`: they are gathered into
/// the shared definitions (where copies of one name differ — a copy could
/// be cut to fit its tool — the largest is kept) and the roots keep their
/// `#/$defs/<name>` references.
pub fn upgrade(document: &str) -> Result<String, LoadError> {
    match format_of(document) {
        FORMAT => return Ok(document.to_string()),
        1 => {}
        n => return Err(LoadError::Newer(n)),
    }
    let mut integration: ImportedIntegration =
        serde_json::from_str(document).map_err(|e| LoadError::Damaged(e.to_string()))?;
    let mut definitions: serde_json::Map<String, Value> = serde_json::Map::new();
    let mut gather = |schema: &mut Value| {
        let Some(Value::Object(defs)) = schema.as_object_mut().and_then(|m| m.remove("$defs"))
        else {
            return;
        };
        for (name, def) in defs {
            let larger = definitions
                .get(&name)
                .is_none_or(|kept| node_count(kept) < node_count(&def));
            if larger {
                definitions.insert(name, def);
            }
        }
    };
    for tool in &mut integration.tools {
        gather(&mut tool.input_schema);
        if let Some(output) = &mut tool.output_schema {
            gather(output);
        }
    }
    integration.definitions = definitions;
    integration.format = FORMAT;
    serde_json::to_string(&integration).map_err(|e| LoadError::Damaged(e.to_string()))
}

impl StoredIntegration {
    /// The catalog entries of this integration, invoked by the invoker
    /// `invoker` makes of its request shapes.
    pub fn into_entries(
        self,
        invoker: impl FnOnce(OpenApiService) -> Arc<dyn ToolInvoker>,
    ) -> Vec<NewTool> {
        let definitions = Arc::new(Definitions::new(self.definitions));
        let mut operations = Vec::with_capacity(self.tools.len());
        let mut parts = Vec::with_capacity(self.tools.len());
        // Fx: thousands of tools repeat the same paging parameters.
        let mut shared: FxHashSet<Arc<ParamSpec>> = FxHashSet::default();
        let mut schemas = SchemaInterner::default();
        for tool in self.tools {
            let parameters = tool
                .parameters
                .into_iter()
                .map(|p| match shared.get(&p) {
                    Some(same) => same.clone(),
                    None => {
                        let one = Arc::new(p);
                        shared.insert(one.clone());
                        one
                    }
                })
                .collect();
            let route = route_hint(&tool.method, &tool.path_template, &tool.name);
            let operation = HttpOperation {
                method: tool.method,
                path_template: tool.path_template,
                base_url: tool.base_url,
                parameters,
                body: tool.body,
                security: tool.security,
            };
            operations.push(operation);
            parts.push((
                tool.name,
                tool.description,
                schemas.schema(&tool.input_schema),
                tool.output_schema.map(|o| schemas.schema(&o)),
                tool.requires_approval,
                route,
            ));
        }
        let invoker = invoker(OpenApiService {
            namespace: self.namespace.clone(),
            base_url: self.base_url,
            auth_methods: self.auth_methods,
            operations,
        });
        let namespace = self.namespace;
        parts
            .into_iter()
            .enumerate()
            .map(
                |(slot, (name, description, input, output, requires_approval, route))| NewTool {
                    entry: ToolEntry {
                        path: tool_path(&namespace, &name).into(),
                        description,
                        input_schema: Some(input),
                        output_schema: output,
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

/// `namespace.name`, without the formatting machinery (22k of them).
fn tool_path(namespace: &str, name: &str) -> String {
    let mut path = String::with_capacity(namespace.len() + 1 + name.len());
    path.push_str(namespace);
    path.push('.');
    path.push_str(name);
    path
}

/// The catalog entries of a fresh import, all invoked by `invoker` (for
/// tests and benchmarks), made the way the server makes them: through the
/// stored form.
pub fn tool_entries(
    integration: &ImportedIntegration,
    invoker: Arc<dyn ToolInvoker>,
) -> Result<Vec<NewTool>, LoadError> {
    let text = serde_json::to_string(integration).map_err(|e| LoadError::Damaged(e.to_string()))?;
    Ok(load(&text)?.into_entries(|_| invoker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::import;
    use crate::model::ImportOptions;
    use serde_json::json;

    fn petstore() -> ImportedIntegration {
        let doc = json!({
            "openapi": "3.0.0", "info": {"title": "t", "version": "1"},
            "servers": [{"url": "https://pets.example"}],
            "paths": {"/pets": {
                "get": {"operationId": "listPets", "responses": {"200": {"description": "ok",
                    "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}}}}}},
                "post": {"operationId": "addPet", "requestBody": {"required": true, "content": {"application/json":
                    {"schema": {"$ref": "#/components/schemas/Pet"}}}}, "responses": {"201": {"description": "ok"}}}
            }},
            "components": {"schemas": {
                "Pet": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "owner": {"$ref": "#/components/schemas/User"}}},
                "User": {"type": "object", "properties": {"login": {"type": "string"}}}
            }}
        });
        import(&doc.to_string(), &ImportOptions::new("pets")).unwrap()
    }

    #[test]
    fn the_stored_form_names_its_format_first() {
        let text = serde_json::to_string(&petstore()).unwrap();
        assert!(
            text.starts_with(&format!("{{\"format\":{FORMAT},")),
            "{text}"
        );
        assert_eq!(format_of(&text), FORMAT);
        assert_eq!(format_of("{\"namespace\":\"x\"}"), 1);
        assert_eq!(format_of("{\"format\":17,\"x\":1}"), 17);
    }

    #[test]
    fn definitions_are_stored_once_and_shared_by_every_tool() {
        let text = serde_json::to_string(&petstore()).unwrap();
        assert_eq!(text.matches("\"login\"").count(), 1, "{text}");
        let entries = load(&text).unwrap().into_entries(|_| Arc::new(Nothing));
        assert_eq!(entries.len(), 2);
        let shared = |e: &NewTool| Arc::as_ptr(e.entry.definitions.as_ref().unwrap());
        assert_eq!(shared(&entries[0]), shared(&entries[1]));
        assert_eq!(entries[0].entry.definitions.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn format_1_records_are_upgraded_without_losing_a_schema() {
        // Format 1: the same integration, each tool carrying its `$defs`.
        let current = petstore();
        let mut v1 = serde_json::to_value(&current).unwrap();
        let defs = v1["definitions"].clone();
        let map = v1.as_object_mut().unwrap();
        map.remove("format");
        map.remove("definitions");
        for tool in v1["tools"].as_array_mut().unwrap() {
            tool["input_schema"]["$defs"] = defs.clone();
            if tool["output_schema"].is_object() {
                tool["output_schema"]["$defs"] = defs.clone();
            }
        }
        let v1 = v1.to_string();
        assert_eq!(load(&v1).err(), Some(LoadError::Older(1)));
        let upgraded = upgrade(&v1).unwrap();
        let back: ImportedIntegration = serde_json::from_str(&upgraded).unwrap();
        assert_eq!(back, current);
        assert!(load(&upgraded).is_ok());
    }

    #[test]
    fn newer_and_damaged_records_say_so() {
        assert_eq!(load("{\"format\":99}").err(), Some(LoadError::Newer(99)));
        assert_eq!(upgrade("{\"format\":99}").err(), Some(LoadError::Newer(99)));
        let damaged = format!("{{\"format\":{FORMAT},\"tools\":");
        assert!(matches!(load(&damaged), Err(LoadError::Damaged(_))));
        assert!(matches!(upgrade("not json"), Err(LoadError::Damaged(_))));
        assert!(
            LoadError::Newer(3)
                .to_string()
                .contains("integrations refresh")
        );
    }

    struct Nothing;
    impl ToolInvoker for Nothing {
        fn invoke(
            &self,
            _call: executor_catalog::ToolInvocation,
        ) -> futures::future::BoxFuture<'static, executor_catalog::ToolResult> {
            Box::pin(async { Err(executor_catalog::ToolError::new("x", "x")) })
        }
    }
}
