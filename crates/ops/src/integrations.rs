//! Integrations: add (OpenAPI, GraphQL, MCP), preview without saving,
//! refresh, remove, list, get, and an integration's tools.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use executor_integrations::IntegrationKind;
use executor_openapi::{ImportOptions, import_with_progress};
use executor_outbound::{Credential, CredentialSource, HttpClient};
use executor_store::{IntegrationRecord, PageRequest, ToolCallFilter, now_ms};
use executor_upstream::{Discovery, Endpoint, EnvSecrets, HttpTransport, State, seal_env};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// Largest API description or schema read, fetched or uploaded.
pub const MAX_SPEC_BYTES: usize = 128 * 1024 * 1024;
/// Warnings an import reports at most (a large document can have
/// thousands; the first ones say what kind of trouble it has).
const MAX_WARNINGS: usize = 20;

/// Where a document comes from.
#[derive(Debug, Clone)]
pub enum DocumentSource {
    /// An http(s) URL, fetched now and again at refresh.
    Url(String),
    /// A file on this machine (the CLI only), stored as an absolute path.
    Path(String),
    /// The document itself (uploaded); a refresh re-imports this text.
    Text(String),
}

/// Where a GraphQL schema comes from.
#[derive(Debug, Clone)]
pub enum GraphqlSchemaSource {
    /// Ask the endpoint (introspection), with the connection's credential.
    Introspect,
    /// Introspection JSON or SDL in a file (the CLI only).
    Path(String),
    /// Introspection JSON or SDL, uploaded.
    Text(String),
}

/// Where an upstream MCP server is.
#[derive(Debug, Clone)]
pub enum McpEndpoint {
    /// Streamable HTTP or legacy SSE, or the first that answers.
    Http {
        url: String,
        transport: HttpTransport,
    },
    /// A command speaking MCP on stdio.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
}

/// An integration to add (or replace: a namespace is the key).
#[derive(Debug, Clone)]
pub enum AddIntegration {
    OpenApi {
        namespace: String,
        spec: DocumentSource,
        /// Overrides the servers the document declares.
        base_url: Option<String>,
    },
    Graphql {
        namespace: String,
        endpoint: String,
        schema: GraphqlSchemaSource,
    },
    Mcp {
        namespace: String,
        endpoint: McpEndpoint,
    },
}

impl AddIntegration {
    pub fn namespace(&self) -> &str {
        match self {
            AddIntegration::OpenApi { namespace, .. }
            | AddIntegration::Graphql { namespace, .. }
            | AddIntegration::Mcp { namespace, .. } => namespace,
        }
    }
}

/// What an update changes; what it leaves out stays.
#[derive(Debug, Clone, Default)]
pub struct UpdateIntegration {
    /// An OpenAPI integration's base URL (over the document's servers), or
    /// a GraphQL API's endpoint.
    pub base_url: Option<String>,
}

/// Import progress: operations done of the total.
pub type Progress<'a> = &'a mut (dyn FnMut(usize, usize) + Send);

/// An integration as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationSummary {
    pub namespace: String,
    /// openapi, graphql or mcp.
    pub kind: String,
    pub tool_count: i64,
    pub base_url: Option<String>,
    /// The URL or path it was read from (`(uploaded)` for a document).
    pub source: String,
    /// Whether the server can serve it: `ok` (with a note after it, at
    /// times), `needs login`, or `unavailable: ` and why.
    pub status: String,
    /// What an operator has to do about it, if anything (SPEC §14).
    #[schema(value_type = String, example = "ready")]
    pub state: IntegrationState,
    /// How its upstream asks to be authenticated, one phrase per way its
    /// description declares ("bearer token"); empty when it declares none.
    pub auth: Vec<String>,
    /// How the server reaches an MCP upstream ("streamable HTTP", "stdio").
    pub transport: Option<String>,
    pub updated_at_ms: i64,
}

