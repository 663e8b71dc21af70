//! What `tools.describe.tool` says about one tool, typed: its schemas with
//! the definitions they reach, and their TypeScript — the input, what a
//! call resolves to (the `{ ok, data } | { ok, error }` envelope, SPEC §7)
//! and the named types both use. The sandbox helper (`invoke.rs`) answers
//! it to the agent as JSON; the operations layer shows the same to an
//! operator, so both read one rendering.

use executor_catalog::describe;
use executor_catalog::{ComposeLimits, Definitions, ToolEntry, ToolSchema};
use serde_json::{Value, json};

/// The error half of every call's answer, as the agent's types name it.
const TOOL_ERROR_TS: &str =
    "{ code: string; message: string; status?: number; details?: unknown; retryable?: boolean }";
/// The HTTP details an answer may carry.
const TOOL_HTTP_META_TS: &str = "{ status: number; headers: { [k: string]: string } }";

/// How much of the shared definitions one rendering reads: about what
/// `describe` can show anyway (it names at most 256 types).
const DESCRIBE_LIMITS: ComposeLimits = ComposeLimits {
    definitions: 256,
    nodes: 50_000,
};

/// One tool, described.
#[derive(Debug, Clone)]
pub struct ToolDescription {
    pub path: String,
    /// The path without the namespace.
    pub name: String,
    pub description: Option<String>,
    /// The default when no policy matches (SPEC §9).
    pub requires_approval: bool,
    /// The input schema with the definitions it reaches composed in, so it
    /// stands on its own.
    pub input_schema: Option<Value>,
    pub output_schema: Option<Value>,
    /// The input's type; none for a tool without an input schema.
    pub input_type_script: Option<String>,
    /// What a call resolves to: `{ ok: true; data: …; http?: ToolHttpMeta }
    /// | { ok: false; error: ToolError }`.
    pub output_type_script: String,
    /// The named types the two refer to, by name, in the order the
    /// renderer met them, then `ToolError` and `ToolHttpMeta`; a type's
    /// text may start with its `/** doc */` line.
    pub type_script_definitions: Vec<(String, String)>,
}

impl ToolDescription {
    /// Describes `tool`. Bounded work (the composition and the renderer
    /// cap what they visit), done inline.
    pub fn of(tool: &ToolEntry) -> Self {
        let definitions = tool.definitions.as_deref();
        let input_schema = schema_document(tool.input_schema.as_ref(), definitions);
        let output_schema = schema_document(tool.output_schema.as_ref(), definitions);
        let ts = describe::render(input_schema.as_ref(), output_schema.as_ref());
        let data = ts.output.as_deref().unwrap_or("unknown");
        // Ours win over an API's types of the same names, in their place
        // (as a JSON object's keys would).
        let mut type_script_definitions = ts.named;
        for (name, body) in [
            ("ToolError", TOOL_ERROR_TS),
            ("ToolHttpMeta", TOOL_HTTP_META_TS),
        ] {
            match type_script_definitions.iter_mut().find(|(n, _)| n == name) {
                Some(named) => named.1 = body.to_string(),
                None => type_script_definitions.push((name.to_string(), body.to_string())),
            }
        }
        ToolDescription {
            path: tool.path.to_string(),
            name: tool.name().to_string(),
            description: tool.description.clone(),
            requires_approval: tool.requires_approval,
            input_schema,
            output_schema,
            input_type_script: ts.input,
            output_type_script: format!(
                "{{ ok: true; data: {data}; http?: ToolHttpMeta }} | {{ ok: false; error: ToolError }}"
            ),
            type_script_definitions,
        }
    }

    /// All of it as TypeScript to read: `type Input`, `type Output`, then
    /// every named type, each after its doc comment.
    pub fn declarations(&self) -> String {
        let mut lines = Vec::new();
        if let Some(input) = &self.input_type_script {
            lines.push(format!("type Input = {input};"));
        }
        lines.push(format!("type Output = {};", self.output_type_script));
        for (name, text) in &self.type_script_definitions {
            // The renderer writes a doc comment as one line of its own.
            let (doc, body) = match text.split_once('\n') {
                Some((doc, body)) if doc.starts_with("/**") => (Some(doc), body),
                _ => (None, text.as_str()),
            };
            lines.extend(doc.map(str::to_string));
            lines.push(format!("type {name} = {body};"));
        }
        lines.join("\n")
    }

    /// The answer of `tools.describe.tool` inside the sandbox.
    pub(crate) fn to_agent_value(&self) -> Value {
        let mut out = json!({ "path": self.path, "name": self.name });
        if let Some(d) = &self.description {
            out["description"] = json!(d);
        }
        if let Some(input) = &self.input_type_script {
            out["inputTypeScript"] = json!(input);
        }
        out["outputTypeScript"] = json!(self.output_type_script);
        let definitions: serde_json::Map<String, Value> = self
            .type_script_definitions
            .iter()
            .map(|(name, body)| (name.clone(), json!(body)))
            .collect();
        out["typeScriptDefinitions"] = Value::Object(definitions);
        out
    }
}

/// A tool schema with the definitions it reaches, parsed for rendering.
fn schema_document(
    schema: Option<&ToolSchema>,
    definitions: Option<&Definitions>,
) -> Option<Value> {
    let root = schema?.to_value();
    Some(match definitions {
        Some(definitions) => definitions.compose(&root, DESCRIBE_LIMITS, false),
        None => root,
    })
}
