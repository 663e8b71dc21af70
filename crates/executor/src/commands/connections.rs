//! `executor connections …`: set, list and remove the credentials of
//! integrations; secrets come from stdin or a file and are sealed at rest.

use executor_store::secrets::SecretRef;
use executor_store::{ConnectionRecord, CredentialKind, Store, now_ms, secrets};
use zeroize::Zeroizing;

use super::resolve_org;
use crate::AnyResult;
use crate::cli::{ConnectionsCommand, GlobalOpts};

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

/// Secrets this short could not be scrubbed from what upstreams answer
/// (SPEC §9): redaction skips strings under four bytes, which would
/// otherwise mangle every result.
pub(crate) fn long_enough(secret: &str) -> AnyResult<()> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "a secret of fewer than {MIN_SECRET_BYTES} bytes is refused: it could not be kept out of results"
        )
        .into());
    }
    Ok(())
}

pub(crate) const MIN_SECRET_BYTES: usize = 4;

pub(crate) async fn connections(
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
            let org_id = resolve_org(store, &org).await?;
            let associated = secrets::connection_aad(&org_id, &namespace);
            let read = |value: Option<String>| value.map(secret_value).transpose();
            let (api_key, bearer, basic) = (read(api_key)?, read(bearer)?, read(basic)?);
            let (kind, username, secret) = match (api_key, bearer, basic, secret_ref) {
                (_, _, _, Some(reference)) => {
                    let parsed = SecretRef::parse(&reference)?;
                    if !matches!(parsed, SecretRef::Env(_)) {
                        return Err("--secret-ref takes env://NAME".into());
                    }
                    if kind == CredentialKind::OAuth {
                        return Err(format!(
                            "an OAuth connection is made by logging in: run `executor connections login {namespace}`"
                        )
                        .into());
                    }
                    (kind, username, parsed.to_string())
                }
                (Some(key), None, None, None) => (
                    CredentialKind::ApiKey,
                    None,
                    long_enough(&key)
                        .and_then(|()| seal_with(global, key.as_str(), &associated))?,
                ),
                (None, Some(token), None, None) => (
                    CredentialKind::Bearer,
                    None,
                    long_enough(&token)
                        .and_then(|()| seal_with(global, token.as_str(), &associated))?,
                ),
                (None, None, Some(pair), None) => {
                    let (user, password) =
                        pair.split_once(':').ok_or("--basic takes USER:PASSWORD")?;
                    long_enough(password)?;
                    (
                        CredentialKind::Basic,
                        Some(user.to_string()),
                        seal_with(global, password, &associated)?,
                    )
                }
                _ => return Err("give one of --api-key, --bearer, --basic or --secret-ref".into()),
            };
            store
                .set_connection(ConnectionRecord {
                    org_id,
                    namespace: namespace.clone(),
                    kind,
                    username,
                    secret,
                    updated_at_ms: now_ms(),
                    oauth: None,
                    generation: 0,
                })
                .await?;
            println!("{namespace}\t{kind}");
            Ok(())
        }
        ConnectionsCommand::List { org } => {
            let org_id = resolve_org(store, &org).await?;
            for c in store.list_connections(&org_id).await? {
                if c.kind == CredentialKind::OAuth {
                    let state = executor_oauth::Grant::from_record(&c)
                        .map(|g| g.describe(now_ms()))
                        .unwrap_or_else(|e| format!("unreadable: {e}"));
                    println!("{}\t{}\t{state}", c.namespace, c.kind);
                    continue;
                }
                let stored = if c.secret.starts_with("env://") {
                    c.secret.as_str()
                } else {
                    "sealed"
                };
                println!("{}\t{}\t{}", c.namespace, c.kind, stored);
            }
            Ok(())
        }
        ConnectionsCommand::Login(_) => Err("handled by login::login".into()),
        ConnectionsCommand::Remove { namespace, org } => {
            let org_id = resolve_org(store, &org).await?;
            if store.remove_connection(&org_id, &namespace).await? {
                Ok(())
            } else {
                Err(format!("no connection for {namespace:?}").into())
            }
        }
    }
}

pub(crate) fn seal_with(global: &GlobalOpts, value: &str, associated: &str) -> AnyResult<String> {
    let key = crate::wiring::load_secret_key(global)?;
    Ok(secrets::seal(&key, value, associated)?)
}
