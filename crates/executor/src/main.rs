//! `executor`: the binary. Parses the command line, opens the store, wires
//! the crates together and runs the chosen command. No logic of its own.

mod cli;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use executor_engine::CatalogSource;
use executor_engine::policy::{Pattern, PolicyAction};
use executor_engine::{Engine, EngineConfig, ShareLimits};
use executor_integrations::{Credentials, IntegrationKind, OpenApiInvokers, StoreCatalogs};
use executor_mcp::McpServer;
use executor_openapi::{ImportOptions, ImportedIntegration, import_with_progress};
use executor_outbound::{HttpClient, HttpConfig};
use executor_sandbox::Limits;
use executor_sessions::{Sessions, SessionsConfig};
use executor_store::secrets::{self, SecretKey, SecretRef};
use executor_store::{
    ConnectionRecord, IntegrationRecord, LogBounds, PolicyRecord, SqliteStore, Store, StoreOptions,
    now_ms, tokens,
};
use executor_wire::{App, HostPolicy, WireConfig};
use zeroize::Zeroizing;

use cli::{
    AddIntegration, Cli, Command, ConnectionsCommand, EngineOpts, ExecutionsCommand, GlobalOpts,
    IntegrationsCommand, LogFormat, PoliciesCommand, ServeOpts, TokenCommand, ToolsCommand,
};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let log_format = cli.global.log_format;
    init_tracing(log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            match log_format {
                // A log collector reads every line of stderr as JSON.
                LogFormat::Json => tracing::error!(error = %e, "executor stopped"),
                LogFormat::Text => eprintln!("error: {e}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// The log goes to stderr. Colour codes only reach a terminal (and not with
/// `NO_COLOR`): in a file or a pipe they are noise for whoever reads it.
fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_ansi(false).init(),
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(terminal && !no_color).init()
        }
    }
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn run(cli: Cli) -> AnyResult<()> {
    let store = open_store(
        &cli.global,
        store_options(&cli.command),
        uses_secret_key(&cli.command),
    )?;
    match cli.command {
        Command::Serve(opts) => serve(store, &cli.global, opts).await,
        Command::Mcp(opts) => {
            let principal = store
                .ensure_account(&opts.email, opts.org.as_deref())
                .await?;
            let engine = engine(store, &cli.global, &opts.engine)?;
            // Like `serve`, so that `executor resume` reaches runs paused here.
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let decisions = tokio::spawn(engine.clone().apply_posted_decisions(stopped));
            let server = Arc::new(McpServer::new(engine));
            let served = executor_wire::stdio::serve_stdio(server, principal).await;
            stop.send_replace(true);
            let _ = decisions.await;
            Ok(served?)
        }
        Command::Token(TokenCommand::Create {
            email,
            org,
            expires_in_days,
        }) => {
            let principal = store.ensure_account(&email, org.as_deref()).await?;
            let now = now_ms();
            let expires = expires_in_days.map(|d| now + (d as i64) * 24 * 3600 * 1000);
            let minted = tokens::mint(principal, now, expires);
            store.insert_token(minted.record).await?;
            println!("{}", minted.plaintext);
            Ok(())
        }
        Command::Token(TokenCommand::Revoke { token }) => {
            // Accept the full token or its id.
            let id = tokens::parse(&token)
                .map(|(id, _)| id.to_string())
                .unwrap_or(token);
            if store.revoke_token(&id, now_ms()).await? {
                eprintln!("revoked");
                Ok(())
            } else {
                Err("no such token".into())
            }
        }
        Command::Executions(ExecutionsCommand::List { limit }) => {
            for x in store.list_executions(None, limit).await? {
                println!(
                    "{}\t{}\t{} ms\t{}",
                    x.id,
                    x.status,
                    x.duration_ms,
                    first_line(&x.code)
                );
            }
            Ok(())
        }
        Command::Policies(command) => policies(store.as_ref(), command).await,
        Command::Integrations(command) => integrations(store.as_ref(), command).await,
        Command::Connections(command) => connections(store.as_ref(), &cli.global, command).await,
        Command::Call {
            path,
            input,
            email,
            org,
            engine: opts,
        } => {
            let principal = store.ensure_account(&email, org.as_deref()).await?;
            let engine = engine(store, &cli.global, &opts)?;
            call_tool(&engine, principal, &path, &input).await
        }
        Command::Resume {
            execution_id,
            action,
            wait,
            engine: opts,
        } => {
            let engine = engine(store, &cli.global, &opts)?;
            let action: executor_engine::Action = action.parse()?;
            let result = engine
                .resume_from_outside(&execution_id, action, Duration::from_secs(wait))
                .await;
            print_result(&result)
        }
        Command::Tools(ToolsCommand::Search { query, limit, org }) => {
            let org_id = resolve_org(store.as_ref(), org.as_deref()).await?;
            let catalogs = store_catalogs(store.clone(), &cli.global, HttpConfig::default())?;
            let catalog = catalogs.catalog(&org_id).await;
            for (tool, score) in catalog.search(&query, None).into_iter().take(limit) {
                let description = tool
                    .description
                    .as_deref()
                    .map(first_line)
                    .unwrap_or_default();
                println!("{:>7.2}\t{}\t{}", score, tool.path, description);
            }
            Ok(())
        }
        Command::Executions(ExecutionsCommand::Show { id }) => {
            let x = store.get_execution(&id).await?.ok_or("no such execution")?;
            println!("{}", serde_json::to_string_pretty(&x)?);
            Ok(())
        }
    }
}

async fn policies(store: &dyn Store, command: PoliciesCommand) -> AnyResult<()> {
    match command {
        PoliciesCommand::Add {
            pattern,
            action,
            position,
            org,
        } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            // Validated on save (SPEC §9): a bad rule never reaches the store.
            pattern.parse::<Pattern>()?;
            let action: PolicyAction = action.parse()?;
            let record = store
                .add_policy(PolicyRecord {
                    id: format!("pol_{}", tokens::random_id(9)),
                    org_id,
                    pattern: pattern.trim().to_string(),
                    action: action.as_str().to_string(),
                    position: position.unwrap_or(i64::MAX),
                    created_at_ms: now_ms(),
                })
                .await?;
            println!(
                "{}\t{}\t{}\t{}",
                record.id, record.position, record.pattern, record.action
            );
            Ok(())
        }
        PoliciesCommand::List { org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            for r in store.list_policies(&org_id).await? {
                println!("{}\t{}\t{}\t{}", r.id, r.position, r.pattern, r.action);
            }
            Ok(())
        }
        PoliciesCommand::Remove { id, org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            if store.remove_policy(&org_id, &id).await? {
                Ok(())
            } else {
                Err(format!("no policy {id} in this org").into())
            }
        }
    }
}

