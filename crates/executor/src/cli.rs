//! The command line (SPEC §1). Every flag also reads an environment
//! variable; defaults make `executor serve` work with nothing set. A
//! switch's variable takes `1`/`0`, `yes`/`no`, `on`/`off` as well as
//! `true`/`false` (clap's `BoolishValueParser`).

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use executor_store::{CredentialKind, ExecutionStatus};

#[derive(Debug, Parser)]
#[command(
    name = "executor",
    version,
    about = "An integration layer for AI agents, served over MCP"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalOpts {
    /// Where the embedded store lives.
    #[arg(long, env = "EXECUTOR_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// `sqlite://PATH` (default: `sqlite://<data-dir>/executor.db`), or
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` for a store several
    /// nodes share (SPEC §10; needs an explicit `EXECUTOR_SECRET_KEY`).
    #[arg(long, env = "EXECUTOR_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// Connections to a Postgres store this process opens at most.
    #[arg(
        long,
        env = "EXECUTOR_DATABASE_POOL_SIZE",
        global = true,
        default_value_t = 16,
        value_parser = clap::value_parser!(u16).range(1..=1000)
    )]
    pub database_pool_size: u16,
    /// The log on stderr: `text` (coloured only on a terminal) or `json`
    /// (one object per line). `RUST_LOG` sets the filter.
    #[arg(
        long,
        env = "EXECUTOR_LOG_FORMAT",
        global = true,
        value_enum,
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,
}

/// How the log is written (SPEC §11: structured logs, JSON on request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Who a command acts for, the same on every command that acts in an org
/// (its catalog, connections, policies, calls, a stdio session). Neither
/// given: the only org, by its owner (a fresh data dir's first command
/// makes the local operator, `local@localhost`); several orgs need one of
/// them named. See `commands::resolve_actor`.
#[derive(Debug, Clone, Args)]
pub struct ActorArg {
    /// The account to act as (its personal org unless --org names
    /// another); created if missing.
    #[arg(long, env = "EXECUTOR_EMAIL")]
    pub email: Option<String>,
    /// The org to act in, by name (default: the only org).
    #[arg(long = "org", env = "EXECUTOR_ORG")]
    pub org: Option<String>,
}

/// `--allow-local-network`, the same on every command that makes outbound
/// requests.
#[derive(Debug, Clone, Copy, Args)]
pub struct LocalNetworkArg {
    /// Let outbound requests (integrations' calls, spec and schema fetches,
    /// OAuth) reach loopback, private and link-local addresses (refused by
    /// default: the SSRF guard).
    #[arg(
        long = "allow-local-network",
        env = "EXECUTOR_ALLOW_LOCAL_NETWORK",
        value_parser = BoolishValueParser::new()
    )]
    pub allowed: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server: MCP at /mcp, health at /healthz.
    Serve(Box<ServeOpts>),
    /// Serve MCP over stdio, for clients that spawn a process.
    Mcp(StdioOpts),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Inspect past executions.
    #[command(subcommand)]
    Executions(ExecutionsCommand),
    /// Manage policy rules (allow, require_approval, block).
    #[command(subcommand)]
    Policies(PoliciesCommand),
    /// Manage integrations (API sources whose operations become tools).
    #[command(subcommand)]
    Integrations(IntegrationsGroup),
    /// Use the catalog from a shell.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// The org's MCP sessions: list them, end one.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// The calls waiting for a human's decision (decide one with
    /// `executor resume`).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Manage connections (the credential of an integration).
    #[command(subcommand)]
    Connections(ConnectionsCommand),
    /// Call one tool from a shell, through the same pipeline as `execute`
    /// (policies, validation, approvals, credentials).
    Call {
        /// The tool's address, e.g. github.issues.create.
        path: String,
        /// The input, as a JSON object.
        #[arg(default_value = "{}")]
        input: String,
        #[command(flatten)]
        actor: ActorArg,
        #[command(flatten)]
        engine: EngineOpts,
    },
    /// Copy the embedded SQLite store into an empty Postgres store (the
    /// --database-url), keeping tokens, integrations, connections,
    /// policies, sessions and history. Stop the servers on the SQLite store
    /// first: later writes there are not copied.
    Migrate {
        /// The store to copy (default: `sqlite://<data-dir>/executor.db`).
        #[arg(long)]
        from: Option<String>,
    },
    /// The built-in OAuth authorization server's clients and grants (SPEC
    /// §4): what MCP clients that logged in with a browser hold.
    #[command(subcommand)]
    Oauth(OauthCommand),
    /// Browser sign-in to the server (the consent page, the console).
    #[command(subcommand)]
    Console(ConsoleCommand),
    /// Decide a paused execution (the `resume` tool, from a shell): the
    /// running server applies it and this prints the outcome; with no
    /// server holding the run, it is replayed and applied here.
    Resume {
        /// The exec_… id from the paused result or `executions list`.
        execution_id: String,
        /// The decision: accept runs the pending call, decline or cancel
        /// makes it throw.
        #[arg(long, value_parser = ["accept", "decline", "cancel"])]
        action: String,
        /// Seconds to wait for a running server to take the decision.
        #[arg(long, default_value_t = 3)]
        wait: u64,
        #[command(flatten)]
        engine: EngineOpts,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConnectionsCommand {
    /// Set the credential of an integration. The value is sealed with the
    /// data dir's key (or EXECUTOR_SECRET_KEY); `--secret-ref env://NAME`
    /// stores a reference resolved at call time instead. Give secret values
    /// as `-` (read from standard input) or `@FILE`, so that they stay out
    /// of `ps` and shell history.
    Set {
        /// The integration's namespace.
        namespace: String,
        /// The key, `-` for standard input, or `@FILE`.
        #[arg(long, group = "credential")]
        api_key: Option<String>,
        /// The token, `-` for standard input, or `@FILE`.
        #[arg(long, group = "credential")]
        bearer: Option<String>,
        /// USER:PASSWORD, `-` for standard input, or `@FILE`.
        #[arg(long, group = "credential")]
        basic: Option<String>,
        /// `env://NAME`: read the secret from the server's environment.
        #[arg(long, group = "credential")]
        secret_ref: Option<String>,
        /// With --secret-ref: api_key, bearer or basic (user from --username).
        #[arg(long, default_value = "api_key")]
        kind: CredentialKind,
        /// With --secret-ref and --kind basic: the user name.
        #[arg(long)]
        username: Option<String>,
        #[command(flatten)]
        org: ActorArg,
    },
    /// Log in to an OAuth-protected integration: prints the authorization
    /// URL (opens it when a browser is there); the running server's
    /// `/oauth/callback` completes it (or this command's own listener on
    /// `--listen` when no server runs); waits until the connection is
    /// ready and prints its status.
    Login(LoginArgs),
    /// The org's connections (never their secrets).
    List {
        #[command(flatten)]
        org: ActorArg,
    },
    /// One connection: its kind, where its secret is, and an OAuth grant's
    /// state (scopes, expiry).
    Status {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
    /// Tries the connection with one request that changes nothing: an MCP
    /// server lists its tools, a GraphQL API answers `{ __typename }`, an
    /// OpenAPI API's base URL is fetched. Exits 1 when the upstream
    /// refuses it.
    Test {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        #[command(flatten)]
        org: ActorArg,
    },
    /// Remove an integration's connection.
    Remove {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The integration's namespace.
    pub namespace: String,
    /// A client registered with the authorization server beforehand
    /// (else: our client metadata document, or dynamic registration).
    #[arg(long)]
    pub client_id: Option<String>,
    /// Read the client secret of --client-id from standard input.
    #[arg(long, requires = "client_id")]
    pub client_secret_stdin: bool,
    /// Scopes to ask for (repeatable); default: what the server asks for.
    #[arg(long = "scope")]
    pub scopes: Vec<String>,
    /// Default: client credentials when it is the only grant the server
    /// offers, else authorization code.
    #[arg(long, value_enum)]
    pub flow: Option<LoginFlow>,
    /// The authorization server, when neither the integration's description
    /// nor the server's answers name one.
    #[arg(long)]
    pub issuer: Option<String>,
    /// The RFC 8707 resource to ask tokens for (default: the one the
    /// server's resource metadata names; none for a plain API).
    #[arg(long)]
    pub resource: Option<String>,
    #[command(flatten)]
    pub public: PublicOpts,
    /// Where the server listens (or, with none running, where this command
    /// serves the callback itself; `127.0.0.1:0` picks a free port).
    /// Default: the public URL the server running on this store announced,
    /// when it answers there, else 127.0.0.1:4788.
    #[arg(long, env = "EXECUTOR_LISTEN")]
    pub listen: Option<String>,
    /// Seconds to wait for the browser step.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Print the URL only; never open a browser.
    #[arg(long)]
    pub no_browser: bool,
    #[command(flatten)]
    pub local_network: LocalNetworkArg,
    #[command(flatten)]
    pub org: ActorArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoginFlow {
    AuthorizationCode,
    ClientCredentials,
}

/// How browsers and OAuth servers reach this server (SPEC §1).
#[derive(Debug, Clone, Args)]
pub struct PublicOpts {
    /// The origin browsers and OAuth servers reach (the OAuth redirect URI
    /// is `<public-url>/oauth/callback`); default `http://<listen address>`.
    #[arg(long, env = "EXECUTOR_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The https URL where our OAuth client ID metadata document is
    /// published (default: `<public-url>/oauth/client-metadata.json` when
    /// the public URL is https). Servers that accept such documents need no
    /// registration.
    #[arg(long, env = "EXECUTOR_OAUTH_CLIENT_METADATA_URL")]
    pub oauth_client_metadata_url: Option<String>,
}

/// `executor integrations …`: the commands that change or list
/// integrations (`commands/integrations.rs`), and `tools`, a read of the
/// catalog served beside `tools search` (`commands/tools.rs`).
#[derive(Debug, Subcommand)]
pub enum IntegrationsGroup {
    #[command(flatten)]
    Manage(IntegrationsCommand),
    /// An integration's tools: path, whether a call waits for approval by
    /// default, and the first line of its description.
    Tools {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum IntegrationsCommand {
    /// Add (or replace) an integration.
    #[command(subcommand)]
    Add(AddIntegration),
    /// The org's integrations.
    List {
        #[command(flatten)]
        org: ActorArg,
    },
    /// Re-read an integration's source and replace its tools.
    Refresh {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        #[command(flatten)]
        org: ActorArg,
    },
    /// Change an integration's settings; it is imported again from its
    /// source with them, as a refresh.
    Update {
        /// The integration's namespace.
        namespace: String,
        /// An OpenAPI integration's base URL (over its document's
        /// servers), or a GraphQL API's endpoint.
        #[arg(long)]
        base_url: Option<String>,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        #[command(flatten)]
        org: ActorArg,
    },
    /// Remove an integration and its tools.
    Remove {
        /// The integration's namespace.
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum AddIntegration {
    /// An OpenAPI 3.x or Swagger 2.0 document (JSON or YAML).
    Openapi {
        /// A file path or an http(s) URL.
        #[arg(long)]
        spec: String,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        /// The first segment of every tool address (letters, digits, `_`).
        #[arg(long)]
        namespace: String,
        /// Overrides the servers the document declares.
        #[arg(long)]
        base_url: Option<String>,
        #[command(flatten)]
        org: ActorArg,
    },
    /// A GraphQL API: one tool per query and mutation field.
    Graphql {
        /// Where the API answers (an http(s) URL).
        #[arg(long)]
        endpoint: String,
        /// The schema as a file (introspection JSON or SDL); without it,
        /// the endpoint is asked (introspection).
        #[arg(long)]
        schema: Option<String>,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        /// The first segment of every tool address (letters, digits, `_`).
        #[arg(long)]
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
    /// An MCP server: over HTTP (`--url`) or started as a command that
    /// speaks MCP on stdio (`--command`; run only by servers started with
    /// --allow-stdio-integrations). Its tools are listed now.
    Mcp {
        /// Where the server answers (streamable HTTP or legacy SSE).
        #[arg(long, conflicts_with = "command", required_unless_present = "command")]
        url: Option<String>,
        /// Which HTTP transport: auto (streamable HTTP, then SSE),
        /// streamable-http or sse.
        #[arg(long, default_value = "auto", requires = "url")]
        transport: String,
        /// The program to start (stdio).
        #[arg(long)]
        command: Option<String>,
        /// An argument of the command (repeat for more).
        #[arg(long = "arg", requires = "command", allow_hyphen_values = true)]
        args: Vec<String>,
        /// An environment variable of the command, `NAME=value` (repeat
        /// for more). The command inherits only PATH, HOME, USER, LANG,
        /// LC_ALL, TMPDIR and TZ besides these.
        #[arg(long = "env", requires = "command")]
        env: Vec<String>,
        #[command(flatten)]
        local_network: LocalNetworkArg,
        /// The first segment of every tool address (letters, digits, `_`).
        #[arg(long)]
        namespace: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Rank the org's tools for a plain-language query.
    Search {
        /// What the tool should do, in plain words.
        query: String,
        /// How many tools to show, best first.
        #[arg(long, default_value_t = 12)]
        limit: usize,
        #[command(flatten)]
        org: ActorArg,
    },
    /// One tool as agents read it (`tools.describe.tool`): its description,
    /// whether a call waits for approval by default, and its input and
    /// output as TypeScript.
    Describe {
        /// The tool's address, e.g. github.issues.create.
        path: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum OauthCommand {
    /// Registered clients.
    #[command(subcommand)]
    Clients(OauthClientsCommand),
    /// Grants: the consent a person gave a client, for one org.
    #[command(subcommand)]
    Grants(OauthGrantsCommand),
}

#[derive(Debug, Subcommand)]
pub enum OauthClientsCommand {
    /// Every client: id, name, how it came, redirect URIs.
    List,
    /// Pre-register a client (one that cannot register itself): prints
    /// its client id, and with --secret its secret, once.
    Add {
        /// Its name, shown on the consent page.
        #[arg(long)]
        name: String,
        /// Where it receives codes (repeat for several). A loopback
        /// http URI matches on any port.
        #[arg(long = "redirect-uri", required = true)]
        redirect_uris: Vec<String>,
        /// Make it a confidential client with a secret
        /// (client_secret_basic or client_secret_post).
        #[arg(long)]
        secret: bool,
    },
    /// Delete a client; its grants are revoked.
    Delete {
        /// The client's id (`cl_…`), from `oauth clients list`.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum OauthGrantsCommand {
    /// The org's grants, newest first.
    List {
        #[command(flatten)]
        org: ActorArg,
    },
    /// Revoke a grant: its tokens stop working at once, also on live
    /// sessions, whose streams close within 5 s.
    Revoke {
        /// The grant's id (`gr_…`), from `oauth grants list`.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConsoleCommand {
    /// Print a one-time sign-in link (valid 10 minutes, single use).
    LoginLink {
        #[command(flatten)]
        actor: ActorArg,
        /// The server's public URL (default: the one the running server on
        /// this store announced, else http://127.0.0.1:4788).
        #[arg(long, env = "EXECUTOR_PUBLIC_URL")]
        public_url: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// The org's MCP sessions, most recently active first: id, client,
    /// protocol version, last activity, state (open or terminated).
    List {
        /// How many, most recently active first (at most 200).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        org: ActorArg,
    },
    /// End a session: its next request gets 404 (terminated) and the
    /// client must start a new one. A running server that holds the
    /// session lets it go, with its open streams: at once on a Postgres
    /// store (every node hears of it), within a second on the embedded
    /// SQLite store (a server there looks for sessions other processes
    /// ended each second).
    Terminate {
        /// The session's id (its Mcp-Session-Id), from `sessions list`.
        /// Ids are base64url, so one may begin with `-`: it is still the id.
        #[arg(allow_hyphen_values = true)]
        id: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// The org's calls waiting for a decision, oldest first: execution,
    /// tool, when it paused, when it is declined by itself, and its
    /// arguments' first line. Decide one with
    /// `executor resume EXECUTION_ID --action accept|decline|cancel`.
    List {
        #[command(flatten)]
        org: ActorArg,
        // The server's engine settings: its approval window and preview
        // length say when a call paused and how much of it to show.
        #[command(flatten)]
        engine: EngineOpts,
    },
}

#[derive(Debug, Subcommand)]
pub enum PoliciesCommand {
    /// Add a rule. PATTERN: `*`, `ns.*` (a subtree), `ns.*.tool` (`*` = one
    /// segment) or a full address; ACTION: allow, require_approval, block.
    Add {
        /// The tools the rule matches.
        pattern: String,
        /// allow, require_approval or block.
        action: String,
        /// 0-based position; first match wins (default: last).
        #[arg(long)]
        position: Option<i64>,
        /// Org name (default: the only org).
        #[command(flatten)]
        org: ActorArg,
    },
    /// The rules in the order they are matched.
    List {
        #[command(flatten)]
        org: ActorArg,
    },
    /// Remove a rule by id.
    Remove {
        /// The rule's id (pol_…), from `policies list`.
        id: String,
        #[command(flatten)]
        org: ActorArg,
    },
}

#[derive(Debug, Args)]
pub struct ServeOpts {
    /// The address the server listens on, HOST:PORT.
    #[arg(long, env = "EXECUTOR_LISTEN", default_value = "127.0.0.1:4788")]
    pub listen: String,
    /// Where the other nodes on the store reach this one, over plain HTTP,
    /// e.g. http://10.0.0.5:4788 (default: the address listened on).
    /// Needed on Postgres when listening on an unspecified address
    /// (0.0.0.0, [::]).
    #[arg(long, env = "EXECUTOR_NODE_URL")]
    pub node_url: Option<String>,
    /// This node's lease on the store, in ms: renewed every fifth of it; a
    /// node that stops renewing is taken over by its peers after it.
    #[arg(
        long = "node-lease-ms",
        env = "EXECUTOR_NODE_LEASE_MS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u64).range(500..)
    )]
    pub node_lease: u64,
    #[command(flatten)]
    pub public: PublicOpts,
    /// Dispose a session's runtime after this many ms without requests.
    #[arg(long, env = "MCP_SESSION_TIMEOUT_MS", default_value_t = 300_000)]
    pub session_idle_timeout: u64,
    /// Idle timeout while an execution of the session waits for approval.
    #[arg(
        long,
        env = "MCP_PAUSED_SESSION_IDLE_TIMEOUT_MS",
        default_value_t = 540_000
    )]
    pub paused_session_idle_timeout: u64,
    /// Keep a disposed session's lease on this node this many ms: its next
    /// request here is served without a store write, one landing on
    /// another node is handed here. 0 releases it at disposal.
    #[arg(
        long,
        env = "EXECUTOR_SESSION_LEASE_KEPT_MS",
        default_value_t = 300_000
    )]
    pub session_lease_kept: u64,
    #[command(flatten)]
    pub engine: EngineOpts,
    /// Garbage-collect session records untouched for this many days.
    #[arg(long, env = "EXECUTOR_SESSION_RETENTION_DAYS", default_value_t = 30)]
    pub session_retention_days: u64,
    /// Delete execution records, and the tool calls of their audit trail,
    /// older than this many days (a paused run that can still be resumed
    /// is kept).
    #[arg(long, env = "EXECUTOR_EXECUTION_RETENTION_DAYS", default_value_t = 30)]
    pub execution_retention_days: u64,
    /// Bytes the execution records (and their tool calls) may hold in all;
    /// past it the oldest are deleted (a paused run that can still be
    /// resumed is kept).
    #[arg(long, env = "EXECUTOR_MAX_HISTORY_BYTES", default_value_t = 2 << 30)]
    pub max_history_bytes: u64,
    /// Bytes the execution records of one org may hold; past it that org's
    /// oldest are deleted.
    #[arg(long, env = "EXECUTOR_MAX_ORG_HISTORY_BYTES", default_value_t = 1 << 30)]
    pub max_org_history_bytes: u64,
    /// Bytes the SSE event log's delivered events may hold in all; past it
    /// the oldest delivered ones are deleted (an undelivered one never is).
    #[arg(long, env = "EXECUTOR_MAX_EVENT_LOG_BYTES", default_value_t = 256 << 20)]
    pub max_event_log_bytes: u64,
    /// Bytes one session's SSE event log may hold; past it its oldest
    /// delivered events go, then its oldest undelivered ones: an answer is
    /// replaced by an error answer to its request, so the client is told.
    #[arg(long, env = "EXECUTOR_MAX_SESSION_EVENT_BYTES", default_value_t = 16 << 20)]
    pub max_session_event_bytes: u64,
    /// Bytes the SSE event logs of one org's sessions may hold; past it as
    /// for one session, across the org's sessions, oldest first.
    #[arg(long, env = "EXECUTOR_MAX_ORG_EVENT_BYTES", default_value_t = 64 << 20)]
    pub max_org_event_bytes: u64,
    /// Host names accepted in the Host header (default: loopback names when
    /// listening on loopback, any otherwise). Comma-separated.
    #[arg(long, env = "EXECUTOR_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Option<Vec<String>>,
    /// Extra browser origins accepted (e.g. https://app.example.com).
    #[arg(long, env = "EXECUTOR_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Option<Vec<String>>,
    /// Value of access-control-allow-origin.
    #[arg(long, env = "EXECUTOR_CORS_ORIGIN", default_value = "*")]
    pub cors_origin: String,
    /// After SIGTERM, how long in-flight requests may run on (ms).
    #[arg(
        long,
        env = "EXECUTOR_SHUTDOWN_DRAIN_DEADLINE_MS",
        default_value_t = 10_000
    )]
    pub shutdown_drain_deadline: u64,
    /// How long a client may take to send a request's headers, in ms; also
    /// how long a keep-alive connection may sit idle between requests (0:
    /// no limit).
    #[arg(
        long,
        env = "EXECUTOR_HEADER_READ_TIMEOUT_MS",
        default_value_t = executor_wire::HEADER_READ_TIMEOUT.as_millis() as u64
    )]
    pub header_read_timeout: u64,
    /// How long a request body may stall between two chunks, in ms (408;
    /// 0: no limit).
    #[arg(
        long,
        env = "EXECUTOR_BODY_READ_TIMEOUT_MS",
        default_value_t = executor_wire::BODY_READ_TIMEOUT.as_millis() as u64
    )]
    pub body_read_timeout: u64,
    /// Most client connections open at once; at the cap new ones wait in
    /// the listen backlog (default: the descriptor limit less a quarter).
    #[arg(long, env = "EXECUTOR_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Most messages in one JSON-RPC batch (2025-03-26 sessions).
    #[arg(long, env = "EXECUTOR_MAX_BATCH", default_value_t = executor_mcp::MAX_BATCH)]
    pub max_batch: usize,
    /// Live sessions one (account, org) may hold, and may create within one
    /// session idle timeout; over it, initialize answers 429.
    #[arg(
        long,
        env = "EXECUTOR_MAX_SESSIONS_PER_PRINCIPAL",
        default_value_t = executor_sessions::MAX_SESSIONS_PER_PRINCIPAL
    )]
    pub max_sessions_per_principal: usize,
    /// Standalone GET streams one session may hold open, and 2026-07-28
    /// `subscriptions/listen` streams one (account, org) may hold open;
    /// over it, 429.
    #[arg(
        long,
        env = "EXECUTOR_MAX_GET_STREAMS_PER_SESSION",
        default_value_t = executor_sessions::MAX_GET_STREAMS_PER_SESSION
    )]
    pub max_get_streams_per_session: usize,
    /// The built-in OAuth authorization server for /mcp (SPEC §4): `on`
    /// lets clients log in with a browser; `off` leaves API tokens only.
    #[arg(long, env = "EXECUTOR_OAUTH", default_value = "on", value_parser = ["on", "off"])]
    pub oauth: String,
    /// How long an OAuth access token lives, in seconds.
    #[arg(long, env = "EXECUTOR_OAUTH_ACCESS_TOKEN_TTL", default_value_t = 3600)]
    pub oauth_access_token_ttl: u64,
    /// How long a rotated refresh token is still accepted, in seconds
    /// (concurrent refreshes from one client); a later reuse revokes the
    /// grant.
    #[arg(long, env = "EXECUTOR_OAUTH_REFRESH_GRACE", default_value_t = 60)]
    pub oauth_refresh_grace: u64,
    /// Client registrations one source address may make per minute (the
    /// server takes ten times as many in all); over it, 429.
    #[arg(long, env = "EXECUTOR_OAUTH_REGISTRATION_RATE", default_value_t = 30)]
    pub oauth_registration_rate: u32,
    /// Client ID metadata documents (SPEC §4): `on` fetches the document an
    /// https `client_id` names (through the same guard as integrations'
    /// requests) and advertises it; `off` does neither.
    #[arg(long, env = "EXECUTOR_OAUTH_CIMD", default_value = "on", value_parser = ["on", "off"])]
    pub oauth_cimd: String,
    /// When set, `/metrics` requires `Authorization: Bearer <token>`.
    #[arg(long, env = "EXECUTOR_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Management API requests one token may make per second, on average;
    /// over it, 429 with Retry-After.
    #[arg(long, env = "EXECUTOR_API_RATE", default_value_t = executor_api::DEFAULT_RATE)]
    pub api_rate: u32,
    /// Management API requests one token may make at once after a pause.
    #[arg(long, env = "EXECUTOR_API_BURST", default_value_t = executor_api::DEFAULT_BURST)]
    pub api_burst: u32,
    /// Largest request body, in bytes; a larger one gets 413.
    #[arg(
        long,
        env = "EXECUTOR_MAX_BODY_BYTES",
        default_value_t = executor_wire::MAX_BODY_BYTES
    )]
    pub max_body_bytes: usize,
    /// How long a session with a request in flight or a stream open is kept
    /// without other activity, in ms.
    #[arg(
        long,
        env = "EXECUTOR_KEEP_ALIVE_CEILING_MS",
        default_value_t = executor_sessions::BUSY_CEILING.as_millis() as u64
    )]
    pub keep_alive_ceiling: u64,
    /// Events of one SSE stream kept in the log for replay (older ones are
    /// dropped).
    #[arg(
        long,
        env = "EXECUTOR_SSE_REPLAY_EVENTS",
        default_value_t = executor_store::LogBounds::DEFAULT.max_events
    )]
    pub sse_replay_events: u32,
    /// Bytes of one SSE stream's events kept in the log for replay.
    #[arg(
        long,
        env = "EXECUTOR_SSE_REPLAY_BYTES",
        default_value_t = executor_store::LogBounds::DEFAULT.max_bytes
    )]
    pub sse_replay_bytes: u64,
    /// How often a keepalive comment is sent on an open SSE stream, in ms.
    #[arg(
        long,
        env = "EXECUTOR_SSE_KEEPALIVE_MS",
        default_value_t = executor_wire::SSE_KEEPALIVE.as_millis() as u64
    )]
    pub sse_keepalive: u64,
    /// How long a standalone GET stream stays open before the server ends
    /// it (the client reconnects), in ms.
    #[arg(
        long,
        env = "EXECUTOR_GET_STREAM_ROTATION_MS",
        default_value_t = executor_wire::GET_STREAM_ROTATION.as_millis() as u64
    )]
    pub get_stream_rotation: u64,
    /// Unsent bytes a GET stream may queue for a slow reader before it is
    /// cut off (its events stay replayable).
    #[arg(
        long,
        env = "EXECUTOR_SLOW_READER_BYTES",
        default_value_t = executor_sessions::SLOW_READER_BYTES
    )]
    pub slow_reader_bytes: usize,
    /// How long the delivered events of a finished POST stream are kept for
    /// replay, in ms.
    #[arg(
        long,
        env = "EXECUTOR_REPLAY_WINDOW_MS",
        default_value_t = executor_sessions::REPLAY_WINDOW.as_millis() as u64
    )]
    pub replay_window: u64,
    /// Store writes that may wait for the writer; past it a write waits up
    /// to 2 s for room, then fails (a session that cannot be written: 503
    /// with Retry-After).
    #[arg(
        long,
        env = "EXECUTOR_MAX_QUEUED_WRITES",
        default_value_t = executor_store::MAX_QUEUED_WRITES
    )]
    pub max_queued_writes: usize,
}

