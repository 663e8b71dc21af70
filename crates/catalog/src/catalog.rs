//! Tool entries, their invokers, and the catalog that indexes them.
//!
//! A catalog is made of [`ToolGroup`]s, one per namespace, each indexed on
//! its own: a change to one integration builds that group again and the
//! org's catalog reuses the others as they are (`Arc`), so that adding a
//! 20k-tool API does not re-index the rest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};

use executor_store::PolicyRecord;

use crate::budget::{HostBudget, HostHold};
use crate::loader::Unavailable;
use crate::schema::{Definitions, ToolSchema};
use crate::search::{SearchDoc, SearchIndex, StoredSearchIndex};
use crate::validate::{SchemaProblems, Validators};
use executor_call::CallContext;

/// One callable tool. A catalog holds tens of thousands, so an entry
/// keeps its path once: the namespace and the name are parts of it.
pub struct ToolEntry {
    /// The address agents call: `<namespace>.<name>`. Shared with the
    /// search index.
    pub path: Arc<str>,
    pub description: Option<String>,
    pub input_schema: Option<ToolSchema>,
    pub output_schema: Option<ToolSchema>,
    /// What the schemas' `#/$defs/<name>` refer to: the integration's
    /// definitions, shared by all its tools.
    pub definitions: Option<Arc<Definitions>>,
    /// The default when no policy matches (SPEC §9).
    pub requires_approval: bool,
    pub invoker: Arc<dyn ToolInvoker>,
    /// The invoker's own number for this tool (its place in the invoker's
    /// table of operations); 0 where the invoker goes by name.
    pub slot: usize,
}

/// A tool on its way into a [`ToolGroup`]: the entry the group keeps, and
/// what only the group's search index reads — what the tool does in its
/// transport's own terms, indexed beside its name and description and
/// not kept per tool.
pub struct NewTool {
    pub entry: ToolEntry,
    pub route: Option<RouteHint>,
}

impl From<ToolEntry> for NewTool {
    fn from(entry: ToolEntry) -> Self {
        NewTool { entry, route: None }
    }
}

impl ToolEntry {
    /// The path without the namespace.
    pub fn name(&self) -> &str {
        self.path.split_once('.').map_or("", |(_, name)| name)
    }

    /// The namespace: the integration the tool belongs to.
    pub fn integration(&self) -> &str {
        namespace_of(&self.path)
    }
}

/// A call that passed lookup, policy and validation.
pub struct ToolInvocation {
    pub tool: Arc<ToolEntry>,
    pub args: Value,
    pub ctx: CallContext,
    pub catalog: Arc<Catalog>,
    /// The org's policy rules as stored (for `executor.coreTools.policies.list`).
    pub policies: Arc<Vec<PolicyRecord>>,
    /// The host memory the execution's answers may hold while parsed.
    pub budget: HostBudget,
    /// Whom the integration's questions go to while the call runs (an
    /// upstream MCP server's `input_required`, SPEC §8); None where nobody
    /// can answer (the question is then declined).
    pub questions: Option<Arc<dyn HumanQuestions>>,
}

/// An integration's question about the call in flight, put to the person
/// who approves the execution's calls: the call pauses as an approval
/// does (SPEC §9) and the decision comes back here. The engine implements
/// it; a kind only asks.
pub trait HumanQuestions: Send + Sync {
    /// Asks `question` (the integration's own words) about the call.
    fn ask(&self, question: String) -> BoxFuture<'static, HumanAnswer>;
}

/// What the person decided about an integration's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HumanAnswer {
    Accepted,
    /// Declined, cancelled, or nobody decided in time (the reason).
    Declined {
        reason: &'static str,
    },
    /// Nobody could be asked (the execution cannot pause); why.
    Unavailable(String),
}

/// What a tool returns: `{ok: true, data, http?}` …
#[derive(Debug, Clone)]
pub struct ToolSuccess {
    pub data: Value,
    pub http: Option<Value>,
    /// Room `data` holds in the execution's [`HostBudget`], given back once
    /// the answer has been handed to the sandbox.
    pub held: Option<Arc<HostHold>>,
}

/// Equal when what the program sees is equal.
impl PartialEq for ToolSuccess {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data && self.http == other.http
    }
}

/// … or `{ok: false, error}` (SPEC §7).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            status: None,
            details: None,
            retryable: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

pub type ToolResult = Result<ToolSuccess, ToolError>;

/// The value a tool call resolves to inside the sandbox (the data moves,
/// it is not copied).
pub fn result_value(result: ToolResult) -> Value {
    match result {
        Ok(ok) => {
            let mut v = serde_json::Map::with_capacity(3);
            v.insert("ok".into(), Value::Bool(true));
            v.insert("data".into(), ok.data);
            if let Some(http) = ok.http {
                v.insert("http".into(), http);
            }
            Value::Object(v)
        }
        Err(e) => json!({ "ok": false, "error": e }),
    }
}

