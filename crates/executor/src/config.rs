//! Flags resolved into the crates' own config structs. `cli.rs` holds the
//! raw flags as clap parses them; this file is the one place that turns
//! them into `Limits`, `EngineConfig`, `SessionsConfig`, `WireConfig` and
//! the store's options, clamping what must not be zero.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use executor_engine::{EngineConfig, QueueLimits, ShareLimits};
use executor_outbound::HttpConfig;
use executor_sandbox::Limits;
use executor_sessions::{HistoryBounds, SessionsConfig};
use executor_store::{LogBounds, StoreOptions};
use executor_upstream::UpstreamSettings;
use executor_wire::{HostPolicy, MetricsToken, WireConfig};

use crate::AnyResult;
use crate::cli::{Command, EngineOpts, GlobalOpts, ServeOpts};

impl GlobalOpts {
    pub fn data_dir(&self) -> PathBuf {
        if let Some(d) = &self.data_dir {
            return d.clone();
        }
        let base = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("executor")
    }

    /// Whether the store is Postgres, shared by nodes that share no files.
    pub fn shared_store(&self) -> bool {
        self.database_url
            .as_deref()
            .is_some_and(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"))
    }

    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| {
            format!("sqlite://{}", self.data_dir().join("executor.db").display())
        })
    }
}

/// The store's tunables: `serve` takes them from its flags; the other
/// commands write little and use the defaults.
pub(crate) fn store_options(command: &Command) -> StoreOptions {
    match command {
        Command::Serve(opts) => StoreOptions {
            max_queued_writes: opts.max_queued_writes.max(1),
        },
        _ => StoreOptions::default(),
    }
}

impl EngineOpts {
    /// The sandbox's limits per execution (SPEC §6, §12).
    pub fn limits(&self) -> Limits {
        Limits {
            timeout: Duration::from_millis(self.execution_timeout),
            memory_bytes: self.sandbox_memory_mb.max(1) * 1024 * 1024,
            stack_bytes: self.sandbox_stack_kb.max(64) * 1024,
            max_log_bytes: self.max_log_bytes,
            max_result_bytes: self.max_result_bytes,
            max_calls_in_flight: self.max_calls_in_flight.max(1),
            max_calls: self.max_calls_per_execution.max(1),
            backstop_grace: Duration::from_millis(self.sandbox_backstop),
            max_queued_jobs: self.max_queued_sandbox_jobs.map(|n| n.max(1)),
        }
    }

    /// How integrations' requests leave the server.
    pub fn http(&self) -> HttpConfig {
        HttpConfig {
            allow_local_network: self.local_network.allowed,
            max_response_bytes: self.max_upstream_response_bytes.max(1),
            ..HttpConfig::default()
        }
    }

    /// How client ID metadata documents are fetched (SPEC §4): the
    /// integrations' guard, a 5 s deadline and no redirects.
    pub fn client_documents(&self) -> HttpConfig {
        HttpConfig {
            header_timeout: executor_authz::FETCH_TIMEOUT,
            body_timeout: executor_authz::FETCH_TIMEOUT,
            max_response_bytes: executor_authz::MAX_DOCUMENT_BYTES,
            ..self.http()
        }
    }

    /// How upstream MCP servers are run and pooled.
    /// What the management API may make this server do.
    pub fn api_surface(&self) -> executor_ops::Surface {
        executor_ops::Surface {
            allow_local_network: self.local_network.allowed,
            // A path over HTTP would read the server's own files.
            may_read_files: false,
            may_start_commands: self.allow_stdio_integrations,
        }
    }

    pub fn upstream(&self) -> UpstreamSettings {
        UpstreamSettings {
            allow_stdio: self.allow_stdio_integrations,
            max_sessions: self.max_upstream_sessions.max(1),
            idle_timeout: Duration::from_millis(self.upstream_idle_timeout.max(1)),
            resync_every: Duration::from_millis(self.upstream_resync_interval.max(1)),
            ..UpstreamSettings::default()
        }
    }

    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            limits: self.limits(),
            share: ShareLimits::new(self.max_concurrent_executions, self.max_org_executions),
            queue: QueueLimits {
                max_queued: self.max_org_queued_executions,
                max_wait: Duration::from_millis(self.org_queue_wait),
            },
            approval_window: Duration::from_millis(self.approval_window),
            wall_clock: Duration::from_millis(self.execution_wall_clock.max(1)),
            max_journal_bytes: self.max_journal_bytes,
            max_tool_path_bytes: self.max_tool_path_bytes.max(1),
            max_result_text_chars: self.max_result_text_chars,
            max_emitted_text_chars: self.max_emitted_text_chars,
            max_approval_preview_chars: self.max_approval_preview_chars,
            console_approvals_url: None,
        }
    }
}

