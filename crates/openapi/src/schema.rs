//! JSON Schemas from the document, shaped into tool schemas that share one
//! set of definitions.
//!
//! `$ref`s: every schema that a local `$ref` points at becomes a
//! *definition*, normalised once per import and stored once per
//! integration (the import's `definitions`). A tool schema (input or
//! output) is a root that refers to them as `#/$defs/<name>`; it never
//! carries a copy. So a cyclic schema is simply a definition that refers to
//! itself, and nothing is ever inlined twice: no exponential blow-up, and
//! a 20k-operation API whose every tool reaches most of its schemas costs
//! its schemas once.
//!
//! Size is bounded by counting JSON nodes, a string counting one more node
//! per [`STRING_BYTES_PER_NODE`] bytes so that the count follows memory:
//! each definition is cut at [`MAX_DEF_NODES`], and each tool root at the
//! budget the importer gives it (inline schemas are the tool's own). What
//! is cut accepts anything; schemas only ever get looser this way, never
//! stricter: the upstream API still validates what it receives.
//!
//! Normalisation targets JSON Schema 2020-12, which is what the tool
//! schemas are validated and rendered with: OpenAPI 3.0's `nullable` and
//! boolean `exclusiveMinimum`/`exclusiveMaximum`, Swagger's `x-nullable`
//! and `type: file` are translated; keywords that do not constrain or
//! describe a value (`example`, `xml`, `discriminator`, `x-…`) are dropped.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use crate::pointer;
use crate::warnings::Warnings;

/// Nesting deeper than this becomes `{}`. Real schemas stay far below; it
/// bounds recursion on hostile input.
const MAX_DEPTH: usize = 40;
/// What a string costs on top of its node: one node per this many bytes.
const STRING_BYTES_PER_NODE: usize = 32;
/// Nodes one definition may take once normalised; the rest is cut.
const MAX_DEF_NODES: usize = 10_000;
/// Longest description kept inside a schema, in characters.
const MAX_SCHEMA_DESCRIPTION: usize = 400;
/// Longest title kept, in characters.
const MAX_TITLE: usize = 120;
/// Longest definition name, in bytes (ASCII).
const MAX_DEF_NAME: usize = 100;

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "additionalItems",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of schemas.
const SCHEMA_ARRAY: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keywords copied as they are (after a type check where it matters).
const PLAIN: &[&str] = &[
    "format",
    "enum",
    "const",
    "default",
    "multipleOf",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "dependentRequired",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
];
/// The JSON Schema type names; anything else in `type` is dropped.
const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// A schema normalised for one definition.
struct Normalized {
    schema: Value,
    /// Definitions it refers to directly, in first-use order.
    deps: Vec<usize>,
}

struct Def {
    name: String,
    pointer: String,
    body: Option<Normalized>,
}

/// The definitions of one import, shared by all its tools.
pub(crate) struct Schemas<'a> {
    doc: &'a Value,
    defs: Vec<Def>,
    by_pointer: HashMap<String, usize>,
    by_name: HashMap<String, usize>,
    /// Definitions finished documents refer to, in first-use order.
    reached: Vec<usize>,
    reached_set: HashSet<usize>,
}

/// The state of one tool document (an input or an output schema) while its
/// parts are normalised.
pub(crate) struct DocBuilder {
    deps: Vec<usize>,
    seen: HashSet<usize>,
    nodes: usize,
    budget: usize,
}

impl DocBuilder {
    /// A document that may hold `budget` nodes, definitions included.
    pub(crate) fn new(budget: usize) -> Self {
        DocBuilder {
            deps: Vec::new(),
            seen: HashSet::new(),
            nodes: 0,
            budget,
        }
    }

    fn take(&mut self, n: usize) -> bool {
        if self.nodes + n > self.budget {
            return false;
        }
        self.nodes += n;
        true
    }

    fn depend(&mut self, id: usize) {
        if self.seen.insert(id) {
            self.deps.push(id);
        }
    }
}

impl<'a> Schemas<'a> {
    pub(crate) fn new(doc: &'a Value) -> Self {
        Schemas {
            doc,
            defs: Vec::new(),
            by_pointer: HashMap::new(),
            by_name: HashMap::new(),
            reached: Vec::new(),
            reached_set: HashSet::new(),
        }
    }

    /// Normalises one raw schema into `builder`'s document.
    pub(crate) fn normalize(
        &mut self,
        builder: &mut DocBuilder,
        raw: &'a Value,
        warnings: &mut Warnings,
    ) -> Value {
        Normalizer {
            schemas: self,
            builder,
            warnings,
        }
        .schema(raw, 0)
    }

