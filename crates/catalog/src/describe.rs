//! TypeScript renderings of tool schemas for `tools.describe.tool` (SPEC §6).
//!
//! Schemas come from third-party API descriptions, so nothing here trusts
//! them: any JSON value is accepted, unknown shapes degrade to `unknown`,
//! `$ref`s become named types (which is what makes cycles harmless), and
//! nesting depth, schema nodes visited and output length are all capped.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// TypeScript for one tool: its input and output types and the named types
/// they refer to (`type X = …;` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsRendering {
    pub input: Option<String>,
    pub output: Option<String>,
    pub definitions: Option<String>,
    /// The same definitions by name (`/** doc */` + the type), the shape
    /// `typeScriptDefinitions` has on the wire.
    pub named: Vec<(String, String)>,
}

/// Deeper schemas render as `unknown`; agents rarely need more.
const MAX_DEPTH: usize = 8;
/// Cap on each rendering (input, output, definitions), in bytes.
const MAX_CHARS: usize = 8_000;
/// Schema nodes visited per rendering (input, output, all definitions), so
/// fan-out cannot blow up.
const MAX_NODES: usize = 10_000;
/// Distinct named definitions per [`render`] call.
const MAX_DEFINITIONS: usize = 256;
/// Property descriptions longer than this are cut.
const MAX_DESCRIPTION_CHARS: usize = 160;
/// A top-level object wider than this is spread over several lines.
const INLINE_WIDTH: usize = 80;
const MAX_NAME_LEN: usize = 64;
const TRUNCATED: &str = "/* … */";
/// What the members of one composite may take, leaving room under
/// [`MAX_CHARS`] for its brackets, indentation and the truncation marker.
const PARTS_BUDGET: usize = MAX_CHARS - 100;

/// Renders the input and output schemas; both may point into their own
/// `$defs` (or draft-07 `definitions`), rendered once each.
pub fn render(input_schema: Option<&Value>, output_schema: Option<&Value>) -> TsRendering {
    let mut renderer = Renderer::new([input_schema, output_schema]);
    let input = input_schema.map(|schema| renderer.render_top(schema, INPUT));
    let output = output_schema.map(|schema| renderer.render_top(schema, OUTPUT));
    let (definitions, named) = renderer.render_definitions();
    TsRendering {
        input,
        output,
        definitions,
        named,
    }
}

/// Which document a schema (and so its `$ref`s) belongs to.
type Root = usize;
const INPUT: Root = 0;
const OUTPUT: Root = 1;

/// How tightly a rendered type binds, to know where parentheses are needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Union,
    Intersection,
    Atom,
}

/// A rendered type expression.
#[derive(Debug, Clone)]
struct Ty {
    text: String,
    prec: Prec,
    /// For a union, its members, so nested unions flatten and dedupe.
    alternatives: Vec<String>,
}

impl Ty {
    fn atom(text: impl Into<String>) -> Ty {
        Ty {
            text: text.into(),
            prec: Prec::Atom,
            alternatives: Vec::new(),
        }
    }

    fn unknown() -> Ty {
        Ty::atom("unknown")
    }

    fn never() -> Ty {
        Ty::atom("never")
    }

    fn is(&self, text: &str) -> bool {
        self.text == text
    }

