//! `executor`: the binary. Parses the command line, opens the store, wires
//! the crates together and runs the chosen command. No logic of its own.

mod cli;
mod connections;
mod integrations;
mod login;
mod migrate;
mod policies;
mod serve;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use executor_engine::CatalogSource;
use executor_mcp::McpServer;
use executor_outbound::HttpConfig;
use executor_store::secrets::{SecretError, SecretKey};
use executor_store::{PgOptions, PgStore, SqliteStore, Store, StoreOptions, now_ms, tokens};
use executor_upstream::UpstreamSettings;

use cli::{
    AddIntegration, Cli, Command, ConnectionsCommand, ExecutionsCommand, GlobalOpts,
    IntegrationsCommand, LogFormat, TokenCommand, ToolsCommand,
};

/// A server's allocator: the request path allocates and frees many small
/// objects across threads, where glibc's malloc cost a quarter of
/// `tools/list` (README, "Performance").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
            let e = with_causes(e.as_ref());
            match log_format {
                // A log collector reads every line of stderr as JSON.
                LogFormat::Json => tracing::error!(error = %e, "executor stopped"),
                LogFormat::Text => eprintln!("error: {e}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and the chain of its sources: "cannot configure TLS: <why>".
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The log goes to stderr. Colour codes only reach a terminal (and not with
/// `NO_COLOR`): in a file or a pipe they are noise for whoever reads it.
fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
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

pub(crate) type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn run(cli: Cli) -> AnyResult<()> {
    // Two stores, neither opened the usual way.
    if let Command::Migrate { from } = &cli.command {
        return migrate::run(&cli.global, from.as_deref()).await;
    }
    let store = open_store(
        &cli.global,
        store_options(&cli.command),
        uses_secret_key(&cli.command),
        matches!(cli.command, Command::Serve(_)),
    )
    .await?;
    match cli.command {
        Command::Migrate { .. } => Err("migrate copies between two stores and ran above".into()),
        Command::Serve(opts) => serve::serve(store, &cli.global, *opts).await,
        Command::Mcp(opts) => {
            let principal = store
                .ensure_account(&opts.email, opts.org.as_deref())
                .await?;
            let engine = serve::engine(store, &cli.global, &opts.engine)?;
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
                    tools::first_line(&x.code)
                );
            }
            Ok(())
        }
        Command::Policies(command) => policies::policies(store.as_ref(), command).await,
        Command::Integrations(command) => {
            integrations::integrations(store.clone(), &cli.global, command).await
        }
        Command::Connections(ConnectionsCommand::Login(args)) => {
            login::login(store, &cli.global, args).await
        }
        Command::Connections(command) => {
            connections::connections(store.as_ref(), &cli.global, command).await
        }
        Command::Call {
            path,
            input,
            email,
            org,
            engine: opts,
        } => {
            let principal = store.ensure_account(&email, org.as_deref()).await?;
            let engine = serve::engine(store, &cli.global, &opts)?;
            tools::call_tool(&engine, principal, &path, &input).await
        }
        Command::Resume {
            execution_id,
            action,
            wait,
            engine: opts,
        } => {
            let engine = serve::engine(store, &cli.global, &opts)?;
            let action: executor_engine::Action = action.parse()?;
            let result = engine
                .resume_from_outside(&execution_id, action, Duration::from_secs(wait))
                .await;
            tools::print_result(&result)
        }
        Command::Tools(ToolsCommand::Search { query, limit, org }) => {
            let org_id = resolve_org(store.as_ref(), org.as_deref()).await?;
            let outbound = serve::outbound(store.clone(), &cli.global, HttpConfig::default())?;
            let catalogs =
                serve::store_catalogs(store.clone(), &outbound, UpstreamSettings::default());
            let catalog = catalogs.catalog(&org_id).await;
            for (tool, score) in catalog.search(&query, None).into_iter().take(limit) {
                let description = tool
                    .description
                    .as_deref()
                    .map(tools::first_line)
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

/// The org a catalog command acts on: the one named, else the only one.
pub(crate) async fn resolve_org(store: &dyn Store, name: Option<&str>) -> AnyResult<String> {
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

/// Opens the store after its start checks (SPEC §11), whose refusals are
/// the operator's message on stderr. `needs_secret_key`: the command seals or
/// opens connection secrets, so their key must still be there. `serving`:
/// a server, whose Postgres connections are all opened before it listens.
async fn open_store(
    global: &GlobalOpts,
    options: StoreOptions,
    needs_secret_key: bool,
    serving: bool,
) -> AnyResult<Arc<dyn Store>> {
    let url = global.database_url();
    if global.shared_store() {
        let pool_size = usize::from(global.database_pool_size);
        let store = PgStore::open(&url, PgOptions { pool_size }).await?;
        if needs_secret_key {
            // Never a key made up here: every node must hold the one the
            // store was set up with, and the check says so before anything
            // is sealed with another.
            store.check_secret_key(&load_secret_key(global)?).await?;
        }
        if serving {
            store.warm_pool().await;
        }
        return Ok(Arc::new(store));
    }
    let store = SqliteStore::open_url(&url, options)?;
    if needs_secret_key {
        // Before anything calls `SecretKey::load_or_create`, which would make
        // a new key that never opens the secrets already sealed.
        store.check_secret_key(&global.data_dir())?;
    }
    Ok(Arc::new(store))
}

/// The key that seals connection secrets: on the embedded store made on
/// first use; on a shared store only ever given (`EXECUTOR_SECRET_KEY` or an
/// existing `<data-dir>/secret.key`), since nodes share no files.
pub(crate) fn load_secret_key(global: &GlobalOpts) -> Result<SecretKey, SecretError> {
    if global.shared_store() {
        SecretKey::load_existing(&global.data_dir())
    } else {
        SecretKey::load_or_create(&global.data_dir())
    }
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
            | Command::Integrations(
                IntegrationsCommand::List { .. }
                    | IntegrationsCommand::Remove { .. }
                    | IntegrationsCommand::Add(AddIntegration::Openapi { .. })
            )
            | Command::Connections(
                ConnectionsCommand::List { .. } | ConnectionsCommand::Remove { .. }
            )
    )
}
