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

use executor_store::{Principal, Store};

use crate::AnyResult;
use crate::cli::{ActorArg, AddIntegration, Cli, Command, ConnectionsCommand, IntegrationsCommand};
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
            actor,
            engine,
        } => tools::call(store, global, &path, &input, &actor, &engine).await,
        Command::Tools(command) => tools::tools(store, global, command).await,
    }
}

/// The org a command acts in: see [`resolve_actor`].
pub(crate) async fn resolve_org(store: &dyn Store, actor: &ActorArg) -> AnyResult<String> {
    Ok(resolve_actor(store, actor).await?.org_id)
}

/// Who a command acts for, the same for every command (issue 37: `call`
/// and `mcp` acted for `local@localhost` by default, which made a second
/// org beside the one `token create` had made, after which every catalog
/// command asked for `--org`):
/// - `--email` (with or without `--org`): that account, in its personal
///   org or the org named; made if missing, as `token create` would;
/// - `--org` alone: that org, which must exist, by its owner or earliest
///   member;
/// - neither: the only org, likewise; on a fresh data dir the local
///   operator (`local@localhost`) and its personal org are made, so the
///   first command works without a token; with several orgs one must be
///   named.
pub(crate) async fn resolve_actor(store: &dyn Store, actor: &ActorArg) -> AnyResult<Principal> {
    if let Some(email) = &actor.email {
        return Ok(store.ensure_account(email, actor.org.as_deref()).await?);
    }
    let org_id = match &actor.org {
        Some(name) => store
            .find_org(name)
            .await?
            .ok_or_else(|| format!("no org named {name:?}: see `executor token create --org`"))?,
        None => {
            let orgs = store.list_orgs().await?;
            match orgs.as_slice() {
                [(id, _)] => id.clone(),
                [] => return Ok(store.ensure_account(LOCAL_OPERATOR, None).await?),
                many => {
                    let names: Vec<&str> = many.iter().map(|(_, n)| n.as_str()).collect();
                    return Err(format!(
                        "several orgs exist ({}): name one with --org (or EXECUTOR_ORG)",
                        names.join(", ")
                    )
                    .into());
                }
            }
        }
    };
    let acting = store.org_account(&org_id).await?;
    acting.ok_or_else(|| "the org has no member to act as: name an account with --email".into())
}

/// Says on stderr which org a command that runs tools acts in, so that an
/// operator who named none sees which one it chose.
pub(crate) async fn say_who_acts(store: &dyn Store, principal: &Principal) {
    let orgs = store.list_orgs().await.unwrap_or_default();
    let name = orgs
        .iter()
        .find(|(id, _)| *id == principal.org_id)
        .map_or(principal.org_id.as_str(), |(_, name)| name.as_str());
    eprintln!("executor: acting in org {name}");
}

/// The account a fresh data dir's first command acts as.
const LOCAL_OPERATOR: &str = "local@localhost";

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