/// Runs the tools of one integration kind.
pub trait ToolInvoker: Send + Sync + 'static {
    fn invoke(&self, call: ToolInvocation) -> BoxFuture<'static, ToolResult>;

    /// Refuses arguments that pass the input schema but cannot make the
    /// request the tool names (a path value of `..`). Runs after validation
    /// and before approval, so a human is never asked about a call that
    /// would fail or reach something else. The default accepts everything.
    fn check(&self, _tool: &ToolEntry, _args: &Value) -> Result<(), ToolError> {
        Ok(())
    }
}

/// A tool's route as search reads it. Real APIs often name and describe
/// operations poorly (Microsoft Graph summarises `GET /me/messages` as "Get
/// open extension"), but the route says what the operation is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteHint {
    /// Plain words: the operation's verb and the resource it acts on, e.g.
    /// "list me messages" for `GET /me/messages`.
    pub words: String,
    /// How far down the API's tree the resource sits (path segments): of
    /// two tools that match a query alike, the shallower one is the
    /// resource itself rather than a copy reached through another
    /// (`/me/messages` before `/me/mailFolders/{id}/messages`).
    pub depth: u8,
}

/// An integration as listed by `tools.executor.integrations.list`.
#[derive(Debug, Clone, Serialize)]
pub struct IntegrationSummary {
    pub namespace: String,
    #[serde(rename = "toolCount")]
    pub tool_count: usize,
    /// Why the integration's tools cannot be served (e.g. stored in a
    /// format this server cannot read); its calls fail with
    /// `integration_unavailable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// The tools of one namespace, indexed for lookup and search. Immutable;
/// shared between the catalogs of successive versions while unchanged.
pub struct ToolGroup {
    namespace: String,
    /// Sorted by path: a lookup is a binary search, with no second copy of
    /// every path in a map.
    tools: Vec<Arc<ToolEntry>>,
    index: SearchIndex,
    validators: Validators,
}

impl ToolGroup {
    /// The group of `namespace`; tools whose path is not under it are left
    /// out.
    pub fn new(namespace: &str, tools: Vec<impl Into<NewTool>>) -> Self {
        ToolGroup::with_stored_index(namespace, tools, None).0
    }

    /// [`ToolGroup::new`], taking its search index from `stored` (what
    /// [`ToolGroup::encoded_index`] wrote, read back) when that index was
    /// built from these very tools; also says whether it did.
    pub fn with_stored_index(
        namespace: &str,
        tools: Vec<impl Into<NewTool>>,
        stored: Option<StoredSearchIndex>,
    ) -> (Self, bool) {
        let mut tools: Vec<NewTool> = tools.into_iter().map(Into::into).collect();
        tools.retain(|t| namespace_of(&t.entry.path) == namespace);
        tools.sort_by(|a, b| a.entry.path.cmp(&b.entry.path));
        tools.dedup_by(|a, b| a.entry.path == b.entry.path);
        let docs: Vec<SearchDoc<'_>> = tools
            .iter()
            .map(|NewTool { entry, route }| SearchDoc {
                path: entry.path.clone(),
                name: entry.name(),
                integration: entry.integration(),
                description: entry.description.as_deref().unwrap_or(""),
                route: route.as_ref().map_or("", |r| r.words.as_str()),
                depth: route.as_ref().map_or(0, |r| r.depth),
            })
            .collect();
        let decoded = stored.and_then(|stored| SearchIndex::adopt(stored, &docs));
        let reused = decoded.is_some();
        let index = decoded.unwrap_or_else(|| SearchIndex::build(docs));
        let group = ToolGroup {
            namespace: namespace.to_string(),
            tools: tools.into_iter().map(|t| Arc::new(t.entry)).collect(),
            index,
            validators: Validators::default(),
        };
        (group, reused)
    }

