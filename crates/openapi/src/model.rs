//! The nouns of an import, shared by the importer's modules, the stored
//! form and the invoker: the options of an import and its result
//! ([`ImportedIntegration`]), each operation as a tool ([`OperationTool`])
//! and as a request shape ([`HttpOperation`]), its parameters and body, and
//! the security schemes a document declares ([`AuthMethod`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// How to import one document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The integration's namespace: the first segment of every tool address.
    pub namespace: String,
    /// Overrides the servers the document declares (`--base-url`).
    pub base_url: Option<String>,
    /// Where the document was fetched from, if from a URL: relative server
    /// URLs (OpenAPI 3) and a missing `host` (Swagger 2) resolve against it.
    pub source_url: Option<String>,
}

impl ImportOptions {
    pub fn new(namespace: impl Into<String>) -> Self {
        ImportOptions {
            namespace: namespace.into(),
            ..ImportOptions::default()
        }
    }
}

/// Which dialect the document was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecVersion {
    Swagger2,
    OpenApi30,
    OpenApi31,
}

/// The stored form's version ([`ImportedIntegration::format`]). 1: every
/// tool schema carried its own copy of the definitions it reached (under
/// `$defs`); 2: the definitions are stored once, in `definitions`.
pub const FORMAT: u32 = 2;

/// The result of an import: everything the catalog and the invoker need,
/// and (serialised) the compact form the store keeps and the server loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportedIntegration {
    /// [`FORMAT`] when written; a stored record without it is format 1.
    #[serde(default = "format_1")]
    pub format: u32,
    pub namespace: String,
    pub spec_version: SpecVersion,
    /// `info.title`.
    pub title: Option<String>,
    /// `--base-url`, else the first server (3.x, variables at their
    /// defaults) or `schemes`/`host`/`basePath` (2.0); no trailing slash.
    /// None when the document gives no usable absolute URL.
    pub base_url: Option<String>,
    /// The operator's `--base-url`, kept so that a refresh applies it
    /// again while a document-derived URL follows the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_override: Option<String>,
    pub auth_methods: Vec<AuthMethod>,
    pub tools: Vec<OperationTool>,
    /// The schemas tool schemas refer to as `#/$defs/<name>`, normalised
    /// once and shared by every tool.
    #[serde(default)]
    pub definitions: serde_json::Map<String, serde_json::Value>,
    /// What was skipped or repaired, for the operator (bounded).
    pub warnings: Vec<String>,
}

fn format_1() -> u32 {
    1
}

/// A security scheme the document declares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuthMethod {
    ApiKeyHeader {
        scheme: String,
        name: String,
    },
    ApiKeyQuery {
        scheme: String,
        name: String,
    },
    ApiKeyCookie {
        scheme: String,
        name: String,
    },
    Bearer {
        scheme: String,
    },
    Basic {
        scheme: String,
    },
    /// OAuth 2.0 (and `openIdConnect`): the token of an OAuth connection
    /// (`executor connections login`) goes as a bearer token. What a login
    /// needs is kept: the declared flows, or the OpenID configuration URL.
    /// Records imported before these were kept have neither (`integrations
    /// refresh` reads them again).
    #[serde(rename = "oauth2")]
    OAuth2 {
        scheme: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flows: Option<OAuthFlows>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        openid_connect_url: Option<String>,
        /// The scopes the document's security requirements ask of this
        /// scheme (globally and per operation): what a login asks for.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        required_scopes: Vec<String>,
    },
    /// Anything else (`openIdConnect`, `mutualTLS`, `http` with another
    /// scheme such as `digest`); `kind` says which.
    Other {
        scheme: String,
        kind: String,
    },
}

impl AuthMethod {
    /// The scheme as a person reads it, before adding the API.
    pub fn describe(&self) -> String {
        match self {
            AuthMethod::ApiKeyHeader { name, .. } => format!("API key in the {name} header"),
            AuthMethod::ApiKeyQuery { name, .. } => {
                format!("API key in the {name} query parameter")
            }
            AuthMethod::ApiKeyCookie { name, .. } => format!("API key in the {name} cookie"),
            AuthMethod::Bearer { .. } => "bearer token".to_string(),
            AuthMethod::Basic { .. } => "basic (user name and password)".to_string(),
            AuthMethod::OAuth2 { .. } => "OAuth 2.0 (a login)".to_string(),
            AuthMethod::Other { kind, .. } => {
                format!("{kind} (not supported: calls go without it)")
            }
        }
    }

