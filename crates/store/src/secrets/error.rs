//! The errors of the secrets module, and how they describe a rejected key
//! (where it came from, what is wrong with it) without quoting it; with the
//! names a key goes by (its variable, its file, its length) that they cite.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Environment variable that, when set, supplies the key instead of the file.
pub const KEY_ENV_VAR: &str = "EXECUTOR_SECRET_KEY";
/// Name of the key file inside the data directory.
pub const KEY_FILE_NAME: &str = "secret.key";
/// Length of a key in bytes.
pub(super) const KEY_LEN: usize = 32;

/// Where a key came from, for error messages.
#[derive(Debug)]
pub enum KeyOrigin {
    Env,
    File(PathBuf),
}

impl fmt::Display for KeyOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyOrigin::Env => f.write_str(KEY_ENV_VAR),
            KeyOrigin::File(path) => write!(f, "secret key file {}", path.display()),
        }
    }
}

/// Why a key was rejected; describes the input without quoting it.
#[derive(Debug)]
pub enum KeyProblem {
    Empty,
    NotUtf8,
    NotEncoded,
    WrongLength(usize),
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyProblem::Empty => f.write_str("it is empty"),
            KeyProblem::NotUtf8 => f.write_str("it is not UTF-8 text"),
            KeyProblem::NotEncoded => f.write_str("it is neither hex nor base64"),
            KeyProblem::WrongLength(n) => write!(f, "it decodes to {n} bytes, not {KEY_LEN}"),
        }
    }
}

/// Errors of this module. No message contains key material, plaintext or a
/// rejected input; env variable names and file paths are shown.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "{origin} is not a usable secret key: {problem} \
         (expected 32 random bytes as 64 hex digits or base64, e.g. `openssl rand -hex 32`)"
    )]
    InvalidKey {
        origin: KeyOrigin,
        problem: KeyProblem,
    },
    #[error(
        "secret key file {} has mode {mode:04o}, which lets other users read or change it; \
         it may have been exposed. Check it, then run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    KeyFilePermissions { path: PathBuf, mode: u32 },
    #[error(
        "a shared store needs the same secret key on every node, given explicitly: set \
         {KEY_ENV_VAR} (make one with `openssl rand -hex 32`, once, and give every node the \
         same) or put it in {} (mode 0600). Executor will not make one up for a shared store",
        key_file.display()
    )]
    KeyRequired { key_file: PathBuf },
    #[error("secret key file {} is not a regular file", path.display())]
    KeyFileNotRegular { path: PathBuf },
    #[error("could not {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no OS randomness available: {0}")]
    Random(getrandom::Error),
    #[error("secret could not be sealed (value too large)")]
    Seal,
    #[error("sealed secret is malformed (expected `v1:` followed by base64)")]
    Malformed,
    #[error("sealed secret uses a format version this server does not support")]
    UnsupportedVersion,
    #[error("sealed secret could not be opened: wrong key, wrong owner, or tampered with")]
    Open,
    #[error("opened secret is not UTF-8 text")]
    NotUtf8,
    #[error(
        "secret reference must be a sealed value (`v1:…`) or `env://NAME` \
         (NAME: letters, digits and `_`, not starting with a digit)"
    )]
    InvalidRef,
    #[error("env://{name} names the server's own configuration and cannot be used as a credential")]
    ReservedEnvVar { name: String },
    #[error("environment variable {name} (from env://{name}) is not set")]
    EnvMissing { name: String },
    #[error("environment variable {name} (from env://{name}) is not valid UTF-8")]
    EnvNotUnicode { name: String },
    #[error("environment variable {name} (from env://{name}) is empty")]
    EnvEmpty { name: String },
}