    /// The group's search index as bytes, to store beside the record its
    /// tools were loaded from (see [`ToolGroup::with_stored_index`]).
    pub fn encoded_index(&self) -> Vec<u8> {
        self.index.encode()
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The group's tools, sorted by path.
    pub fn tools(&self) -> &[Arc<ToolEntry>] {
        &self.tools
    }

    fn get(&self, path: &str) -> Option<&Arc<ToolEntry>> {
        let found = self.tools.binary_search_by(|t| (*t.path).cmp(path));
        found.ok().and_then(|i| self.tools.get(i))
    }
}

/// The first segment of a tool path: its namespace.
/// The longest namespace.
pub const MAX_NAMESPACE_LEN: usize = 64;

/// Whether `namespace` can be the first segment of tool paths: a letter,
/// then letters, digits or `_`, at most [`MAX_NAMESPACE_LEN`].
pub fn is_valid_namespace(namespace: &str) -> bool {
    let mut chars = namespace.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && namespace.len() <= MAX_NAMESPACE_LEN
}

/// Namespaces no integration may take: the built-in tools' own
/// (`executor.*`), and the names the sandbox's `tools` proxy answers itself
/// (`tools.search`, `tools.describe`, and `tools` for good measure), under
/// which an integration's tools could never be reached.
pub const RESERVED_NAMESPACES: [&str; 4] = ["executor", "search", "describe", "tools"];

/// Why `namespace` cannot name a new integration, as the operator reads it;
/// None when it can.
pub fn namespace_problem(namespace: &str) -> Option<String> {
    if RESERVED_NAMESPACES.contains(&namespace) {
        return Some(format!(
            "the namespace {namespace:?} is reserved ({} are the built-in tools' names): choose another",
            RESERVED_NAMESPACES.join(", ")
        ));
    }
    if !is_valid_namespace(namespace) {
        return Some(format!(
            "invalid namespace {namespace:?}: use a letter followed by letters, digits or _ (at most {MAX_NAMESPACE_LEN})"
        ));
    }
    None
}

fn namespace_of(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// An org's tools: one group per namespace, plus the integrations that are
/// stored but cannot be served. Immutable: a change to the integrations
/// builds a new catalog (from mostly the same groups).
pub struct Catalog {
    /// Sorted by namespace.
    groups: Vec<Arc<ToolGroup>>,
    by_namespace: HashMap<String, usize>,
    unavailable: HashMap<String, Unavailable>,
    /// Namespaces with tool counts, sorted; counted once rather than per
    /// listing.
    integrations: Vec<IntegrationSummary>,
    len: usize,
}

impl Catalog {
    /// A catalog of loose entries, grouped by namespace.
    pub fn new(tools: Vec<impl Into<NewTool>>) -> Self {
        let mut by_namespace: BTreeMap<String, Vec<NewTool>> = BTreeMap::new();
        for tool in tools {
            let tool = tool.into();
            let namespace = namespace_of(&tool.entry.path).to_string();
            by_namespace.entry(namespace).or_default().push(tool);
        }
        let groups = by_namespace
            .into_iter()
            .map(|(namespace, tools)| Arc::new(ToolGroup::new(&namespace, tools)))
            .collect();
        Catalog::from_groups(groups, Vec::new())
    }

    /// A catalog of built groups (a later group of a namespace already
    /// present is ignored) and of integrations that cannot be served, each
    /// with the reason.
    pub fn from_groups(
        mut groups: Vec<Arc<ToolGroup>>,
        unavailable: Vec<(String, Unavailable)>,
    ) -> Self {
        groups.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        groups.dedup_by(|a, b| a.namespace == b.namespace);
        let by_namespace = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.namespace.clone(), i))
            .collect();
        let mut integrations: Vec<IntegrationSummary> = groups
            .iter()
            .filter(|g| !g.is_empty())
            .map(|g| IntegrationSummary {
                namespace: g.namespace.clone(),
                tool_count: g.len(),
                unavailable: None,
            })
            .collect();
        integrations.extend(
            unavailable
                .iter()
                .map(|(namespace, why)| IntegrationSummary {
                    namespace: namespace.clone(),
                    tool_count: 0,
                    unavailable: Some(why.message.clone()),
                }),
        );
        integrations.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        Catalog {
            len: groups.iter().map(|g| g.len()).sum(),
            groups,
            by_namespace,
            unavailable: unavailable.into_iter().collect(),
            integrations,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The groups, sorted by namespace.
    pub fn groups(&self) -> &[Arc<ToolGroup>] {
        &self.groups
    }

    fn group(&self, namespace: &str) -> Option<&ToolGroup> {
        self.by_namespace
            .get(namespace)
            .and_then(|&i| self.groups.get(i))
            .map(Arc::as_ref)
    }

    pub fn get(&self, path: &str) -> Option<&Arc<ToolEntry>> {
        self.group(namespace_of(path))?.get(path)
    }

    /// Why the integration a path names cannot be served, when it cannot.
    pub fn unavailable(&self, path: &str) -> Option<&Unavailable> {
        self.unavailable.get(namespace_of(path))
    }

    /// Checks arguments against the tool's input schema (tools without one
    /// accept any object).
    pub fn validate(&self, tool: &ToolEntry, args: &Value) -> Result<(), SchemaProblems> {
        let Some(schema) = &tool.input_schema else {
            return Ok(());
        };
        match self.group(namespace_of(&tool.path)) {
            Some(group) => {
                let definitions = tool.definitions.as_deref();
                group
                    .validators
                    .check(&tool.path, schema, definitions, args)
            }
            None => Ok(()),
        }
    }

    /// Ranked matches, best first (ties by path).
    pub fn search(&self, query: &str, namespace: Option<&str>) -> Vec<(&Arc<ToolEntry>, f64)> {
        let mut hits: Vec<(&Arc<ToolEntry>, f64)> = Vec::new();
        for group in &self.groups {
            let found = group.index.search(query, namespace);
            hits.extend(
                found
                    .into_iter()
                    .filter_map(|(i, score)| group.tools.get(i).map(|t| (t, score))),
            );
        }
        // Each group's hits are ranked already; one group needs no merge.
        if self.groups.len() > 1 {
            hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.path.cmp(&b.0.path)));
        }
        hits
    }

