//! The registry of integration kinds: each kind's crate, one line.

use std::sync::Arc;

use executor_catalog::search::StoredSearchIndex;
use executor_catalog::{IntegrationLoader, ToolGroup, Unavailable};
use executor_graphql::GraphqlKind;
use executor_openapi::OpenApiKind;
use executor_outbound::{CredentialSource, HttpClient};
use executor_upstream::{UpstreamKind, Upstreams};

use executor_store::IntegrationRecord;

use crate::IntegrationKind;

/// The loader of every kind this release serves.
pub struct Kinds {
    loaders: Vec<(IntegrationKind, Arc<dyn IntegrationLoader>)>,
}

impl Kinds {
    /// The kinds this release serves; their tools call through `http` with
    /// the org's connections from `credentials`, an upstream MCP server's
    /// through the process's `upstreams` pools.
    pub fn new(
        http: Arc<HttpClient>,
        credentials: Arc<dyn CredentialSource>,
        upstreams: Arc<Upstreams>,
    ) -> Self {
        Kinds::with(vec![
            (
                IntegrationKind::OpenApi,
                Arc::new(OpenApiKind::new(http.clone(), credentials.clone())),
            ),
            (
                IntegrationKind::Graphql,
                Arc::new(GraphqlKind::new(http, credentials)),
            ),
            (IntegrationKind::Mcp, Arc::new(UpstreamKind::new(upstreams))),
        ])
    }

    /// Kinds with the given loaders (a test stands in its own).
    pub fn with(loaders: Vec<(IntegrationKind, Arc<dyn IntegrationLoader>)>) -> Self {
        Kinds { loaders }
    }

    /// The loader of `record`'s kind; Err says, for `integrations list`
    /// and the agent, that this release does not serve it.
    pub fn of(&self, record: &IntegrationRecord) -> Result<&dyn IntegrationLoader, String> {
        let kind = record.integration_kind().ok();
        kind.and_then(|kind| self.loaders.iter().find(|(k, _)| *k == kind))
            .map(|(_, loader)| loader.as_ref())
            .ok_or_else(|| format!("its kind `{}` is not known to this release", record.kind))
    }

    /// The tools of `org_id`'s integration `record` from its stored
    /// `document`, as the server serves them: searched with the stored
    /// `search_index` when that was built from these tools by this release,
    /// else with one built now. Err says why they cannot be served.
    pub fn load_group(
        &self,
        org_id: &str,
        record: &IntegrationRecord,
        document: &str,
        search_index: Option<&[u8]>,
    ) -> Result<LoadedGroup, Unavailable> {
        let loaded = self.of(record)?.load(org_id, &record.namespace, document)?;
        // Read after the tools are made, on this thread: reading it on a
        // second one meanwhile saved 30 ms for a 22k-tool API but left
        // that thread's allocator arena about 8 MB larger for good.
        let stored = search_index.and_then(StoredSearchIndex::read);
        let (group, index_reused) =
            ToolGroup::with_stored_index(&record.namespace, loaded.tools, stored);
        Ok(LoadedGroup {
            group,
            upgraded: loaded.upgraded,
            index_reused,
        })
    }

    /// The search index to store beside `record` (its `document` set), so
    /// that the server that loads it need not build one.
    pub fn search_index(
        &self,
        org_id: &str,
        record: &IntegrationRecord,
    ) -> Result<Vec<u8>, Unavailable> {
        let loaded = self.load_group(org_id, record, &record.document, None)?;
        Ok(loaded.group.encoded_index())
    }
}

/// An integration's tools, loaded by [`Kinds::load_group`].
pub struct LoadedGroup {
    pub group: ToolGroup,
    /// The document in this release's format, when the record held an
    /// older one (see [`executor_catalog::LoadedIntegration::upgraded`]).
    pub upgraded: Option<String>,
    /// Whether the stored search index was used; when not, the caller
    /// stores the group's own ([`ToolGroup::encoded_index`]).
    pub index_reused: bool,
}
