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

/// Where `ensure_account` looks for the org asked for, once the account is
/// known.
pub(crate) enum OrgKey<'a> {
    /// A personal org is found by its owner, never by its name.
    Owner(&'a str),
    Name(&'a str),
}

/// The org `ensure_account` wants: the row to look for, and what a new row
/// holds when none is found.
pub(crate) struct WantedOrg<'a> {
    pub(crate) key: OrgKey<'a>,
    pub(crate) name: &'a str,
    pub(crate) owner: Option<&'a str>,
}

impl OrgChoice {
    /// The org this choice names for `account_id` (whose email is `email`):
    /// a personal org is named after the email and owned by the account.
    pub(crate) fn wanted<'a>(&'a self, email: &'a str, account_id: &'a str) -> WantedOrg<'a> {
        match self {
            OrgChoice::Personal => WantedOrg {
                key: OrgKey::Owner(account_id),
                name: email,
                owner: Some(account_id),
            },
            OrgChoice::Shared(name) => WantedOrg {
                key: OrgKey::Name(name),
                name,
                owner: None,
            },
        }
    }
}

impl WantedOrg<'_> {
    /// What to do with the row found (`(id, owner)`): use its id, or, with
    /// None, insert a new org. An org another account owns is refused: a
    /// personal org belongs to its account alone (SPEC §4).
    pub(crate) fn settle(
        &self,
        found: Option<(String, Option<String>)>,
        account_id: &str,
    ) -> StoreResult<Option<String>> {
        match found {
            Some((_, Some(owner))) if owner != account_id => Err(StoreError::ForeignPersonalOrg {
                org: self.name.to_string(),
            }),
            Some((id, _)) => Ok(Some(id)),
            None => Ok(None),
        }
    }
}

/// A new account's id.
pub(crate) fn new_account_id() -> String {
    format!("acc_{}", uuid::Uuid::new_v4().simple())
}

/// A new org's id.
pub(crate) fn new_org_id() -> String {
    format!("org_{}", uuid::Uuid::new_v4().simple())
}
