//! API token format: `exk_<id>_<secret>`.
//!
//! The id is the lookup key; only SHA-256 of the secret is stored, and the
//! comparison is constant-time, so neither the database nor timing reveals a
//! usable token.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::{Principal, TokenRecord};

const PREFIX: &str = "exk_";

/// A freshly minted token: the plaintext (shown once) and its record.
pub struct MintedToken {
    pub plaintext: String,
    pub record: TokenRecord,
}

/// URL-safe random string from `bytes` bytes of OS randomness.
pub fn random_id(bytes: usize) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(bytes))
}

pub fn mint(principal: Principal, now_ms: i64, expires_at_ms: Option<i64>) -> MintedToken {
    // Ids never contain '_' so the token splits unambiguously.
    let id = hex::encode(random_bytes(8));
    let secret = random_id(32);
    MintedToken {
        plaintext: format!("{PREFIX}{id}_{secret}"),
        record: TokenRecord {
            id,
            secret_hash: hash(&secret),
            principal,
            created_at_ms: now_ms,
            expires_at_ms,
            revoked_at_ms: None,
            grant_id: None,
        },
    }
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    // getrandom fails only without any OS entropy source; uuid's generator
    // is the fallback so an id is never all zeroes.
    if getrandom::fill(&mut buf).is_err() {
        for (slot, b) in buf
            .iter_mut()
            .zip(std::iter::repeat_with(uuid::Uuid::new_v4).flat_map(|u| u.into_bytes()))
        {
            *slot = b;
        }
    }
    buf
}

/// Splits a presented token into (id, secret), or None if malformed.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if id.is_empty() || secret.is_empty() {
        return None;
    }
    Some((id, secret))
}

pub fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Why a presented token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRejection {
    Malformed,
    Unknown,
    Revoked,
    Expired,
    /// An OAuth access token presented anywhere but `/mcp` (SPEC §4, §13).
    OnlyForMcp,
}

impl TokenRejection {
    pub fn description(self) -> &'static str {
        match self {
            TokenRejection::Malformed => "The access token is malformed",
            TokenRejection::Unknown => "The access token is invalid",
            TokenRejection::Revoked => "The access token has been revoked",
            TokenRejection::Expired => "The access token has expired",
            TokenRejection::OnlyForMcp => {
                "OAuth access tokens are valid at /mcp only; use an API token (executor token create)"
            }
        }
    }
}

/// Tokens verified at an access revision ([`crate::Store::access_revision`]),
/// so that a request on a store where no token or policy changed costs
/// neither a read nor a hash. Not a time-based cache: an entry is used only
/// while the revision it was read at is still the store's, and any change
/// to any token (a revocation by the CLI included) moves the revision, so
/// the next request reads the token again and sees the change.
///
/// An entry keeps the secret that verified, compared in constant time with
/// the presented one; it lives in this process's memory only. At most
/// [`TokenCache::MAX_ENTRIES`]; a full cache starts over.
#[derive(Default)]
pub struct TokenCache {
    entries: std::sync::Mutex<std::collections::HashMap<String, Verified>>,
}

struct Verified {
    revision: u64,
    record: TokenRecord,
    secret: Box<str>,
}

impl TokenCache {
    pub const MAX_ENTRIES: usize = 4096;

    /// The principal of a token verified at `revision` with this very
    /// secret, if it is still current at `now_ms`.
    pub fn lookup(
        &self,
        id: &str,
        secret: &str,
        revision: u64,
        now_ms: i64,
    ) -> Option<(Principal, bool)> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(id)?;
        let same_secret = bool::from(entry.secret.as_bytes().ct_eq(secret.as_bytes()));
        (entry.revision == revision && same_secret && is_current(&entry.record, now_ms))
            .then(|| (entry.record.principal.clone(), entry.record.is_oauth()))
    }

    /// Keeps a record that `secret` verified, read after the store's
    /// revision was `revision`.
    pub fn keep(&self, revision: u64, record: &TokenRecord, secret: &str) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= Self::MAX_ENTRIES && !entries.contains_key(&record.id) {
            entries.clear();
        }
        entries.insert(
            record.id.clone(),
            Verified {
                revision,
                record: record.clone(),
                secret: secret.into(),
            },
        );
    }
}

