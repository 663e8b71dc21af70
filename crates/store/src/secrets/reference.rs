//! [`SecretRef`], how a connection stores a credential (sealed, or
//! `env://NAME`), and [`resolve`], which yields its plaintext at call time.

use std::ffi::OsString;
use std::fmt;
use std::str::FromStr;

use super::error::SecretError;
use super::key::SecretKey;
use super::seal::{has_version_prefix, open};
use super::string::SecretString;

const ENV_REF_PREFIX: &str = "env://";
/// Environment variables with this prefix configure the server itself (the
/// secret key among them); letting a connection reference them would let
/// whoever configures a connection send them to a third-party API.
const RESERVED_ENV_PREFIX: &str = "EXECUTOR_";

/// How a connection stores a credential: sealed in the store, or a reference
/// to an environment variable of the server process read at call time.
///
/// Both forms are safe to log: the sealed form is ciphertext, the env form a
/// variable name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// A value produced by [`seal`](fn@super::seal) (`v1:…`).
    Sealed(String),
    /// The name of an environment variable (`env://NAME`).
    Env(String),
}

impl SecretRef {
    /// Whether a stored secret is sealed with the key (not an `env://`
    /// reference): the ones a key check and a store copy must open.
    pub fn is_sealed(value: &str) -> bool {
        matches!(SecretRef::parse(value), Ok(SecretRef::Sealed(_)))
    }

    /// Parses `env://NAME` or a sealed `vN:…` value. NAME is letters, digits
    /// and `_`, not starting with a digit, and not `EXECUTOR_*`. An invalid
    /// input is not echoed: it may be a pasted credential.
    pub fn parse(value: &str) -> Result<Self, SecretError> {
        if let Some(name) = value.strip_prefix(ENV_REF_PREFIX) {
            check_env_name(name)?;
            Ok(SecretRef::Env(name.to_string()))
        } else if has_version_prefix(value) {
            Ok(SecretRef::Sealed(value.to_string()))
        } else {
            Err(SecretError::InvalidRef)
        }
    }
}

impl FromStr for SecretRef {
    type Err = SecretError;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse(value)
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Sealed(sealed) => f.write_str(sealed),
            SecretRef::Env(name) => write!(f, "{ENV_REF_PREFIX}{name}"),
        }
    }
}

