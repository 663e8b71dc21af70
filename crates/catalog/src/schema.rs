//! Tool schemas as the catalog holds them: compact JSON text, and the
//! definitions an integration's tools share, stored once.
//!
//! A catalog of 35,000 tools cannot afford a JSON tree per schema (a
//! `serde_json::Value` costs several times its text), nor a copy of the
//! definitions per tool (a Microsoft Graph tool reaches most of its
//! document). So a tool's input and output schemas are [`ToolSchema`]s:
//! compact text that refers to `#/$defs/<name>` in its integration's
//! [`Definitions`], whose properties are shared between the tools that
//! have the same one (a large API repeats its paging and filtering
//! parameters on thousands of operations). The readers — validation and
//! `describe` — parse what they reach, when they reach it, into a
//! self-contained document ([`Definitions::compose`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashSet;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A JSON Schema as compact JSON text.
pub type SchemaText = Box<RawValue>;

/// The compact text of a schema built in code (the core tools).
pub fn schema_text(schema: &Value) -> SchemaText {
    // Serialising a `Value` cannot fail: its keys are strings.
    serde_json::value::to_raw_value(schema)
        .unwrap_or_else(|_| RawValue::from_string("{}".into()).unwrap_or_default())
}

/// A tool's input or output schema: the schema without its `properties`,
/// as compact JSON text, and the properties, in order, each name and
/// schema text shared with every tool of the integration that has the same
/// one.
pub struct ToolSchema {
    head: Box<str>,
    properties: Box<[(Arc<str>, Arc<str>)]>,
}

impl ToolSchema {
    /// A schema built in code (the core tools, tests): nothing shared.
    pub fn from_value(schema: &Value) -> ToolSchema {
        SchemaInterner::default().schema(&schema_text(schema))
    }

    /// The schema, parsed. Text that does not parse (it never should: it
    /// was written by serde) reads as `true`, which accepts anything.
    pub fn to_value(&self) -> Value {
        let Ok(mut head) = serde_json::from_str::<Value>(&self.head) else {
            return Value::Bool(true);
        };
        if let (Value::Object(map), false) = (&mut head, self.properties.is_empty()) {
            let properties = self.properties.iter().map(|(name, schema)| {
                let schema = serde_json::from_str(schema).unwrap_or(Value::Bool(true));
                (name.to_string(), schema)
            });
            map.insert("properties".into(), Value::Object(properties.collect()));
        }
        head
    }
}

/// Makes [`ToolSchema`]s that share equal property names and schemas.
/// One per integration load: what it shares lives as long as the tools.
#[derive(Default)]
pub struct SchemaInterner {
    /// Fx, not SipHash: a 22k-tool load hashes every property's text, and
    /// the texts are the operator's own stored record.
    texts: FxHashSet<Arc<str>>,
}

impl SchemaInterner {
    fn share(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.texts.get(text) {
            return shared.clone();
        }
        let shared: Arc<str> = text.into();
        self.texts.insert(shared.clone());
        shared
    }

    /// The schema of compact JSON text. A schema that is not an object with
    /// a `properties` object is kept whole.
    pub fn schema(&mut self, text: &RawValue) -> ToolSchema {
        let whole = || ToolSchema {
            head: text.get().into(),
            properties: Box::new([]),
        };
        let Ok(Members(members)) = serde_json::from_str::<Members<'_>>(text.get()) else {
            return whole();
        };
        let Some(raw) = members
            .iter()
            .find(|(k, _)| k == "properties")
            .map(|(_, v)| *v)
        else {
            return whole();
        };
        let Ok(Members(properties)) = serde_json::from_str::<Members<'_>>(raw.get()) else {
            return whole();
        };
        let head: Vec<(&str, &RawValue)> = members
            .iter()
            .filter(|(k, _)| k != "properties")
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        let Ok(head) = serde_json::to_string(&HeadMembers(&head)) else {
            return whole();
        };
        let properties = properties
            .iter()
            .map(|(name, schema)| (self.share(name), self.share(schema.get())))
            .collect();
        ToolSchema {
            head: head.into(),
            properties,
        }
    }
}

/// The members of a JSON object, in order, values left as text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(member) = map.next_entry::<String, &'a RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor(std::marker::PhantomData))
    }
}

/// Writes members back as an object.
struct HeadMembers<'a>(&'a [(&'a str, &'a RawValue)]);

impl serde::Serialize for HeadMembers<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The schemas one integration's tools refer to as `#/$defs/<name>`.
#[derive(Default)]
pub struct Definitions {
    by_name: HashMap<Box<str>, SchemaText>,
}

