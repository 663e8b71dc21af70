//! PKCE (RFC 7636) as SPEC §4 asks it: `S256` only; `plain` or none is
//! `invalid_request`. The verifier is checked in constant time.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why an authorization request's PKCE parameters are refused (each is
/// `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkceError {
    #[error("code_challenge is required (PKCE with S256)")]
    Missing,
    #[error("code_challenge_method must be S256")]
    Method,
    #[error("code_challenge is not an S256 challenge (43 base64url characters)")]
    Malformed,
}

/// Checks the `code_challenge` and `code_challenge_method` of an
/// authorization request; an absent method is `plain` (RFC 7636 §4.3),
/// which is refused.
pub fn check_challenge(method: Option<&str>, challenge: Option<&str>) -> Result<(), PkceError> {
    let challenge = challenge.ok_or(PkceError::Missing)?;
    if method != Some("S256") {
        return Err(PkceError::Method);
    }
    let well_formed = challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if well_formed {
        Ok(())
    } else {
        Err(PkceError::Malformed)
    }
}

/// The S256 challenge of `verifier`: BASE64URL(SHA-256(verifier)).
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether `verifier` (at `/token`) is a well-formed verifier (43–128
/// unreserved characters) whose S256 challenge is `challenge`.
pub fn verify_s256(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    well_formed && bool::from(s256(verifier).as_bytes().ct_eq(challenge.as_bytes()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rfc_7636_appendix_b() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert_eq!(s256(verifier), challenge);
        assert!(verify_s256(verifier, challenge));
        assert_eq!(check_challenge(Some("S256"), Some(challenge)), Ok(()));
    }

    #[test]
    fn plain_or_missing_is_refused() {
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert_eq!(
            check_challenge(None, Some(challenge)),
            Err(PkceError::Method)
        );
        assert_eq!(
            check_challenge(Some("plain"), Some(challenge)),
            Err(PkceError::Method)
        );
        assert_eq!(check_challenge(Some("S256"), None), Err(PkceError::Missing));
        assert_eq!(
            check_challenge(Some("S256"), Some("short")),
            Err(PkceError::Malformed)
        );
        assert!(
            !verify_s256("too-short", &s256("too-short")),
            "a verifier has 43 characters at least"
        );
    }

    proptest! {
        #[test]
        fn a_verifier_opens_its_own_challenge_only(
            v in "[A-Za-z0-9._~-]{43,128}",
            w in "[A-Za-z0-9._~-]{43,128}",
        ) {
            let challenge = s256(&v);
            prop_assert_eq!(check_challenge(Some("S256"), Some(&challenge)), Ok(()));
            prop_assert!(verify_s256(&v, &challenge));
            if v != w {
                prop_assert!(!verify_s256(&w, &challenge));
            }
        }
    }
}
