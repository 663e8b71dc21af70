//! API tokens: minted for the caller (shown once), listed, revoked.

use executor_store::{now_ms, tokens};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{Actor, OpError, OpResult, Operations};

/// How a token (and an id given as `exk_<id>`) starts.
const TOKEN_PREFIX: &str = "exk_";
const DAY_MS: i64 = 24 * 3600 * 1000;
/// The longest lifetime a token can be given, in days (ten years).
pub const MAX_TOKEN_DAYS: u64 = 3650;

#[derive(Debug, Clone, Default)]
pub struct NewToken {
    /// Days until the token stops working; none: never.
    pub expires_in_days: Option<u64>,
}

/// A token just made: the only time its secret is seen. Its `Debug`
/// never shows the token.
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MintedToken {
    /// `exk_<id>_<secret>`: what `Authorization: Bearer` carries.
    pub token: String,
    pub id: String,
    pub account_id: String,
    pub org_id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
}

impl std::fmt::Debug for MintedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MintedToken").field("id", &self.id).finish()
    }
}

/// A token as listed: never its secret.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenInfo {
    pub id: String,
    pub account_id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    /// active, expired or revoked.
    pub state: String,
}

impl TokenInfo {
    fn of(record: &executor_store::TokenRecord) -> Self {
        let state = if record.revoked_at_ms.is_some() {
            "revoked"
        } else if tokens::is_current(record, now_ms()) {
            "active"
        } else {
            "expired"
        };
        TokenInfo {
            id: record.id.clone(),
            account_id: record.principal.account_id.clone(),
            created_at_ms: record.created_at_ms,
            expires_at_ms: record.expires_at_ms,
            revoked_at_ms: record.revoked_at_ms,
            state: state.to_string(),
        }
    }
}

/// A revoked token's id.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenRevoked {
    pub id: String,
    pub revoked_at_ms: i64,
}

impl Operations {
    /// Mints a token acting for `actor`.
    pub async fn create_token(&self, actor: &Actor, input: NewToken) -> OpResult<MintedToken> {
        if let Some(days) = input.expires_in_days
            && !(1..=MAX_TOKEN_DAYS).contains(&days)
        {
            return Err(OpError::invalid(
                "expiresInDays",
                format!("a token lives 1 to {MAX_TOKEN_DAYS} days"),
            ));
        }
        let now = now_ms();
        let expires = input
            .expires_in_days
            .map(|days| now + (days as i64) * DAY_MS);
        let minted = tokens::mint(actor.clone(), now, expires);
        let out = MintedToken {
            token: minted.plaintext,
            id: minted.record.id.clone(),
            account_id: actor.account_id.clone(),
            org_id: actor.org_id.clone(),
            created_at_ms: now,
            expires_at_ms: expires,
        };
        self.store().insert_token(minted.record).await?;
        Ok(out)
    }

    /// The org's tokens, newest first, revoked and expired ones included.
    pub async fn list_tokens(&self, actor: &Actor) -> OpResult<Vec<TokenInfo>> {
        let records = self.store().list_tokens(&actor.org_id).await?;
        Ok(records.iter().map(TokenInfo::of).collect())
    }

    /// A token of the org `org_id`; another org's is "not found".
    pub async fn get_token(&self, org_id: &str, id: &str) -> OpResult<TokenInfo> {
        let found = self.store().find_token(id).await?;
        found
            .filter(|t| t.principal.org_id == org_id)
            .map(|t| TokenInfo::of(&t))
            .ok_or_else(|| OpError::not_found(format_args!("token {id}")))
    }

    /// Revokes a token named by its id or the token itself: of the org
    /// `org_id` (another org's token is "not found"), or of any org for
    /// `None` (the store's operator, at its shell).
    pub async fn revoke_token(&self, org_id: Option<&str>, token: &str) -> OpResult<TokenRevoked> {
        let id = tokens::parse(token).map_or(token, |(id, _)| id);
        let id = id.strip_prefix(TOKEN_PREFIX).unwrap_or(id);
        let found = self.store().find_token(id).await?;
        if found.is_none_or(|t| org_id.is_some_and(|org| t.principal.org_id != org)) {
            return Err(OpError::not_found(format_args!("token {id}")));
        }
        let now = now_ms();
        if self.store().revoke_token(id, now).await? {
            Ok(TokenRevoked {
                id: id.to_string(),
                revoked_at_ms: now,
            })
        } else {
            Err(OpError::not_found(format_args!("token {id}")))
        }
    }
}
