//! Randomness for keys and nonces, from the OS generator.

use zeroize::Zeroizing;

use super::error::SecretError;

/// `N` bytes from the OS generator, wiped on drop: nonces in `seal.rs`, and
/// the key itself in `key.rs`.
pub(super) fn random_array<const N: usize>() -> Result<Zeroizing<[u8; N]>, SecretError> {
    let mut buf = Zeroizing::new([0u8; N]);
    getrandom::fill(&mut buf[..]).map_err(SecretError::Random)?;
    Ok(buf)
}
