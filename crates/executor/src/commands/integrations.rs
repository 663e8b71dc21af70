//! `executor integrations …`: import, list, refresh and remove the org's
//! integrations.

use std::sync::Arc;

use executor_integrations::{Credentials, IntegrationKind, Kinds};
use executor_oauth::OAuth;
use executor_openapi::{ImportOptions, import_with_progress};
use executor_outbound::{Credential, CredentialSource, HttpClient, HttpConfig};
use executor_store::{IntegrationRecord, Store, now_ms};
use executor_upstream::{Discovery, Endpoint, HttpTransport, State, UpstreamSettings, Upstreams};

use super::resolve_org;
use crate::AnyResult;
use crate::cli::{AddIntegration, GlobalOpts, IntegrationsCommand};

pub(crate) async fn integrations(
    shared: Arc<dyn Store>,
    global: &GlobalOpts,
    command: IntegrationsCommand,
) -> AnyResult<()> {
    let store = shared.as_ref();
    match command {
        IntegrationsCommand::Add(AddIntegration::Openapi {
            spec,
            local_network,
            namespace,
            base_url,
            org,
        }) => {
            let allow_local_network = local_network.allowed;
            check_namespace(&namespace)?;
            let org_id = resolve_org(store, &org).await?;
            let kinds = cli_kinds(shared.clone())?;
            import_openapi(
                store,
                &kinds,
                &org_id,
                &spec,
                &namespace,
                base_url,
                allow_local_network,
            )
            .await
        }
        IntegrationsCommand::Add(AddIntegration::Graphql {
            endpoint,
            schema,
            local_network,
            namespace,
            org,
        }) => {
            let allow_local_network = local_network.allowed;
            let org_id = resolve_org(store, &org).await?;
            let kinds = cli_kinds(shared.clone())?;
            let source = GraphqlSource {
                endpoint: &endpoint,
                schema: schema.as_deref(),
                allow_local_network,
            };
            let credentials = sealed_credentials(shared.clone(), global, allow_local_network)?;
            import_graphql(store, &kinds, &credentials, &org_id, &namespace, source).await
        }
        IntegrationsCommand::Add(AddIntegration::Mcp {
            url,
            transport,
            command,
            args,
            env,
            local_network,
            namespace,
            org,
        }) => {
            let allow_local_network = local_network.allowed;
            let org_id = resolve_org(store, &org).await?;
            let endpoint = match (url, command) {
                (Some(url), _) => Endpoint::Http {
                    url,
                    transport: transport.parse::<HttpTransport>()?,
                },
                (None, Some(command)) => Endpoint::Stdio {
                    command,
                    args,
                    env: parse_env(&env)?,
                },
                (None, None) => return Err("give --url or --command".into()),
            };
            let kinds = cli_kinds(shared.clone())?;
            let credentials = sealed_credentials(shared.clone(), global, allow_local_network)?;
            let source = McpSource {
                endpoint,
                allow_local_network,
            };
            import_mcp(store, &kinds, &credentials, &org_id, &namespace, source).await
        }
        IntegrationsCommand::List { org } => {
            let org_id = resolve_org(store, &org).await?;
            let kinds = cli_kinds(shared.clone())?;
            for i in store.list_integrations(&org_id, false).await? {
                let document = store
                    .integration_document(&org_id, &i.namespace, i.revision)
                    .await?
                    .map(|stored| stored.document)
                    .unwrap_or_default();
                println!(
                    "{}\t{}\t{} tools\t{}\t{}\t{}",
                    i.namespace,
                    i.kind,
                    i.tool_count,
                    i.base_url.as_deref().unwrap_or("(no base URL)"),
                    i.source,
                    stored_status(&kinds, &i, &document),
                );
            }
            Ok(())
        }
        IntegrationsCommand::Refresh {
            namespace,
            local_network,
            org,
        } => {
            let allow_local_network = local_network.allowed;
            let org_id = resolve_org(store, &org).await?;
            let existing = store.list_integrations(&org_id, true).await?;
            let record = existing
                .into_iter()
                .find(|i| i.namespace == namespace)
                .ok_or_else(|| format!("no integration {namespace:?}"))?;
            match record.integration_kind() {
                Ok(IntegrationKind::OpenApi) => {
                    let kinds = cli_kinds(shared.clone())?;
                    refresh_openapi(store, &kinds, &org_id, &record, allow_local_network).await
                }
                Ok(IntegrationKind::Graphql) => {
                    let kinds = cli_kinds(shared.clone())?;
                    let endpoint = record.base_url.clone().unwrap_or_default();
                    let source = GraphqlSource {
                        endpoint: &endpoint,
                        // The source is the schema file, or the endpoint
                        // itself when it was introspected.
                        schema: (record.source != endpoint).then_some(record.source.as_str()),
                        allow_local_network,
                    };
                    let credentials =
                        sealed_credentials(shared.clone(), global, allow_local_network)?;
                    import_graphql(store, &kinds, &credentials, &org_id, &namespace, source).await
                }
                Ok(IntegrationKind::Mcp) => {
                    let kinds = cli_kinds(shared.clone())?;
                    let endpoint = executor_upstream::load(&record.document)
                        .map(|stored| stored.endpoint)
                        .map_err(|why| {
                            format!("{namespace} cannot be refreshed: {why}; add it again")
                        })?;
                    let credentials =
                        sealed_credentials(shared.clone(), global, allow_local_network)?;
                    let source = McpSource {
                        endpoint,
                        allow_local_network,
                    };
                    import_mcp(store, &kinds, &credentials, &org_id, &namespace, source).await
                }
                Err(e) => Err(format!(
                    "{namespace} cannot be refreshed by this release: {e}; \
                     remove it, or refresh it with the release that added it"
                )
                .into()),
            }
        }
        IntegrationsCommand::Remove { namespace, org } => {
            let org_id = resolve_org(store, &org).await?;
            if store.remove_integration(&org_id, &namespace).await? {
                Ok(())
            } else {
                Err(format!("no integration {namespace:?}").into())
            }
        }
    }
}

