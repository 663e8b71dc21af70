//! [`SecretString`]: plaintext held in memory, never printed, wiped on drop.

use std::fmt;

use zeroize::Zeroizing;

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
