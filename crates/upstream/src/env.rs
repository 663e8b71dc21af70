//! A stdio integration's `--env` values at rest (SPEC §9): sealed like a
//! connection's secret, under the server's key, bound to the integration and
//! the variable's name ([`env_aad`]), so a value copied to another org,
//! namespace or variable does not open. They are opened only to start the
//! command ([`open_env`]) and scrubbed, in every form, from what comes back
//! from it: answers, errors and its stderr lines in the log.
//!
//! A record written by an earlier release holds its values in clear: they
//! still start the command, and `integrations refresh` (or adding it again)
//! seals them.

use executor_outbound::{Credential, scrub_value};
use executor_store::secrets::{self, SecretKey, SecretString};
use serde_json::Value;

/// What a sealed value starts with (`secrets::seal`'s version prefix).
const SEALED: &str = "v1:";

/// What opens a stdio integration's sealed `--env` values: the server's
/// key (none where a command runs without it) and the integration's org.
#[derive(Clone, Copy)]
pub struct EnvSecrets<'a> {
    pub key: Option<&'a SecretKey>,
    pub org_id: &'a str,
}

/// The associated data of one variable's sealed value.
fn env_aad(org_id: &str, namespace: &str, name: &str) -> String {
    format!("{org_id}/{namespace}/env/{name}")
}

/// `env` with every value sealed for (`org_id`, `namespace`). A value that
/// already opens as this variable's (a record refreshed) stays as it is.
pub fn seal_env(
    key: &SecretKey,
    org_id: &str,
    namespace: &str,
    env: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, secrets::SecretError> {
    env.into_iter()
        .map(|(name, value)| {
            let aad = env_aad(org_id, namespace, &name);
            if value.starts_with(SEALED) && secrets::open(key, &value, &aad).is_ok() {
                return Ok((name, value));
            }
            let sealed = secrets::seal(key, &value, &aad)?;
            Ok((name, sealed))
        })
        .collect()
}

/// The plaintext of `env`'s values, to start the command with. Err says
/// why not, naming the variable, never its value.
pub(crate) fn open_env(
    secrets: EnvSecrets<'_>,
    namespace: &str,
    env: &[(String, String)],
) -> Result<Vec<(String, SecretString)>, String> {
    env.iter()
        .map(|(name, value)| {
            if !value.starts_with(SEALED) {
                // Written in clear by an earlier release.
                return Ok((name.clone(), SecretString::from(value.clone())));
            }
            let key = secrets.key.ok_or_else(|| {
                format!("{name} is sealed and the server's secret key is not loaded here")
            })?;
            let aad = env_aad(secrets.org_id, namespace, name);
            secrets::open(key, value, &aad)
                .map(|plain| (name.clone(), plain))
                .map_err(|e| format!("{name} cannot be opened: {e}"))
        })
        .collect()
}

/// Scrubs every form of every value of `env` from `value`.
pub(crate) fn scrub_env(env: &[(String, SecretString)], value: &mut Value) {
    for (_, secret) in env {
        scrub_value(&Credential::ApiKey(secret.clone()), value);
    }
}

/// `text` with every value of `env` scrubbed.
pub(crate) fn scrub_env_text(env: &[(String, SecretString)], text: String) -> String {
    if env.is_empty() {
        return text;
    }
    let mut value = Value::String(text);
    scrub_env(env, &mut value);
    match value {
        Value::String(text) => text,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> SecretKey {
        SecretKey::from_env_value(&"07".repeat(32)).unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_as_its_own_variable_of_its_own_integration() {
        let key = key();
        let sealed = seal_env(
            &key,
            "org",
            "ns",
            vec![("TOKEN".into(), "s3cret-value".into())],
        )
        .unwrap();
        assert!(sealed[0].1.starts_with(SEALED));
        assert!(!sealed[0].1.contains("s3cret"));
        let secrets = EnvSecrets {
            key: Some(&key),
            org_id: "org",
        };
        let opened = open_env(secrets, "ns", &sealed).unwrap();
        assert_eq!(opened[0].1.expose(), "s3cret-value");
        // Sealing again keeps it; another org, namespace or name does not open it.
        assert_eq!(seal_env(&key, "org", "ns", sealed.clone()).unwrap(), sealed);
        let other_org = EnvSecrets {
            key: Some(&key),
            org_id: "other",
        };
        assert!(open_env(other_org, "ns", &sealed).is_err());
        assert!(open_env(secrets, "other", &sealed).is_err());
        let renamed = vec![("OTHER".to_string(), sealed[0].1.clone())];
        let refused = open_env(secrets, "ns", &renamed).unwrap_err();
        assert!(
            refused.contains("OTHER") && !refused.contains("s3cret"),
            "{refused}"
        );
        let keyless = EnvSecrets {
            key: None,
            org_id: "org",
        };
        assert!(open_env(keyless, "ns", &sealed).is_err());
    }

    #[test]
    fn a_value_written_in_clear_by_an_earlier_release_still_starts_the_command() {
        let secrets = EnvSecrets {
            key: None,
            org_id: "org",
        };
        let opened = open_env(secrets, "ns", &[("MODE".into(), "plain".into())]).unwrap();
        assert_eq!(opened[0].1.expose(), "plain");
    }

    proptest! {
        /// Whatever the value, the stored form never holds it, and an
        /// answer that echoes it (raw or base64) is scrubbed.
        #[test]
        fn a_value_is_never_stored_or_echoed_in_clear(value in "[A-Za-z0-9_\\-]{12,40}") {
            let key = key();
            let sealed = seal_env(&key, "org", "ns", vec![("TOKEN".into(), value.clone())]).unwrap();
            prop_assert!(!sealed[0].1.contains(&value));
            let secrets = EnvSecrets { key: Some(&key), org_id: "org" };
            let opened = open_env(secrets, "ns", &sealed).unwrap();
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&value);
            let mut answer = serde_json::json!({"text": format!("token={value} b64={b64}"), value.clone(): 1});
            scrub_env(&opened, &mut answer);
            let shown = answer.to_string();
            prop_assert!(!shown.contains(&value), "{}", shown);
            prop_assert!(!shown.contains(&b64), "{}", shown);
        }
    }
}
