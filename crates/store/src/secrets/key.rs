//! The server-wide [`SecretKey`]: from `EXECUTOR_SECRET_KEY` if set, else
//! from the key file in the data directory, which is created on first use and
//! published so that concurrent starters end up with one key.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::KeyInit;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_PAD_INDIFFERENT, URL_SAFE_PAD_INDIFFERENT};
use tempfile::NamedTempFile;
use zeroize::Zeroizing;

use super::error::{KEY_ENV_VAR, KEY_FILE_NAME, KEY_LEN, KeyOrigin, KeyProblem, SecretError};
use super::random::random_array;

/// A key file is 65 bytes; anything much larger is not a key and is not read.
const KEY_FILE_READ_LIMIT: u64 = 1024;

/// A 256-bit key for sealing secrets at rest.
///
/// Only the expanded cipher is kept (built once, so sealing does not redo the
/// key schedule); with the `zeroize` feature of `aes-gcm` it is wiped on drop.
pub struct SecretKey {
    cipher: Aes256Gcm,
    /// The key itself, for the keys derived from it ([`SecretKey::derive`]).
    raw: Zeroizing<[u8; KEY_LEN]>,
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
    /// the key is written to a private temp file and moved into place by a
    /// rename that refuses to replace (or a hard link), which fails rather than
    /// overwrites if another process got there first; the loser then reads the
    /// winner's key.
    pub fn load_or_create(data_dir: &Path) -> Result<Self, SecretError> {
        Self::load_with(std::env::var_os(KEY_ENV_VAR), data_dir)
    }

