//! Secrets at rest (SPEC §9).
//!
//! Connection credentials are stored either sealed (AES-256-GCM under a
//! server-wide key, bound to their owner through the associated data) or as a
//! reference to an environment variable (`env://NAME`) that is read only when
//! a call needs it. Plaintext lives in memory as a [`SecretString`], which
//! never prints its value and is wiped on drop; no error of this module
//! carries key material or plaintext, so errors can be logged as they are.
//!
//! One job per file:
//!
//! - `key`: the server-wide [`SecretKey`]. It comes from [`KEY_ENV_VAR`]
//!   (`EXECUTOR_SECRET_KEY`: 64 hex digits or base64 of 32 bytes) when that
//!   variable is set, else from [`KEY_FILE_NAME`] in the data directory,
//!   created on first use with 32 random bytes and mode 0600 and published
//!   without ever replacing a key file another process wrote first.
//! - `seal`: [`seal`](fn@seal) and [`open`]. A sealed secret is
//!   `v1:<base64(nonce || ciphertext || tag)>`; the associated data names its
//!   owner, for a connection its org and namespace ([`connection_aad`]), so a
//!   sealed value copied to another org or namespace does not open.
//! - `reference`: [`SecretRef`], how a connection stores a credential (sealed
//!   or `env://NAME`), and [`resolve`], which yields its plaintext at call
//!   time.
//! - `string`: [`SecretString`], plaintext in memory.
//! - `error`: [`SecretError`], and the [`KeyOrigin`] and [`KeyProblem`] it
//!   reports for a rejected key.

mod error;
mod key;
mod random;
mod reference;
mod seal;
mod string;
#[cfg(test)]
mod test_support;

pub use self::error::{KEY_ENV_VAR, KEY_FILE_NAME, KeyOrigin, KeyProblem, SecretError};
pub use self::key::SecretKey;
pub use self::reference::{SecretRef, resolve};
pub use self::seal::{connection_aad, open, seal};
pub use self::string::SecretString;

#[cfg(test)]
mod tests {
    //! The module-wide promise that nothing prints a secret, checked across
    //! every file of the tree at once.

    use super::reference::resolve_with;
    use super::seal::NONCE_LEN;
    use super::test_support::{HEX_KEY, PLAINTEXT, decode_sealed, encode_sealed, test_key};
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn nothing_prints_secrets() {
        let key = test_key();
        let secret = SecretString::from(PLAINTEXT.to_string());
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(format!("{secret}"), "[redacted]");
        assert_eq!(format!("{:?}", secret.clone()), "[redacted]");
        let key_debug = format!("{key:?} {key:#?}");
        assert!(key_debug.contains("redacted"));
        // Neither the hex nor any byte rendering of the key appears.
        assert!(
            !key_debug.contains("0a0b") && !key_debug.contains("10, 11"),
            "{key_debug}"
        );

        let sealed = seal(&key, PLAINTEXT, "o/n").unwrap();
        let mut raw = decode_sealed(&sealed);
        raw[NONCE_LEN] ^= 1;
        let errors = [
            open(&key, &sealed, "other").unwrap_err(),
            open(&key, &encode_sealed(&raw), "o/n").unwrap_err(),
            open(&key, PLAINTEXT, "o/n").unwrap_err(),
            open(&key, &format!("v9:{PLAINTEXT}"), "o/n").unwrap_err(),
            SecretRef::parse(PLAINTEXT).unwrap_err(),
            SecretRef::parse(&format!("env://{PLAINTEXT}-x")).unwrap_err(),
            resolve_with(&key, &SecretRef::Sealed(PLAINTEXT.into()), "o/n", |_| None).unwrap_err(),
            resolve_with(&key, &SecretRef::Env("TOKEN".into()), "o/n", |_| {
                Some(OsString::new())
            })
            .unwrap_err(),
            SecretKey::from_env_value(HEX_KEY.get(..60).unwrap()).unwrap_err(),
            SecretKey::from_env_value(&format!("{PLAINTEXT}{PLAINTEXT}")).unwrap_err(),
        ];
        for err in &errors {
            for rendered in [err.to_string(), format!("{err:?}")] {
                assert!(!rendered.contains(PLAINTEXT), "{rendered}");
                assert!(!rendered.contains(&HEX_KEY[..16]), "{rendered}");
            }
        }
    }
}
