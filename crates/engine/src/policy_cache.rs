//! Each org's policies, read once per access revision.

use std::collections::HashMap;
use std::sync::Mutex;

use executor_store::{PolicyRecord, Store, StoreResult};

/// Orgs whose policies are kept; a full cache starts over.
const MAX_ORGS: usize = 4096;

/// An org's policies as read after the store's access revision
/// ([`Store::access_revision`]) was `revision`. Every change to a policy,
/// by this process, another server or the CLI, moves the revision, so the
/// next execution reads them again: a policy applies from the next
/// execution on, as before, without a read per execution while none
/// changes.
#[derive(Default)]
pub(crate) struct PolicyCache {
    orgs: Mutex<HashMap<String, (u64, Vec<PolicyRecord>)>>,
}

impl PolicyCache {
    pub(crate) async fn policies(
        &self,
        store: &dyn Store,
        org_id: &str,
    ) -> StoreResult<Vec<PolicyRecord>> {
        // Read before the policies: a change committed in between moves
        // the revision past the one they are kept at.
        let revision = store.access_revision();
        if let Some(revision) = revision {
            let orgs = self.orgs.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, policies)) = orgs.get(org_id)
                && *at == revision
            {
                return Ok(policies.clone());
            }
        }
        let policies = store.list_policies(org_id).await?;
        if let Some(revision) = revision {
            let mut orgs = self.orgs.lock().unwrap_or_else(|e| e.into_inner());
            if orgs.len() >= MAX_ORGS && !orgs.contains_key(org_id) {
                orgs.clear();
            }
            orgs.insert(org_id.to_string(), (revision, policies.clone()));
        }
        Ok(policies)
    }
}
