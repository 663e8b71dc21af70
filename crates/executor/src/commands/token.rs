//! `executor token …`: API tokens.

use executor_ops::{ActorChoice, NewToken, Operations};

use crate::AnyResult;
use crate::cli::TokenCommand;

pub(crate) async fn token(ops: &Operations, command: TokenCommand) -> AnyResult<()> {
    match command {
        TokenCommand::Create {
            email,
            org,
            expires_in_days,
        } => {
            let choice = ActorChoice {
                email: Some(email),
                org,
            };
            let actor = ops.resolve_actor(&choice).await?;
            let minted = ops
                .create_token(&actor, NewToken { expires_in_days })
                .await?;
            println!("{}", minted.token);
            Ok(())
        }
        TokenCommand::List { org } => {
            let actor = super::resolve_actor(ops, &org).await?;
            let listed = ops.list_tokens(&actor).await?;
            if listed.is_empty() {
                eprintln!(
                    "no tokens: make one with `executor token create --email you@example.com`"
                );
            }
            for t in listed {
                println!(
                    "{}\t{}\t{}\tmade {}\t{}",
                    t.id,
                    t.account_id,
                    t.state,
                    super::readable_time(t.created_at_ms),
                    t.expires_at_ms
                        .map_or("never expires".to_string(), |e| format!(
                            "expires {}",
                            super::readable_time(e)
                        )),
                );
            }
            Ok(())
        }
        TokenCommand::Revoke { token } => {
            // The operator at the shell may revoke any org's token.
            ops.revoke_token(None, &token).await?;
            eprintln!("revoked");
            Ok(())
        }
    }
}