    /// Finishes one tool document (an input or an output schema): its
    /// `$ref`s point into the import's shared definitions, which
    /// [`Schemas::definitions`] hands out once at the end. In an `input`
    /// document, read-only properties of the root's own objects are not
    /// required (OpenAPI: they are only sent in responses); definitions
    /// stay as the document wrote them and the catalog applies the same
    /// rule when it validates arguments.
    pub(crate) fn finish(&mut self, builder: DocBuilder, root: Value, input: bool) -> Value {
        for id in builder.deps {
            if self.reached_set.insert(id) {
                self.reached.push(id);
            }
        }
        Copier { input }.copy(&root, 0)
    }

    /// Every definition a finished document reaches, directly or through
    /// other definitions, normalised once: the `$defs` all tools share.
    pub(crate) fn definitions(mut self, warnings: &mut Warnings) -> Map<String, Value> {
        let mut queue: VecDeque<usize> = std::mem::take(&mut self.reached).into();
        let mut visited = HashSet::new();
        let mut order = Vec::new();
        while let Some(id) = queue.pop_front() {
            if !visited.insert(id) {
                continue;
            }
            let Some(body) = self.ensure(id, warnings) else {
                continue;
            };
            queue.extend(body.deps.iter().copied());
            order.push(id);
        }
        let mut defs = Map::new();
        for id in order {
            if let Some(def) = self.defs.get_mut(id)
                && let Some(body) = def.body.take()
            {
                defs.insert(std::mem::take(&mut def.name), body.schema);
            }
        }
        defs
    }

    /// The normalised body of a definition, computed on first use.
    fn ensure(&mut self, id: usize, warnings: &mut Warnings) -> Option<&Normalized> {
        let pending = self.defs.get(id)?.body.is_none();
        if pending {
            let pointer = self.defs.get(id)?.pointer.clone();
            let doc = self.doc;
            let raw = doc.pointer(&pointer)?;
            let mut builder = DocBuilder::new(MAX_DEF_NODES);
            let schema = self.normalize(&mut builder, raw, warnings);
            if builder.nodes >= MAX_DEF_NODES {
                warnings.push(format!(
                    "schema {pointer} is larger than {MAX_DEF_NODES} nodes; the rest accepts anything"
                ));
            }
            let def = self.defs.get_mut(id)?;
            def.body = Some(Normalized {
                schema,
                deps: builder.deps,
            });
        }
        self.defs.get(id)?.body.as_ref()
    }

    /// The definition a local `$ref` names, registered on first sight.
    fn definition(&mut self, reference: &str) -> Result<usize, pointer::RefError> {
        let Some(pointer) = pointer::local_pointer(reference) else {
            return Err(pointer::RefError::External(reference.to_string()));
        };
        if let Some(&id) = self.by_pointer.get(&pointer) {
            return Ok(id);
        }
        match self.doc.pointer(&pointer) {
            Some(Value::Object(_) | Value::Bool(_)) => {}
            _ => return Err(pointer::RefError::Missing(reference.to_string())),
        }
        let name = self.unique_name(&definition_name(&pointer));
        let id = self.defs.len();
        self.defs.push(Def {
            name: name.clone(),
            pointer: pointer.clone(),
            body: None,
        });
        self.by_pointer.insert(pointer, id);
        self.by_name.insert(name, id);
        Ok(id)
    }

    fn unique_name(&self, base: &str) -> String {
        if !self.by_name.contains_key(base) {
            return base.to_string();
        }
        (2..)
            .map(|n| format!("{base}_{n}"))
            .find(|name| !self.by_name.contains_key(name))
            .unwrap_or_default()
    }

    fn name_of(&self, id: usize) -> Option<&str> {
        self.defs.get(id).map(|d| d.name.as_str())
    }
}

/// `#/components/schemas/Pet` and `#/definitions/Pet` are `Pet`; any other
/// pointer is named after all its segments. Names keep only characters that
/// need no escaping in a `$ref`.
fn definition_name(pointer: &str) -> String {
    let segments: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let base = match segments.as_slice() {
        [components, schemas, name] if components == "components" && schemas == "schemas" => {
            name.clone()
        }
        [definitions, name] if definitions == "definitions" => name.clone(),
        _ => segments.join("_"),
    };
    let mut name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_DEF_NAME)
        .collect();
    if name.is_empty() {
        name.push_str("schema");
    }
    name
}