/// How much of the definitions one composed document may take.
#[derive(Debug, Clone, Copy)]
pub struct ComposeLimits {
    /// Definitions taken, breadth-first from the root.
    pub definitions: usize,
    /// Schema nodes taken over all definitions (counted as in the
    /// importer: objects, arrays and values alike).
    pub nodes: usize,
}

impl Definitions {
    pub fn new(by_name: HashMap<Box<str>, SchemaText>) -> Self {
        Definitions { by_name }
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// One definition, parsed.
    pub fn get(&self, name: &str) -> Option<Value> {
        serde_json::from_str(self.by_name.get(name)?.get()).ok()
    }

    /// `root` as a self-contained document: the definitions it reaches go
    /// under `$defs`, breadth-first while they fit `limits`, so what is left
    /// out is the far end; a `$ref` to a definition left out (or missing) is
    /// dropped, which only ever loosens the schema. With `input`, an object
    /// does not require its `readOnly` properties (a client never sends
    /// them).
    pub fn compose(&self, root: &Value, limits: ComposeLimits, input: bool) -> Value {
        let mut taken: Map<String, Value> = Map::new();
        let mut seen = HashSet::new();
        let mut queue: VecDeque<String> = VecDeque::new();
        refs_in(root, &mut |name| {
            if seen.insert(name.to_string()) {
                queue.push_back(name.to_string());
            }
        });
        let mut nodes = 0;
        while let Some(name) = queue.pop_front() {
            if taken.len() >= limits.definitions {
                break;
            }
            let Some(schema) = self.get(&name) else {
                continue;
            };
            let weight = node_count(&schema);
            if nodes + weight > limits.nodes {
                continue;
            }
            nodes += weight;
            refs_in(&schema, &mut |next| {
                if seen.insert(next.to_string()) {
                    queue.push_back(next.to_string());
                }
            });
            taken.insert(name, schema);
        }
        let fix = Fixer {
            kept: &taken,
            input,
        };
        let mut document = fix.schema(root);
        if !taken.is_empty() {
            let defs: Map<String, Value> = taken
                .iter()
                .map(|(k, v)| (k.clone(), fix.schema(v)))
                .collect();
            if let Value::Object(map) = &mut document {
                map.insert("$defs".into(), Value::Object(defs));
            } else {
                // A boolean root has nothing that refers to definitions.
            }
        }
        document
    }
}

/// The definition a `$ref` names, when it points into `#/$defs`.
fn def_name(reference: &Value) -> Option<&str> {
    reference.as_str()?.strip_prefix("#/$defs/")
}

/// Calls `found` with every definition name `schema` refers to.
fn refs_in(schema: &Value, found: &mut dyn FnMut(&str)) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match key.as_str() {
                    "$ref" => def_name(value).into_iter().for_each(&mut *found),
                    k if DATA.contains(&k) => {}
                    k if SCHEMA_MAPS.contains(&k) => {
                        let members = value.as_object().into_iter().flat_map(|m| m.values());
                        members.for_each(|member| refs_in(member, found));
                    }
                    _ => refs_in(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs_in(v, found)),
        _ => {}
    }
}

/// Keywords whose value is data, not a schema.
const DATA: &[&str] = &["enum", "const", "default", "examples"];
/// Keywords whose value maps names (which may be anything, `$ref` too) to
/// schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
];

/// The JSON nodes of a value (objects, arrays and values alike).
pub fn node_count(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(node_count).sum::<usize>(),
        Value::Array(items) => 1 + items.iter().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

/// Copies a schema, dropping references to definitions not taken and, for
/// input, `readOnly` names from `required`.
struct Fixer<'a> {
    kept: &'a Map<String, Value>,
    input: bool,
}

impl Fixer<'_> {
    fn schema(&self, value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, v) in map {
                    match key.as_str() {
                        "$ref" if !def_name(v).is_some_and(|n| self.kept.contains_key(n)) => {}
                        "required" if self.input => {
                            out.insert(key.clone(), writable_required(map, v));
                        }
                        k if DATA.contains(&k) => {
                            out.insert(key.clone(), v.clone());
                        }
                        k if SCHEMA_MAPS.contains(&k) && v.is_object() => {
                            let members = v.as_object().into_iter().flatten();
                            let fixed = members.map(|(n, m)| (n.clone(), self.schema(m)));
                            out.insert(key.clone(), Value::Object(fixed.collect()));
                        }
                        _ => {
                            out.insert(key.clone(), self.schema(v));
                        }
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.schema(v)).collect()),
            other => other.clone(),
        }
    }
}