fn check_env_name(name: &str) -> Result<(), SecretError> {
    let mut bytes = name.bytes();
    let valid = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(SecretError::InvalidRef);
    }
    if name.to_ascii_uppercase().starts_with(RESERVED_ENV_PREFIX) {
        return Err(SecretError::ReservedEnvVar {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// The plaintext of a credential, at call time: opens a sealed value, or
/// reads the referenced environment variable now (so rotating the variable
/// and restarting takes effect without re-saving the connection).
pub fn resolve(
    key: &SecretKey,
    secret: &SecretRef,
    associated: &str,
) -> Result<SecretString, SecretError> {
    resolve_with(key, secret, associated, |name| std::env::var_os(name))
}

/// `resolve` with the environment lookup passed in, so tests need not mutate
/// the process environment (`pub(super)` for the module-wide test in
/// `mod.rs`).
pub(super) fn resolve_with(
    key: &SecretKey,
    secret: &SecretRef,
    associated: &str,
    lookup: impl FnOnce(&str) -> Option<OsString>,
) -> Result<SecretString, SecretError> {
    match secret {
        SecretRef::Sealed(sealed) => open(key, sealed, associated),
        SecretRef::Env(name) => {
            // The variants are public, so a ref may not have come from parse.
            check_env_name(name)?;
            let value =
                lookup(name).ok_or_else(|| SecretError::EnvMissing { name: name.clone() })?;
            let value = value
                .into_string()
                .map_err(|_| SecretError::EnvNotUnicode { name: name.clone() })?;
            // An empty credential is a configuration mistake; saying so here
            // beats a 401 from the upstream API.
            if value.is_empty() {
                return Err(SecretError::EnvEmpty { name: name.clone() });
            }
            Ok(SecretString::from(value))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::seal;
    use crate::secrets::test_support::{HEX_KEY, PLAINTEXT, test_key};

    #[test]
    fn secret_refs_parse_and_print() {
        let env = SecretRef::parse("env://GITHUB_TOKEN").unwrap();
        assert_eq!(env, SecretRef::Env("GITHUB_TOKEN".into()));
        assert_eq!(env.to_string(), "env://GITHUB_TOKEN");
        assert_eq!(
            "env://_x1".parse::<SecretRef>().unwrap(),
            SecretRef::Env("_x1".into())
        );

        let sealed = seal(&test_key(), PLAINTEXT, "o/n").unwrap();
        let parsed = SecretRef::parse(&sealed).unwrap();
        assert_eq!(parsed, SecretRef::Sealed(sealed.clone()));
        assert_eq!(parsed.to_string(), sealed);

        for bad in [
            "env://",
            "env://1ABC",
            "env://A-B",
            "env://A B",
            "env://A=b",
            "env:/X",
            "ENV://X",
            "plain",
            "v:abc",
        ] {
            let err = SecretRef::parse(bad).unwrap_err();
            assert!(matches!(err, SecretError::InvalidRef), "{bad}");
        }
        for reserved in ["env://EXECUTOR_SECRET_KEY", "env://executor_admin_token"] {
            let err = SecretRef::parse(reserved).unwrap_err();
            assert!(
                matches!(err, SecretError::ReservedEnvVar { .. }),
                "{reserved}"
            );
        }
    }

    #[test]
    fn env_refs_resolve_at_call_time() {
        let key = test_key();
        let reference = SecretRef::parse("env://GITHUB_TOKEN").unwrap();
        let value = resolve_with(&key, &reference, "o/n", |name| {
            assert_eq!(name, "GITHUB_TOKEN");
            Some(PLAINTEXT.into())
        })
        .unwrap();
        assert_eq!(value.expose(), PLAINTEXT);

        // The real environment, read-only: PATH is set wherever tests run.
        if let Ok(path) = std::env::var("PATH") {
            let value = resolve(&key, &SecretRef::Env("PATH".into()), "o/n").unwrap();
            assert_eq!(value.expose(), path);
        }

        let missing = SecretRef::Env("XTEST_TEST_SURELY_UNSET_7F3A".into());
        let err = resolve(&key, &missing, "o/n").unwrap_err();
        assert!(matches!(err, SecretError::EnvMissing { .. }));
        assert_eq!(
            err.to_string(),
            "environment variable XTEST_TEST_SURELY_UNSET_7F3A (from env://XTEST_TEST_SURELY_UNSET_7F3A) is not set"
        );

        let err = resolve_with(&key, &reference, "o/n", |_| Some(OsString::new())).unwrap_err();
        assert!(matches!(err, SecretError::EnvEmpty { .. }));
        assert!(err.to_string().contains("GITHUB_TOKEN"));

        // Built directly rather than parsed: still refused.
        let err = resolve_with(
            &key,
            &SecretRef::Env("EXECUTOR_SECRET_KEY".into()),
            "o/n",
            |_| Some(HEX_KEY.into()),
        )
        .unwrap_err();
        assert!(matches!(err, SecretError::ReservedEnvVar { .. }));
        assert!(!err.to_string().contains(HEX_KEY));

        // Sealed refs go through open with the owner binding.
        let sealed = SecretRef::Sealed(seal(&key, PLAINTEXT, "o/n").unwrap());
        assert_eq!(resolve(&key, &sealed, "o/n").unwrap().expose(), PLAINTEXT);
        assert!(matches!(
            resolve(&key, &sealed, "o/other"),
            Err(SecretError::Open)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn env_ref_not_unicode_is_clear() {
        use std::os::unix::ffi::OsStringExt;
        let err = resolve_with(&test_key(), &SecretRef::Env("TOKEN".into()), "o/n", |_| {
            Some(OsString::from_vec(vec![0xff, 0xfe]))
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "environment variable TOKEN (from env://TOKEN) is not valid UTF-8"
        );
    }
}
