//! What both backends of [`OAuthStore`](crate::OAuthStore) share: how long
//! lapsed rows are kept before `gc_oauth` deletes them, and how a client's
//! redirect URIs are stored.

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// A registered client never used is deleted this long after registration.
pub(crate) const UNUSED_CLIENT_KEPT_MS: i64 = 7 * DAY_MS;
/// A registered client is deleted this long after its last use.
pub(crate) const IDLE_CLIENT_KEPT_MS: i64 = 90 * DAY_MS;
/// A revoked or lapsed grant, and an access token past its deadline, are
/// kept this long (a caller may still show why a token was refused).
pub(crate) const LAPSED_KEPT_MS: i64 = DAY_MS;

/// A client's redirect URIs as stored: a JSON array of strings.
pub(crate) fn redirect_uris_to_json(uris: &[String]) -> String {
    serde_json::Value::from(uris.to_vec()).to_string()
}

/// The stored redirect URIs; an error (never a panic, never an empty list
/// standing in for a corrupt one) when the column holds anything else.
pub(crate) fn redirect_uris_from_json(text: &str) -> Result<Vec<String>, serde_json::Error> {
    serde_json::from_str(text)
}

/// An origin the store does not know, as an error a row reader returns.
#[derive(Debug, thiserror::Error)]
#[error("unknown OAuth client origin {0:?}")]
pub(crate) struct UnknownOrigin(pub(crate) String);

pub(crate) fn parse_origin(text: &str) -> Result<crate::OAuthClientOrigin, UnknownOrigin> {
    crate::OAuthClientOrigin::parse(text).ok_or_else(|| UnknownOrigin(text.to_string()))
}

/// The tokens row of an OAuth access token issued under `grant`.
pub(crate) fn access_token(
    grant: &crate::OAuthGrantRecord,
    tokens: &crate::IssuedTokens,
) -> crate::TokenRecord {
    crate::TokenRecord {
        id: tokens.access_id.clone(),
        secret_hash: tokens.access_hash.clone(),
        principal: grant.principal.clone(),
        created_at_ms: tokens.issued_at_ms,
        // Nothing outlives its grant.
        expires_at_ms: Some(tokens.access_expires_at_ms.min(grant.expires_at_ms)),
        revoked_at_ms: None,
        grant_id: Some(grant.id.clone()),
    }
}

/// What a refresh token's row says of a use at `at_ms` once its grant is
/// known to be current and the presenting client's: issue (marking it
/// rotated now when it was not), or refuse as reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rotation {
    /// Not rotated before: rotate it now, and issue.
    First,
    /// Rotated within the grace (a concurrent refresh): issue.
    WithinGrace,
    /// Rotated before the grace: revoke the grant.
    Reused,
}

pub(crate) fn rotation(rotated_at_ms: Option<i64>, at_ms: i64, grace_ms: i64) -> Rotation {
    match rotated_at_ms {
        None => Rotation::First,
        Some(rotated) if at_ms.saturating_sub(rotated) <= grace_ms => Rotation::WithinGrace,
        Some(_) => Rotation::Reused,
    }
}