/// `required` without the properties marked `readOnly`, which a client
/// never sends (JSON Schema's `readOnly`; OpenAPI's rule for requests).
pub fn writable_required(schema: &Map<String, Value>, required: &Value) -> Value {
    let properties = schema.get("properties");
    let read_only = |name: &str| {
        properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("readOnly"))
            == Some(&Value::Bool(true))
    };
    let names = required.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        names
            .iter()
            .filter(|n| !n.as_str().is_some_and(read_only))
            .cloned()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs(value: Value) -> Definitions {
        let Value::Object(map) = value else {
            return Definitions::default();
        };
        Definitions::new(
            map.iter()
                .map(|(k, v)| (k.as_str().into(), schema_text(v)))
                .collect(),
        )
    }

    const WIDE: ComposeLimits = ComposeLimits {
        definitions: 100,
        nodes: 10_000,
    };

    #[test]
    fn composes_the_closure_of_a_root() {
        let d = defs(json!({
            "Pet": {"type": "object", "properties": {"owner": {"$ref": "#/$defs/User"}}},
            "User": {"type": "object", "properties": {"pets": {"type": "array", "items": {"$ref": "#/$defs/Pet"}}}},
            "Unrelated": {"type": "string"}
        }));
        let doc = d.compose(&json!({"$ref": "#/$defs/Pet"}), WIDE, false);
        let names: Vec<&String> = doc["$defs"]
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(names, ["Pet", "User"]);
        assert_eq!(doc["$ref"], "#/$defs/Pet");
    }

    #[test]
    fn what_does_not_fit_is_dropped_far_end_first() {
        let d = defs(json!({
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}}}
        }));
        let limits = ComposeLimits {
            definitions: 100,
            nodes: 5,
        };
        let doc = d.compose(&json!({"$ref": "#/$defs/A"}), limits, false);
        assert_eq!(
            doc,
            json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"b": {}}}}})
        );
        let none = ComposeLimits {
            definitions: 0,
            nodes: 0,
        };
        assert_eq!(
            d.compose(
                &json!({"$ref": "#/$defs/A", "description": "d"}),
                none,
                false
            ),
            json!({"description": "d"})
        );
        assert_eq!(
            d.compose(&json!({"$ref": "#/$defs/Missing"}), WIDE, false),
            json!({})
        );
    }

    #[test]
    fn input_documents_do_not_require_read_only_properties() {
        let d = defs(json!({"Pet": {
            "type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer", "readOnly": true}, "name": {"type": "string"}}
        }}));
        let root = json!({"$ref": "#/$defs/Pet"});
        assert_eq!(
            d.compose(&root, WIDE, true)["$defs"]["Pet"]["required"],
            json!(["name"])
        );
        assert_eq!(
            d.compose(&root, WIDE, false)["$defs"]["Pet"]["required"],
            json!(["id", "name"])
        );
    }

    #[test]
    fn tool_schemas_share_equal_properties_and_read_back_whole() {
        let mut interner = SchemaInterner::default();
        let a = json!({"type": "object", "properties": {"id": {"type": "string"}, "$top": {"type": "integer"}},
                       "required": ["id"], "additionalProperties": false});
        let b = json!({"type": "object", "properties": {"$top": {"type": "integer"}, "name": {"type": "string"}}});
        let (sa, sb) = (
            interner.schema(&schema_text(&a)),
            interner.schema(&schema_text(&b)),
        );
        assert_eq!(sa.to_value(), a);
        assert_eq!(sb.to_value(), b);
        let top = |s: &ToolSchema| {
            s.properties
                .iter()
                .find(|(n, _)| &**n == "$top")
                .map(|(_, t)| t.clone())
        };
        assert!(Arc::ptr_eq(&top(&sa).unwrap(), &top(&sb).unwrap()));
        let order: Vec<String> = sb.to_value()["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(order, ["$top", "name"]);
        // Not an object with properties: kept whole.
        for other in [
            json!(true),
            json!({"$ref": "#/$defs/X"}),
            json!({"properties": 3}),
        ] {
            assert_eq!(ToolSchema::from_value(&other).to_value(), other);
        }
    }

    #[test]
    fn enum_values_and_property_names_that_look_like_refs_are_kept() {
        let d = defs(json!({}));
        let root =
            json!({"enum": [{"$ref": "#/$defs/X"}], "properties": {"$ref": {"type": "string"}}});
        assert_eq!(d.compose(&root, WIDE, false), root);
    }
}