/// An integration's state, as the console and the API name it (SPEC §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationState {
    /// Its tools can be called.
    Ready,
    /// It waits for an OAuth login (`connections login`, Connect).
    NeedsLogin,
    /// It declares a way to authenticate and has no connection, or its
    /// last call said no credential was set.
    MissingCredential,
    /// Its last call, among the org's latest, could not reach it.
    Unreachable,
    /// Its stored record cannot be served (`status` says why).
    Unavailable,
}

impl IntegrationState {
    pub fn as_str(self) -> &'static str {
        match self {
            IntegrationState::Ready => "ready",
            IntegrationState::NeedsLogin => "needs login",
            IntegrationState::MissingCredential => "missing credential",
            IntegrationState::Unreachable => "unreachable",
            IntegrationState::Unavailable => "unavailable",
        }
    }

    /// The state a kind's status text gives, before the connections and
    /// the calls are looked at.
    fn of_status(status: &str) -> Self {
        if status.starts_with("ok") {
            IntegrationState::Ready
        } else if status == "needs login" {
            IntegrationState::NeedsLogin
        } else {
            IntegrationState::Unavailable
        }
    }
}

/// The org's calls [`Operations::list_integrations`] reads for the last
/// outcome of each integration: the latest ones, by the index every
/// listing of calls uses.
const RECENT_CALLS_READ: u32 = 200;

/// What an add, preview or refresh did.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationAdded {
    pub integration: IntegrationSummary,
    /// The import's first warnings (operations left out and why).
    pub warnings: Vec<String>,
    /// An MCP server that asks for an OAuth login first: its tools appear
    /// once `connections login` is done.
    pub needs_login: bool,
    pub elapsed_ms: u64,
    /// A preview's tools (paths), at most [`PREVIEW_TOOLS`]; empty after an
    /// add.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// Tool paths a preview lists at most.
pub const PREVIEW_TOOLS: usize = 500;

/// A record made by an import, not yet stored.
struct Imported {
    record: IntegrationRecord,
    warnings: Vec<String>,
    needs_login: bool,
}

impl Operations {
    /// Imports and stores an integration with the search index of its tools.
    pub async fn add_integration(
        &self,
        actor: &Actor,
        input: AddIntegration,
        local_network: bool,
        progress: Progress<'_>,
    ) -> OpResult<IntegrationAdded> {
        let started = Instant::now();
        let imported = self.import(actor, input, local_network, progress).await?;
        let Imported {
            record,
            warnings,
            needs_login,
        } = imported;
        let summary = self.summary(&record);
        if needs_login {
            // No tools to index until the login.
            self.store().upsert_integration(record).await?;
        } else {
            self.store_indexed(record).await?;
        }
        Ok(IntegrationAdded {
            integration: summary,
            warnings,
            needs_login,
            elapsed_ms: started.elapsed().as_millis() as u64,
            tools: Vec::new(),
        })
    }

    /// What [`Operations::add_integration`] would store, and its tools,
    /// without storing anything.
    pub async fn preview_integration(
        &self,
        actor: &Actor,
        input: AddIntegration,
        local_network: bool,
    ) -> OpResult<IntegrationAdded> {
        let started = Instant::now();
        let imported = self
            .import(actor, input, local_network, &mut |_, _| {})
            .await?;
        let tools = if imported.needs_login {
            Vec::new()
        } else {
            let record = &imported.record;
            let loaded = self
                .parts
                .kinds
                .load_group(&record.org_id, record, &record.document, None)
                .map_err(|why| OpError::invalid("spec", why.to_string()))?;
            loaded
                .group
                .tools()
                .iter()
                .take(PREVIEW_TOOLS)
                .map(|t| t.path.to_string())
                .collect()
        };
        Ok(IntegrationAdded {
            integration: self.summary(&imported.record),
            warnings: imported.warnings,
            needs_login: imported.needs_login,
            elapsed_ms: started.elapsed().as_millis() as u64,
            tools,
        })
    }

    /// Reads an integration's source again and replaces its tools; an
    /// operator-given base URL is kept.
    pub async fn refresh_integration(
        &self,
        actor: &Actor,
        namespace: &str,
        local_network: bool,
        progress: Progress<'_>,
    ) -> OpResult<IntegrationAdded> {
        let record = self.integration_record(actor, namespace).await?;
        let input = self.source_of(&record)?;
        self.add_integration(actor, input, local_network, progress)
            .await
    }

