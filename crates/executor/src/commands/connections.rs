//! `executor connections …`: set, list, show, test and remove the
//! credentials of integrations; secrets come from stdin or a file and are sealed at rest.

use executor_ops::{CredentialInput, Operations, SetConnection};
use executor_store::CredentialKind;
use zeroize::Zeroizing;

use super::resolve_actor;
use crate::AnyResult;
use crate::cli::ConnectionsCommand;

/// A secret given to the CLI: `-` reads it from standard input, `@FILE`
/// from a file (one trailing newline dropped), so that it stays out of
/// `ps` and shell history; anything else is the value itself.
pub(crate) fn secret_value(arg: String) -> AnyResult<Zeroizing<String>> {
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

pub(crate) async fn connections(ops: &Operations, command: ConnectionsCommand) -> AnyResult<()> {
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
            let actor = resolve_actor(ops, &org).await?;
            let read = |value: Option<String>| value.map(secret_value).transpose();
            let (api_key, bearer, basic) = (read(api_key)?, read(bearer)?, read(basic)?);
            let credential = match (api_key, bearer, basic, secret_ref) {
                (_, _, _, Some(reference)) => CredentialInput::Reference {
                    reference,
                    kind,
                    username,
                },
                (Some(key), None, None, None) => CredentialInput::ApiKey(key),
                (None, Some(token), None, None) => CredentialInput::Bearer(token),
                (None, None, Some(pair), None) => {
                    let (user, password) =
                        pair.split_once(':').ok_or("--basic takes USER:PASSWORD")?;
                    CredentialInput::Basic {
                        username: user.to_string(),
                        password: Zeroizing::new(password.to_string()),
                    }
                }
                _ => return Err("give one of --api-key, --bearer, --basic or --secret-ref".into()),
            };
            let set = SetConnection {
                namespace,
                credential,
            };
            let status = ops.set_connection(&actor, set).await?;
            println!("{}\t{}", status.namespace, status.kind);
            Ok(())
        }
        ConnectionsCommand::List { org } => {
            let actor = resolve_actor(ops, &org).await?;
            let listed = ops.list_connections(&actor).await?;
            if listed.is_empty() {
                println!("no connections yet: set one with `executor connections set NAMESPACE`");
            }
            for c in listed {
                println!("{}\t{}\t{}", c.namespace, c.kind, c.stored);
            }
            Ok(())
        }
        ConnectionsCommand::Status { namespace, org } => {
            let actor = resolve_actor(ops, &org).await?;
            let status = ops.connection_status(&actor, &namespace).await?;
            let state = if status.kind == CredentialKind::OAuth {
                ops.describe_grant(&actor, &namespace).await?
            } else {
                status.stored
            };
            println!("{}\t{}\t{state}", status.namespace, status.kind);
            Ok(())
        }
        ConnectionsCommand::Test {
            namespace,
            local_network,
            org,
        } => {
            let actor = resolve_actor(ops, &org).await?;
            let test = ops
                .test_connection(&actor, &namespace, local_network.allowed)
                .await?;
            let verdict = if test.ok { "ok" } else { "failed" };
            println!(
                "{}\t{verdict}\t{}\t{} ms",
                test.namespace, test.message, test.elapsed_ms
            );
            eprintln!("tried: {}", test.request);
            if test.ok {
                Ok(())
            } else {
                Err(format!("{namespace}'s connection did not work: {}", test.message).into())
            }
        }
        ConnectionsCommand::Login(_) => Err("handled by login::login".into()),
        ConnectionsCommand::Remove { namespace, org } => {
            let actor = resolve_actor(ops, &org).await?;
            ops.remove_connection(&actor, &namespace).await?;
            Ok(())
        }
    }
}