async fn integrations(store: &dyn Store, command: IntegrationsCommand) -> AnyResult<()> {
    match command {
        IntegrationsCommand::Add(AddIntegration::Openapi {
            spec,
            allow_local_network,
            namespace,
            base_url,
            org,
        }) => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            import_openapi(
                store,
                &org_id,
                &spec,
                &namespace,
                base_url,
                allow_local_network,
            )
            .await
        }
        IntegrationsCommand::List { org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            for i in store.list_integrations(&org_id, false).await? {
                let document = store
                    .integration_document(&org_id, &i.namespace, i.revision)
                    .await?
                    .unwrap_or_default();
                println!(
                    "{}\t{}\t{} tools\t{}\t{}\t{}",
                    i.namespace,
                    i.kind,
                    i.tool_count,
                    i.base_url.as_deref().unwrap_or("(no base URL)"),
                    i.source,
                    stored_status(&document),
                );
            }
            Ok(())
        }
        IntegrationsCommand::Refresh {
            namespace,
            allow_local_network,
            org,
        } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            let existing = store.list_integrations(&org_id, true).await?;
            let record = existing
                .into_iter()
                .find(|i| i.namespace == namespace)
                .ok_or_else(|| format!("no integration {namespace:?}"))?;
            let previous: ImportedIntegration = serde_json::from_str(&record.document)?;
            // An operator-given base URL is kept; one from the document
            // follows the document.
            import_openapi(
                store,
                &org_id,
                &record.source,
                &namespace,
                previous.base_url_override,
                allow_local_network,
            )
            .await
        }
        IntegrationsCommand::Remove { namespace, org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            if store.remove_integration(&org_id, &namespace).await? {
                Ok(())
            } else {
                Err(format!("no integration {namespace:?}").into())
            }
        }
    }
}