/// Translates one raw schema.
struct Normalizer<'s, 'a> {
    schemas: &'s mut Schemas<'a>,
    builder: &'s mut DocBuilder,
    warnings: &'s mut Warnings,
}

impl<'a> Normalizer<'_, 'a> {
    fn schema(&mut self, raw: &'a Value, depth: usize) -> Value {
        if depth > MAX_DEPTH || !self.builder.take(1) {
            return json!({});
        }
        match raw {
            Value::Bool(b) => Value::Bool(*b),
            Value::Object(map) => self.object(map, depth),
            // Not a schema: accept anything rather than fail the tool.
            _ => json!({}),
        }
    }

    fn object(&mut self, map: &'a Map<String, Value>, depth: usize) -> Value {
        let mut out = Map::new();
        for (key, value) in map {
            self.keyword(&mut out, key, value, depth);
        }
        exclusive_bound(&mut out, map, "exclusiveMinimum", "minimum");
        exclusive_bound(&mut out, map, "exclusiveMaximum", "maximum");
        let nullable = ["nullable", "x-nullable"]
            .iter()
            .any(|k| map.get(*k) == Some(&Value::Bool(true)));
        if nullable && self.builder.take(2) {
            return make_nullable(out);
        }
        Value::Object(out)
    }

    fn keyword(&mut self, out: &mut Map<String, Value>, key: &str, value: &'a Value, depth: usize) {
        let key_name = key.to_string();
        match key {
            "$ref" => {
                if let Some(reference) = self.reference(value) {
                    out.insert(key_name, reference);
                }
            }
            // Draft 4 tuples; 2020-12 spells them `prefixItems`.
            "items" if value.is_array() => {
                out.insert("prefixItems".to_string(), self.schema_array(value, depth));
            }
            _ if ONE_SCHEMA.contains(&key) => {
                out.insert(key_name, self.schema(value, depth + 1));
            }
            _ if SCHEMA_ARRAY.contains(&key) && value.is_array() => {
                out.insert(key_name, self.schema_array(value, depth));
            }
            _ if SCHEMA_MAP.contains(&key) => {
                if let Value::Object(members) = value {
                    out.insert(key_name, self.schema_map(members, depth));
                }
            }
            "type" => {
                if let Some(ty) = normalize_type(value) {
                    if value == "file" {
                        out.insert("format".to_string(), json!("binary"));
                    }
                    out.insert(key_name, ty);
                }
            }
            "required" => {
                if let Some(names) = string_array(value)
                    && self.builder.take(weight(&names, usize::MAX))
                {
                    out.insert(key_name, names);
                }
            }
            "description" | "title" => {
                let limit = if key == "title" {
                    MAX_TITLE
                } else {
                    MAX_SCHEMA_DESCRIPTION
                };
                if let Some(text) = value.as_str() {
                    let text = crate::text::bounded(text, limit);
                    if self.builder.take(string_weight(&text)) {
                        out.insert(key_name, json!(text));
                    }
                }
            }
            // Boolean forms are OpenAPI 3.0's; handled once all keys are in.
            "exclusiveMinimum" | "exclusiveMaximum" if !value.is_number() => {}
            "exclusiveMinimum" | "exclusiveMaximum" => {
                out.insert(key_name, value.clone());
            }
            "enum" if !value.is_array() => {}
            _ if PLAIN.contains(&key) => self.plain(out, key_name, value),
            _ => {}
        }
    }

    /// Copies a value keyword when it fits the budget; a keyword that does
    /// not fit is left out entirely (a cut `enum` would reject valid input).
    fn plain(&mut self, out: &mut Map<String, Value>, key: String, value: &Value) {
        let left = self.builder.budget.saturating_sub(self.builder.nodes);
        let nodes = weight(value, left + 1);
        if self.builder.take(nodes) {
            out.insert(key, value.clone());
        }
    }

    fn schema_array(&mut self, value: &'a Value, depth: usize) -> Value {
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        Value::Array(
            items
                .iter()
                .map(|item| self.schema(item, depth + 1))
                .collect(),
        )
    }

    fn schema_map(&mut self, members: &'a Map<String, Value>, depth: usize) -> Value {
        let mut out = Map::new();
        for (name, schema) in members {
            if !self.builder.take(string_weight(name)) {
                break;
            }
            out.insert(name.clone(), self.schema(schema, depth + 1));
        }
        Value::Object(out)
    }

    /// `#/$defs/<name>` for a resolvable local reference; None (the
    /// reference is dropped, so the schema accepts more) otherwise.
    fn reference(&mut self, value: &Value) -> Option<Value> {
        let reference = value.as_str()?;
        match self.schemas.definition(reference) {
            Ok(id) => {
                self.builder.depend(id);
                let name = self.schemas.name_of(id)?;
                Some(json!(format!("#/$defs/{name}")))
            }
            Err(e) => {
                self.warnings.push(format!("{e}; it accepts anything"));
                None
            }
        }
    }
}