    /// Changes an integration's settings: it is imported again from its
    /// source with them (as a refresh), so its tools follow.
    pub async fn update_integration(
        &self,
        actor: &Actor,
        namespace: &str,
        update: UpdateIntegration,
        local_network: bool,
        progress: Progress<'_>,
    ) -> OpResult<IntegrationAdded> {
        let record = self.integration_record(actor, namespace).await?;
        let mut input = self.source_of(&record)?;
        if let Some(url) = update.base_url {
            http_url(&url, "baseUrl")?;
            match &mut input {
                AddIntegration::OpenApi { base_url, .. } => *base_url = Some(url),
                AddIntegration::Graphql { endpoint, .. } => *endpoint = url,
                AddIntegration::Mcp { .. } => {
                    return Err(OpError::invalid(
                        "baseUrl",
                        "an MCP server has no base URL: add it again with its new URL",
                    ));
                }
            }
        }
        self.add_integration(actor, input, local_network, progress)
            .await
    }

    pub async fn remove_integration(&self, actor: &Actor, namespace: &str) -> OpResult<()> {
        if self
            .store()
            .remove_integration(&actor.org_id, namespace)
            .await?
        {
            Ok(())
        } else {
            Err(OpError::not_found(format_args!(
                "integration {namespace:?}"
            )))
        }
    }