impl ServeOpts {
    /// The session lifecycle's timeouts and bounds; `node_url` is where
    /// peers reach this node ([`ServeOpts::node_url`]).
    pub fn sessions(&self, node_url: String) -> SessionsConfig {
        SessionsConfig {
            idle_timeout: Duration::from_millis(self.session_idle_timeout),
            paused_idle_timeout: Duration::from_millis(self.paused_session_idle_timeout),
            retention: Duration::from_secs(self.session_retention_days * 24 * 3600),
            execution_retention: Duration::from_secs(
                self.execution_retention_days.max(1) * 24 * 3600,
            ),
            max_sessions_per_principal: self.max_sessions_per_principal,
            max_get_streams_per_session: self.max_get_streams_per_session,
            busy_ceiling: Duration::from_millis(self.keep_alive_ceiling),
            replay_window: Duration::from_millis(self.replay_window),
            sse_replay: LogBounds {
                max_events: self.sse_replay_events.max(1),
                max_bytes: self.sse_replay_bytes,
            },
            slow_reader_bytes: self.slow_reader_bytes,
            node_url: Some(node_url),
            node_lease: Duration::from_millis(self.node_lease),
            lease_kept: Duration::from_millis(self.session_lease_kept),
            history: HistoryBounds {
                max_bytes: self.max_history_bytes,
                max_org_bytes: self.max_org_history_bytes,
                max_event_log_bytes: self.max_event_log_bytes,
                max_session_event_bytes: self.max_session_event_bytes,
                max_org_event_bytes: self.max_org_event_bytes,
            },
        }
    }

    /// What one API token may ask of the management API.
    pub fn api_rate_limits(&self) -> executor_api::RateLimits {
        executor_api::RateLimits::new(self.api_rate, self.api_burst)
    }

    /// The HTTP edge's checks and bounds, for a server listening on `local`.
    pub fn wire(&self, local: SocketAddr) -> WireConfig {
        WireConfig {
            hosts: self.hosts(local),
            cors_origin: self.cors_origin.clone(),
            max_batch: self.max_batch,
            header_read_timeout: Duration::from_millis(self.header_read_timeout),
            body_read_timeout: Duration::from_millis(self.body_read_timeout),
            max_connections: self.max_connections,
            metrics_token: self.metrics_token.clone().map(MetricsToken::new),
            max_body_bytes: self.max_body_bytes,
            sse_keepalive: Duration::from_millis(self.sse_keepalive),
            get_stream_rotation: Duration::from_millis(self.get_stream_rotation),
            first_event_window: executor_wire::FIRST_EVENT_WINDOW,
            public: self.public_origin(local),
            oauth: self.oauth_on(),
        }
    }

    /// Whether the built-in authorization server runs (`--oauth`).
    pub fn oauth_on(&self) -> bool {
        self.oauth == "on"
    }

    /// The URL that names this server to clients (SPEC §4).
    pub fn public_origin(&self, local: SocketAddr) -> executor_authz::PublicOrigin {
        let default = crate::commands::public_url_of(&self.public, local);
        executor_authz::PublicOrigin::new(self.public.public_url.as_deref(), &default)
    }

    /// The authorization server's settings.
    pub fn authz(&self, local: SocketAddr) -> executor_authz::AuthzConfig {
        executor_authz::AuthzConfig {
            access_token_ttl: Duration::from_secs(self.oauth_access_token_ttl.max(1)),
            refresh_grace: Duration::from_secs(self.oauth_refresh_grace),
            registrations_per_address: self.oauth_registration_rate.max(1),
            registrations_total: self.oauth_registration_rate.max(1).saturating_mul(10),
            metadata_documents: self.oauth_cimd == "on",
            ..executor_authz::AuthzConfig::new(self.public_origin(local))
        }
    }

    /// The Host and Origin checks (SPEC §2): the hosts named, else loopback
    /// names when listening on loopback, else any.
    fn hosts(&self, local: SocketAddr) -> HostPolicy {
        let allowed_origins = self.allowed_origins.clone();
        match (&self.allowed_hosts, local.ip().is_loopback()) {
            (Some(list), _) => HostPolicy {
                allowed_hosts: Some(list.clone()),
                allowed_origins,
            },
            (None, true) => HostPolicy {
                allowed_origins,
                ..HostPolicy::loopback()
            },
            (None, false) => HostPolicy {
                allowed_origins,
                ..HostPolicy::open()
            },
        }
    }

    pub fn drain_deadline(&self) -> Duration {
        Duration::from_millis(self.shutdown_drain_deadline)
    }

    /// Where peers reach this node: `--node-url`, else the address it
    /// listens on. A node listening on every address has no one address to
    /// give, and on a shared store its peers are on other machines: it must
    /// be told.
    pub fn node_url(&self, local: SocketAddr, shared: bool) -> AnyResult<String> {
        if let Some(url) = &self.node_url {
            let url = url.trim_end_matches('/');
            // Nodes talk plain HTTP on the network they share (see forward.rs).
            if !url.starts_with("http://") {
                return Err(format!("--node-url must be an http:// URL, got {url:?}").into());
            }
            return Ok(url.to_string());
        }
        if local.ip().is_unspecified() {
            if shared {
                return Err(format!(
                    "listening on {local} with a shared store: set --node-url (EXECUTOR_NODE_URL) to the address the other nodes reach this one at"
                )
                .into());
            }
            // One machine (nodes sharing a SQLite file): loopback reaches it.
            let loopback = if local.is_ipv4() {
                "127.0.0.1"
            } else {
                "[::1]"
            };
            return Ok(format!("http://{loopback}:{}", local.port()));
        }
        Ok(format!("http://{local}"))
    }
}