/// `type` as 2020-12 accepts it: a known name or a list of them. Swagger's
/// `file` is a binary string.
fn normalize_type(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) if s == "file" => Some(json!("string")),
        Value::String(s) if TYPES.contains(&s.as_str()) => Some(value.clone()),
        Value::Array(names) => {
            let known: Vec<Value> = names
                .iter()
                .filter(|n| n.as_str().is_some_and(|n| TYPES.contains(&n)))
                .cloned()
                .collect();
            (!known.is_empty() && known.len() == names.len()).then_some(Value::Array(known))
        }
        _ => None,
    }
}

fn string_array(value: &Value) -> Option<Value> {
    let items = value.as_array()?;
    items
        .iter()
        .all(Value::is_string)
        .then(|| Value::Array(items.clone()))
}

/// OpenAPI 3.0's `exclusiveMinimum: true` next to `minimum: 5` is 2020-12's
/// `exclusiveMinimum: 5`.
fn exclusive_bound(
    out: &mut Map<String, Value>,
    raw: &Map<String, Value>,
    exclusive: &str,
    bound: &str,
) {
    if raw.get(exclusive) != Some(&Value::Bool(true)) {
        return;
    }
    if let Some(limit) = out.remove(bound) {
        out.insert(exclusive.to_string(), limit);
    }
}

/// Adds `null` to what a schema accepts: through `type`/`enum` when the
/// schema is a plain typed one, else by wrapping it in `anyOf`.
fn make_nullable(mut out: Map<String, Value>) -> Value {
    let composite = ["$ref", "allOf", "anyOf", "oneOf", "not"]
        .iter()
        .any(|k| out.contains_key(*k));
    if composite {
        let description = out.remove("description");
        let mut wrapper = Map::new();
        wrapper.insert(
            "anyOf".to_string(),
            json!([Value::Object(out), {"type": "null"}]),
        );
        if let Some(description) = description {
            wrapper.insert("description".to_string(), description);
        }
        return Value::Object(wrapper);
    }
    match out.get_mut("type") {
        Some(Value::String(ty)) => {
            let ty = std::mem::take(ty);
            out.insert("type".to_string(), json!([ty, "null"]));
        }
        Some(Value::Array(types)) if !types.contains(&json!("null")) => types.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(values)) = out.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    Value::Object(out)
}

/// The nodes a value costs (see [`STRING_BYTES_PER_NODE`]); counting
/// stops once past `limit`.
fn weight(value: &Value, limit: usize) -> usize {
    let mut total = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total += 1;
        if total > limit {
            break;
        }
        match v {
            Value::String(s) => total += s.len() / STRING_BYTES_PER_NODE,
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    total += key.len() / STRING_BYTES_PER_NODE;
                    stack.push(item);
                }
            }
            _ => {}
        }
    }
    total
}

/// A string as a node: one, plus its length.
fn string_weight(text: &str) -> usize {
    1 + text.len() / STRING_BYTES_PER_NODE
}

/// Copies a finished tool document's root, applying the input rule.
struct Copier {
    input: bool,
}

impl Copier {
    fn copy(&self, schema: &Value, depth: usize) -> Value {
        // The normaliser bounds depth; the margin covers the tool-level
        // wrapping around parameter and body schemas.
        let Value::Object(map) = schema else {
            return schema.clone();
        };
        if depth > MAX_DEPTH + 8 {
            return json!({});
        }
        let mut out = Map::new();
        for (key, value) in map {
            let copied = match key.as_str() {
                "required" if self.input => executor_catalog::schema::writable_required(map, value),
                k if ONE_SCHEMA.contains(&k) => self.copy(value, depth + 1),
                k if SCHEMA_ARRAY.contains(&k) => self.copy_array(value, depth),
                k if SCHEMA_MAP.contains(&k) => self.copy_map(value, depth),
                _ => value.clone(),
            };
            out.insert(key.clone(), copied);
        }
        Value::Object(out)
    }

    fn copy_array(&self, value: &Value, depth: usize) -> Value {
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        Value::Array(items.iter().map(|v| self.copy(v, depth + 1)).collect())
    }