    /// The org's integrations, by namespace.
    pub async fn list_integrations(&self, actor: &Actor) -> OpResult<Vec<IntegrationSummary>> {
        let records = self.store().list_integrations(&actor.org_id, false).await?;
        let seen = self.what_was_seen(actor).await?;
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            out.push(self.listed(actor, record, &seen).await?);
        }
        Ok(out)
    }

    pub async fn get_integration(
        &self,
        actor: &Actor,
        namespace: &str,
    ) -> OpResult<IntegrationSummary> {
        let records = self.store().list_integrations(&actor.org_id, false).await?;
        let record = records
            .into_iter()
            .find(|r| r.namespace == namespace)
            .ok_or_else(|| OpError::not_found(format_args!("integration {namespace:?}")))?;
        let seen = self.what_was_seen(actor).await?;
        self.listed(actor, record, &seen).await
    }

    /// The org's connections and the last outcome of each integration
    /// among its latest calls: what a listed integration's state reads.
    async fn what_was_seen(&self, actor: &Actor) -> OpResult<Seen> {
        let connected = self
            .store()
            .list_connections(&actor.org_id)
            .await?
            .into_iter()
            .map(|c| c.namespace)
            .collect();
        let calls = self
            .store()
            .list_tool_calls(
                &actor.org_id,
                &ToolCallFilter::default(),
                &PageRequest::first(RECENT_CALLS_READ),
            )
            .await?;
        let mut last_error = HashMap::new();
        // Newest first: the first call of a namespace is its last outcome.
        for call in calls {
            let namespace = call.tool_path.split('.').next().unwrap_or_default();
            if !last_error.contains_key(namespace) {
                last_error.insert(namespace.to_string(), call.error_code);
            }
        }
        Ok(Seen {
            connected,
            last_error,
        })
    }

    /// A listed record with its state, which needs its document.
    async fn listed(
        &self,
        actor: &Actor,
        record: IntegrationRecord,
        seen: &Seen,
    ) -> OpResult<IntegrationSummary> {
        let document = self
            .store()
            .integration_document(&actor.org_id, &record.namespace, record.revision)
            .await?
            .map(|stored| stored.document)
            .unwrap_or_default();
        let mut summary = self.summary_with(&record, &document);
        summary.state = seen.state_of(&summary);
        Ok(summary)
    }

    fn summary(&self, record: &IntegrationRecord) -> IntegrationSummary {
        self.summary_with(record, &record.document)
    }

    /// `record` as listed, its status read from `document`.
    fn summary_with(&self, record: &IntegrationRecord, document: &str) -> IntegrationSummary {
        let loader = self.parts.kinds.of(record);
        let status = match &loader {
            Ok(loader) => loader.status(document),
            Err(why) => format!("unavailable: {why}"),
        };
        let loader = loader.ok();
        IntegrationSummary {
            namespace: record.namespace.clone(),
            kind: record.kind.clone(),
            tool_count: record.tool_count,
            base_url: record.base_url.clone(),
            source: record.source.clone(),
            status: status.clone(),
            state: IntegrationState::of_status(&status),
            auth: loader.map(|l| l.auth(document)).unwrap_or_default(),
            transport: loader.and_then(|l| l.transport(document)),
            updated_at_ms: record.updated_at_ms,
        }
    }

    /// The stored record of `namespace`, with its document.
    pub(crate) async fn integration_record(
        &self,
        actor: &Actor,
        namespace: &str,
    ) -> OpResult<IntegrationRecord> {
        let existing = self.store().list_integrations(&actor.org_id, true).await?;
        existing
            .into_iter()
            .find(|i| i.namespace == namespace)
            .ok_or_else(|| OpError::not_found(format_args!("integration {namespace:?}")))
    }

    /// How to import a stored integration again.
    fn source_of(&self, record: &IntegrationRecord) -> OpResult<AddIntegration> {
        let namespace = record.namespace.clone();
        match record.integration_kind() {
            Ok(IntegrationKind::OpenApi) => {
                // Refresh is also the way out for a record the server cannot
                // read (a newer format, damage), so it reads only the fields
                // it needs, and goes on without them when even that fails.
                #[derive(serde::Deserialize)]
                struct Previous {
                    base_url_override: Option<String>,
                    #[serde(default)]
                    uploaded: Option<String>,
                }
                let previous = serde_json::from_str::<Previous>(&record.document).ok();
                let base_url = previous.as_ref().and_then(|p| p.base_url_override.clone());
                let spec = match previous.and_then(|p| p.uploaded) {
                    Some(text) => DocumentSource::Text(text),
                    None => document_source(&record.source),
                };
                Ok(AddIntegration::OpenApi {
                    namespace,
                    spec,
                    base_url,
                })
            }
            Ok(IntegrationKind::Graphql) => {
                let endpoint = record.base_url.clone().unwrap_or_default();
                // The source is the schema file, or the endpoint itself
                // when it was introspected.
                let schema = if record.source == endpoint {
                    GraphqlSchemaSource::Introspect
                } else {
                    GraphqlSchemaSource::Path(record.source.clone())
                };
                Ok(AddIntegration::Graphql {
                    namespace,
                    endpoint,
                    schema,
                })
            }
            Ok(IntegrationKind::Mcp) => {
                let stored = executor_upstream::load(&record.document).map_err(|why| {
                    OpError::conflict(
                        "unreadable_record",
                        format!("{namespace} cannot be refreshed: {why}; add it again"),
                    )
                })?;
                Ok(AddIntegration::Mcp {
                    namespace,
                    endpoint: match stored.endpoint {
                        Endpoint::Http { url, transport } => McpEndpoint::Http { url, transport },
                        Endpoint::Stdio { command, args, env } => {
                            McpEndpoint::Stdio { command, args, env }
                        }
                    },
                })
            }
            Err(e) => Err(OpError::conflict(
                "unknown_kind",
                format!(
                    "{namespace} cannot be refreshed by this release: {e}; \
                     remove it, or refresh it with the release that added it"
                ),
            )),
        }
    }

    /// Imports an integration into a record (not stored).
    async fn import(
        &self,
        actor: &Actor,
        input: AddIntegration,
        local_network: bool,
        progress: Progress<'_>,
    ) -> OpResult<Imported> {
        check_namespace(input.namespace())?;
        if local_network && !self.surface().allow_local_network {
            return Err(OpError::forbidden(
                "this server does not reach local network addresses (--allow-local-network)",
            ));
        }
        match input {
            AddIntegration::OpenApi {
                namespace,
                spec,
                base_url,
            } => {
                self.import_openapi(actor, &namespace, spec, base_url, local_network, progress)
                    .await
            }
            AddIntegration::Graphql {
                namespace,
                endpoint,
                schema,
            } => {
                self.import_graphql(actor, &namespace, &endpoint, schema, local_network)
                    .await
            }
            AddIntegration::Mcp {
                namespace,
                endpoint,
            } => {
                self.import_mcp(actor, &namespace, endpoint, local_network)
                    .await
            }
        }
    }

    /// The text of a document, fetched or read; with whether it came from
    /// a URL and the source to store.
    async fn read_document(
        &self,
        source: &DocumentSource,
        field: &'static str,
        local_network: bool,
    ) -> OpResult<String> {
        match source {
            DocumentSource::Url(url) => {
                http_url(url, field)?;
                let http = self.http_client(local_network)?;
                http.fetch_document(url, MAX_SPEC_BYTES)
                    .await
                    .map_err(|e| OpError::upstream(format!("cannot fetch {url}: {}", e.message)))
            }
            DocumentSource::Path(path) => {
                if !self.surface().may_read_files {
                    return Err(OpError::forbidden(
                        "a file path is read only from the command line; upload the document",
                    ));
                }
                std::fs::read_to_string(path)
                    .map_err(|e| OpError::invalid(field, format!("cannot read {path}: {e}")))
            }
            DocumentSource::Text(text) => {
                if text.len() > MAX_SPEC_BYTES {
                    return Err(OpError::invalid(
                        field,
                        format!("a document is at most {MAX_SPEC_BYTES} bytes"),
                    ));
                }
                Ok(text.clone())
            }
        }
    }

    fn http_client(&self, local_network: bool) -> OpResult<HttpClient> {
        HttpClient::new(self.http_config(local_network))
            .map_err(|e| OpError::internal("cannot build the HTTP client", e))
    }

    async fn import_openapi(
        &self,
        actor: &Actor,
        namespace: &str,
        spec: DocumentSource,
        base_url: Option<String>,
        local_network: bool,
        progress: Progress<'_>,
    ) -> OpResult<Imported> {
        if let Some(url) = &base_url {
            http_url(url, "baseUrl")?;
        }
        let text = self.read_document(&spec, "spec", local_network).await?;
        let source_url = match &spec {
            DocumentSource::Url(url) => Some(url.clone()),
            _ => None,
        };
        let options = ImportOptions {
            base_url,
            source_url,
            ..ImportOptions::new(namespace)
        };
        let imported = import_with_progress(&text, &options, progress)
            .map_err(|e| OpError::invalid("spec", e.to_string()))?;
        let warnings = first_warnings(&imported.warnings);
        let mut document = serde_json::to_value(&imported)
            .map_err(|e| OpError::internal("cannot encode the import", e))?;
        // An uploaded document is kept with the import, so that a refresh
        // has something to read again.
        if let (DocumentSource::Text(_), Some(fields)) = (&spec, document.as_object_mut()) {
            fields.insert("uploaded".into(), serde_json::Value::String(text));
        }
        let record = IntegrationRecord {
            org_id: actor.org_id.clone(),
            namespace: namespace.to_string(),
            kind: IntegrationKind::OpenApi.as_str().into(),
            source: stored_source(&spec),
            base_url: imported.base_url.clone(),
            tool_count: imported.tools.len() as i64,
            document: document.to_string(),
            updated_at_ms: now_ms(),
            revision: 0,
            search_index: None,
        };
        Ok(Imported {
            record,
            warnings,
            needs_login: false,
        })
    }

    async fn import_graphql(
        &self,
        actor: &Actor,
        namespace: &str,
        endpoint: &str,
        schema: GraphqlSchemaSource,
        local_network: bool,
    ) -> OpResult<Imported> {
        let endpoint = http_url(endpoint, "endpoint")?;
        let (text, source) = match schema {
            GraphqlSchemaSource::Introspect => {
                // The connection's credential, when one is set (a refresh).
                let credential = self.credential_of(&actor.org_id, namespace).await?;
                let http = self.http_client(local_network)?;
                let text = executor_graphql::introspect(&http, endpoint.as_str(), &credential)
                    .await
                    .map_err(|e| {
                        OpError::upstream(format!("cannot introspect {endpoint}: {}", e.message))
                    })?;
                (text, endpoint.to_string())
            }
            GraphqlSchemaSource::Path(path) => {
                let source = DocumentSource::Path(path);
                let text = self.read_document(&source, "schema", false).await?;
                (text, stored_source(&source))
            }
            GraphqlSchemaSource::Text(text) => {
                let text = self
                    .read_document(&DocumentSource::Text(text), "schema", false)
                    .await?;
                (text, UPLOADED.to_string())
            }
        };
        let imported = executor_graphql::import(&text)
            .map_err(|e| OpError::invalid("schema", e.to_string()))?;
        drop(text);
        let record = IntegrationRecord {
            org_id: actor.org_id.clone(),
            namespace: namespace.to_string(),
            kind: IntegrationKind::Graphql.as_str().into(),
            source,
            base_url: Some(endpoint.to_string()),
            tool_count: imported.tools.len() as i64,
            document: executor_graphql::store(&imported, namespace, endpoint.as_str()),
            updated_at_ms: now_ms(),
            revision: 0,
            search_index: None,
        };
        Ok(Imported {
            record,
            warnings: first_warnings(&imported.warnings),
            needs_login: false,
        })
    }

    async fn import_mcp(
        &self,
        actor: &Actor,
        namespace: &str,
        endpoint: McpEndpoint,
        local_network: bool,
    ) -> OpResult<Imported> {
        let endpoint = match endpoint {
            McpEndpoint::Http { url, transport } => {
                http_url(&url, "url")?;
                Endpoint::Http { url, transport }
            }
            McpEndpoint::Stdio { command, args, env } => {
                if !self.surface().may_start_commands {
                    return Err(OpError::forbidden(
                        "this server does not start MCP servers as commands \
                         (--allow-stdio-integrations)",
                    ));
                }
                if command.trim().is_empty() {
                    return Err(OpError::invalid("command", "the command is empty"));
                }
                // Sealed like a connection's secret (SPEC §9): the record
                // never holds a value in clear.
                let env = if env.is_empty() {
                    env
                } else {
                    seal_env(self.key()?, &actor.org_id, namespace, env).map_err(|e| {
                        OpError::internal("cannot seal the command's environment", e)
                    })?
                };
                Endpoint::Stdio { command, args, env }
            }
        };
        let http = self.http_client(local_network)?;
        let (state, record) = self
            .discover_mcp(&actor.org_id, namespace, &endpoint, &http)
            .await?;
        Ok(Imported {
            record,
            warnings: Vec::new(),
            needs_login: state == State::NeedsLogin,
        })
    }

    /// Lists the tools of the upstream MCP server at `endpoint` with the
    /// connection's credential and stores them (or that it needs a login);
    /// the state stored and the number of tools. For a login that just
    /// completed.
    pub async fn sync_mcp(
        &self,
        org_id: &str,
        namespace: &str,
        endpoint: &Endpoint,
        http: &HttpClient,
    ) -> OpResult<(State, usize)> {
        let (state, record) = self.discover_mcp(org_id, namespace, endpoint, http).await?;
        let tools = record.tool_count as usize;
        match state {
            State::Ready => self.store_indexed(record).await?,
            State::NeedsLogin => self.store().upsert_integration(record).await?,
        }
        Ok((state, tools))
    }

    async fn discover_mcp(
        &self,
        org_id: &str,
        namespace: &str,
        endpoint: &Endpoint,
        http: &HttpClient,
    ) -> OpResult<(State, IntegrationRecord)> {
        let credential = self.credential_of(org_id, namespace).await?;
        let secrets = EnvSecrets {
            key: self.parts.key.as_deref(),
            org_id,
        };
        let discovered =
            executor_upstream::discover(namespace, endpoint, &credential, http, secrets)
                .await
                .map_err(|why| {
                    OpError::upstream(format!(
                        "cannot list the tools of {}: {why}",
                        endpoint.source()
                    ))
                })?;
        let (state, tools, document) = match discovered {
            Discovery::Ready(tools) => {
                let document = executor_upstream::store(namespace, endpoint, State::Ready, &tools);
                (State::Ready, tools.len(), document)
            }
            Discovery::NeedsLogin { challenge } => {
                let document = executor_upstream::store_needing_login(
                    namespace,
                    endpoint,
                    challenge.as_deref(),
                );
                (State::NeedsLogin, 0, document)
            }
        };
        let record = IntegrationRecord {
            org_id: org_id.to_string(),
            namespace: namespace.to_string(),
            kind: IntegrationKind::Mcp.as_str().into(),
            source: endpoint.source(),
            base_url: match endpoint {
                Endpoint::Http { url, .. } => Some(url.clone()),
                Endpoint::Stdio { .. } => None,
            },
            tool_count: tools as i64,
            document,
            updated_at_ms: now_ms(),
            revision: 0,
            search_index: None,
        };
        Ok((state, record))
    }

    /// The credential of `namespace`'s connection, when one is set (an
    /// endpoint asked at `add` or `refresh` gets it as a call would).
    async fn credential_of(&self, org_id: &str, namespace: &str) -> OpResult<Credential> {
        Ok(self
            .parts
            .credentials
            .credential(org_id, namespace)
            .await
            // The namespace's connection is set but cannot be used (its
            // variable is unset, its key lost): the state, not the input.
            .map_err(|e| OpError::conflict("connection_unusable", e.message))?
            .unwrap_or(Credential::None))
    }

    /// Stores a new import with the search index of its tools, loaded as
    /// the server will load them. Without an index the record is still
    /// served: the server builds one at its first load and stores it back.
    async fn store_indexed(&self, mut record: IntegrationRecord) -> OpResult<()> {
        record.search_index = self
            .parts
            .kinds
            .search_index(&record.org_id, &record)
            .inspect_err(|why| {
                tracing::warn!(
                    namespace = %record.namespace,
                    "the tools were not indexed at import: {why}"
                )
            })
            .ok();
        self.store().upsert_integration(record).await?;
        Ok(())
    }
}

