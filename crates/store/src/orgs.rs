//! The rule both stores apply in `ensure_account` (SPEC §4): which org a
//! caller asks for, decided before any SQL runs.

use crate::{StoreError, StoreResult};

/// The org `ensure_account` is asked for (SPEC §4).
pub(crate) enum OrgChoice {
    /// The account's own org, found by its owner and named after the email.
    Personal,
    /// An org any account may join by name.
    Shared(String),
}

impl OrgChoice {
    /// `email` is already normalised. A name with an `@` is an email, so it
    /// is the personal org of that address: the caller's own, or refused.
    /// Refusing it even before that account exists keeps the name free for
    /// it, since shared org names are unique.
    pub(crate) fn new(email: &str, org: Option<&str>) -> StoreResult<Self> {
        let Some(name) = org.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(OrgChoice::Personal);
        };
        if !name.contains('@') {
            return Ok(OrgChoice::Shared(name.to_string()));
        }
        let name = name.to_lowercase();
        if name == email {
            Ok(OrgChoice::Personal)
        } else {
            Err(StoreError::ForeignPersonalOrg { org: name })
        }
    }
}

impl OrgChoice {
    /// The normalised email and the org it asks for; an address without
    /// an `@` is refused.
    pub(crate) fn asked(email: &str, org: Option<&str>) -> StoreResult<(String, OrgChoice)> {
        let email = email.trim().to_lowercase();
        if email.is_empty() || !email.contains('@') {
            return Err(StoreError::Invalid(format!(
                "not an email address: {email:?}"
            )));
        }
        let choice = OrgChoice::new(&email, org)?;
        Ok((email, choice))
    }
}
