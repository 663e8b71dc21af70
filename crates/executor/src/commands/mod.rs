//! One file per command group; `run` dispatches a parsed command line to
//! its command after opening the store the way that command needs it.

mod connections;
mod executions;
mod integrations;
mod login;
mod migrate;
mod policies;
mod serve;
mod stdio;
mod token;
mod tools;

use executor_store::Store;

use crate::AnyResult;
use crate::cli::{AddIntegration, Cli, Command, ConnectionsCommand, IntegrationsCommand};
use crate::config::store_options;
use crate::wiring::open_store;

pub(crate) async fn run(cli: Cli) -> AnyResult<()> {
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
    let global = &cli.global;
    match cli.command {
        Command::Migrate { .. } => Err("migrate copies between two stores and ran above".into()),
        Command::Serve(opts) => serve::serve(store, global, *opts).await,
        Command::Mcp(opts) => stdio::serve(store, global, opts).await,
        Command::Token(command) => token::token(store.as_ref(), command).await,
        Command::Executions(command) => executions::executions(store.as_ref(), command).await,
        Command::Resume {
            execution_id,
            action,
            wait,
            engine,
        } => executions::resume(store, global, &execution_id, &action, wait, &engine).await,
        Command::Policies(command) => policies::policies(store.as_ref(), command).await,
        Command::Integrations(command) => {
            integrations::integrations(store.clone(), global, command).await
        }
        Command::Connections(ConnectionsCommand::Login(args)) => {
            login::login(store, global, args).await
        }
        Command::Connections(command) => {
            connections::connections(store.as_ref(), global, command).await
        }
        Command::Call {
            path,
            input,
            email,
            org,
            engine,
        } => tools::call(store, global, &path, &input, &email, &org, &engine).await,
        Command::Tools(command) => tools::tools(store, global, command).await,
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