/// Whether the server can serve a stored integration, for `integrations
/// list`: `ok`, an older format it upgrades when it loads the record, or
/// why its tools are unavailable.
fn stored_status(document: &str) -> String {
    let format = executor_openapi::format_of(document);
    if format < executor_openapi::FORMAT {
        return format!("ok (format {format}: upgraded when the server loads it)");
    }
    match executor_openapi::load(document) {
        Ok(_) => "ok".to_string(),
        Err(e) => format!("unavailable: {e}"),
    }
}

/// Largest API description fetched from a URL.
const MAX_SPEC_BYTES: usize = 128 * 1024 * 1024;

/// Reads, imports and stores an OpenAPI document, showing progress.
async fn import_openapi(
    store: &dyn Store,
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
    let now = now_ms();
    store
        .upsert_integration(IntegrationRecord {
            org_id: org_id.to_string(),
            namespace: namespace.to_string(),
            kind: IntegrationKind::OpenApi.as_str().into(),
            source: source.to_string(),
            base_url: imported.base_url.clone(),
            tool_count: imported.tools.len() as i64,
            document: serde_json::to_string(&imported)?,
            updated_at_ms: now,
            revision: 0,
        })
        .await?;
    println!(
        "{namespace}: {} tools in {:.2} s (base URL: {})",
        imported.tools.len(),
        started.elapsed().as_secs_f64(),
        imported
            .base_url
            .as_deref()
            .unwrap_or("none: pass --base-url")
    );
    Ok(())
}

/// Runs `tools.<path>(input)` as a one-line program and prints the result.
async fn call_tool(
    engine: &Engine,
    principal: executor_store::Principal,
    path: &str,
    input: &str,
) -> AnyResult<()> {
    let input: serde_json::Value =
        serde_json::from_str(input).map_err(|e| format!("the input is not JSON: {e}"))?;
    if !input.is_object() {
        return Err("the input must be a JSON object".into());
    }
    // Bracket access keeps any segment a valid property name.
    let accessor: String = path
        .split('.')
        .map(|segment| format!("[{}]", serde_json::Value::from(segment)))
        .collect();
    let code = format!("return await tools{accessor}({input});");
    let ctx = executor_engine::CallContext {
        principal,
        session_id: None,
    };
    let result = engine
        .call_tool(&ctx, "execute", &serde_json::json!({ "code": code }))
        .await?;
    print_result(&result)
}

/// Prints a `CallToolResult`'s text; fails when it is an error.
fn print_result(result: &serde_json::Value) -> AnyResult<()> {
    let text = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    println!("{text}");
    let failed = result
        .get("isError")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
        || result.pointer("/structuredContent/result/ok") == Some(&serde_json::Value::Bool(false));
    if failed {
        Err("the call failed".into())
    } else {
        Ok(())
    }
}

/// The org a catalog command acts on: the one named, else the only one.
async fn resolve_org(store: &dyn Store, name: Option<&str>) -> AnyResult<String> {
    if let Some(name) = name {
        return store
            .find_org(name)
            .await?
            .ok_or_else(|| format!("no org named {name:?}").into());
    }
    let orgs = store.list_orgs().await?;
    match orgs.as_slice() {
        [(id, _)] => Ok(id.clone()),
        [] => Err("no org yet: create one with `executor token create --email E [--org O]`".into()),
        many => {
            let names: Vec<&str> = many.iter().map(|(_, n)| n.as_str()).collect();
            Err(format!(
                "several orgs exist ({}): name one with --org",
                names.join(", ")
            )
            .into())
        }
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or("");
    line.chars().take(60).collect()
}

/// Opens the store after its start checks (SPEC §11), whose refusals are
/// the operator's message on stderr. `needs_secret_key`: the command seals or
/// opens connection secrets, so their key must still be there.
fn open_store(
    global: &GlobalOpts,
    options: StoreOptions,
    needs_secret_key: bool,
) -> AnyResult<Arc<dyn Store>> {
    let url = global.database_url();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Err("postgres:// is not supported yet: use the embedded default (sqlite)".into());
    }
    let store = SqliteStore::open_url(&url, options)?;
    if needs_secret_key {
        // Before anything calls `SecretKey::load_or_create`, which would make
        // a new key that never opens the secrets already sealed.
        store.check_secret_key(&global.data_dir())?;
    }
    Ok(Arc::new(store))
}

