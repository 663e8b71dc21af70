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
        TokenCommand::Revoke { token } => {
            // The operator at the shell may revoke any org's token.
            ops.revoke_token(None, &token).await?;
            eprintln!("revoked");
            Ok(())
        }
    }
}