    /// The name the document gives the scheme (the key in
    /// `securitySchemes`/`securityDefinitions`).
    pub fn scheme(&self) -> &str {
        match self {
            AuthMethod::ApiKeyHeader { scheme, .. }
            | AuthMethod::ApiKeyQuery { scheme, .. }
            | AuthMethod::ApiKeyCookie { scheme, .. }
            | AuthMethod::Bearer { scheme }
            | AuthMethod::Basic { scheme }
            | AuthMethod::OAuth2 { scheme, .. }
            | AuthMethod::Other { scheme, .. } => scheme,
        }
    }
}

/// The OAuth flows a security scheme declares that a login can use (URLs
/// resolved against the document's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthFlows {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_code: Option<OAuthFlow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<OAuthFlow>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthFlow {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// The scopes the flow declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// One operation as a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationTool {
    /// `<group>.<leaf>`, without the namespace; each segment matches
    /// `[A-Za-z][A-Za-z0-9_]*`.
    pub name: String,
    /// Summary and description, trimmed and bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Upper case: `GET`, `POST`, …
    pub method: String,
    /// The path as the document writes it, e.g. `/repos/{owner}/{repo}`.
    pub path_template: String,
    /// A server declared on the operation or its path item, which replaces
    /// the integration's `base_url` for this tool. Never set when the
    /// operator gave `--base-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<ParamSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodySpec>,
    /// One flat object: a property per parameter plus `body`, referring to
    /// the integration's `definitions` as `#/$defs/<name>`.
    pub input_schema: serde_json::Value,
    /// The JSON schema of the first 2xx response that has one (refers to
    /// the definitions like the input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// GET/HEAD/OPTIONS run without approval by default; the rest need it.
    pub requires_approval: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    /// Scheme names that apply (the operation's `security`, else the
    /// document's): the union over the alternatives, in order. `Some([])`
    /// means explicitly anonymous; None means the document does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Vec<String>>,
}

/// The stored form leaves out what is false, empty or absent: a 20k-tool
/// API has a hundred thousand parameters, and their defaults were a third
/// of its stored size.
fn is_false(value: &bool) -> bool {
    !value
}

/// What the HTTP invoker needs of one operation to build its request (the
/// request half of an [`OperationTool`]; the catalog holds the rest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOperation {
    pub method: String,
    pub path_template: String,
    pub base_url: Option<String>,
    /// Shared: most operations of a large API repeat the same few
    /// parameters (`$top`, `$filter`, `per_page`), loaded once.
    pub parameters: Vec<Arc<ParamSpec>>,
    pub body: Option<BodySpec>,
    pub security: Option<Vec<String>>,
}

/// Where a parameter goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamLocation {
    Path,
    Query,
    Header,
    Cookie,
}

impl ParamLocation {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamLocation::Path => "path",
            ParamLocation::Query => "query",
            ParamLocation::Header => "header",
            ParamLocation::Cookie => "cookie",
        }
    }
}

/// How a parameter value is serialised (OpenAPI 3 `style`; Swagger 2
/// `collectionFormat` is mapped onto it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ParamStyle {
    Simple,
    Form,
    Label,
    Matrix,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
    /// Swagger 2 `collectionFormat: tsv`.
    TabDelimited,
}

/// One parameter of an operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ParamSpec {
    /// The name on the wire.
    pub name: String,
    pub location: ParamLocation,
    /// The input property that carries it: `name`, unless that collides
    /// with `body` or a parameter elsewhere (then e.g. `query_id`).
    pub property: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// Defaults applied: `form` for query and cookie, `simple` otherwise.
    pub style: ParamStyle,
    /// Defaults applied: true for `form`, false otherwise.
    pub explode: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_reserved: bool,
    /// Set when the parameter is described by `content` rather than
    /// `schema`: the value is serialised as this media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// The request body of an operation; the input's `body` property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodySpec {
    /// JSON is preferred, then forms, then whatever comes first.
    pub content_type: String,
    pub required: bool,
}