/// The store's tunables: `serve` takes them from its flags; the other
/// commands write little and use the defaults.
fn store_options(command: &Command) -> StoreOptions {
    match command {
        Command::Serve(opts) => StoreOptions {
            max_queued_writes: opts.max_queued_writes.max(1),
        },
        _ => StoreOptions::default(),
    }
}

/// Whether `command` may seal or open connection secrets. Listing and
/// removing connections never do (they are how an operator recovers from a
/// lost key), nor do the commands below that never touch connections; a new
/// command is checked until it is listed here.
fn uses_secret_key(command: &Command) -> bool {
    !matches!(
        command,
        Command::Token(_)
            | Command::Executions(_)
            | Command::Policies(_)
            | Command::Integrations(_)
            | Command::Connections(
                ConnectionsCommand::List { .. } | ConnectionsCommand::Remove { .. }
            )
    )
}

fn engine(store: Arc<dyn Store>, global: &GlobalOpts, opts: &EngineOpts) -> AnyResult<Arc<Engine>> {
    let limits = Limits {
        timeout: Duration::from_millis(opts.execution_timeout),
        memory_bytes: opts.sandbox_memory_mb.max(1) * 1024 * 1024,
        stack_bytes: opts.sandbox_stack_kb.max(64) * 1024,
        max_log_bytes: opts.max_log_bytes,
        max_result_bytes: opts.max_result_bytes,
        max_calls_in_flight: opts.max_calls_in_flight.max(1),
        max_calls: opts.max_calls_per_execution.max(1),
        backstop_grace: Duration::from_millis(opts.sandbox_backstop),
        max_queued_jobs: opts.max_queued_sandbox_jobs.map(|n| n.max(1)),
    };
    let http = HttpConfig {
        allow_local_network: opts.allow_local_network,
        max_response_bytes: opts.max_upstream_response_bytes.max(1),
        ..HttpConfig::default()
    };
    let catalogs = Arc::new(store_catalogs(store.clone(), global, http)?);
    Ok(Arc::new(Engine::with_catalogs(
        store,
        EngineConfig {
            limits,
            share: ShareLimits::new(opts.max_concurrent_executions, opts.max_org_executions),
            approval_window: Duration::from_millis(opts.approval_window),
            wall_clock: Duration::from_millis(opts.execution_wall_clock.max(1)),
            max_journal_bytes: opts.max_journal_bytes,
            max_tool_path_bytes: opts.max_tool_path_bytes.max(1),
            max_result_text_chars: opts.max_result_text_chars,
            max_emitted_text_chars: opts.max_emitted_text_chars,
            max_approval_preview_chars: opts.max_approval_preview_chars,
        },
        catalogs,
    )))
}

/// Org catalogs from the store, with the HTTP client and credentials their
/// OpenAPI tools are invoked with.
fn store_catalogs(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    http: HttpConfig,
) -> AnyResult<StoreCatalogs> {
    let http = HttpClient::new(http)?;
    let key = SecretKey::load_or_create(&global.data_dir())?;
    let invokers = OpenApiInvokers {
        http: Arc::new(http),
        credentials: Arc::new(Credentials {
            store: store.clone(),
            key: Some(Arc::new(key)),
        }),
    };
    let core = executor_engine::core_tool_entries(store.clone());
    Ok(StoreCatalogs::new(store, Arc::new(invokers), core))
}

/// A secret given to the CLI: `-` reads it from standard input, `@FILE`
/// from a file (one trailing newline dropped), so that it stays out of
/// `ps` and shell history; anything else is the value itself.
fn secret_value(arg: String) -> AnyResult<Zeroizing<String>> {
    let arg = Zeroizing::new(arg);
    let mut text = if arg.as_str() == "-" {
        let mut text = Zeroizing::new(String::new());
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| format!("cannot read the secret from standard input: {e}"))?;
        text
    } else if let Some(path) = arg.strip_prefix('@') {
        Zeroizing::new(
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the secret from {path}: {e}"))?,
        )
    } else {
        eprintln!(
            "note: a secret given on the command line can be seen in `ps` and shell history; \
             pass `-` to read it from standard input or `@FILE` to read it from a file"
        );
        return Ok(arg);
    };
    for ending in ["\n", "\r"] {
        if text.ends_with(ending) {
            text.pop();
        }
    }
    if text.is_empty() {
        return Err("the secret is empty".into());
    }
    Ok(text)
}

