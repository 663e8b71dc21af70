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
    ) -> Result<LoadedIntegration, Unavailable>;

    /// Whether a stored document can be served, for `integrations list`:
    /// "ok", or why not.
    fn status(&self, document: &str) -> String;

    /// How the upstream asks to be authenticated, one phrase per way the
    /// stored document declares ("bearer token", "API key in the X-Key
    /// header"): shown before an integration is added, and an integration
    /// that declares any and has no connection misses its credential.
    /// Empty when it declares none (or the kind cannot tell).
    fn auth(&self, _document: &str) -> Vec<String> {
        Vec::new()
    }

    /// How the server reaches the upstream, for a kind with a choice
    /// ("streamable HTTP", "stdio"); None otherwise.
    fn transport(&self, _document: &str) -> Option<String> {
        None
    }
}

/// Why an integration's tools cannot be served: the error code its calls
/// answer (SPEC §7) and the reason, for `integrations list` and the agent.
/// From a plain reason, the code is `integration_unavailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub code: &'static str,
    pub message: String,
}

impl Unavailable {
    pub const CODE: &'static str = "integration_unavailable";

    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Unavailable {
            code,
            message: message.into(),
        }
    }
}

impl From<String> for Unavailable {
    fn from(message: String) -> Self {
        Unavailable::new(Unavailable::CODE, message)
    }
}

impl From<&str> for Unavailable {
    fn from(message: &str) -> Self {
        Unavailable::new(Unavailable::CODE, message)
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Unavailable {
    /// Err when a stored record names another namespace than the one it is
    /// stored under (a damaged or hand-edited record).
    pub fn unless_same_namespace(stored: &str, namespace: &str) -> Result<(), Unavailable> {
        if stored == namespace {
            Ok(())
        } else {
            Err(
                "its stored record names another namespace; run `executor integrations refresh`"
                    .into(),
            )
        }
    }
}

/// An integration's tools, loaded.
pub struct LoadedIntegration {
    pub tools: Vec<NewTool>,
    /// The document in this release's format, when the record held an
    /// older one that was upgraded to load it: the caller stores it back,
    /// so that the upgrade runs once.
    pub upgraded: Option<String>,
}

/// The format a kind's stored document names first (`{"format":N,…`, so
/// that it is read without parsing the rest); None when it names none.
/// Each kind keeps its own format counter.
pub fn stored_format(document: &str) -> Option<u32> {
    let rest = document.trim_start().strip_prefix("{\"format\":")?;
    let digits = rest.trim_start();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    Some(digits.get(..end).and_then(|d| d.parse().ok()).unwrap_or(0))
}

/// Reads a kind's stored document written in `format`, this release's;
/// Err says why not (damaged, formatless, or written by a newer release),
/// for `integrations list` and the agent.
pub fn load_stored<T: serde::de::DeserializeOwned>(
    document: &str,
    format: u32,
) -> Result<T, String> {
    match stored_format(document).unwrap_or(0) {
        n if n == format => serde_json::from_str(document).map_err(|e| {
            format!("its stored record cannot be read ({e}); run `executor integrations refresh`")
        }),
        0 => Err("its stored record cannot be read; run `executor integrations refresh`".into()),
        n => Err(format!(
            "stored in format {n} by a newer release (this one reads format {format}); run `executor integrations refresh` with this release"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::stored_format;

    #[test]
    fn the_format_is_read_from_the_documents_first_field() {
        assert_eq!(stored_format("{\"format\":17,\"x\":1}"), Some(17));
        assert_eq!(stored_format("  {\"format\": 2}"), Some(2));
        assert_eq!(stored_format("{\"namespace\":\"x\"}"), None);
        assert_eq!(stored_format("{\"format\":\"x\"}"), Some(0));
        assert_eq!(stored_format(""), None);
    }
}
