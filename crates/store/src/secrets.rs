//! Secrets at rest (SPEC §9).
//!
//! Connection credentials are stored either sealed (AES-256-GCM under a
//! server-wide key, bound to their owner through the associated data) or as a
//! reference to an environment variable (`env://NAME`) that is read only when
//! a call needs it. Plaintext lives in memory as a [`SecretString`], which
//! never prints its value and is wiped on drop; no error of this module
//! carries key material or plaintext, so errors can be logged as they are.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, KeyInit, Nonce, Payload};
use base64::Engine as _;
use base64::engine::general_purpose::{
    STANDARD, STANDARD_PAD_INDIFFERENT, URL_SAFE_PAD_INDIFFERENT,
};
use zeroize::{Zeroize, Zeroizing};

/// Environment variable that, when set, supplies the key instead of the file.
pub const KEY_ENV_VAR: &str = "EXECUTOR_SECRET_KEY";
/// Name of the key file inside the data directory.
pub const KEY_FILE_NAME: &str = "secret.key";

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const SEALED_PREFIX: &str = "v1:";
const ENV_REF_PREFIX: &str = "env://";
/// Environment variables with this prefix configure the server itself (the
/// secret key among them); letting a connection reference them would let
/// whoever configures a connection send them to a third-party API.
const RESERVED_ENV_PREFIX: &str = "EXECUTOR_";
/// Prepended to the caller's associated data so a v1 ciphertext can never be
/// accepted under another format or by another use of the same key.
const AAD_DOMAIN: &[u8] = b"executor/secret/v1\0";
/// A key file is 65 bytes; anything much larger is not a key and is not read.
const KEY_FILE_READ_LIMIT: u64 = 1024;

/// A 256-bit key for sealing secrets at rest.
///
/// Only the expanded cipher is kept (built once, so sealing does not redo the
/// key schedule); with the `zeroize` feature of `aes-gcm` it is wiped on drop.
pub struct SecretKey {
    cipher: Aes256Gcm,
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey([redacted])")
    }
}

impl SecretKey {
    /// The key from `EXECUTOR_SECRET_KEY` (64 hex digits or base64 of 32
    /// bytes) if that variable is set, else from `<data_dir>/secret.key`,
    /// which is created with 32 random bytes and mode 0600 on first use.
    ///
    /// An existing key file readable or writable by group or others is
    /// refused, not tightened: the key may already have been copied, and
    /// quietly fixing the mode would hide that from the operator (the same
    /// stance ssh takes with private keys). The error says how to fix it.
    ///
    /// Safe against concurrent first use (server and CLI starting together):
    /// the key is written to a private temp file and hard-linked into place,
    /// which fails rather than overwrites if another process got there first;
    /// the loser then reads the winner's key.
    pub fn load_or_create(data_dir: &Path) -> Result<Self, SecretError> {
        Self::load_with(std::env::var_os(KEY_ENV_VAR), data_dir)
    }

    /// Parses a key given as 64 hex digits or as base64 (standard or
    /// URL-safe alphabet, padding optional) of exactly 32 bytes. Surrounding
    /// whitespace is ignored, so `$(cat key)` works.
    pub fn from_env_value(value: &str) -> Result<Self, SecretError> {
        parse_key(value).map_err(|problem| SecretError::InvalidKey {
            origin: KeyOrigin::Env,
            problem,
        })
    }

    /// `load_or_create` with the environment value passed in, so tests need
    /// not mutate the process environment.
    fn load_with(env_value: Option<OsString>, data_dir: &Path) -> Result<Self, SecretError> {
        match env_value {
            // Set but empty is treated as a mistake, not as "unset": falling
            // back to a file key would seal secrets under a key the operator
            // believes is elsewhere, and they would be lost with the file.
            Some(value) => match value.into_string() {
                Ok(text) => Self::from_env_value(&Zeroizing::new(text)),
                Err(_) => Err(SecretError::InvalidKey {
                    origin: KeyOrigin::Env,
                    problem: KeyProblem::NotUtf8,
                }),
            },
            None => Self::load_or_create_file(data_dir),
        }
    }