/// Secrets this short could not be scrubbed from what upstreams answer
/// (SPEC §9): redaction skips strings under four bytes, which would
/// otherwise mangle every result.
fn long_enough(secret: &str) -> AnyResult<()> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "a secret of fewer than {MIN_SECRET_BYTES} bytes is refused: it could not be kept out of results"
        )
        .into());
    }
    Ok(())
}

const MIN_SECRET_BYTES: usize = 4;

async fn connections(
    store: &dyn Store,
    global: &GlobalOpts,
    command: ConnectionsCommand,
) -> AnyResult<()> {
    match command {
        ConnectionsCommand::Set {
            namespace,
            api_key,
            bearer,
            basic,
            secret_ref,
            kind,
            username,
            org,
        } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            let associated = secrets::connection_aad(&org_id, &namespace);
            let read = |value: Option<String>| value.map(secret_value).transpose();
            let (api_key, bearer, basic) = (read(api_key)?, read(bearer)?, read(basic)?);
            let (kind, username, secret) = match (api_key, bearer, basic, secret_ref) {
                (_, _, _, Some(reference)) => {
                    let parsed = SecretRef::parse(&reference)?;
                    if !matches!(parsed, SecretRef::Env(_)) {
                        return Err("--secret-ref takes env://NAME".into());
                    }
                    (kind, username, parsed.to_string())
                }
                (Some(key), None, None, None) => (
                    "api_key".to_string(),
                    None,
                    long_enough(&key)
                        .and_then(|()| seal_with(global, key.as_str(), &associated))?,
                ),
                (None, Some(token), None, None) => (
                    "bearer".to_string(),
                    None,
                    long_enough(&token)
                        .and_then(|()| seal_with(global, token.as_str(), &associated))?,
                ),
                (None, None, Some(pair), None) => {
                    let (user, password) =
                        pair.split_once(':').ok_or("--basic takes USER:PASSWORD")?;
                    long_enough(password)?;
                    (
                        "basic".to_string(),
                        Some(user.to_string()),
                        seal_with(global, password, &associated)?,
                    )
                }
                _ => return Err("give one of --api-key, --bearer, --basic or --secret-ref".into()),
            };
            if !matches!(kind.as_str(), "api_key" | "bearer" | "basic") {
                return Err("--kind is api_key, bearer or basic".into());
            }
            store
                .set_connection(ConnectionRecord {
                    org_id,
                    namespace: namespace.clone(),
                    kind: kind.clone(),
                    username,
                    secret,
                    updated_at_ms: now_ms(),
                })
                .await?;
            println!("{namespace}\t{kind}");
            Ok(())
        }
        ConnectionsCommand::List { org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            for c in store.list_connections(&org_id).await? {
                let stored = if c.secret.starts_with("env://") {
                    c.secret.as_str()
                } else {
                    "sealed"
                };
                println!("{}\t{}\t{}", c.namespace, c.kind, stored);
            }
            Ok(())
        }
        ConnectionsCommand::Remove { namespace, org } => {
            let org_id = resolve_org(store, org.as_deref()).await?;
            if store.remove_connection(&org_id, &namespace).await? {
                Ok(())
            } else {
                Err(format!("no connection for {namespace:?}").into())
            }
        }
    }
}

fn seal_with(global: &GlobalOpts, value: &str, associated: &str) -> AnyResult<String> {
    let key = SecretKey::load_or_create(&global.data_dir())?;
    Ok(secrets::seal(&key, value, associated)?)
}

