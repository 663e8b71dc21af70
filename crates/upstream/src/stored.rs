//! The stored form of an upstream MCP integration (format [`FORMAT`]):
//! where the server is, whether it waits for a login, and the tools it
//! listed at the last sync, each under its catalog name with the name the
//! upstream knows.

use std::sync::Arc;

use executor_catalog::{NewTool, SchemaInterner, SchemaText, ToolEntry, ToolInvoker, schema_text};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// This release's stored format; written first in the document.
pub const FORMAT: u32 = 1;

/// Where an upstream MCP server is and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Endpoint {
    /// A server over HTTP (streamable HTTP or legacy SSE).
    Http {
        url: String,
        #[serde(default)]
        transport: HttpTransport,
    },
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// Set for the child on top of the few variables it inherits.
        #[serde(default)]
        env: Vec<(String, String)>,
    },
}

impl Endpoint {
    /// How the server talks to it, as a person reads it.
    pub fn transport_name(&self) -> String {
        match self {
            Endpoint::Http {
                transport: HttpTransport::Auto,
                ..
            } => "streamable HTTP (legacy SSE if that fails)".into(),
            Endpoint::Http {
                transport: HttpTransport::StreamableHttp,
                ..
            } => "streamable HTTP".into(),
            Endpoint::Http {
                transport: HttpTransport::Sse,
                ..
            } => "legacy SSE".into(),
            Endpoint::Stdio { .. } => "stdio (a command on this machine)".into(),
        }
    }

    /// How `integrations list` names the source: the URL, or the command
    /// line (never the environment, which may hold a token).
    pub fn source(&self) -> String {
        match self {
            Endpoint::Http { url, .. } => url.clone(),
            Endpoint::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Which HTTP transport an upstream speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpTransport {
    /// Streamable HTTP, falling back to legacy SSE when that transport
    /// fails (never on 401/403: those are about the credential).
    #[default]
    Auto,
    StreamableHttp,
    Sse,
}

impl std::str::FromStr for HttpTransport {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(HttpTransport::Auto),
            "streamable-http" => Ok(HttpTransport::StreamableHttp),
            "sse" => Ok(HttpTransport::Sse),
            other => Err(format!(
                "unknown transport {other:?}: use auto, streamable-http or sse"
            )),
        }
    }
}

/// Whether the integration's tools can be listed and called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    #[default]
    Ready,
    /// The server answered with an OAuth challenge: its tools appear once
    /// `executor connections login` completes.
    NeedsLogin,
}

/// One tool as the upstream listed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamTool {
    /// The catalog's name (normalised, unique in the integration).
    pub name: String,
    /// The name the upstream knows, sent with each call.
    pub upstream_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    /// The upstream's schema of `structuredContent`, when it gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// `destructiveHint: true`: calls wait for approval.
    pub destructive: bool,
}

#[derive(Serialize)]
struct StoredRef<'a> {
    format: u32,
    namespace: &'a str,
    endpoint: &'a Endpoint,
    state: State,
    tools: &'a [UpstreamTool],
    #[serde(skip_serializing_if = "Option::is_none")]
    challenge: Option<&'a str>,
}

/// The stored text of an integration.
pub fn store(namespace: &str, endpoint: &Endpoint, state: State, tools: &[UpstreamTool]) -> String {
    store_with(namespace, endpoint, state, tools, None)
}

/// The stored text of an integration whose server asks for a login, with
/// the challenge it answered (where to discover its authorization server,
/// which scope it wants).
pub fn store_needing_login(
    namespace: &str,
    endpoint: &Endpoint,
    challenge: Option<&str>,
) -> String {
    store_with(namespace, endpoint, State::NeedsLogin, &[], challenge)
}

/// Where to log in for a stored integration: the server's URL and the
/// challenge it answered (None for a stdio server, which has no login).
pub fn login_resource(document: &str) -> Result<Option<(String, Option<String>)>, String> {
    let stored = load(document)?;
    Ok(match stored.endpoint {
        Endpoint::Http { url, .. } => Some((url, stored.challenge)),
        Endpoint::Stdio { .. } => None,
    })
}

fn store_with(
    namespace: &str,
    endpoint: &Endpoint,
    state: State,
    tools: &[UpstreamTool],
    challenge: Option<&str>,
) -> String {
    let stored = StoredRef {
        format: FORMAT,
        namespace,
        endpoint,
        state,
        tools,
        challenge,
    };
    // Strings and JSON values always serialise.
    serde_json::to_string(&stored).unwrap_or_default()
}