/// Imports an OpenAPI integration's source again, keeping an
/// operator-given base URL.
async fn refresh_openapi(
    store: &dyn Store,
    kinds: &Kinds,
    org_id: &str,
    record: &IntegrationRecord,
    allow_local_network: bool,
) -> AnyResult<()> {
    let namespace = &record.namespace;
    // An operator-given base URL is kept; one from the document
    // follows the document. Refresh is also the way out for a record
    // the server cannot read (a newer format, damage), so it reads
    // only that field, and goes on without it when even that fails.
    #[derive(serde::Deserialize)]
    struct Previous {
        base_url_override: Option<String>,
    }
    let base_url = match serde_json::from_str::<Previous>(&record.document) {
        Ok(previous) => previous.base_url_override,
        Err(e) => {
            eprintln!(
                "warning: the stored record of {namespace} cannot be read ({e}); \
                 refreshing from {} without its --base-url",
                record.source
            );
            None
        }
    };
    import_openapi(
        store,
        kinds,
        org_id,
        &record.source,
        namespace,
        base_url,
        allow_local_network,
    )
    .await
}

/// The kinds, to say whether each stored record can be served and to index
/// a new one's tools; the tools are not called here, so the HTTP client
/// has the defaults and the credentials no key.
pub(crate) fn cli_kinds(store: Arc<dyn Store>) -> AnyResult<Kinds> {
    let http = Arc::new(HttpClient::new(HttpConfig::default())?);
    let credentials = Arc::new(Credentials {
        store: store.clone(),
        key: None,
        oauth: None,
    });
    let upstreams = Upstreams::new(
        http.clone(),
        credentials.clone(),
        store,
        UpstreamSettings::default(),
    );
    Ok(Kinds::new(http, credentials, upstreams))
}

/// `NAME=value` pairs of `--env`.
fn parse_env(pairs: &[String]) -> AnyResult<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
            _ => Err(format!("--env {pair:?} is not NAME=value").into()),
        })
        .collect()
}

/// Where an upstream MCP server is, and whether a local URL may be used.
struct McpSource {
    endpoint: Endpoint,
    allow_local_network: bool,
}

/// Lists an upstream MCP server's tools (starting its command, for a stdio
/// one: the operator runs `add` on purpose) and stores them with their
/// search index; a server that asks for an OAuth login is stored as
/// needing one.
async fn import_mcp(
    store: &dyn Store,
    kinds: &Kinds,
    credentials: &Credentials,
    org_id: &str,
    namespace: &str,
    source: McpSource,
) -> AnyResult<()> {
    check_namespace(namespace)?;
    let endpoint = source.endpoint;
    if let Endpoint::Http { url, .. } = &endpoint {
        url::Url::parse(url)
            .ok()
            .filter(|parsed| matches!(parsed.scheme(), "http" | "https"))
            .ok_or_else(|| format!("--url {url:?} is not an http(s) URL"))?;
    }
    let started = std::time::Instant::now();
    let http = HttpClient::new(HttpConfig {
        allow_local_network: source.allow_local_network,
        ..HttpConfig::default()
    })?;
    let (state, tools) = sync_mcp(
        store,
        kinds,
        credentials,
        &http,
        org_id,
        namespace,
        &endpoint,
    )
    .await?;
    match state {
        State::Ready => println!(
            "{namespace}: {tools} tools in {:.2} s (server: {})",
            started.elapsed().as_secs_f64(),
            endpoint.source()
        ),
        State::NeedsLogin => println!(
            "{namespace}: stored; the server asks for an OAuth login, so its tools appear \
             once it is done: run `executor connections login {namespace}`"
        ),
    }
    Ok(())
}

