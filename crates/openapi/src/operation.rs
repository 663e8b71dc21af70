//! Operations → tools: walks `paths`, and for each operation puts together
//! its name, parameters, body, flat input schema and output schema.

use serde_json::{Map, Value, json};

use crate::context::{Context, Operation};
use crate::media::{self, BodyShape};
use crate::model::{ImportOptions, OperationTool, ParamSpec, SpecVersion};
use crate::naming::{self, Names};
use crate::parameters::{self, Split};
use crate::schema::{DocBuilder, Schemas};
use crate::text::bounded;
use crate::warnings::Warnings;
use crate::{pointer, servers};

/// The path-item keys that are operations.
const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];
/// Longest tool description, in characters.
const MAX_DESCRIPTION: usize = 2_000;
/// The most one tool root (input or output schema, without the shared
/// definitions it refers to) may weigh, in schema nodes (see `schema.rs`):
/// about what `tools.describe.tool` can render anyway.
const MAX_DOC_NODES: usize = 10_000;
/// What all input roots of one import may weigh together, and all output
/// roots: per-root budgets shrink as operations grow in number, so that
/// 20k operations that each inline a large parameter schema still fit in
/// memory. Definitions are not counted here: they are stored once.
/// Inputs get more: they are validated.
const TOTAL_INPUT_NODES: usize = 8_000_000;
const TOTAL_OUTPUT_NODES: usize = 4_000_000;
/// Floors, so that every tool keeps a usable shape however many there are.
const MIN_INPUT_NODES: usize = 300;
const MIN_OUTPUT_NODES: usize = 100;

/// Every operation of the document as a tool, in document order, and the
/// definitions their schemas share.
pub(crate) fn tools(
    doc: &Value,
    version: SpecVersion,
    options: &ImportOptions,
    base_url: Option<&str>,
    warnings: &mut Warnings,
    progress: &mut dyn FnMut(usize, usize),
) -> (Vec<OperationTool>, Map<String, Value>) {
    let operations = collect(doc, warnings);
    let mut shaper = Shaper {
        ctx: Context {
            doc,
            version,
            schemas: Schemas::new(doc),
            warnings,
        },
        options,
        base_url,
        names: Names::default(),
        input_budget: doc_budget(TOTAL_INPUT_NODES, operations.len(), MIN_INPUT_NODES),
        output_budget: doc_budget(TOTAL_OUTPUT_NODES, operations.len(), MIN_OUTPUT_NODES),
    };
    let total = operations.len();
    let mut tools = Vec::with_capacity(total);
    for (done, operation) in operations.iter().enumerate() {
        tools.push(shaper.tool(operation));
        progress(done + 1, total);
    }
    let Context {
        schemas, warnings, ..
    } = shaper.ctx;
    (tools, schemas.definitions(warnings))
}

fn doc_budget(total: usize, operations: usize, min: usize) -> usize {
    (total / operations.max(1)).clamp(min, MAX_DOC_NODES)
}

/// The operations under `paths`, path items' `$ref`s followed.
fn collect<'a>(doc: &'a Value, warnings: &mut Warnings) -> Vec<Operation<'a>> {
    let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
        warnings.push("the document has no paths");
        return Vec::new();
    };
    let mut operations = Vec::new();
    for (path, item) in paths {
        let item = match pointer::follow(doc, item) {
            Ok(Value::Object(item)) => item,
            Ok(_) => {
                warnings.push(format!("path {path}: not an object; skipped"));
                continue;
            }
            Err(e) => {
                warnings.push(format!("path {path}: {e}; skipped"));
                continue;
            }
        };
        let path = if path.starts_with('/') {
            path.clone()
        } else {
            format!("/{path}")
        };
        for (key, op) in item {
            let method = key.to_ascii_lowercase();
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            match op {
                Value::Object(op) => operations.push(Operation {
                    path: path.clone(),
                    method,
                    op,
                    item,
                }),
                _ => warnings.push(format!(
                    "{} {path}: not an object; skipped",
                    method.to_ascii_uppercase()
                )),
            }
        }
    }
    operations
}

struct Shaper<'a, 'w> {
    ctx: Context<'a, 'w>,
    options: &'w ImportOptions,
    base_url: Option<&'w str>,
    names: Names,
    /// What each tool's input and output document may weigh.
    input_budget: usize,
    output_budget: usize,
}

