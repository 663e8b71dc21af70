//! One file per command group; `run` dispatches a parsed command line to
//! its command after opening the store the way that command needs it.

mod approvals;
mod connections;
mod executions;
mod integrations;
mod login;
mod migrate;
mod oauth;
mod policies;
mod serve;
mod sessions;
mod stdio;
mod token;
mod tools;

use std::sync::Arc;

use executor_ops::{ActorChoice, Operations};
use executor_store::{Principal, Store};

use crate::AnyResult;
use crate::cli::{
    ActorArg, AddIntegration, ApprovalsCommand, Cli, Command, ConnectionsCommand, EngineOpts,
    GlobalOpts, IntegrationsCommand, IntegrationsGroup,
};
use crate::config::store_options;
use crate::wiring::{SHELL, command_operations, open_store, operations_of, wire_engine};

pub(crate) async fn run(cli: Cli) -> AnyResult<()> {
    // Two stores, neither opened the usual way.
    if let Command::Migrate { from } = &cli.command {
        return migrate::run(&cli.global, from.as_deref()).await;
    }
    let with_key = uses_secret_key(&cli.command);
    let store = open_store(
        &cli.global,
        store_options(&cli.command),
        with_key,
        matches!(cli.command, Command::Serve(_)),
    )
    .await?;
    let global = &cli.global;
    // Commands that run code build an engine (and its sandbox threads);
    // the rest work on the store with the operations alone.
    let ops = || command_operations(store.clone(), global, with_key);
    match cli.command {
        Command::Migrate { .. } => Err("migrate copies between two stores and ran above".into()),
        Command::Serve(opts) => serve::serve(store, global, *opts).await,
        Command::Mcp(opts) => stdio::serve(store, global, opts).await,
        Command::Token(command) => token::token(&ops()?, command).await,
        Command::Executions(command) => executions::executions(&ops()?, command).await,
        Command::Resume {
            execution_id,
            action,
            wait,
            engine,
        } => {
            let ops = engine_operations(store, global, &engine)?;
            executions::resume(&ops, &execution_id, &action, wait).await
        }
        Command::Policies(command) => policies::policies(&ops()?, command).await,
        Command::Integrations(IntegrationsGroup::Manage(command)) => {
            integrations::integrations(&ops()?, command).await
        }
        Command::Integrations(IntegrationsGroup::Tools { namespace, org }) => {
            tools::integration_tools(&ops()?, &namespace, &org).await
        }
        Command::Connections(ConnectionsCommand::Login(args)) => {
            login::login(store, global, args).await
        }
        Command::Connections(command) => connections::connections(&ops()?, command).await,
        Command::Call {
            path,
            input,
            actor,
            engine,
        } => {
            let ops = engine_operations(store, global, &engine)?;
            tools::call(&ops, &path, &input, &actor).await
        }
        Command::Tools(command) => tools::tools(&ops()?, command).await,
        Command::Sessions(command) => sessions::sessions(&ops()?, command).await,
        Command::Oauth(command) => oauth::oauth(&ops()?, command).await,
        Command::Console(command) => oauth::console(&ops()?, command).await,
        Command::Approvals(ApprovalsCommand::List { org, engine }) => {
            let ops = engine_operations(store, global, &engine)?;
            approvals::list(&ops, &org).await
        }
    }
}

/// `http://<listen>` or `--public-url` (see `login::public_url`).
pub(crate) fn public_url_of(
    public: &crate::cli::PublicOpts,
    local: std::net::SocketAddr,
) -> String {
    login::public_url(public, local)
}

/// The operations of a command that runs code, with its engine.
fn engine_operations(
    store: Arc<dyn Store>,
    global: &GlobalOpts,
    opts: &EngineOpts,
) -> AnyResult<Operations> {
    let wired = wire_engine(store.clone(), global, opts, None)?;
    Ok(operations_of(store, &wired, opts, SHELL, None, None))
}

/// Who a command acts for: see [`Operations::resolve_actor`].
pub(crate) async fn resolve_actor(ops: &Operations, actor: &ActorArg) -> AnyResult<Principal> {
    let choice = ActorChoice {
        email: actor.email.clone(),
        org: actor.org.clone(),
    };
    Ok(ops.resolve_actor(&choice).await?)
}

/// Says on stderr which org a command that runs tools acts in, so that an
/// operator who named none sees which one it chose.
pub(crate) async fn say_who_acts(ops: &Operations, principal: &Principal) {
    let name = ops
        .org_name(principal)
        .await
        .unwrap_or_else(|_| principal.org_id.clone());
    eprintln!("executor: acting in org {name}");
}

/// A time a person reads: `2026-12-06 10:04:05 UTC`.
pub(crate) fn readable_time(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
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
            | Command::Sessions(_)
            | Command::Oauth(_)
            | Command::Console(_)
            | Command::Integrations(IntegrationsGroup::Manage(
                IntegrationsCommand::List { .. }
                    | IntegrationsCommand::Remove { .. }
                    | IntegrationsCommand::Add(AddIntegration::Openapi { .. })
            ))
            | Command::Connections(
                ConnectionsCommand::List { .. } | ConnectionsCommand::Remove { .. }
            )
    )
}