/// What an uploaded document's record names as its source.
const UPLOADED: &str = "(uploaded)";

/// A CLI's `--spec`: a URL, else a path.
/// What a listed integration's state reads beyond its record.
struct Seen {
    /// Namespaces with a connection.
    connected: HashSet<String>,
    /// The error code of each namespace's last call among the org's latest
    /// (None: it succeeded).
    last_error: HashMap<String, Option<String>>,
}

impl Seen {
    fn state_of(&self, summary: &IntegrationSummary) -> IntegrationState {
        if summary.state != IntegrationState::Ready {
            return summary.state;
        }
        let connected = self.connected.contains(&summary.namespace);
        if !connected && !summary.auth.is_empty() {
            return IntegrationState::MissingCredential;
        }
        match self
            .last_error
            .get(&summary.namespace)
            .and_then(Option::as_deref)
        {
            Some(CONNECTION_MISSING) => IntegrationState::MissingCredential,
            Some(OAUTH_REAUTH_REQUIRED) => IntegrationState::NeedsLogin,
            Some(INTEGRATION_UNAVAILABLE | UPSTREAM_TIMEOUT) => IntegrationState::Unreachable,
            _ => IntegrationState::Ready,
        }
    }
}

/// The error codes (SPEC §7) a listed integration's state reads.
const CONNECTION_MISSING: &str = "connection_missing";
const OAUTH_REAUTH_REQUIRED: &str = "oauth_reauth_required";
const INTEGRATION_UNAVAILABLE: &str = "integration_unavailable";
const UPSTREAM_TIMEOUT: &str = "upstream_timeout";