#[derive(Debug, Args)]
pub struct StdioOpts {
    #[command(flatten)]
    pub actor: ActorArg,
    #[command(flatten)]
    pub engine: EngineOpts,
}

/// Sandbox limits (SPEC §6, §12) and outbound calls.
#[derive(Debug, Args)]
pub struct EngineOpts {
    #[command(flatten)]
    pub local_network: LocalNetworkArg,
    /// Let stdio MCP integrations start their command on this machine
    /// (refused by default: such a call answers `integration_unavailable`).
    #[arg(
        long,
        env = "EXECUTOR_ALLOW_STDIO_INTEGRATIONS",
        value_parser = BoolishValueParser::new()
    )]
    pub allow_stdio_integrations: bool,
    /// Most sessions open at once with one upstream MCP server over HTTP,
    /// per org; parallel calls beyond it wait for a free one.
    #[arg(long, env = "EXECUTOR_MAX_UPSTREAM_SESSIONS", default_value_t = 8)]
    pub max_upstream_sessions: usize,
    /// An upstream MCP session (or stdio child) unused this long closes,
    /// in ms.
    #[arg(
        long,
        env = "EXECUTOR_UPSTREAM_IDLE_TIMEOUT_MS",
        default_value_t = 300_000
    )]
    pub upstream_idle_timeout: u64,
    /// How often an upstream MCP server's tools are listed again while the
    /// integration is in use, in ms (besides when it says they changed, or
    /// a call names a tool it no longer has).
    #[arg(
        long,
        env = "EXECUTOR_UPSTREAM_RESYNC_INTERVAL_MS",
        default_value_t = 900_000
    )]
    pub upstream_resync_interval: u64,
    /// Sandbox compute time per execution, in ms (the clock stops while a
    /// tool call is in flight).
    #[arg(long, env = "EXECUTOR_EXECUTION_TIMEOUT_MS", default_value_t = 300_000)]
    pub execution_timeout: u64,
    /// Sandbox memory per execution, in MiB.
    #[arg(long, env = "EXECUTOR_SANDBOX_MEMORY_MB", default_value_t = 64)]
    pub sandbox_memory_mb: usize,
    /// Sandbox stack per execution, in KiB.
    #[arg(long, env = "EXECUTOR_SANDBOX_STACK_KB", default_value_t = 1024)]
    pub sandbox_stack_kb: usize,
    /// Most bytes of console output kept per execution.
    #[arg(long, env = "EXECUTOR_MAX_LOG_BYTES", default_value_t = 1024 * 1024)]
    pub max_log_bytes: usize,
    /// Largest result (as JSON) an execution may return, in bytes.
    #[arg(long, env = "EXECUTOR_MAX_RESULT_BYTES", default_value_t = 1024 * 1024)]
    pub max_result_bytes: usize,
    /// How long a call that needs approval waits for a human, in ms.
    #[arg(long, env = "EXECUTOR_APPROVAL_WINDOW_MS", default_value_t = 240_000)]
    pub approval_window: u64,
    /// Most executions running at once in all; more are refused at once
    /// (503 with Retry-After). Paused executions hold no slot.
    #[arg(long, env = "EXECUTOR_MAX_CONCURRENT_EXECUTIONS", default_value_t = 64)]
    pub max_concurrent_executions: usize,
    /// Most executions of one org running at once (its fair share); more
    /// wait their turn in the org's queue.
    #[arg(long, env = "EXECUTOR_MAX_ORG_EXECUTIONS", default_value_t = 16)]
    pub max_org_executions: usize,
    /// Most executions of one org waiting for a turn at once; past it an
    /// execute is refused at once with a clear error.
    #[arg(
        long,
        env = "EXECUTOR_MAX_ORG_QUEUED_EXECUTIONS",
        default_value_t = 512
    )]
    pub max_org_queued_executions: usize,
    /// How long, in ms, an execution waits in its org's queue for a turn
    /// before it is refused with a clear error.
    #[arg(long, env = "EXECUTOR_ORG_QUEUE_WAIT_MS", default_value_t = 30_000)]
    pub org_queue_wait: u64,
    /// Wall clock per execution, in ms: compute and tool calls, approval
    /// waits excluded.
    #[arg(
        long,
        env = "EXECUTOR_EXECUTION_WALL_CLOCK_MS",
        default_value_t = 600_000
    )]
    pub execution_wall_clock: u64,
    /// Tool calls one execution may have in flight at once.
    #[arg(long, env = "EXECUTOR_MAX_CALLS_IN_FLIGHT", default_value_t = 32)]
    pub max_calls_in_flight: usize,
    /// Tool calls one execution may make in all.
    #[arg(
        long,
        env = "EXECUTOR_MAX_CALLS_PER_EXECUTION",
        default_value_t = 10_000
    )]
    pub max_calls_per_execution: usize,
    /// Bytes of tool-call arguments and answers kept per execution to
    /// replay a paused run after a restart.
    #[arg(long, env = "EXECUTOR_MAX_JOURNAL_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_journal_bytes: usize,
    /// Longest tool path accepted, in bytes.
    #[arg(long, env = "EXECUTOR_MAX_TOOL_PATH_BYTES", default_value_t = 512)]
    pub max_tool_path_bytes: usize,
    /// Largest upstream answer read, in bytes (its parsed size is counted
    /// against the execution's sandbox memory).
    #[arg(long, env = "EXECUTOR_MAX_UPSTREAM_RESPONSE_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_upstream_response_bytes: usize,
    /// Longest result text, in characters; longer text is cut with a note
    /// (the structured result stays whole).
    #[arg(
        long,
        env = "EXECUTOR_MAX_RESULT_TEXT_CHARS",
        default_value_t = executor_engine::MAX_RESULT_TEXT_CHARS
    )]
    pub max_result_text_chars: usize,
    /// Longest emitted text file shown inline, in characters; longer text is
    /// cut with a note.
    #[arg(
        long,
        env = "EXECUTOR_MAX_EMITTED_TEXT_CHARS",
        default_value_t = executor_engine::MAX_EMITTED_TEXT_CHARS
    )]
    pub max_emitted_text_chars: usize,
    /// Longest argument preview of a call waiting for approval, in
    /// characters.
    #[arg(
        long,
        env = "EXECUTOR_MAX_APPROVAL_PREVIEW_CHARS",
        default_value_t = executor_engine::execution::MAX_ARGS_PREVIEW_CHARS
    )]
    pub max_approval_preview_chars: usize,
    /// Executions that may wait for a sandbox thread, in all; past it
    /// `execute` answers at once that the server is busy (default: 4 per
    /// sandbox thread, that is 8 × --max-concurrent-executions, 512).
    #[arg(long, env = "EXECUTOR_MAX_QUEUED_SANDBOX_JOBS")]
    pub max_queued_sandbox_jobs: Option<usize>,
    /// How long past its compute deadline a run whose interrupt never fired
    /// is abandoned by the host, in ms.
    #[arg(
        long,
        env = "EXECUTOR_SANDBOX_BACKSTOP_MS",
        default_value_t = executor_sandbox::BACKSTOP_GRACE.as_millis() as u64
    )]
    pub sandbox_backstop: u64,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create the account (and org) if missing and mint a token; prints it.
    Create {
        /// The account the token acts for (created if missing).
        #[arg(long)]
        email: String,
        /// A shared org's name (default: the account's personal org, named
        /// after the email, which belongs to that account alone; another
        /// account's email is refused).
        #[arg(long)]
        org: Option<String>,
        /// Days until the token stops working (default: never).
        #[arg(long)]
        expires_in_days: Option<u64>,
    },
    /// The tokens of an org (never their secrets): id, account, state,
    /// when made and when they expire.
    List {
        #[command(flatten)]
        org: ActorArg,
    },
    /// Revoke a token (the token itself or its id).
    Revoke {
        /// The token, or its id (`exk_<id>`).
        token: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ExecutionsCommand {
    /// The newest executions: when, org, status, duration and the code's
    /// first line.
    List {
        /// How many, newest first (at most 200).
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Only this org's (its name); default: every org's.
        #[arg(long)]
        org: Option<String>,
        /// Only these: completed, error or waiting_for_interaction.
        #[arg(long)]
        status: Option<ExecutionStatus>,
        /// Only those started since: a duration back from now (`30m`,
        /// `2h`, `7d`) or a date (`2026-12-06`, `2026-12-06T10:00:00Z`).
        #[arg(long)]
        since: Option<String>,
    },
    /// One execution, in full.
    Show {
        /// The execution's id (exec_…).
        id: String,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// A session id is base64url: one that begins with `-` is still an
    /// id, not a flag (found by CI: a random id began with `-V`).
    #[test]
    fn a_session_id_may_begin_with_a_hyphen() {
        use clap::Parser as _;
        let cli = Cli::try_parse_from([
            "executor",
            "sessions",
            "terminate",
            "-VwiHO0cnDvbtHEtqG4PP1z",
        ])
        .expect("the id parses");
        match cli.command {
            super::Command::Sessions(super::SessionsCommand::Terminate { id, .. }) => {
                assert_eq!(id, "-VwiHO0cnDvbtHEtqG4PP1z");
            }
            other => panic!("parsed as {other:?}"),
        }
    }

    /// Issue 37: every argument of every command says what it is in
    /// `--help`.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "executor", &mut missing);
        assert!(
            missing.is_empty(),
            "arguments without help:\n{}",
            missing.join("\n")
        );
    }
}
