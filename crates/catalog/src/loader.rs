//! The seam between the server and a kind of integration: the store keeps
//! each integration as its kind's compact document (written at import),
//! and the kind turns that document into tools. A kind is a crate of its
//! own (`executor-openapi`) that implements [`IntegrationLoader`];
//! `executor-integrations` registers it with one line.

use crate::NewTool;

/// Loads one kind's stored documents into catalog tools.
pub trait IntegrationLoader: Send + Sync + 'static {
    /// The tools of `org_id`'s integration `namespace` from its stored
    /// `document`. Err says why the integration cannot be served: it is
    /// shown by `integrations list` and to an agent that calls its tools,
    /// so it names no secret and no internal path.
    fn load(
        &self,
        org_id: &str,
        namespace: &str,
        document: &str,
    ) -> Result<LoadedIntegration, String>;

    /// Whether a stored document can be served, for `integrations list`:
    /// "ok", or why not.
    fn status(&self, document: &str) -> String;
}

/// An integration's tools, loaded.
pub struct LoadedIntegration {
    pub tools: Vec<NewTool>,
    /// The document in this release's format, when the record held an
    /// older one that was upgraded to load it: the caller stores it back,
    /// so that the upgrade runs once.
    pub upgraded: Option<String>,
}