    /// Up to five paths close to one that does not exist.
    pub fn suggestions(&self, path: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .search(path, None)
            .into_iter()
            .take(5)
            .map(|(t, _)| t.path.to_string())
            .collect();
        if found.is_empty() {
            // Fall back to the last segment alone ("github.issue.create" → "create").
            let leaf = path.rsplit('.').next().unwrap_or(path);
            found = self
                .search(leaf, None)
                .into_iter()
                .take(5)
                .map(|(t, _)| t.path.to_string())
                .collect();
        }
        found
    }

    /// Integration namespaces with their tool counts, sorted.
    pub fn integrations(&self) -> &[IntegrationSummary] {
        &self.integrations
    }
}

/// Where an org's catalog comes from: the integrations layer implements
/// this over the store; [`StaticCatalog`] serves one catalog to every org.
pub trait CatalogSource: Send + Sync + 'static {
    /// The org's catalog as committed now: what an execution calls, so an
    /// integration another process just added is there for it.
    fn catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>>;

    /// The org's catalog as this node last heard of it, which may trail a
    /// change another process committed by the time its notice takes to
    /// arrive. For tool lists, which that notice refreshes; it may save a
    /// read of the store.
    fn listed_catalog(&self, org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        self.catalog(org_id)
    }
}

/// One catalog for everyone.
pub struct StaticCatalog(pub Arc<Catalog>);

impl CatalogSource for StaticCatalog {
    fn catalog(&self, _org_id: &str) -> BoxFuture<'_, Arc<Catalog>> {
        let catalog = self.0.clone();
        Box::pin(async move { catalog })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never;

    impl ToolInvoker for Never {
        fn invoke(&self, _call: ToolInvocation) -> BoxFuture<'static, ToolResult> {
            Box::pin(async { Err(ToolError::new("never", "not called")) })
        }
    }

    fn entry(path: &str, description: &str) -> ToolEntry {
        ToolEntry {
            path: path.into(),
            description: Some(description.into()),
            input_schema: None,
            output_schema: None,
            definitions: None,
            requires_approval: false,
            invoker: Arc::new(Never),
            slot: 0,
        }
    }

    #[test]
    fn groups_are_searched_together_and_merged_by_score() {
        let catalog = Catalog::new(vec![
            entry("zoo.pets.list", "List pets"),
            entry(
                "api.pets.listPetsAndOwnersWithTheirAddresses",
                "List pets and owners",
            ),
            entry("api.users.get", "Get a user"),
        ]);
        assert_eq!(catalog.groups().len(), 2);
        let hits = catalog.search("list pets", None);
        let paths: Vec<&str> = hits.iter().map(|(t, _)| &*t.path).collect();
        // The better match is in the group that sorts later.
        assert_eq!(paths.first(), Some(&"zoo.pets.list"));
        assert!(paths.contains(&"api.pets.listPetsAndOwnersWithTheirAddresses"));
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "{paths:?}");
        let scoped: Vec<String> = catalog
            .search("list pets", Some("api"))
            .iter()
            .map(|(t, _)| t.path.to_string())
            .collect();
        assert_eq!(scoped, ["api.pets.listPetsAndOwnersWithTheirAddresses"]);
        assert!(catalog.get("api.users.get").is_some() && catalog.get("api.users.nope").is_none());
    }

    #[test]
    fn a_route_given_beside_an_entry_is_searched() {
        // Graph's summary says nothing of messages; the route does.
        let routed = NewTool {
            entry: entry("g.a.first", "Get open extension"),
            route: Some(RouteHint {
                words: "list me messages".into(),
                depth: 2,
            }),
        };
        let catalog = Catalog::new(vec![
            routed,
            entry("g.a.second", "Get open extension").into(),
        ]);
        let hits = catalog.search("list me messages", None);
        let paths: Vec<&str> = hits.iter().map(|(t, _)| &*t.path).collect();
        assert_eq!(paths, ["g.a.first"]);
    }
}