pub fn document_source(spec: &str) -> DocumentSource {
    if spec.starts_with("http://") || spec.starts_with("https://") {
        DocumentSource::Url(spec.to_string())
    } else {
        DocumentSource::Path(spec.to_string())
    }
}

/// The source a record keeps: a URL as given, a path made absolute against
/// the directory `add` ran in (so that `refresh` finds it from anywhere).
fn stored_source(source: &DocumentSource) -> String {
    match source {
        DocumentSource::Url(url) => url.clone(),
        DocumentSource::Path(path) => std::path::absolute(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.clone()),
        DocumentSource::Text(_) => UPLOADED.to_string(),
    }
}

/// A namespace an integration (or its connection) can take: a reserved
/// one is taken already (by the built-in tools), any other bad one is bad
/// input.
pub(crate) fn check_namespace(namespace: &str) -> OpResult<()> {
    if executor_catalog::RESERVED_NAMESPACES.contains(&namespace) {
        return Err(OpError {
            field: Some("namespace"),
            ..OpError::conflict(
                "namespace_reserved",
                executor_catalog::namespace_problem(namespace).unwrap_or_default(),
            )
        });
    }
    match executor_catalog::namespace_problem(namespace) {
        Some(problem) => Err(OpError::invalid("namespace", problem)),
        None => Ok(()),
    }
}