async fn serve(store: Arc<dyn Store>, global: &GlobalOpts, opts: ServeOpts) -> AnyResult<()> {
    let server = Arc::new(McpServer::new(engine(store.clone(), global, &opts.engine)?));
    let sessions = Sessions::new(
        store.clone(),
        server,
        SessionsConfig {
            idle_timeout: Duration::from_millis(opts.session_idle_timeout),
            paused_idle_timeout: Duration::from_millis(opts.paused_session_idle_timeout),
            retention: Duration::from_secs(opts.session_retention_days * 24 * 3600),
            max_sessions_per_principal: opts.max_sessions_per_principal,
            max_get_streams_per_session: opts.max_get_streams_per_session,
            busy_ceiling: Duration::from_millis(opts.keep_alive_ceiling),
            replay_window: Duration::from_millis(opts.replay_window),
            sse_replay: LogBounds {
                max_events: opts.sse_replay_events.max(1),
                max_bytes: opts.sse_replay_bytes,
            },
            slow_reader_bytes: opts.slow_reader_bytes,
        },
    );
    // Background loops end when `stop` flips, after the drain; serve awaits them.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let background = [
        tokio::spawn(sessions.clone().run_maintenance(stopped.clone())),
        tokio::spawn(
            sessions
                .server()
                .engine()
                .clone()
                .apply_posted_decisions(stopped),
        ),
    ];
    let listener = tokio::net::TcpListener::bind(&opts.listen).await?;
    let local = listener.local_addr()?;
    let hosts = match (&opts.allowed_hosts, local.ip().is_loopback()) {
        (Some(list), _) => HostPolicy {
            allowed_hosts: Some(list.clone()),
            allowed_origins: opts.allowed_origins.clone(),
        },
        (None, true) => HostPolicy {
            allowed_origins: opts.allowed_origins.clone(),
            ..HostPolicy::loopback()
        },
        (None, false) => HostPolicy {
            allowed_origins: opts.allowed_origins.clone(),
            ..HostPolicy::open()
        },
    };
    let app = App {
        sessions,
        in_flight: executor_wire::InFlight::default(),
        config: Arc::new(WireConfig {
            hosts,
            cors_origin: opts.cors_origin.clone(),
            max_batch: opts.max_batch,
            header_read_timeout: Duration::from_millis(opts.header_read_timeout),
            body_read_timeout: Duration::from_millis(opts.body_read_timeout),
            max_connections: opts.max_connections,
            metrics_token: opts
                .metrics_token
                .clone()
                .map(executor_wire::MetricsToken::new),
            max_body_bytes: opts.max_body_bytes,
            sse_keepalive: Duration::from_millis(opts.sse_keepalive),
            get_stream_rotation: Duration::from_millis(opts.get_stream_rotation),
        }),
    };
    tracing::info!(%local, "executor listening; MCP at http://{local}/mcp");
    // SPEC §11: on SIGTERM, drain: `/healthz` turns 503, new `/mcp`
    // requests get 503 + Retry-After, standalone GET streams end, and
    // in-flight requests — JSON or SSE — finish and are recorded, up to the
    // drain deadline. Then the listener closes, runtimes are disposed
    // (records stay) and the process exits. A second signal exits at once.
    let sessions = app.sessions.clone();
    let in_flight = app.in_flight.clone();
    let drain_deadline = Duration::from_millis(opts.shutdown_drain_deadline);
    let graceful = {
        let sessions = sessions.clone();
        async move {
            shutdown_signal().await;
            sessions.drain();
            tokio::spawn(async {
                shutdown_signal().await;
                tracing::warn!("second signal: exiting without waiting for in-flight requests");
                std::process::exit(1);
            });
            let left = in_flight.current();
            tracing::info!(in_flight = left, "draining");
            if tokio::time::timeout(drain_deadline, in_flight.idle())
                .await
                .is_err()
            {
                tracing::warn!(
                    in_flight = in_flight.current(),
                    "in-flight requests outlived the shutdown deadline"
                );
            }
        }
    };
    // Once drained, the server stops; connections still open then (a
    // request past the deadline) get a moment, not forever.
    let served = executor_wire::serve(listener, app, graceful);
    tokio::pin!(served);
    tokio::select! {
        result = &mut served => result?,
        _ = async {
            let mut draining = sessions.draining();
            let _ = draining.wait_for(|d| *d).await;
            tokio::time::sleep(drain_deadline + CLOSE_GRACE).await;
        } => tracing::warn!("connections still open after the drain; closing them"),
    }
    stop.send_replace(true);
    for task in background {
        let _ = task.await;
    }
    sessions.dispose_all().await;
    // Last: the store writer commits what the loops and disposals queued.
    if let Err(e) = store.flush().await {
        tracing::error!(error = %e, "the store could not commit its last writes");
    }
    Ok(())
}

/// How long connections may stay open once the drain has ended.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