/// Checks a presented secret against its stored record.
pub fn verify(
    record: &TokenRecord,
    secret: &str,
    now_ms: i64,
) -> Result<Principal, TokenRejection> {
    let presented = hash(secret);
    if !bool::from(presented.as_slice().ct_eq(record.secret_hash.as_slice())) {
        return Err(TokenRejection::Unknown);
    }
    if record.revoked_at_ms.is_some() {
        return Err(TokenRejection::Revoked);
    }
    if record.expires_at_ms.is_some_and(|e| e <= now_ms) {
        return Err(TokenRejection::Expired);
    }
    Ok(record.principal.clone())
}

/// Why a presented bearer did not authenticate.
#[derive(Debug)]
pub enum AuthFailure {
    /// The token is not one that acts for anybody now.
    Rejected(TokenRejection),
    /// The store could not be asked.
    Store(crate::StoreError),
}

/// Who a presented API token acts for, and the token's id: the one check
/// every surface makes (`/mcp`, the management API). A token verified
/// since the store's last token or policy change (its access revision) is
/// taken from `cache` without a read; any change anywhere, a revocation by
/// the CLI included, makes the next request read the token again (SPEC
/// §4: at once).
///
/// `mcp` says where the token is presented: an OAuth access token is
/// accepted at `/mcp` only ([`TokenRejection::OnlyForMcp`] elsewhere).
pub async fn authenticate(
    store: &dyn crate::AccountStore,
    cache: &TokenCache,
    presented: &str,
    mcp: bool,
) -> Result<(Principal, String), AuthFailure> {
    let (id, secret) = parse(presented).ok_or(AuthFailure::Rejected(TokenRejection::Malformed))?;
    let audience = |oauth: bool| {
        if oauth && !mcp {
            Err(AuthFailure::Rejected(TokenRejection::OnlyForMcp))
        } else {
            Ok(())
        }
    };
    // Read before the token: a change committed in between moves the
    // revision past the one the entry is kept at.
    let revision = store.access_revision();
    let now = crate::now_ms();
    if let Some((principal, oauth)) = revision.and_then(|r| cache.lookup(id, secret, r, now)) {
        audience(oauth)?;
        return Ok((principal, id.to_string()));
    }
    let record = store.find_token(id).await.map_err(AuthFailure::Store)?;
    let record = record.ok_or(AuthFailure::Rejected(TokenRejection::Unknown))?;
    let principal = verify(&record, secret, now).map_err(AuthFailure::Rejected)?;
    if let Some(revision) = revision {
        cache.keep(revision, &record, secret);
    }
    audience(record.is_oauth())?;
    Ok((principal, record.id))
}

/// Whether a token found earlier is still neither revoked nor expired.
pub fn is_current(record: &TokenRecord, now_ms: i64) -> bool {
    record.revoked_at_ms.is_none() && record.expires_at_ms.is_none_or(|e| e > now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal() -> Principal {
        Principal {
            account_id: "a".into(),
            org_id: "o".into(),
        }
    }

    #[test]
    fn minted_token_parses_and_verifies() {
        let m = mint(principal(), 0, None);
        let (id, secret) = parse(&m.plaintext).expect("parses");
        assert_eq!(id, m.record.id);
        assert_eq!(verify(&m.record, secret, 1), Ok(principal()));
        assert_eq!(verify(&m.record, "wrong", 1), Err(TokenRejection::Unknown));
    }

    #[test]
    fn revoked_and_expired_are_refused() {
        let mut m = mint(principal(), 0, Some(10));
        let (_, secret) = parse(&m.plaintext)
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .unwrap();
        assert_eq!(verify(&m.record, &secret, 11), Err(TokenRejection::Expired));
        m.record.revoked_at_ms = Some(5);
        assert_eq!(verify(&m.record, &secret, 1), Err(TokenRejection::Revoked));
    }

    #[test]
    fn malformed_tokens_do_not_parse() {
        for t in ["", "exk_", "exk__x", "abc", "exk_id_"] {
            assert!(parse(t).is_none(), "{t}");
        }
    }
}