impl<'a> Shaper<'a, '_> {
    fn tool(&mut self, operation: &Operation<'a>) -> OperationTool {
        let label = operation.label();
        let split = parameters::split(self.ctx.doc, operation, &label, self.ctx.warnings);
        let mut input = DocBuilder::new(self.input_budget);
        let body = media::body(&mut self.ctx, operation, &split, &mut input, &label);
        let (parameters, input_root) = self.input_root(&split, body.as_ref(), &mut input);
        let input_schema = self.ctx.finish(input, input_root, true);
        let output_schema = self.output_schema(operation);
        let group = naming::group(operation.op.get("tags"), &operation.path);
        let operation_id = operation.op.get("operationId").and_then(Value::as_str);
        let leaf = naming::leaf(operation_id, &group, &operation.method, &operation.path);
        let method = operation.method.to_ascii_uppercase();
        OperationTool {
            name: self.names.claim(&group, &leaf),
            description: description(operation.op),
            requires_approval: !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS"),
            method,
            path_template: operation.path.clone(),
            base_url: self.operation_server(operation),
            parameters,
            body: body.map(|b| b.spec),
            input_schema,
            output_schema,
            deprecated: is_deprecated(operation.op),
            security: security(operation.op, self.ctx.doc),
        }
    }

    /// The flat input object: a property per parameter, then `body`.
    fn input_root(
        &mut self,
        split: &Split<'a>,
        body: Option<&BodyShape>,
        input: &mut DocBuilder,
    ) -> (Vec<ParamSpec>, Value) {
        let params = parameters::shape(&mut self.ctx, split, input);
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut specs = Vec::with_capacity(params.len());
        for (spec, schema) in params {
            if spec.required {
                required.push(json!(spec.property));
            }
            properties.insert(spec.property.clone(), schema);
            specs.push(spec);
        }
        if let Some(body) = body {
            if body.spec.required {
                required.push(json!(parameters::BODY));
            }
            properties.insert(parameters::BODY.to_string(), body.schema.clone());
        }
        let mut root = Map::new();
        root.insert("type".into(), json!("object"));
        root.insert("properties".into(), Value::Object(properties));
        if !required.is_empty() {
            root.insert("required".into(), Value::Array(required));
        }
        // We own this object's shape, so an unknown property is a mistake
        // worth reporting (a misspelt parameter, a body not under `body`).
        root.insert("additionalProperties".into(), json!(false));
        (specs, Value::Object(root))
    }

    fn output_schema(&mut self, operation: &Operation<'a>) -> Option<Value> {
        let mut output = DocBuilder::new(self.output_budget);
        let root = media::response_schema(&mut self.ctx, operation, &mut output)?;
        Some(self.ctx.finish(output, root, false))
    }

    /// A server on the operation or its path item, unless the operator
    /// chose the base URL or it is the document's own.
    fn operation_server(&mut self, operation: &Operation<'a>) -> Option<String> {
        if self.options.base_url.is_some() || self.ctx.version == SpecVersion::Swagger2 {
            return None;
        }
        let servers = [operation.op.get("servers"), operation.item.get("servers")]
            .into_iter()
            .flatten()
            .find(|s| s.as_array().is_some_and(|s| !s.is_empty()))?;
        let url = servers::server_url(servers, self.options, self.ctx.warnings)?;
        (Some(url.as_str()) != self.base_url).then_some(url)
    }
}

fn is_deprecated(op: &Map<String, Value>) -> bool {
    op.get("deprecated") == Some(&Value::Bool(true))
}

/// The summary, then the description unless it already starts with it.
fn description(op: &Map<String, Value>) -> Option<String> {
    let text = |key: &str| {
        op.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
    };
    let mut parts: Vec<&str> = Vec::new();
    if is_deprecated(op) {
        parts.push("Deprecated.");
    }
    match (text("summary"), text("description")) {
        (Some(summary), Some(description)) if description.starts_with(summary) => {
            parts.push(description);
        }
        (summary, description) => parts.extend(summary.into_iter().chain(description)),
    }
    (!parts.is_empty()).then(|| bounded(&parts.join("\n\n"), MAX_DESCRIPTION))
}

/// The scheme names of the operation's `security` (else the document's),
/// all alternatives together, in order.
fn security(op: &Map<String, Value>, doc: &Value) -> Option<Vec<String>> {
    let requirements = op
        .get("security")
        .filter(|s| s.is_array())
        .or_else(|| doc.get("security").filter(|s| s.is_array()))?;
    let mut names: Vec<String> = Vec::new();
    let alternatives = requirements
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for requirement in alternatives.iter().filter_map(Value::as_object) {
        for name in requirement.keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn descriptions_join_summary_and_description() {
        let d = |v: Value| description(&op(v));
        assert_eq!(d(json!({})), None);
        assert_eq!(
            d(json!({"summary": " List pets "})).as_deref(),
            Some("List pets")
        );
        assert_eq!(
            d(json!({"summary": "List pets", "description": "All of them."})).as_deref(),
            Some("List pets\n\nAll of them.")
        );
        assert_eq!(
            d(json!({"summary": "List pets", "description": "List pets, all of them."})).as_deref(),
            Some("List pets, all of them.")
        );
        assert_eq!(
            d(json!({"description": "Old.", "deprecated": true})).as_deref(),
            Some("Deprecated.\n\nOld.")
        );
        let long = d(json!({"description": "x".repeat(10_000)})).unwrap_or_default();
        assert_eq!(long.chars().count(), MAX_DESCRIPTION);
    }

    #[test]
    fn operation_security_overrides_global() {
        let doc = json!({"security": [{"key": []}, {"oauth": ["read"], "key": []}]});
        assert_eq!(
            security(&op(json!({})), &doc),
            Some(vec!["key".to_string(), "oauth".to_string()])
        );
        assert_eq!(security(&op(json!({"security": []})), &doc), Some(vec![]));
        assert_eq!(
            security(&op(json!({"security": [{"basic": []}]})), &doc),
            Some(vec!["basic".to_string()])
        );
        assert_eq!(security(&op(json!({})), &json!({})), None);
    }

    #[test]
    fn budgets_shrink_with_operation_count() {
        let budget = |n| doc_budget(TOTAL_OUTPUT_NODES, n, MIN_OUTPUT_NODES);
        assert_eq!(budget(0), MAX_DOC_NODES);
        assert_eq!(budget(100), MAX_DOC_NODES);
        assert!(budget(1_000) < MAX_DOC_NODES);
        assert_eq!(budget(1_000_000), MIN_OUTPUT_NODES);
    }
}
