//! Sealing and opening: AES-256-GCM under the server key with a fresh random
//! nonce, and associated data that binds each sealed value to its owner.

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, Nonce, Payload};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroize;

use super::error::SecretError;
use super::key::SecretKey;
use super::random::random_array;
use super::string::SecretString;

pub(super) const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const SEALED_PREFIX: &str = "v1:";
/// Prepended to the caller's associated data so a v1 ciphertext can never be
/// accepted under another format or by another use of the same key.
const AAD_DOMAIN: &[u8] = b"executor/secret/v1\0";

fn associated_data(associated: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(AAD_DOMAIN.len() + associated.len());
    aad.extend_from_slice(AAD_DOMAIN);
    aad.extend_from_slice(associated.as_bytes());
    aad
}

/// The associated data that binds a connection's sealed secret to that
/// connection: sealing and opening must agree on it, byte for byte.
pub fn connection_aad(org_id: &str, namespace: &str) -> String {
    format!("{org_id}/{namespace}")
}

/// Seals `plaintext` with AES-256-GCM under a fresh random 96-bit nonce.
///
/// Output: `v1:<base64(nonce || ciphertext || tag)>`. `associated` names the
/// owner (for connections, [`connection_aad`]); the same string is needed to open
/// it, so a sealed value copied to another connection does not open.
pub fn seal(key: &SecretKey, plaintext: &str, associated: &str) -> Result<String, SecretError> {
    let nonce_bytes = random_array::<NONCE_LEN>()?;
    let nonce = Nonce::<Aes256Gcm>::from(*nonce_bytes);
    let aad = associated_data(associated);
    let ciphertext = key
        .cipher()
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext.as_bytes(),
                aad: &aad,
            },
        )
        .map_err(|_| SecretError::Seal)?;
    let mut out = Vec::with_capacity(NONCE_LEN + ciphertext.len());
    out.extend_from_slice(&nonce_bytes[..]);
    out.extend_from_slice(&ciphertext);
    Ok(format!("{SEALED_PREFIX}{}", STANDARD.encode(out)))
}

/// Opens a value made by [`seal`] with the same key and associated data.
pub fn open(key: &SecretKey, sealed: &str, associated: &str) -> Result<SecretString, SecretError> {
    let Some(body) = sealed.strip_prefix(SEALED_PREFIX) else {
        return Err(if has_version_prefix(sealed) {
            SecretError::UnsupportedVersion
        } else {
            SecretError::Malformed
        });
    };
    let raw = STANDARD.decode(body).map_err(|_| SecretError::Malformed)?;
    if raw.len() < NONCE_LEN + TAG_LEN {
        return Err(SecretError::Malformed);
    }
    let (nonce_bytes, ciphertext) = raw.split_at(NONCE_LEN);
    let nonce = Nonce::<Aes256Gcm>::try_from(nonce_bytes).map_err(|_| SecretError::Malformed)?;
    let aad = associated_data(associated);
    let plaintext = key
        .cipher()
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad: &aad,
            },
        )
        .map_err(|_| SecretError::Open)?;
    match String::from_utf8(plaintext) {
        Ok(text) => Ok(SecretString::from(text)),
        Err(e) => {
            // Authentic but not text: still secret, so wipe it.
            e.into_bytes().zeroize();
            Err(SecretError::NotUtf8)
        }
    }
}

/// `vN:` for some N: a format this build does not know (e.g. from a newer
/// server), reported differently from garbage.
pub(super) fn has_version_prefix(sealed: &str) -> bool {
    sealed
        .strip_prefix('v')
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::test_support::{PLAINTEXT, decode_sealed, encode_sealed, test_key};

    #[test]
    fn round_trip() {
        let key = test_key();
        for text in [PLAINTEXT, "", "ünïcödé 🔑", &"x".repeat(10_000)] {
            let sealed = seal(&key, text, "org_1/github").unwrap();
            assert!(sealed.starts_with("v1:"));
            assert!(!sealed.contains(text) || text.is_empty());
            assert_eq!(open(&key, &sealed, "org_1/github").unwrap().expose(), text);
        }
    }

    #[test]
    fn wrong_associated_data_fails() {
        let key = test_key();
        let sealed = seal(&key, PLAINTEXT, "org_1/github").unwrap();
        for other in ["org_2/github", "org_1/gitlab", "", "org_1/github "] {
            assert!(matches!(open(&key, &sealed, other), Err(SecretError::Open)));
        }
    }

    #[test]
    fn wrong_key_fails() {
        let sealed = seal(&test_key(), PLAINTEXT, "o/n").unwrap();
        let other = SecretKey::from_env_value(&"ab".repeat(32)).unwrap();
        assert!(matches!(
            open(&other, &sealed, "o/n"),
            Err(SecretError::Open)
        ));
    }

    #[test]
    fn tampered_ciphertext_fails() {
        let key = test_key();
        let sealed = seal(&key, PLAINTEXT, "o/n").unwrap();
        let raw = decode_sealed(&sealed);
        // Nonce, ciphertext body and tag: flipping any bit must be detected.
        for index in [
            0,
            NONCE_LEN - 1,
            NONCE_LEN,
            NONCE_LEN + 5,
            raw.len() - TAG_LEN,
            raw.len() - 1,
        ] {
            let mut tampered = raw.clone();
            tampered[index] ^= 0x01;
            let result = open(&key, &encode_sealed(&tampered), "o/n");
            assert!(matches!(result, Err(SecretError::Open)), "index {index}");
        }
        // Truncated, extended, and not base64 at all.
        assert!(matches!(
            open(&key, &encode_sealed(&raw[..raw.len() - 1]), "o/n"),
            Err(SecretError::Open)
        ));
        let mut longer = raw.clone();
        longer.push(0);
        assert!(matches!(
            open(&key, &encode_sealed(&longer), "o/n"),
            Err(SecretError::Open)
        ));
        assert!(matches!(
            open(&key, &encode_sealed(&raw[..NONCE_LEN + TAG_LEN - 1]), "o/n"),
            Err(SecretError::Malformed)
        ));
        assert!(matches!(
            open(&key, "v1:not base64!", "o/n"),
            Err(SecretError::Malformed)
        ));
        assert!(matches!(
            open(&key, PLAINTEXT, "o/n"),
            Err(SecretError::Malformed)
        ));
        let v2 = sealed.replacen("v1:", "v2:", 1);
        assert!(matches!(
            open(&key, &v2, "o/n"),
            Err(SecretError::UnsupportedVersion)
        ));
    }

    #[test]
    fn different_nonces_for_same_plaintext() {
        let key = test_key();
        let a = seal(&key, PLAINTEXT, "o/n").unwrap();
        let b = seal(&key, PLAINTEXT, "o/n").unwrap();
        assert_ne!(a, b);
        assert_ne!(
            decode_sealed(&a)[..NONCE_LEN],
            decode_sealed(&b)[..NONCE_LEN]
        );
        assert_eq!(
            open(&key, &a, "o/n").unwrap().expose(),
            open(&key, &b, "o/n").unwrap().expose()
        );
    }
}
