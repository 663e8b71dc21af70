//! Fixtures shared by the tests of the files of the secrets module.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::key::SecretKey;
use super::seal::{open, seal};

pub(super) const HEX_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
pub(super) const PLAINTEXT: &str = "ghp_SuperSecretToken123";

pub(super) fn test_key() -> SecretKey {
    SecretKey::from_env_value(HEX_KEY).unwrap()
}

/// Same key iff each opens what the other sealed.
pub(super) fn same_key(a: &SecretKey, b: &SecretKey) -> bool {
    let sealed = seal(a, "probe", "o/n").unwrap();
    open(b, &sealed, "o/n").is_ok()
}

pub(super) fn decode_sealed(sealed: &str) -> Vec<u8> {
    STANDARD
        .decode(sealed.strip_prefix("v1:").unwrap())
        .unwrap()
}

pub(super) fn encode_sealed(raw: &[u8]) -> String {
    format!("v1:{}", STANDARD.encode(raw))
}