    /// The text, parenthesised when it binds looser than `context` needs.
    fn at_least(&self, context: Prec) -> String {
        if self.prec < context {
            format!("({})", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// Where in the schema tree a rendering happens.
#[derive(Debug, Clone, Copy)]
struct At {
    root: Root,
    depth: usize,
    /// The outermost schema of a rendering, where objects may span lines
    /// and carry property descriptions.
    top: bool,
}

impl At {
    fn child(self) -> At {
        At {
            root: self.root,
            depth: self.depth + 1,
            top: false,
        }
    }
}

/// Parts of a composite type, collected until the output cap is reached.
#[derive(Default)]
struct Parts {
    items: Vec<String>,
    len: usize,
    truncated: bool,
}

impl Parts {
    /// False once the cap is reached: the caller should stop producing.
    fn push(&mut self, item: String) -> bool {
        // Five covers the widest separator: indentation, `;` and newline.
        let cost = item.len() + 5;
        // The first item is always taken: it is already capped itself, and
        // an empty composite would say less than a slightly long one.
        if !self.items.is_empty() && self.len + cost > PARTS_BUDGET {
            self.truncated = true;
            return false;
        }
        self.len += cost;
        self.items.push(item);
        true
    }
}

/// A `$ref` target that got a name.
struct Definition<'a> {
    name: String,
    schema: &'a Value,
    root: Root,
}

struct Renderer<'a> {
    roots: [Option<&'a Value>; 2],
    definitions: Vec<Definition<'a>>,
    /// (document, `$ref` string) → index in `definitions`.
    by_ref: HashMap<(Root, String), usize>,
    /// Name → index in `definitions`.
    by_name: HashMap<String, usize>,
    nodes_left: usize,
}

impl<'a> Renderer<'a> {
    fn new(roots: [Option<&'a Value>; 2]) -> Renderer<'a> {
        Renderer {
            roots,
            definitions: Vec::new(),
            by_ref: HashMap::new(),
            by_name: HashMap::new(),
            nodes_left: MAX_NODES,
        }
    }

    fn render_top(&mut self, schema: &'a Value, root: Root) -> String {
        self.nodes_left = MAX_NODES;
        let at = At {
            root,
            depth: 0,
            top: true,
        };
        cap(self.schema(schema, at).text)
    }

    /// Renders every named definition, including those that definitions
    /// themselves refer to; each name is rendered once.
    fn render_definitions(&mut self) -> (Option<String>, Vec<(String, String)>) {
        self.nodes_left = MAX_NODES;
        let mut lines: Vec<String> = Vec::new();
        let mut named = Vec::new();
        let mut len = 0;
        let mut next = 0;
        while let Some(definition) = self.definitions.get(next) {
            let (name, schema, root) =
                (definition.name.clone(), definition.schema, definition.root);
            next += 1;
            let (comment, body) = self.definition_parts(&name, schema, root);
            let line = format!("{comment}type {name} = {body};");
            if len + line.len() > MAX_CHARS {
                lines.push(TRUNCATED.to_string());
                break;
            }
            len += line.len() + 1;
            lines.push(line);
            named.push((name, format!("{comment}{body}")));
        }
        ((!lines.is_empty()).then(|| lines.join("\n")), named)
    }

    /// A definition's `/** doc */` line (or nothing) and its type.
    fn definition_parts(&mut self, name: &str, schema: &'a Value, root: Root) -> (String, String) {
        let at = At {
            root,
            depth: 0,
            top: true,
        };
        let mut body = self.schema(schema, at).text;
        // `type A = A;` is not valid TypeScript; an alias of itself says nothing.
        if body == name {
            body = "unknown".to_string();
        }
        let comment = description_of(schema)
            .map(|text| format!("/** {text} */\n"))
            .unwrap_or_default();
        (comment, body)
    }

    /// Once the node budget is spent, composites stop adding members (and
    /// say so) rather than fill up with `unknown`, which would swallow a
    /// whole union.
    fn out_of_nodes(&self) -> bool {
        self.nodes_left == 0
    }

    /// Counts one visited node; false once the budget is spent.
    fn take_node(&mut self) -> bool {
        if self.nodes_left == 0 {
            return false;
        }
        self.nodes_left -= 1;
        true
    }

    fn schema(&mut self, schema: &'a Value, at: At) -> Ty {
        if at.depth > MAX_DEPTH || !self.take_node() {
            return Ty::unknown();
        }
        match schema {
            Value::Bool(false) => Ty::never(),
            Value::Object(map) => self.object_schema(map, at),
            // `true`, and anything that is not a schema at all.
            _ => Ty::unknown(),
        }
    }

    fn object_schema(&mut self, map: &'a Map<String, Value>, at: At) -> Ty {
        // A `$ref` names the type; its siblings (descriptions, mostly) add
        // nothing to it. Importers write 2020-12: a nullable reference is
        // `anyOf: [{$ref}, {type: null}]`, which `constrained` renders.
        match map.get("$ref") {
            Some(reference) => self.reference(reference, at.root),
            None => self.constrained(map, at),
        }
    }

    /// The type's own shape intersected with its `allOf`, `oneOf` and
    /// `anyOf` parts.
    fn constrained(&mut self, map: &'a Map<String, Value>, at: At) -> Ty {
        let mut parts = Members::default();
        if let Some(shape) = self.shape(map, at) {
            parts.push(shape);
        }
        let all = map.get("allOf").and_then(Value::as_array);
        for schema in all.into_iter().flatten() {
            if self.out_of_nodes() {
                parts.truncated = true;
                break;
            }
            if !parts.push(self.schema(schema, at.child())) {
                break;
            }
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(alternatives) = map.get(key).and_then(Value::as_array) {
                let alternatives = self.alternatives(alternatives, at);
                parts.push(alternatives);
            }
        }
        parts.intersection()
    }

    fn alternatives(&mut self, schemas: &'a [Value], at: At) -> Ty {
        let mut members = Members::default();
        for schema in schemas {
            if self.out_of_nodes() {
                members.truncated = true;
                break;
            }
            if !members.push(self.schema(schema, at.child())) {
                break;
            }
        }
        members.union()
    }

    /// What `const`, `enum` or `type` (given or implied) say; None when the
    /// schema does not constrain the shape itself.
    fn shape(&mut self, map: &'a Map<String, Value>, at: At) -> Option<Ty> {
        if let Some(value) = map.get("const") {
            return Some(self.literal(value, at.depth));
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array) {
            return Some(self.literal_union(values, at.depth));
        }
        match map.get("type") {
            Some(Value::String(name)) => Some(self.typed(name, map, at)),
            Some(Value::Array(names)) => {
                let mut members = Members::default();
                for name in names.iter().filter_map(Value::as_str) {
                    if self.out_of_nodes() {
                        members.truncated = true;
                        break;
                    }
                    if !members.push(self.typed(name, map, at)) {
                        break;
                    }
                }
                Some(members.union())
            }
            _ => implied_type(map).map(|name| self.typed(name, map, at)),
        }
    }

    fn typed(&mut self, name: &str, map: &'a Map<String, Value>, at: At) -> Ty {
        match name {
            "string" => Ty::atom("string"),
            "number" | "integer" => Ty::atom("number"),
            "boolean" => Ty::atom("boolean"),
            "null" => Ty::atom("null"),
            "array" => self.array(map, at),
            "object" => self.object(map, at),
            _ => Ty::unknown(),
        }
    }

    fn array(&mut self, map: &'a Map<String, Value>, at: At) -> Ty {
        // 2020-12 spells tuples `prefixItems` (+ `items` for the rest);
        // earlier drafts use an array `items` (+ `additionalItems`).
        if let Some(prefix) = map.get("prefixItems").and_then(Value::as_array) {
            return self.tuple(prefix, map.get("items"), at);
        }
        match map.get("items") {
            Some(Value::Array(prefix)) => self.tuple(prefix, map.get("additionalItems"), at),
            Some(items) => {
                let element = self.schema(items, at.child());
                Ty::atom(format!("{}[]", element.at_least(Prec::Atom)))
            }
            None => Ty::atom("unknown[]"),
        }
    }

    /// A tuple is shown closed unless a rest schema is given: an open tail
    /// (`...unknown[]`) on every tuple would mostly be noise.
    fn tuple(&mut self, prefix: &'a [Value], rest: Option<&'a Value>, at: At) -> Ty {
        let mut parts = Parts::default();
        for schema in prefix {
            if self.out_of_nodes() {
                parts.truncated = true;
                break;
            }
            let element = self.schema(schema, at.child());
            if !parts.push(element.text) {
                break;
            }
        }
        let rest = match rest {
            None | Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.schema(schema, at.child())),
        };
        if let Some(rest) = rest.filter(|_| !parts.truncated) {
            parts.push(format!("...{}[]", rest.at_least(Prec::Atom)));
        }
        let mut text = parts.items.join(", ");
        if parts.truncated {
            text.push(' ');
            text.push_str(TRUNCATED);
        }
        Ty::atom(format!("[{text}]"))
    }

    fn object(&mut self, map: &'a Map<String, Value>, at: At) -> Ty {
        let index = self.index_type(map, at);
        let properties = map.get("properties").and_then(Value::as_object);
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            let value = index.map_or("unknown".to_string(), |ty| ty.text);
            return Ty::atom(format!("Record<string, {value}>"));
        };
        let required = required_names(map);
        let mut members = Parts::default();
        let mut described = false;
        for (name, schema) in properties {
            if self.out_of_nodes() {
                members.truncated = true;
                break;
            }
            let is_required = required.contains(&name.as_str());
            let (member, has_comment) = self.property(name, schema, is_required, at);
            described |= has_comment;
            if !members.push(member) {
                break;
            }
        }
        if let Some(index) = index.filter(|_| !members.truncated) {
            members.push(format!("[key: string]: {}", index.text));
        }
        if members.truncated {
            members.items.push(TRUNCATED.to_string());
        }
        Ty::atom(object_literal(&members.items, at.top, described))
    }

    /// One `name?: T` member, with its description as a comment at the top
    /// level; also says whether a comment was added.
    fn property(
        &mut self,
        name: &str,
        schema: &'a Value,
        required: bool,
        at: At,
    ) -> (String, bool) {
        let ty = self.schema(schema, at.child());
        let optional = if required { "" } else { "?" };
        let member = format!("{}{optional}: {}", property_key(name), ty.text);
        match description_of(schema).filter(|_| at.top) {
            Some(text) => (format!("/** {text} */\n  {member}"), true),
            None => (member, false),
        }
    }

    /// The value type of an index signature: `additionalProperties` when it
    /// is a schema, else the union of `patternProperties`; `Some(never)` for
    /// `additionalProperties: false`, so an empty closed object stays empty.
    fn index_type(&mut self, map: &'a Map<String, Value>, at: At) -> Option<Ty> {
        match map.get("additionalProperties") {
            Some(Value::Bool(false)) => {
                let has_properties = map
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty());
                return (!has_properties).then(Ty::never);
            }
            Some(schema @ Value::Object(_)) => return Some(self.schema(schema, at.child())),
            _ => {}
        }
        let patterns = map.get("patternProperties").and_then(Value::as_object)?;
        let mut members = Members::default();
        for schema in patterns.values() {
            if self.out_of_nodes() {
                members.truncated = true;
                break;
            }
            if !members.push(self.schema(schema, at.child())) {
                break;
            }
        }
        (!members.types.is_empty()).then(|| members.union())
    }

    fn reference(&mut self, reference: &Value, root: Root) -> Ty {
        reference
            .as_str()
            .and_then(|reference| self.definition_name(reference, root))
            .map_or_else(Ty::unknown, Ty::atom)
    }

    /// The name for a local `$ref`, registering its definition on first use;
    /// None when it does not resolve inside its own document.
    fn definition_name(&mut self, reference: &str, root: Root) -> Option<String> {
        let key = (root, reference.to_string());
        if let Some(&index) = self.by_ref.get(&key) {
            return self.definitions.get(index).map(|d| d.name.clone());
        }
        if self.definitions.len() >= MAX_DEFINITIONS {
            return None;
        }
        let document = self.roots.get(root).copied().flatten()?;
        let (schema, raw_name) = resolve(document, reference)?;
        let index = self.name_definition(&raw_name, schema, root)?;
        self.by_ref.insert(key, index);
        self.definitions.get(index).map(|d| d.name.clone())
    }

    /// Picks a free identifier for a definition. The same name for an equal
    /// schema (input and output often share components) is reused.
    fn name_definition(&mut self, raw_name: &str, schema: &'a Value, root: Root) -> Option<usize> {
        let base = identifier(raw_name);
        for attempt in 1..=MAX_DEFINITIONS {
            let name = if attempt == 1 {
                base.clone()
            } else {
                format!("{base}{attempt}")
            };
            let Some(&index) = self.by_name.get(&name) else {
                return Some(self.add_definition(name, schema, root));
            };
            let same = |d: &Definition<'_>| std::ptr::eq(d.schema, schema) || d.schema == schema;
            if self.definitions.get(index).is_some_and(same) {
                return Some(index);
            }
        }
        None
    }

    fn add_definition(&mut self, name: String, schema: &'a Value, root: Root) -> usize {
        let index = self.definitions.len();
        self.definitions.push(Definition {
            name: name.clone(),
            schema,
            root,
        });
        self.by_name.insert(name, index);
        index
    }

    /// A JSON value as a TypeScript literal type.
    fn literal(&mut self, value: &Value, depth: usize) -> Ty {
        if depth > MAX_DEPTH || !self.take_node() {
            return Ty::unknown();
        }
        match value {
            Value::Null => Ty::atom("null"),
            Value::Bool(b) => Ty::atom(b.to_string()),
            Value::Number(n) => Ty::atom(n.to_string()),
            Value::String(s) => Ty::atom(js_string(s)),
            Value::Array(items) => {
                let mut parts = Parts::default();
                for item in items {
                    if self.out_of_nodes() {
                        parts.truncated = true;
                        break;
                    }
                    if !parts.push(self.literal(item, depth + 1).text) {
                        break;
                    }
                }
                Ty::atom(format!("[{}]", with_marker(parts, ", ")))
            }
            Value::Object(map) => {
                let mut parts = Parts::default();
                for (key, item) in map {
                    if self.out_of_nodes() {
                        parts.truncated = true;
                        break;
                    }
                    let item = self.literal(item, depth + 1);
                    if !parts.push(format!("{}: {}", property_key(key), item.text)) {
                        break;
                    }
                }
                Ty::atom(object_literal(&with_marker_items(parts), false, false))
            }
        }
    }

    fn literal_union(&mut self, values: &[Value], depth: usize) -> Ty {
        let mut members = Members::default();
        for value in values {
            if self.out_of_nodes() {
                members.truncated = true;
                break;
            }
            if !members.push(self.literal(value, depth + 1)) {
                break;
            }
        }
        members.union()
    }
}

/// The type a schema without `type` implies through its keywords.
fn implied_type(map: &Map<String, Value>) -> Option<&'static str> {
    let has = |key: &str| map.contains_key(key);
    if has("properties") || has("additionalProperties") || has("patternProperties") {
        Some("object")
    } else if has("items") || has("prefixItems") {
        Some("array")
    } else {
        None
    }
}

fn required_names(map: &Map<String, Value>) -> Vec<&str> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `A | B`: `unknown` absorbs everything, `never` disappears, nested unions
/// flatten and duplicates go.
fn union(members: Vec<Ty>) -> Ty {
    let mut alternatives: Vec<String> = Vec::new();
    for member in members {
        if member.is("unknown") {
            return Ty::unknown();
        }
        let texts = if member.prec == Prec::Union {
            member.alternatives
        } else {
            vec![member.text]
        };
        for text in texts {
            if text != "never" && !alternatives.contains(&text) {
                alternatives.push(text);
            }
        }
    }
    match alternatives.len() {
        0 => Ty::never(),
        1 => Ty::atom(alternatives.swap_remove(0)),
        _ => Ty {
            text: alternatives.join(" | "),
            prec: Prec::Union,
            alternatives,
        },
    }
}

/// Types to combine into a union or an intersection, collected until the
/// output cap is reached.
#[derive(Default)]
struct Members {
    types: Vec<Ty>,
    len: usize,
    truncated: bool,
}

impl Members {
    /// False once the cap is reached: the caller should stop producing.
    fn push(&mut self, ty: Ty) -> bool {
        let cost = ty.text.len() + 3;
        // As for `Parts`, the first member is always taken.
        if !self.types.is_empty() && self.len + cost > PARTS_BUDGET {
            self.truncated = true;
            return false;
        }
        self.len += cost;
        self.types.push(ty);
        true
    }