    fn load_or_create_file(data_dir: &Path) -> Result<Self, SecretError> {
        ensure_dir(data_dir)?;
        let path = data_dir.join(KEY_FILE_NAME);
        if let Some(key) = read_key_file(&path)? {
            return Ok(key);
        }
        let bytes = random_array::<KEY_LEN>()?;
        let key = Self::from_bytes(&bytes[..])?;
        let contents = Zeroizing::new(format!("{}\n", hex::encode(&bytes[..])));
        if publish_key_file(data_dir, &path, contents.as_bytes())? {
            return Ok(key);
        }
        // Another process published first; its key is the key.
        read_key_file(&path)?.ok_or_else(|| SecretError::Io {
            action: "read",
            path: path.clone(),
            source: io::Error::new(io::ErrorKind::NotFound, "key file vanished while loading"),
        })
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, SecretError> {
        // The length is checked by every caller; this is the last guard.
        Aes256Gcm::new_from_slice(bytes)
            .map(|cipher| SecretKey { cipher })
            .map_err(|_| SecretError::InvalidKey {
                origin: KeyOrigin::Env,
                problem: KeyProblem::WrongLength(bytes.len()),
            })
    }
}

/// Decodes 64 hex digits or base64 of 32 bytes. Never reports the input or
/// the decoder's error (which can quote the offending character).
fn parse_key(value: &str) -> Result<SecretKey, KeyProblem> {
    let text = value.trim();
    if text.is_empty() {
        return Err(KeyProblem::Empty);
    }
    // An even-length all-hex string is read as hex: base64 of 32 bytes is 43
    // or 44 characters with a '=', so a valid key is never ambiguous.
    let decoded = if text.len().is_multiple_of(2) && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        hex::decode(text).ok()
    } else {
        STANDARD_PAD_INDIFFERENT
            .decode(text)
            .or_else(|_| URL_SAFE_PAD_INDIFFERENT.decode(text))
            .ok()
    };
    let bytes = Zeroizing::new(decoded.ok_or(KeyProblem::NotEncoded)?);
    if bytes.len() != KEY_LEN {
        return Err(KeyProblem::WrongLength(bytes.len()));
    }
    SecretKey::from_bytes(&bytes).map_err(|_| KeyProblem::WrongLength(bytes.len()))
}