/// Lists the tools of the upstream MCP server at `endpoint` with the
/// connection's credential and stores them (or that it needs a login);
/// the state stored and the number of tools.
pub(crate) async fn sync_mcp(
    store: &dyn Store,
    kinds: &Kinds,
    credentials: &Credentials,
    http: &HttpClient,
    org_id: &str,
    namespace: &str,
    endpoint: &Endpoint,
) -> AnyResult<(State, usize)> {
    let credential = connection_credential(credentials, org_id, namespace).await?;
    let discovered = executor_upstream::discover(namespace, endpoint, &credential, http)
        .await
        .map_err(|why| format!("cannot list the tools of {}: {why}", endpoint.source()))?;
    let (state, tools, document) = match discovered {
        Discovery::Ready(tools) => {
            let document = executor_upstream::store(namespace, endpoint, State::Ready, &tools);
            (State::Ready, tools, document)
        }
        Discovery::NeedsLogin { challenge } => {
            let document =
                executor_upstream::store_needing_login(namespace, endpoint, challenge.as_deref());
            (State::NeedsLogin, Vec::new(), document)
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
        tool_count: tools.len() as i64,
        document,
        updated_at_ms: now_ms(),
        revision: 0,
        search_index: None,
    };
    match state {
        State::Ready => store_indexed(store, kinds, record).await?,
        // No tools to index until the login.
        State::NeedsLogin => store.upsert_integration(record).await?,
    }
    Ok((state, tools.len()))
}

fn check_namespace(namespace: &str) -> AnyResult<()> {
    match executor_catalog::namespace_problem(namespace) {
        None => Ok(()),
        Some(problem) => Err(problem.into()),
    }
}

/// Whether the server can serve a stored integration, for `integrations
/// list`: its kind's word, or that this release does not serve the kind.
fn stored_status(kinds: &Kinds, record: &IntegrationRecord, document: &str) -> String {
    match kinds.of(record) {
        Ok(loader) => loader.status(document),
        Err(why) => format!("unavailable: {why}"),
    }
}

/// Where a GraphQL integration's schema comes from.
struct GraphqlSource<'a> {
    endpoint: &'a str,
    /// A file of introspection JSON or SDL; else the endpoint is asked.
    schema: Option<&'a str>,
    allow_local_network: bool,
}