    fn union(self) -> Ty {
        if self.truncated && self.types.is_empty() {
            return Ty::unknown();
        }
        mark_truncated(union(self.types), self.truncated)
    }

    fn intersection(self) -> Ty {
        mark_truncated(intersection(self.types), self.truncated)
    }
}

/// Appends the marker to a type whose members were cut short.
fn mark_truncated(ty: Ty, truncated: bool) -> Ty {
    if !truncated || ty.is("unknown") {
        return ty;
    }
    let text = format!("{} {TRUNCATED}", ty.text);
    // Should it be nested in another union, it stays whole, marker included.
    Ty {
        alternatives: vec![text.clone()],
        text,
        prec: ty.prec,
    }
}

/// `A & B`: `unknown` parts add nothing, `never` absorbs everything.
fn intersection(parts: Vec<Ty>) -> Ty {
    let mut kept: Vec<Ty> = Vec::new();
    for part in parts {
        if part.is("never") {
            return Ty::never();
        }
        if !part.is("unknown") && !kept.iter().any(|k| k.text == part.text) {
            kept.push(part);
        }
    }
    if kept.len() <= 1 {
        return kept.pop().unwrap_or_else(Ty::unknown);
    }
    let texts: Vec<String> = kept
        .iter()
        .map(|p| p.at_least(Prec::Intersection))
        .collect();
    Ty {
        text: texts.join(" & "),
        prec: Prec::Intersection,
        alternatives: Vec::new(),
    }
}

/// `{ a: T; b?: U }` on one line, or one member per line at the top level
/// when there are comments or the line would be long.
fn object_literal(members: &[String], top: bool, described: bool) -> String {
    if members.is_empty() {
        return "{}".to_string();
    }
    let inline = format!("{{ {} }}", members.join("; "));
    // Comments are only ever added at the top, for the multi-line form.
    if !(top && (described || inline.len() > INLINE_WIDTH)) {
        return inline;
    }
    let mut text = String::from("{\n");
    for member in members {
        text.push_str("  ");
        text.push_str(member);
        text.push_str(";\n");
    }
    text.push('}');
    text
}

fn with_marker(parts: Parts, separator: &str) -> String {
    with_marker_items(parts).join(separator)
}

fn with_marker_items(mut parts: Parts) -> Vec<String> {
    if parts.truncated {
        parts.items.push(TRUNCATED.to_string());
    }
    parts.items
}

/// A property name as written in an object type: bare when it is an
/// identifier, quoted otherwise.
fn property_key(name: &str) -> String {
    if is_identifier(name) {
        name.to_string()
    } else {
        js_string(name)
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A double-quoted string literal.
fn js_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Words TypeScript will not accept (or we rely on) as a type alias name.
const RESERVED: &[&str] = &[
    "any",
    "Array",
    "as",
    "bigint",
    "boolean",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "declare",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "infer",
    "instanceof",
    "interface",
    "is",
    "keyof",
    "let",
    "module",
    "namespace",
    "never",
    "new",
    "null",
    "number",
    "object",
    "package",
    "private",
    "protected",
    "public",
    "readonly",
    "Record",
    "return",
    "static",
    "string",
    "super",
    "switch",
    "symbol",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typeof",
    "undefined",
    "unique",
    "unknown",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// A definition key made into a usable type name.
fn identifier(raw: &str) -> String {
    let mut name: String = raw
        .chars()
        .take(MAX_NAME_LEN)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        name.push_str("Schema");
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if RESERVED.contains(&name.as_str()) {
        name.push('_');
    }
    name
}

/// Follows a local `$ref` to one of the definition containers; returns the
/// target schema and its key.
fn resolve<'a>(document: &'a Value, reference: &str) -> Option<(&'a Value, String)> {
    let pointer = reference.strip_prefix("#/")?;
    let segments: Vec<String> = pointer.split('/').map(unescape_segment).collect();
    let supported = match segments.as_slice() {
        [first, _] => first == "$defs" || first == "definitions",
        _ => false,
    };
    if !supported {
        return None;
    }
    let mut target = document;
    for segment in &segments {
        target = target.as_object()?.get(segment)?;
    }
    let key = segments.last()?.clone();
    Some((target, key))
}

/// Undoes URI percent-encoding and JSON Pointer escapes (`~1` is `/`,
/// `~0` is `~`) in one pointer segment.
fn unescape_segment(segment: &str) -> String {
    percent_decode(segment)
        .replace("~1", "/")
        .replace("~0", "~")
}

fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(decoded) if byte == b'%' => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// A schema's description as a one-line comment body, if it has one.
fn description_of(schema: &Value) -> Option<String> {
    let text = schema.get("description")?.as_str()?;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return None;
    }
    let mut line = words.join(" ");
    if line.chars().count() > MAX_DESCRIPTION_CHARS {
        line = line.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
        line.push('…');
    }
    // A `*/` inside would end the comment early.
    Some(line.replace("*/", "*\\/"))
}

/// Last line of defence for the output cap: cuts at a character boundary.
fn cap(mut text: String) -> String {
    if text.len() <= MAX_CHARS {
        return text;
    }
    let mut end = MAX_CHARS;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push(' ');
    text.push_str(TRUNCATED);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The input rendering of one schema.
    fn ts(schema: &Value) -> String {
        render(Some(schema), None).input.unwrap_or_default()
    }

    #[test]
    fn primitives_and_trivial_schemas() {
        assert_eq!(
            ts(&json!({"type": "string", "format": "date-time"})),
            "string"
        );
        assert_eq!(ts(&json!({"type": "integer"})), "number");
        assert_eq!(ts(&json!({"type": "number"})), "number");
        assert_eq!(ts(&json!({"type": "boolean"})), "boolean");
        assert_eq!(ts(&json!({"type": "null"})), "null");
        assert_eq!(ts(&json!({})), "unknown");
        assert_eq!(ts(&json!(true)), "unknown");
        assert_eq!(ts(&json!(false)), "never");
        assert_eq!(ts(&json!({"type": "file"})), "unknown");
        let none = render(None, None);
        assert_eq!(
            (none.input, none.output, none.definitions),
            (None, None, None)
        );
    }

    #[test]
    fn objects_mark_optional_and_quote_keys() {
        let schema = json!({
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "integer"}, "x-rate": {"type": "string"}}
        });
        assert_eq!(ts(&schema), r#"{ id: number; "x-rate"?: string }"#);
        let nested = json!({"properties": {"a": {"properties": {"b": {"type": "string"}}}}});
        assert_eq!(ts(&nested), "{ a?: { b?: string } }");
    }

    #[test]
    fn additional_and_pattern_properties() {
        assert_eq!(ts(&json!({"type": "object"})), "Record<string, unknown>");
        let map = json!({"type": "object", "additionalProperties": {"type": "number"}});
        assert_eq!(ts(&map), "Record<string, number>");
        let closed = json!({"type": "object", "additionalProperties": false});
        assert_eq!(ts(&closed), "Record<string, never>");
        let mixed = json!({
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": {"type": "string"}
        });
        assert_eq!(ts(&mixed), "{ a: string; [key: string]: string }");
        let patterns = json!({"patternProperties": {"^x-": {"type": "boolean"}}});
        assert_eq!(ts(&patterns), "Record<string, boolean>");
    }

    #[test]
    fn type_arrays_and_nullable() {
        assert_eq!(ts(&json!({"type": ["string", "null"]})), "string | null");
        assert_eq!(ts(&json!({"type": ["integer", "null"]})), "number | null");
        // Null twice: no duplicate member.
        let twice = json!({"anyOf": [{"type": ["string", "null"]}, {"type": "null"}]});
        assert_eq!(ts(&twice), "string | null");
        let object = json!({"type": ["object", "null"], "properties": {"a": {"type": "string"}}});
        assert_eq!(ts(&object), "{ a?: string } | null");
    }

    #[test]
    fn enums_and_consts_become_literals() {
        assert_eq!(
            ts(&json!({"enum": ["open", "closed", 3, null, true]})),
            r#""open" | "closed" | 3 | null | true"#
        );
        assert_eq!(
            ts(&json!({"type": "string", "enum": ["a\"b"]})),
            r#""a\"b""#
        );
        assert_eq!(ts(&json!({"enum": []})), "never");
        assert_eq!(ts(&json!({"const": "fixed"})), r#""fixed""#);
        assert_eq!(
            ts(&json!({"const": {"kind": [1, "x"]}})),
            r#"{ kind: [1, "x"] }"#
        );
    }

    #[test]
    fn arrays_and_tuples() {
        assert_eq!(
            ts(&json!({"type": "array", "items": {"type": "string"}})),
            "string[]"
        );
        let union_items = json!({"items": {"type": ["string", "number"]}});
        assert_eq!(ts(&union_items), "(string | number)[]");
        assert_eq!(ts(&json!({"type": "array"})), "unknown[]");
        let tuple = json!({"prefixItems": [{"type": "string"}, {"type": "string"}]});
        assert_eq!(ts(&tuple), "[string, string]");
        let rest = json!({"prefixItems": [{"type": "string"}], "items": {"type": "number"}});
        assert_eq!(ts(&rest), "[string, ...number[]]");
        let old_style =
            json!({"type": "array", "items": [{"type": "boolean"}], "additionalItems": false});
        assert_eq!(ts(&old_style), "[boolean]");
        let nested = json!({"items": {"items": {"type": "integer"}}});
        assert_eq!(ts(&nested), "number[][]");
    }

    #[test]
    fn combinators() {
        let one_of = json!({"oneOf": [{"type": "string"}, {"type": "integer"}]});
        assert_eq!(ts(&one_of), "string | number");
        let any_of = json!({"anyOf": [{"type": "string"}, {}]});
        assert_eq!(ts(&any_of), "unknown");
        let all_of = json!({"allOf": [
            {"properties": {"a": {"type": "string"}}},
            {"properties": {"b": {"type": "number"}}}
        ]});
        assert_eq!(ts(&all_of), "{ a?: string } & { b?: number }");
        let mixed = json!({
            "properties": {"kind": {"type": "string"}},
            "oneOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]
        });
        assert_eq!(
            ts(&mixed),
            "{ kind?: string } & ({ a?: string } | { b?: string })"
        );
        // Branches that only restate `required` add nothing.
        let required_only = json!({"type": "string", "anyOf": [{"required": ["a"]}]});
        assert_eq!(ts(&required_only), "string");
    }

    #[test]
    fn each_named_definition_keeps_its_own_description() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/B"}},
            "$defs": {"A": {"type": "string"}, "B": {"type": "number", "description": "B doc"}}
        });
        let out = render(Some(&schema), None);
        assert_eq!(
            out.named,
            [
                ("A".to_string(), "string".to_string()),
                ("B".to_string(), "/** B doc */\nnumber".to_string()),
            ]
        );
    }

    #[test]
    fn refs_become_named_definitions() {
        let schema = json!({
            "type": "object",
            "properties": {
                "pet": {"$ref": "#/$defs/Pet.Owner"},
                "tag": {"$ref": "#/definitions/1st"},
                "kind": {"anyOf": [{"$ref": "#/$defs/string"}, {"type": "null"}]},
                "missing": {"$ref": "#/$defs/Nope"},
                "remote": {"$ref": "other.json#/$defs/Pet"},
                "pointer": {"$ref": "#/properties/tag"}
            },
            "$defs": {"Pet.Owner": {"type": "object", "properties": {"name": {"type": "string"}}},
                      "string": {"type": "string"}},
            "definitions": {"1st": {"enum": ["a"]}}
        });
        let out = render(Some(&schema), None);
        assert_eq!(
            out.input.as_deref(),
            Some(
                "{\n  pet?: Pet_Owner;\n  tag?: _1st;\n  kind?: string_ | null;\n  missing?: unknown;\n  \
                 remote?: unknown;\n  pointer?: unknown;\n}"
            )
        );
        assert_eq!(
            out.definitions.as_deref(),
            Some("type Pet_Owner = { name?: string };\ntype _1st = \"a\";\ntype string_ = string;")
        );
    }

    #[test]
    fn escaped_ref_segments_resolve() {
        let schema = json!({
            "$ref": "#/$defs/a~1b%20c",
            "$defs": {"a/b c": {"type": "boolean"}}
        });
        let out = render(Some(&schema), None);
        assert_eq!(out.input.as_deref(), Some("a_b_c"));
        assert_eq!(out.definitions.as_deref(), Some("type a_b_c = boolean;"));
    }

    #[test]
    fn cyclic_refs_terminate() {
        let schema = json!({
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "required": ["value"],
                    "properties": {"value": {"type": "number"}, "next": {"$ref": "#/$defs/Node"},
                                   "other": {"$ref": "#/$defs/Other"}}
                },
                "Other": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                "Self": {"$ref": "#/$defs/Self"}
            }
        });
        let out = render(Some(&schema), None);
        assert_eq!(out.input.as_deref(), Some("Node"));
        assert_eq!(
            out.definitions.as_deref(),
            Some(
                "type Node = { value: number; next?: Node; other?: Other };\ntype Other = Node[];"
            )
        );
        let alias = json!({"$ref": "#/$defs/Self", "$defs": {"Self": {"$ref": "#/$defs/Self"}}});
        let out = render(Some(&alias), None);
        assert_eq!(out.definitions.as_deref(), Some("type Self = unknown;"));
    }

    #[test]
    fn input_and_output_share_equal_definitions() {
        let pet = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
        let input = json!({"$ref": "#/$defs/Pet", "$defs": {"Pet": pet}});
        let output = json!({"items": {"$ref": "#/$defs/Pet"}, "$defs": {"Pet": pet.clone()}});
        let out = render(Some(&input), Some(&output));
        assert_eq!(out.output.as_deref(), Some("Pet[]"));
        assert_eq!(
            out.definitions.as_deref(),
            Some("type Pet = { id?: number };")
        );
        // Same name, different schema: the second one gets a new name.
        let other = json!({"$ref": "#/$defs/Pet", "$defs": {"Pet": {"type": "string"}}});
        let out = render(Some(&input), Some(&other));
        assert_eq!(out.output.as_deref(), Some("Pet2"));
        assert_eq!(
            out.definitions.as_deref(),
            Some("type Pet = { id?: number };\ntype Pet2 = string;")
        );
    }

    #[test]
    fn top_level_descriptions_become_comments() {
        let schema = json!({
            "type": "object",
            "required": ["owner"],
            "properties": {
                "owner": {"type": "string", "description": "The  account\nowner. */ end"},
                "page": {"type": "integer", "properties": {"x": {"description": "nested: dropped", "type": "string"}}}
            }
        });
        assert_eq!(
            ts(&schema),
            "{\n  /** The account owner. *\\/ end */\n  owner: string;\n  page?: number;\n}"
        );
        let long = "word ".repeat(100);
        let out = ts(&json!({"properties": {"a": {"description": long}}}));
        assert!(out.contains('…') && out.len() < 300, "{out}");
    }

    #[test]
    fn deep_nesting_is_cut_off() {
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"a": schema}});
        }
        let out = ts(&schema);
        assert!(out.contains("unknown"));
        assert_eq!(out.matches("a?:").count(), MAX_DEPTH + 1);
        let mut arrays = json!({"type": "string"});
        for _ in 0..100 {
            arrays = json!({"items": arrays});
        }
        assert_eq!(
            ts(&arrays),
            format!("unknown{}", "[]".repeat(MAX_DEPTH + 1))
        );
    }

    #[test]
    fn output_is_capped() {
        let properties: Map<String, Value> = (0..5_000)
            .map(|i| (format!("property{i}"), json!({"type": "string"})))
            .collect();
        let wide = ts(&json!({"properties": properties}));
        assert!(
            wide.len() <= MAX_CHARS + 40 && wide.ends_with(&format!("{TRUNCATED};\n}}")),
            "{}",
            wide.len()
        );
        let values: Vec<Value> = (0..100_000).map(|i| json!(format!("value{i}"))).collect();
        let big_enum = ts(&json!({"enum": values}));
        assert!(big_enum.len() <= MAX_CHARS + 40 && big_enum.ends_with(TRUNCATED));
        let defs: Map<String, Value> = (0..1_000)
            .map(|i| {
                let next = json!({"$ref": format!("#/$defs/T{}", i + 1)});
                (
                    format!("T{i}"),
                    json!({"description": "One link of a chain.", "items": next}),
                )
            })
            .collect();
        let chain = json!({"$ref": "#/$defs/T0", "$defs": defs});
        let out = render(Some(&chain), None);
        let definitions = out.definitions.unwrap_or_default();
        assert!(definitions.len() <= MAX_CHARS + 40 && definitions.ends_with(TRUNCATED));
    }

    #[test]
    fn fan_out_is_bounded() {
        // Twelve equal branches per level, four levels (all the depth cap
        // reaches): 20,736 leaves, more than the node budget, yet the text
        // stays short because equal members merge. Built by hand because
        // `json!` would re-serialise the whole tree at every level.
        let object =
            |key: &str, value: Value| Value::Object(Map::from_iter([(key.to_string(), value)]));
        let mut schema = object("type", json!("string"));
        for _ in 0..4 {
            let branch = object("properties", object("p", schema));
            schema = object("anyOf", Value::Array(vec![branch; 12]));
        }
        let out = ts(&schema);
        assert!(
            out.starts_with("{ p?: { p?: { p?: ") && out.contains(TRUNCATED),
            "{out}"
        );
        assert!(out.len() < 200);
    }

    #[test]
    fn garbage_never_panics() {
        let garbage = [
            json!(1),
            json!("string"),
            json!([1, 2, {"type": "string"}]),
            json!(null),
            json!({"type": 5}),
            json!({"type": [1, null, "string", "bogus"]}),
            json!({"properties": [1, 2]}),
            json!({"properties": {"a": 1, "b": "x", "c": null}}),
            json!({"required": "a", "properties": {"a": {}}}),
            json!({"items": 3}),
            json!({"prefixItems": "x", "items": [null]}),
            json!({"enum": "x"}),
            json!({"allOf": {"type": "string"}, "oneOf": 3, "anyOf": [[], 7]}),
            json!({"$ref": 5}),
            json!({"$ref": "#"}),
            json!({"$ref": "#/$defs/"}),
            json!({"$ref": "#/$defs/a/b", "$defs": {"a": {"b": {}}}}),
            json!({"$ref": "#/$defs/%zz%", "$defs": 3}),
            json!({"$ref": "#/components/schemas/é", "components": {"schemas": {"é": true}}}),
            json!({"$ref": "#/$defs/é", "$defs": {"é": true}}),
            json!({"additionalProperties": 4, "patternProperties": {"x": false}}),
            json!({"nullable": "yes", "const": [[[[[[[[[[[[1]]]]]]]]]]]]}),
            json!({"description": 3, "properties": {"\u{0}\u{2028}": {"description": ["x"]}}}),
        ];
        for schema in &garbage {
            let out = render(Some(schema), Some(schema));
            assert!(out.input.is_some() && out.output.is_some());
        }
        assert_eq!(
            ts(&json!({"properties": {"\u{0}": {}}})),
            r#"{ "\u0000"?: unknown }"#
        );
        assert_eq!(
            ts(&json!({"$ref": "#/$defs/", "$defs": {"": {"type": "string"}}})),
            "Schema"
        );
    }
}
