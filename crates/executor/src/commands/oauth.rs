//! `executor oauth …` (the built-in authorization server's clients and
//! grants) and `executor console login-link` (SPEC §4, §14).

use executor_ops::Operations;
use executor_store::PUBLIC_URL_ANNOUNCEMENT;

use super::{readable_time, resolve_actor};
use crate::AnyResult;
use crate::cli::{ConsoleCommand, OauthClientsCommand, OauthCommand, OauthGrantsCommand};

pub(crate) async fn oauth(ops: &Operations, command: OauthCommand) -> AnyResult<()> {
    match command {
        OauthCommand::Clients(OauthClientsCommand::List) => {
            let clients = ops.list_clients().await?;
            if clients.is_empty() {
                eprintln!("no clients");
            }
            for c in clients {
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    c.id,
                    c.client_name.as_deref().unwrap_or("-"),
                    c.origin,
                    c.auth_method,
                    c.redirect_uris.join(" "),
                );
            }
            Ok(())
        }
        OauthCommand::Clients(OauthClientsCommand::Add {
            name,
            redirect_uris,
            secret,
        }) => {
            let added = ops.add_client(&name, &redirect_uris, secret).await?;
            println!("client_id\t{}", added.client.id);
            if let Some(secret) = added.client_secret {
                println!("client_secret\t{secret}");
                eprintln!("the secret is shown this once");
            }
            Ok(())
        }
        OauthCommand::Clients(OauthClientsCommand::Delete { id }) => {
            ops.delete_client(&id).await?;
            eprintln!("deleted; its grants are revoked");
            Ok(())
        }
        OauthCommand::Grants(OauthGrantsCommand::List { org }) => {
            let actor = resolve_actor(ops, &org).await?;
            let grants = ops.list_grants(&actor).await?;
            if grants.is_empty() {
                eprintln!("no grants");
            }
            for g in grants {
                println!(
                    "{}\t{}\t{}\t{}\tgiven {}\tlast used {}",
                    g.id,
                    g.client_name.as_deref().unwrap_or(&g.client_id),
                    g.redirect_host,
                    g.state,
                    readable_time(g.created_at_ms),
                    readable_time(g.last_used_at_ms),
                );
            }
            Ok(())
        }
        OauthCommand::Grants(OauthGrantsCommand::Revoke { id }) => {
            // The operator at the shell may revoke any org's grant.
            ops.revoke_grant(None, &id).await?;
            eprintln!("revoked");
            Ok(())
        }
    }
}

pub(crate) async fn console(ops: &Operations, command: ConsoleCommand) -> AnyResult<()> {
    match command {
        ConsoleCommand::LoginLink { actor, public_url } => {
            let principal = resolve_actor(ops, &actor).await?;
            let base = match public_url {
                Some(url) => url,
                None => ops
                    .store()
                    .announced(PUBLIC_URL_ANNOUNCEMENT)
                    .await?
                    .unwrap_or_else(|| "http://127.0.0.1:4788".to_string()),
            };
            let link = ops.login_link(&principal).await?;
            println!("{}/console/login?link={link}", base.trim_end_matches('/'));
            eprintln!("valid for 10 minutes, once");
            Ok(())
        }
    }
}