/// Reads a GraphQL schema (from its file, or by introspecting the
/// endpoint), makes its tools and stores them with their search index.
async fn import_graphql(
    store: &dyn Store,
    kinds: &Kinds,
    credentials: &Credentials,
    org_id: &str,
    namespace: &str,
    source: GraphqlSource<'_>,
) -> AnyResult<()> {
    check_namespace(namespace)?;
    let endpoint = url::Url::parse(source.endpoint)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or_else(|| format!("--endpoint {:?} is not an http(s) URL", source.endpoint))?;
    let started = std::time::Instant::now();
    let text = match source.schema {
        Some(file) => {
            std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?
        }
        None => {
            // The connection's credential, when one is set (a refresh).
            let credential = connection_credential(credentials, org_id, namespace).await?;
            let http = HttpClient::new(HttpConfig {
                allow_local_network: source.allow_local_network,
                max_response_bytes: MAX_SPEC_BYTES,
                ..HttpConfig::default()
            })?;
            executor_graphql::introspect(&http, endpoint.as_str(), &credential)
                .await
                .map_err(|e| format!("cannot introspect {endpoint}: {}", e.message))?
        }
    };
    let imported = executor_graphql::import(&text)?;
    drop(text);
    for warning in imported.warnings.iter().take(20) {
        eprintln!("warning: {warning}");
    }
    let tools = imported.tools.len();
    let record = IntegrationRecord {
        org_id: org_id.to_string(),
        namespace: namespace.to_string(),
        kind: IntegrationKind::Graphql.as_str().into(),
        source: source
            .schema
            .map(absolute_path)
            .unwrap_or_else(|| endpoint.to_string()),
        base_url: Some(endpoint.to_string()),
        tool_count: tools as i64,
        document: executor_graphql::store(&imported, namespace, endpoint.as_str()),
        updated_at_ms: now_ms(),
        revision: 0,
        search_index: None,
    };
    drop(imported);
    store_indexed(store, kinds, record).await?;
    println!(
        "{namespace}: {tools} tools in {:.2} s (endpoint: {endpoint})",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The credential of `namespace`'s connection, when one is set (an
/// endpoint asked at `add` or `refresh` gets it as a call would).
async fn connection_credential(
    credentials: &Credentials,
    org_id: &str,
    namespace: &str,
) -> AnyResult<Credential> {
    Ok(credentials
        .credential(org_id, namespace)
        .await
        .map_err(|e| e.message)?
        .unwrap_or(Credential::None))
}

/// The org's connections, their sealed secrets opened with the data dir's
/// key (introspection sends the connection's credential).
pub(crate) fn sealed_credentials(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    allow_local_network: bool,
) -> AnyResult<Credentials> {
    let key = Arc::new(crate::wiring::load_secret_key(global)?);
    // Tokens of OAuth connections are refreshed here as a call would.
    let http = HttpClient::new(HttpConfig {
        allow_local_network,
        ..HttpConfig::default()
    })?;
    let oauth = OAuth::new(store.clone(), key.clone(), http);
    Ok(Credentials {
        store,
        key: Some(key),
        oauth: Some(Arc::new(oauth)),
    })
}

/// Stores a new import with the search index of its tools, loaded as the
/// server will load them. Without an index the record is still served:
/// the server builds one at its first load and stores it back.
async fn store_indexed(
    store: &dyn Store,
    kinds: &Kinds,
    mut record: IntegrationRecord,
) -> AnyResult<()> {
    record.search_index = kinds
        .search_index(&record.org_id, &record)
        .inspect_err(|why| {
            eprintln!(
                "warning: {}'s tools were not indexed here: {why}",
                record.namespace
            )
        })
        .ok();
    store.upsert_integration(record).await?;
    Ok(())
}

/// Largest API description fetched from a URL.
pub(crate) const MAX_SPEC_BYTES: usize = 128 * 1024 * 1024;

/// Reads, imports and stores an OpenAPI document with the search index of
/// its tools, showing progress.
/// A file the integration was read from, as `refresh` finds it again from
/// any directory: the path made absolute against the directory `add` ran in.
fn absolute_path(path: &str) -> String {
    std::path::absolute(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string())
}

pub(crate) async fn import_openapi(
    store: &dyn Store,
    kinds: &Kinds,
    org_id: &str,
    source: &str,
    namespace: &str,
    base_url: Option<String>,
    allow_local_network: bool,
) -> AnyResult<()> {
    let is_url = source.starts_with("http://") || source.starts_with("https://");
    let text = if is_url {
        let http = HttpClient::new(HttpConfig {
            allow_local_network,
            ..HttpConfig::default()
        })?;
        http.fetch_document(source, MAX_SPEC_BYTES)
            .await
            .map_err(|e| format!("cannot fetch {source}: {}", e.message))?
    } else {
        std::fs::read_to_string(source).map_err(|e| format!("cannot read {source}: {e}"))?
    };
    let options = ImportOptions {
        base_url,
        source_url: is_url.then(|| source.to_string()),
        ..ImportOptions::new(namespace)
    };
    let started = std::time::Instant::now();
    let mut shown = 0usize;
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let imported = import_with_progress(&text, &options, &mut |done, total| {
        // Redraw at most every 2% so a 10k-operation spec stays cheap; a
        // log file gets the final count only.
        let step = total.div_ceil(50);
        if total > 0 && (done == total || (interactive && done >= shown + step)) {
            shown = done;
            eprint!("\rimporting {namespace}: {done}/{total} operations");
        }
    })?;
    eprintln!();
    for warning in imported.warnings.iter().take(20) {
        eprintln!("warning: {warning}");
    }
    let tools = imported.tools.len();
    let record = IntegrationRecord {
        org_id: org_id.to_string(),
        namespace: namespace.to_string(),
        kind: IntegrationKind::OpenApi.as_str().into(),
        source: if is_url {
            source.to_string()
        } else {
            absolute_path(source)
        },
        base_url: imported.base_url.clone(),
        tool_count: tools as i64,
        document: serde_json::to_string(&imported)?,
        updated_at_ms: now_ms(),
        revision: 0,
        search_index: None,
    };
    // The import's trees go before the tools are loaded and indexed: the
    // peak of a large import stays the import's own.
    drop(imported);
    let base_url = record.base_url.clone();
    store_indexed(store, kinds, record).await?;
    println!(
        "{namespace}: {tools} tools in {:.2} s (base URL: {})",
        started.elapsed().as_secs_f64(),
        base_url.as_deref().unwrap_or("none: pass --base-url")
    );
    Ok(())
}