fn ensure_dir(dir: &Path) -> Result<(), SecretError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    // A data dir we create ourselves holds the key: keep it private.
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|source| SecretError::Io {
        action: "create directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Reads an existing key file; `Ok(None)` if there is none.
fn read_key_file(path: &Path) -> Result<Option<SecretKey>, SecretError> {
    // On filesystems without hard links the key is written in place (see
    // `publish_key_file`), so a reader racing the writer can see a partial
    // file; a few short retries cover the microseconds that write takes.
    let mut attempts = 0;
    loop {
        match read_key_file_once(path) {
            Err(SecretError::InvalidKey { .. }) if attempts < 10 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn read_key_file_once(path: &Path) -> Result<Option<SecretKey>, SecretError> {
    let io_err = |action: &'static str| {
        move |source: io::Error| SecretError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("open")(e)),
    };
    // Checked on the open handle, so the file checked is the file read.
    let meta = file.metadata().map_err(io_err("inspect"))?;
    if !meta.is_file() {
        return Err(SecretError::KeyFileNotRegular {
            path: path.to_path_buf(),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretError::KeyFilePermissions {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    let mut raw = Zeroizing::new(Vec::with_capacity(KEY_FILE_READ_LIMIT as usize));
    file.take(KEY_FILE_READ_LIMIT)
        .read_to_end(&mut raw)
        .map_err(io_err("read"))?;
    let invalid = |problem| SecretError::InvalidKey {
        origin: KeyOrigin::File(path.to_path_buf()),
        problem,
    };
    let text = std::str::from_utf8(&raw).map_err(|_| invalid(KeyProblem::NotUtf8))?;
    parse_key(text).map(Some).map_err(invalid)
}

/// Puts a fully written key file at `path` unless one exists. Returns true if
/// ours was published, false if another process's file was already there.
fn publish_key_file(dir: &Path, path: &Path, contents: &[u8]) -> Result<bool, SecretError> {
    let suffix = hex::encode(random_array::<8>()?);
    let tmp = dir.join(format!(
        ".{KEY_FILE_NAME}.{}.{suffix}.tmp",
        std::process::id()
    ));
    write_new_file(&tmp, contents)?;
    // A hard link appears atomically with complete contents and, unlike
    // rename, never replaces an existing file.
    let linked = fs::hard_link(&tmp, path);
    // Best effort: a leftover temp file is 0600 and holds a key nobody uses.
    let _ = fs::remove_file(&tmp);
    let published = match linked {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        // Some filesystems (FAT, some network and FUSE mounts) have no hard
        // links: fall back to create_new on the final path, which still
        // admits only one creator; readers retry over the short write.
        Err(_) => match write_new_file(path, contents) {
            Ok(()) => true,
            Err(SecretError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                false
            }
            Err(e) => return Err(e),
        },
    };
    if published {
        sync_dir(dir);
    }
    Ok(published)
}

/// Creates `path` (failing if it exists) with mode 0600 before any byte is
/// written, writes `contents` and flushes them to disk: losing the key after
/// secrets were sealed with it would lose those secrets.
fn write_new_file(path: &Path, contents: &[u8]) -> Result<(), SecretError> {
    let io_err = |action: &'static str| {
        move |source: io::Error| SecretError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io_err("create"))?;
    file.write_all(contents).map_err(io_err("write"))?;
    file.sync_all().map_err(io_err("flush"))
}

/// Makes the new directory entry durable. Best effort: the key is already
/// usable, and not every platform can open a directory for syncing.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

fn random_array<const N: usize>() -> Result<Zeroizing<[u8; N]>, SecretError> {
    let mut buf = Zeroizing::new([0u8; N]);
    getrandom::fill(&mut buf[..]).map_err(SecretError::Random)?;
    Ok(buf)
}

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
        .cipher
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
        .cipher
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
fn has_version_prefix(sealed: &str) -> bool {
    sealed
        .strip_prefix('v')
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A secret held in memory: never printed, wiped on drop.
#[derive(Clone)]
pub struct SecretString(Zeroizing<String>);

impl SecretString {
    /// The plaintext, for rendering into a header or query parameter.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for SecretString {
    fn from(value: String) -> Self {
        SecretString(Zeroizing::new(value))
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// How a connection stores a credential: sealed in the store, or a reference
/// to an environment variable of the server process read at call time.
///
/// Both forms are safe to log: the sealed form is ciphertext, the env form a
/// variable name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// A value produced by [`seal`] (`v1:…`).
    Sealed(String),
    /// The name of an environment variable (`env://NAME`).
    Env(String),
}

impl SecretRef {
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
/// the process environment.
fn resolve_with(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// A unique directory under the system temp dir, removed on drop (the
    /// store crate has no tempfile dev-dependency).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            let suffix = hex::encode(random_array::<8>().unwrap());
            let path = std::env::temp_dir().join(format!(
                "executor-secrets-test-{}-{suffix}",
                std::process::id()
            ));
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const HEX_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const PLAINTEXT: &str = "ghp_SuperSecretToken123";

    fn test_key() -> SecretKey {
        SecretKey::from_env_value(HEX_KEY).unwrap()
    }

    /// Same key iff each opens what the other sealed.
    fn same_key(a: &SecretKey, b: &SecretKey) -> bool {
        let sealed = seal(a, "probe", "o/n").unwrap();
        open(b, &sealed, "o/n").is_ok()
    }

    fn decode_sealed(sealed: &str) -> Vec<u8> {
        STANDARD
            .decode(sealed.strip_prefix("v1:").unwrap())
            .unwrap()
    }

    fn encode_sealed(raw: &[u8]) -> String {
        format!("v1:{}", STANDARD.encode(raw))
    }

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

    #[cfg(unix)]
    #[test]
    fn key_file_created_0600_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        // A data dir that does not exist yet is created, private.
        let data_dir = dir.0.join("data");
        let first = SecretKey::load_with(None, &data_dir).unwrap();
        let path = data_dir.join(KEY_FILE_NAME);
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            fs::metadata(&data_dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let contents = fs::read_to_string(&path).unwrap();
        assert_eq!(contents.len(), 65);
        assert!(contents.trim_end().bytes().all(|b| b.is_ascii_hexdigit()));

        let sealed = seal(&first, PLAINTEXT, "o/n").unwrap();
        let second = SecretKey::load_with(None, &data_dir).unwrap();
        assert_eq!(open(&second, &sealed, "o/n").unwrap().expose(), PLAINTEXT);
        assert_eq!(fs::read_to_string(&path).unwrap(), contents);
        // The file holds the same encoding EXECUTOR_SECRET_KEY accepts, so
        // an operator can move the key into the environment.
        assert!(same_key(
            &first,
            &SecretKey::from_env_value(&contents).unwrap()
        ));
    }

    #[cfg(unix)]
    #[test]
    fn key_file_with_wide_permissions_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        SecretKey::load_with(None, &dir.0).unwrap();
        let path = dir.0.join(KEY_FILE_NAME);
        let contents = fs::read_to_string(&path).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            let err = SecretKey::load_with(None, &dir.0).unwrap_err();
            assert!(
                matches!(err, SecretError::KeyFilePermissions { .. }),
                "{mode:o}"
            );
            let message = err.to_string();
            assert!(message.contains("chmod 600"), "{message}");
            assert!(!message.contains(contents.trim()), "{message}");
        }
        // Narrower than 0600 is fine.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o400)).unwrap();
        assert!(SecretKey::load_with(None, &dir.0).is_ok());
    }

    #[test]
    fn corrupt_key_file_is_rejected_without_echo() {
        let dir = TempDir::new();
        let path = dir.0.join(KEY_FILE_NAME);
        write_new_file(&path, b"hunter2-not-a-key\n").unwrap();
        let err = SecretKey::load_with(None, &dir.0).unwrap_err();
        assert!(matches!(
            err,
            SecretError::InvalidKey {
                origin: KeyOrigin::File(_),
                ..
            }
        ));
        let message = err.to_string();
        assert!(message.contains(KEY_FILE_NAME), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn racing_first_use_yields_one_key() {
        for _ in 0..5 {
            let dir = TempDir::new();
            let data_dir = Arc::new(dir.0.join("data"));
            let threads = 8;
            let barrier = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let barrier = Arc::clone(&barrier);
                    let data_dir = Arc::clone(&data_dir);
                    std::thread::spawn(move || {
                        barrier.wait();
                        SecretKey::load_with(None, &data_dir).unwrap()
                    })
                })
                .collect();
            let keys: Vec<SecretKey> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            for key in &keys[1..] {
                assert!(same_key(&keys[0], key));
            }
            // One key file, no temp files left behind.
            let names: Vec<_> = fs::read_dir(&*data_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(names, vec![KEY_FILE_NAME.to_string()]);
        }
    }

    #[test]
    fn env_key_parsing() {
        let bytes: Vec<u8> = (0u8..32).collect();
        let reference = test_key();
        let valid = [
            HEX_KEY.to_string(),
            HEX_KEY.to_ascii_uppercase(),
            format!("  {HEX_KEY}\n"),
            STANDARD.encode(&bytes),
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfbu8; 32]),
        ];
        for value in &valid {
            let key = SecretKey::from_env_value(value).unwrap();
            if !value.contains('_') && !value.contains('-') {
                assert!(same_key(&reference, &key), "{value}");
            }
        }

        let invalid = [
            ("", "empty"),
            ("   ", "empty"),
            (&HEX_KEY[..32], "16 bytes"),
            (&format!("{HEX_KEY}00"), "33 bytes"),
            (&STANDARD.encode([7u8; 16]), "16 bytes"),
            (&STANDARD.encode([7u8; 48]), "48 bytes"),
            ("correct horse battery staple!!", "neither hex nor base64"),
            (
                "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
                "48 bytes",
            ),
        ];
        for (value, expected) in invalid {
            let err = SecretKey::from_env_value(value).unwrap_err();
            let message = err.to_string();
            assert!(message.starts_with(KEY_ENV_VAR), "{message}");
            assert!(message.contains(expected), "{message}");
            if !value.trim().is_empty() {
                assert!(!message.contains(value.trim()), "{message}");
                assert!(!format!("{err:?}").contains(value.trim()));
            }
        }
    }

    #[test]
    fn env_key_takes_precedence_over_file() {
        let dir = TempDir::new();
        let key = SecretKey::load_with(Some(HEX_KEY.into()), &dir.0).unwrap();
        assert!(same_key(&key, &test_key()));
        assert!(!dir.0.join(KEY_FILE_NAME).exists());
        // Set but empty is an error, not a silent fallback to a file key.
        let err = SecretKey::load_with(Some(OsString::new()), &dir.0).unwrap_err();
        assert!(err.to_string().contains("empty"));
        assert!(!dir.0.join(KEY_FILE_NAME).exists());
    }

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
