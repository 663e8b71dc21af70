//! The authorization server's secrets: codes, refresh tokens, client
//! secrets, login links and sign-in cookies. Each is 256 bits of OS
//! randomness with a prefix that says what it is (so a leaked one is
//! recognised), and only its SHA-256 is stored; presented ones are hashed
//! and looked up by hash, so no comparison of secrets happens in the clear.

use executor_store::tokens::{hash, random_id};

/// A freshly made secret: the text handed out once, and its hash.
pub struct Minted {
    pub text: String,
    pub hash: Vec<u8>,
}

/// What a secret is for, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    Code,
    RefreshToken,
    ClientSecret,
    LoginLink,
    Cookie,
}

impl SecretKind {
    fn prefix(self) -> &'static str {
        match self {
            SecretKind::Code => "exc_",
            SecretKind::RefreshToken => "exr_",
            SecretKind::ClientSecret => "exs_",
            SecretKind::LoginLink => "exl_",
            SecretKind::Cookie => "",
        }
    }

    pub fn mint(self) -> Minted {
        let text = format!("{}{}", self.prefix(), random_id(32));
        Minted {
            hash: hash(&text),
            text,
        }
    }

    /// The hash of a presented secret of this kind, or None when it does
    /// not look like one (it then matches nothing anyway).
    pub fn hash_of(self, presented: &str) -> Option<Vec<u8>> {
        (presented.starts_with(self.prefix()) && presented.len() <= 128).then(|| hash(presented))
    }
}

/// A new client id: not a secret, but unguessable so that nobody can
/// probe for clients.
pub fn client_id() -> String {
    format!("cl_{}", random_id(16))
}

/// A new grant id.
pub fn grant_id() -> String {
    format!("gr_{}", random_id(12))
}

/// A client made by the operator (`executor oauth clients add`): its
/// record, and its secret (shown once) when it is confidential.
pub fn preregistered_client(
    name: &str,
    redirect_uris: &[String],
    with_secret: bool,
    now_ms: i64,
) -> Result<(executor_store::OAuthClientRecord, Option<String>), crate::RedirectError> {
    let uris = redirect_uris
        .iter()
        .map(|u| crate::RedirectUri::parse(u).map(|r| r.as_str().to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let secret = with_secret.then(|| SecretKind::ClientSecret.mint());
    let record = executor_store::OAuthClientRecord {
        id: client_id(),
        secret_hash: secret.as_ref().map(|s| s.hash.clone()),
        auth_method: if with_secret {
            "client_secret_basic"
        } else {
            "none"
        }
        .to_string(),
        redirect_uris: uris,
        client_name: Some(name.to_string()),
        origin: executor_store::OAuthClientOrigin::Preregistered,
        created_at_ms: now_ms,
        last_used_at_ms: None,
    };
    Ok((record, secret.map(|s| s.text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_secret_hashes_to_its_stored_hash_and_kinds_do_not_mix() {
        let code = SecretKind::Code.mint();
        assert_eq!(
            SecretKind::Code.hash_of(&code.text),
            Some(code.hash.clone())
        );
        assert_eq!(SecretKind::RefreshToken.hash_of(&code.text), None);
        assert_ne!(SecretKind::Code.mint().text, code.text);
        assert!(code.text.len() > 40);
    }
}
