//! `executor token …`: API tokens.

use executor_store::{Store, now_ms, tokens};

use crate::AnyResult;
use crate::cli::TokenCommand;

const DAY_MS: i64 = 24 * 3600 * 1000;

pub(crate) async fn token(store: &dyn Store, command: TokenCommand) -> AnyResult<()> {
    match command {
        TokenCommand::Create {
            email,
            org,
            expires_in_days,
        } => {
            let principal = store.ensure_account(&email, org.as_deref()).await?;
            let now = now_ms();
            let expires = expires_in_days.map(|days| now + (days as i64) * DAY_MS);
            let minted = tokens::mint(principal, now, expires);
            store.insert_token(minted.record).await?;
            println!("{}", minted.plaintext);
            Ok(())
        }
        TokenCommand::Revoke { token } => {
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
    }
}