    fn copy_map(&self, value: &Value, depth: usize) -> Value {
        let Value::Object(members) = value else {
            return value.clone();
        };
        let copied = members
            .iter()
            .map(|(k, v)| (k.clone(), self.copy(v, depth + 1)))
            .collect();
        Value::Object(copied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normalises `raw` (a pointer into `doc`) as a whole document.
    /// The root, with the shared definitions it reaches under `$defs`.
    fn shape(doc: &Value, raw: &Value, budget: usize, input: bool) -> (Value, Vec<String>) {
        let mut warnings = Warnings::default();
        let mut schemas = Schemas::new(doc);
        let mut builder = DocBuilder::new(budget);
        let root = schemas.normalize(&mut builder, raw, &mut warnings);
        let mut out = schemas.finish(builder, root, input);
        let defs = schemas.definitions(&mut warnings);
        if let (Value::Object(map), false) = (&mut out, defs.is_empty()) {
            map.insert("$defs".into(), Value::Object(defs));
        }
        (out, warnings.finish())
    }

    #[test]
    fn refs_become_shared_defs() {
        let doc = json!({"components": {"schemas": {
            "Pet": {"type": "object", "properties": {"owner": {"$ref": "#/components/schemas/User"},
                                                    "vet": {"$ref": "#/components/schemas/User"}}},
            "User": {"type": "object", "properties": {"name": {"type": "string"}}}
        }}});
        let raw = json!({"type": "array", "items": {"$ref": "#/components/schemas/Pet"}});
        let (out, warnings) = shape(&doc, &raw, 1000, false);
        assert!(warnings.is_empty());
        assert_eq!(
            out,
            json!({
                "type": "array",
                "items": {"$ref": "#/$defs/Pet"},
                "$defs": {
                    "Pet": {"type": "object", "properties": {"owner": {"$ref": "#/$defs/User"},
                                                            "vet": {"$ref": "#/$defs/User"}}},
                    "User": {"type": "object", "properties": {"name": {"type": "string"}}}
                }
            })
        );
    }

    #[test]
    fn cycles_terminate_as_self_referencing_defs() {
        let doc = json!({"definitions": {
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"},
                                                     "tree": {"$ref": "#/definitions/Tree"}}},
            "Tree": {"type": "array", "items": {"$ref": "#/definitions/Node"}},
            "Self": {"$ref": "#/definitions/Self"}
        }});
        let (out, _) = shape(&doc, &json!({"$ref": "#/definitions/Node"}), 1000, false);
        assert_eq!(out["$ref"], "#/$defs/Node");
        assert_eq!(
            out["$defs"]["Node"]["properties"]["next"]["$ref"],
            "#/$defs/Node"
        );
        assert_eq!(out["$defs"]["Tree"]["items"]["$ref"], "#/$defs/Node");
        let (out, _) = shape(&doc, &json!({"$ref": "#/definitions/Self"}), 1000, false);
        assert_eq!(out["$defs"]["Self"], json!({"$ref": "#/$defs/Self"}));
    }