    /// The key from `EXECUTOR_SECRET_KEY` or an existing
    /// `<data_dir>/secret.key`, never a new one: a shared (Postgres) store
    /// is opened by nodes that share no files, so a key made up by one of
    /// them would seal secrets no other node can open.
    pub fn load_existing(data_dir: &Path) -> Result<Self, SecretError> {
        let path = data_dir.join(KEY_FILE_NAME);
        match std::env::var_os(KEY_ENV_VAR) {
            Some(value) => Self::load_with(Some(value), data_dir),
            None => read_key_file(&path)?.ok_or(SecretError::KeyRequired { key_file: path }),
        }
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

    /// The expanded cipher, for sealing and opening (`seal.rs`).
    pub(super) fn cipher(&self) -> &Aes256Gcm {
        &self.cipher
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, SecretError> {
        // The length is checked by every caller; this is the last guard.
        let wrong_length = || SecretError::InvalidKey {
            origin: KeyOrigin::Env,
            problem: KeyProblem::WrongLength(bytes.len()),
        };
        let raw: [u8; KEY_LEN] = bytes.try_into().map_err(|_| wrong_length())?;
        Aes256Gcm::new_from_slice(bytes)
            .map(|cipher| SecretKey {
                cipher,
                raw: Zeroizing::new(raw),
            })
            .map_err(|_| wrong_length())
    }

    /// A key for `purpose` (HMAC-SHA256 of the purpose under this key):
    /// one that signs rather than seals, the same in every process that
    /// has this key, and of no use for opening a sealed secret.
    pub fn derive(&self, purpose: &str) -> Zeroizing<[u8; 32]> {
        use hmac::{Hmac, KeyInit, Mac};
        let mut derived = Zeroizing::new([0u8; 32]);
        // An HMAC takes a key of any length.
        if let Ok(mut mac) = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(&self.raw[..]) {
            mac.update(purpose.as_bytes());
            derived.copy_from_slice(&mac.finalize().into_bytes());
        }
        derived
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
    // On filesystems that can neither rename without replacing nor hard-link,
    // the key is written in place (see `publish_key_file`), so a reader racing
    // the writer can see a partial file; a few short retries cover the
    // microseconds that write takes.
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
    let tmp = write_temp_file(dir, contents)?;
    // `persist_noclobber` makes the complete file appear at `path` at once and
    // never replaces an existing one: a rename that refuses to replace
    // (renameat2 RENAME_NOREPLACE on Linux, renamex_np RENAME_EXCL on Apple
    // systems, MoveFileExW without MOVEFILE_REPLACE_EXISTING on Windows) or,
    // where the filesystem rejects that flag, a hard link and then removal of
    // the temp name. Persisting by path is safe here: the temp file is in the
    // data directory, which no temp-file cleaner patrols.
    let published = match tmp.persist_noclobber(path) {
        Ok(_) => true,
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => false,
        // Some filesystems (FAT, some network and FUSE mounts) have neither
        // that rename nor hard links, and tempfile reports it as an error:
        // fall back to create_new on the final path, which still admits only
        // one creator; readers retry over the short write. Dropping the error
        // drops the temp file it holds, which removes it (best effort: a
        // leftover temp file is 0600 and holds a key nobody uses).
        Err(failed) => {
            drop(failed);
            match write_new_file(path, contents) {
                Ok(()) => true,
                Err(SecretError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists =>
                {
                    false
                }
                Err(e) => return Err(e),
            }
        }
    };
    if published {
        sync_dir(dir);
    }
    Ok(published)
}

/// Creates a temp file next to the key file (same filesystem, so it can be
/// moved into place), private from its creation, holding `contents` on disk.
fn write_temp_file(dir: &Path, contents: &[u8]) -> Result<NamedTempFile, SecretError> {
    let prefix = format!(".{KEY_FILE_NAME}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // tempfile creates files with mode 0600 on Unix by default, set through
    // `OpenOptionsExt::mode` when the file is created, as `write_new_file`
    // does, so no byte is ever readable by others (the umask can only narrow
    // it). Asked for explicitly so the key's privacy does not rest on a
    // library default.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o600));
    }
    let tmp = builder.tempfile_in(dir).map_err(|source| SecretError::Io {
        action: "create a temporary file in",
        path: dir.to_path_buf(),
        source,
    })?;
    write_synced(tmp.as_file(), tmp.path(), contents)?;
    Ok(tmp)
}

/// Creates `path` (failing if it exists) with mode 0600 before any byte is
/// written, and writes `contents` through it to disk.
fn write_new_file(path: &Path, contents: &[u8]) -> Result<(), SecretError> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path).map_err(|source| SecretError::Io {
        action: "create",
        path: path.to_path_buf(),
        source,
    })?;
    write_synced(&file, path, contents)
}

/// Writes `contents` to `file` (named `path` in errors) and flushes them to
/// disk: losing the key after secrets were sealed with it would lose those
/// secrets.
fn write_synced(mut file: &File, path: &Path, contents: &[u8]) -> Result<(), SecretError> {
    let io_err = |action: &'static str| {
        move |source: io::Error| SecretError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::test_support::{HEX_KEY, same_key, test_key};
    use base64::engine::general_purpose::STANDARD;
    use std::sync::{Arc, Barrier};

    #[cfg(unix)]
    #[test]
    fn key_file_created_0600_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        // Imported here: this is the only test of this file that seals, and
        // it is Unix-only.
        use crate::secrets::test_support::PLAINTEXT;
        use crate::secrets::{open, seal};
        let dir = tempfile::tempdir().unwrap();
        // A data dir that does not exist yet is created, private.
        let data_dir = dir.path().join("data");
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
        let dir = tempfile::tempdir().unwrap();
        SecretKey::load_with(None, dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let contents = fs::read_to_string(&path).unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            let err = SecretKey::load_with(None, dir.path()).unwrap_err();
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
        assert!(SecretKey::load_with(None, dir.path()).is_ok());
    }

    #[test]
    fn corrupt_key_file_is_rejected_without_echo() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        write_new_file(&path, b"hunter2-not-a-key\n").unwrap();
        let err = SecretKey::load_with(None, dir.path()).unwrap_err();
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
            let dir = tempfile::tempdir().unwrap();
            let data_dir = Arc::new(dir.path().join("data"));
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
    fn a_derived_key_is_the_same_for_one_key_and_purpose_only() {
        let key = test_key();
        let again = SecretKey::from_env_value(HEX_KEY).unwrap();
        assert_eq!(
            *key.derive("a"),
            *again.derive("a"),
            "every process with the key agrees"
        );
        assert_ne!(*key.derive("a"), *key.derive("b"), "purposes differ");
        let other = SecretKey::from_env_value(&STANDARD.encode([9u8; 32])).unwrap();
        assert_ne!(*key.derive("a"), *other.derive("a"), "keys differ");
        assert_ne!(&key.derive("a")[..], &key.raw[..], "never the key itself");
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
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::load_with(Some(HEX_KEY.into()), dir.path()).unwrap();
        assert!(same_key(&key, &test_key()));
        assert!(!dir.path().join(KEY_FILE_NAME).exists());
        // Set but empty is an error, not a silent fallback to a file key.
        let err = SecretKey::load_with(Some(OsString::new()), dir.path()).unwrap_err();
        assert!(err.to_string().contains("empty"));
        assert!(!dir.path().join(KEY_FILE_NAME).exists());
    }
}
