//! Each org's policies, read once per access revision.

use executor_store::{PolicyRecord, RevisionCache, Store, StoreResult};

/// Orgs whose policies are kept; a full cache starts over.
const MAX_ORGS: usize = 4096;

/// An org's policies as read after the store's access revision
/// ([`Store::access_revision`]) was `revision`. Every change to a policy,
/// by this process, another server or the CLI, moves the revision, so the
/// next execution reads them again: a policy applies from the next
/// execution on, as before, without a read per execution while none
/// changes.
pub(crate) struct PolicyCache {
    orgs: RevisionCache<Vec<PolicyRecord>>,
}

impl Default for PolicyCache {
    fn default() -> Self {
        PolicyCache {
            orgs: RevisionCache::new(MAX_ORGS),
        }
    }
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
        if let Some(policies) = revision.and_then(|r| self.orgs.get(org_id, r)) {
            return Ok(policies);
        }
        let policies = store.list_policies(org_id).await?;
        if let Some(revision) = revision {
            self.orgs.keep(org_id, revision, policies.clone());
        }
        Ok(policies)
    }
}