    #[test]
    fn definitions_are_whole_whatever_the_root_budget() {
        let doc = json!({"definitions": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}}},
            "B": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"},
                                                  "z": {"type": "string"}}}
        }});
        let raw = json!({"$ref": "#/definitions/A"});
        let (out, _) = shape(&doc, &raw, 2, false);
        assert_eq!(out["$ref"], "#/$defs/A");
        assert_eq!(out["$defs"]["A"]["properties"]["b"]["$ref"], "#/$defs/B");
        assert_eq!(
            out["$defs"]["B"]["properties"].as_object().map(Map::len),
            Some(3)
        );
        // Nothing fits: the root accepts anything and reaches nothing.
        let (out, _) = shape(&doc, &raw, 0, false);
        assert_eq!(out, json!({}));
    }

    #[test]
    fn oversized_inline_schemas_are_cut() {
        let properties: Map<String, Value> = (0..100)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let raw = json!({"type": "object", "properties": properties});
        let (out, _) = shape(&json!({}), &raw, 50, false);
        let kept = out["properties"].as_object().map_or(0, Map::len);
        assert!(kept > 5 && kept < 50, "{kept}");
    }

    #[test]
    fn unresolvable_refs_accept_anything_and_warn() {
        let raw = json!({"properties": {
            "a": {"$ref": "#/definitions/Missing"},
            "b": {"$ref": "other.yaml#/Pet", "description": "kept"},
            "c": {"$ref": "#/info/title"}
        }});
        let doc = json!({"info": {"title": "x"}});
        let (out, warnings) = shape(&doc, &raw, 100, false);
        assert_eq!(
            out,
            json!({"properties": {"a": {}, "b": {"description": "kept"}, "c": {}}})
        );
        assert_eq!(warnings.len(), 3);
    }

    #[test]
    fn openapi_30_keywords_are_translated() {
        let doc = json!({"definitions": {"Pet": {"type": "object"}}});
        let cases = [
            (
                json!({"type": "string", "nullable": true}),
                json!({"type": ["string", "null"]}),
            ),
            (
                json!({"type": "string", "enum": ["a"], "x-nullable": true}),
                json!({"type": ["string", "null"], "enum": ["a", null]}),
            ),
            (
                json!({"$ref": "#/definitions/Pet", "nullable": true, "description": "d"}),
                json!({"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}], "description": "d"}),
            ),
            (
                json!({"minimum": 1, "exclusiveMinimum": true, "maximum": 5, "exclusiveMaximum": false}),
                json!({"exclusiveMinimum": 1, "maximum": 5}),
            ),
            (
                json!({"exclusiveMaximum": 3}),
                json!({"exclusiveMaximum": 3}),
            ),
            (
                json!({"type": "file"}),
                json!({"type": "string", "format": "binary"}),
            ),
            (
                json!({"items": [{"type": "string"}]}),
                json!({"prefixItems": [{"type": "string"}]}),
            ),
            (
                json!({"type": "int", "required": true, "example": 1, "x-foo": 2, "xml": {}}),
                json!({}),
            ),
        ];
        for (raw, expected) in cases {
            let (mut out, _) = shape(&doc, &raw, 100, false);
            if let Some(map) = out.as_object_mut() {
                map.remove("$defs");
            }
            assert_eq!(out, expected, "{raw}");
        }
    }

    #[test]
    fn long_descriptions_are_bounded() {
        let raw = json!({"description": "x".repeat(5000)});
        let (out, _) = shape(&json!({}), &raw, 100, false);
        let description = out["description"].as_str().unwrap_or_default();
        assert!(description.chars().count() <= MAX_SCHEMA_DESCRIPTION);
    }

    #[test]
    fn input_roots_do_not_require_read_only_properties() {
        let doc = json!({"definitions": {"Pet": {
            "type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer", "readOnly": true}, "name": {"type": "string"}}
        }}});
        let raw = doc["definitions"]["Pet"].clone();
        let (input, _) = shape(&doc, &raw, 100, true);
        assert_eq!(input["required"], json!(["name"]));
        let (output, _) = shape(&doc, &raw, 100, false);
        assert_eq!(output["required"], json!(["id", "name"]));
        // A shared definition keeps its `required`: the catalog applies
        // the rule when it validates input.
        let (input, _) = shape(&doc, &json!({"$ref": "#/definitions/Pet"}), 100, true);
        assert_eq!(input["$defs"]["Pet"]["required"], json!(["id", "name"]));
    }

    #[test]
    fn names_come_from_pointers() {
        assert_eq!(
            definition_name("/components/schemas/simple-user"),
            "simple-user"
        );
        assert_eq!(definition_name("/definitions/List«Pet»"), "List_Pet_");
        assert_eq!(
            definition_name("/paths/~1pets/get/responses/200/schema"),
            "paths__pets_get_responses_200_schema"
        );
        assert_eq!(definition_name(""), "schema");
        let doc = json!({"definitions": {"a b": {}, "a_b": {}}});
        let mut schemas = Schemas::new(&doc);
        let first = schemas.definition("#/definitions/a%20b");
        let second = schemas.definition("#/definitions/a_b");
        assert_eq!(first.ok().and_then(|id| schemas.name_of(id)), Some("a_b"));
        assert_eq!(
            second.ok().and_then(|id| schemas.name_of(id)),
            Some("a_b_2")
        );
    }

    #[test]
    fn hostile_nesting_is_bounded() {
        let mut raw = json!({"type": "string"});
        for _ in 0..100 {
            raw = json!({"type": "object", "properties": {"a": raw}});
        }
        let (out, _) = shape(&json!({}), &raw, 10_000, false);
        let mut depth = 0;
        let mut at = &out;
        while let Some(next) = at.pointer("/properties/a") {
            at = next;
            depth += 1;
        }
        // The innermost level is the `{}` the cut leaves.
        assert!(depth <= MAX_DEPTH + 1, "{depth}");
    }
}