fn http_url(text: &str, field: &'static str) -> OpResult<url::Url> {
    url::Url::parse(text)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or_else(|| OpError::invalid(field, format!("{text:?} is not an http(s) URL")))
}

fn first_warnings(warnings: &[String]) -> Vec<String> {
    warnings.iter().take(MAX_WARNINGS).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(namespace: &str, status: &str, auth: &[&str]) -> IntegrationSummary {
        IntegrationSummary {
            namespace: namespace.into(),
            kind: "openapi".into(),
            tool_count: 1,
            base_url: None,
            source: String::new(),
            status: status.into(),
            state: IntegrationState::of_status(status),
            auth: auth.iter().map(|a| a.to_string()).collect(),
            transport: None,
            updated_at_ms: 0,
        }
    }

    fn seen(connected: &[&str], last: &[(&str, Option<&str>)]) -> Seen {
        Seen {
            connected: connected.iter().map(|c| c.to_string()).collect(),
            last_error: last
                .iter()
                .map(|(ns, code)| (ns.to_string(), code.map(str::to_string)))
                .collect(),
        }
    }

    #[test]
    fn a_listed_integration_says_what_an_operator_has_to_do() {
        let state = |i: &IntegrationSummary, s: &Seen| s.state_of(i);
        let nothing = seen(&[], &[]);
        assert_eq!(
            state(&listed("a", "ok", &[]), &nothing),
            IntegrationState::Ready
        );
        assert_eq!(
            state(&listed("a", "needs login", &[]), &nothing),
            IntegrationState::NeedsLogin
        );
        assert_eq!(
            state(
                &listed("a", "unavailable: damaged", &["bearer token"]),
                &nothing
            ),
            IntegrationState::Unavailable
        );
        // Declares a credential: missing until a connection is set.
        let bearer = listed("a", "ok", &["bearer token"]);
        assert_eq!(
            state(&bearer, &nothing),
            IntegrationState::MissingCredential
        );
        assert_eq!(state(&bearer, &seen(&["a"], &[])), IntegrationState::Ready);
        // The last call among the latest decides the rest; a later success clears it.
        let open = listed("a", "ok", &[]);
        for (code, expected) in [
            ("integration_unavailable", IntegrationState::Unreachable),
            ("upstream_timeout", IntegrationState::Unreachable),
            ("connection_missing", IntegrationState::MissingCredential),
            ("oauth_reauth_required", IntegrationState::NeedsLogin),
            ("upstream_http_error", IntegrationState::Ready),
        ] {
            assert_eq!(
                state(&open, &seen(&[], &[("a", Some(code))])),
                expected,
                "{code}"
            );
        }
        assert_eq!(
            state(&open, &seen(&[], &[("a", None)])),
            IntegrationState::Ready
        );
        assert_eq!(
            state(&open, &seen(&[], &[("b", Some("upstream_timeout"))])),
            IntegrationState::Ready,
            "another namespace's failure is not this one's"
        );
    }
}