/// A stored integration, loaded: schemas as compact text.
#[derive(Deserialize)]
pub struct StoredUpstream {
    pub namespace: String,
    pub endpoint: Endpoint,
    #[serde(default)]
    pub state: State,
    pub tools: Vec<StoredTool>,
    /// The `WWW-Authenticate` challenge a server needing a login answered.
    #[serde(default)]
    pub challenge: Option<String>,
}

#[derive(Deserialize)]
pub struct StoredTool {
    pub name: String,
    pub upstream_name: String,
    pub description: Option<String>,
    pub input_schema: SchemaText,
    pub output_schema: Option<SchemaText>,
    #[serde(default)]
    pub destructive: bool,
}

/// Loads a stored document of this release's format; Err says why not,
/// for `integrations list` and the agent.
pub fn load(document: &str) -> Result<StoredUpstream, String> {
    executor_catalog::load_stored(document, FORMAT)
}

impl StoredUpstream {
    /// The catalog entries of this integration, invoked by `invoker`; a
    /// tool's slot is its place in the returned names (the upstream's).
    pub fn into_entries(self, invoker: Arc<dyn ToolInvoker>) -> Vec<NewTool> {
        let mut schemas = SchemaInterner::default();
        self.tools
            .into_iter()
            .enumerate()
            .map(|(slot, tool)| {
                let output = output_schema(tool.output_schema.as_deref().map(|s| s.get()));
                NewTool::from(ToolEntry {
                    path: format!("{}.{}", self.namespace, tool.name).into(),
                    description: tool.description,
                    input_schema: Some(schemas.schema(&tool.input_schema)),
                    output_schema: Some(schemas.schema(&output)),
                    definitions: None,
                    requires_approval: tool.destructive,
                    invoker: invoker.clone(),
                    slot,
                })
            })
            .collect()
    }
}

/// What a call's `data` holds: the content blocks, and the structured
/// content in the upstream's schema when it declared one.
fn output_schema(structured: Option<&str>) -> SchemaText {
    let structured: Value = structured
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    schema_text(&serde_json::json!({
        "type": "object",
        "properties": {
            "content": {
                "type": "array",
                "description": "MCP content blocks: {type: \"text\", text} and the like",
                "items": { "type": "object" }
            },
            "structuredContent": structured,
        },
        "required": ["content"],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> UpstreamTool {
        UpstreamTool {
            name: name.into(),
            upstream_name: name.to_uppercase(),
            description: Some("adds".into()),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}}}),
            output_schema: None,
            destructive: name == "drop",
        }
    }

    #[test]
    fn a_stored_document_loads_with_its_endpoint_state_and_tools() {
        let endpoint = Endpoint::Stdio {
            command: "node".into(),
            args: vec!["server.js".into(), "stdio".into()],
            env: vec![("TOKEN".into(), "t0ken".into())],
        };
        let text = store(
            "everything",
            &endpoint,
            State::Ready,
            &[tool("sum"), tool("drop")],
        );
        assert!(text.starts_with("{\"format\":1,"));
        let loaded = load(&text).expect("loads");
        assert_eq!(loaded.endpoint, endpoint);
        assert_eq!(loaded.state, State::Ready);
        assert_eq!(loaded.tools.len(), 2);
        assert_eq!(loaded.tools[0].upstream_name, "SUM");
        assert!(loaded.tools[1].destructive);
        assert_eq!(endpoint.source(), "node server.js stdio");
    }

    #[test]
    fn other_formats_are_refused_with_the_way_out() {
        let refused = |text: &str| load(text).err().unwrap_or_default();
        assert!(refused("{\"format\":9}").contains("newer release"));
        assert!(refused("{}").contains("refresh"));
        assert!(refused("{\"format\":1,\"namespace\":3}").contains("cannot be read"));
    }

    #[test]
    fn transports_parse_from_their_flag_words() {
        assert_eq!("sse".parse::<HttpTransport>(), Ok(HttpTransport::Sse));
        assert_eq!("auto".parse::<HttpTransport>(), Ok(HttpTransport::Auto));
        assert!("ws".parse::<HttpTransport>().is_err());
    }
}
