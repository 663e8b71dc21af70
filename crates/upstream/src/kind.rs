//! Upstream MCP servers as a kind of integration the server serves: stored
//! records loaded into tools that call through the process's pools.

use std::sync::Arc;

use executor_catalog::{IntegrationLoader, LoadedIntegration, Unavailable};

use crate::env::open_env;
use crate::invoker::{CONNECTION_MISSING, UpstreamInvoker};
use crate::pool::Upstreams;
use crate::stored::{Endpoint, State, load};

/// Loads stored upstream MCP records; their tools call through `upstreams`.
pub struct UpstreamKind {
    upstreams: Arc<Upstreams>,
}

impl UpstreamKind {
    pub fn new(upstreams: Arc<Upstreams>) -> Self {
        UpstreamKind { upstreams }
    }
}

impl IntegrationLoader for UpstreamKind {
    fn load(
        &self,
        org_id: &str,
        namespace: &str,
        document: &str,
    ) -> Result<LoadedIntegration, Unavailable> {
        let stored = load(document)?;
        Unavailable::unless_same_namespace(&stored.namespace, namespace)?;
        if stored.state == State::NeedsLogin {
            return Err(Unavailable::new(
                CONNECTION_MISSING,
                format!("it needs a login: run `executor connections login {namespace}`"),
            ));
        }
        // Opened here, once, for scrubbing; a value that does not open
        // fails the command's start with the reason, at its first call.
        let env_secrets = match &stored.endpoint {
            Endpoint::Stdio { env, .. } if !env.is_empty() => {
                open_env(self.upstreams.env_secrets(org_id), namespace, env).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let invoker = Arc::new(UpstreamInvoker {
            env_secrets: env_secrets.into(),
            org_id: org_id.to_string(),
            namespace: namespace.to_string(),
            endpoint: stored.endpoint.clone(),
            upstream_names: stored
                .tools
                .iter()
                .map(|t| t.upstream_name.clone())
                .collect(),
            upstreams: self.upstreams.clone(),
        });
        Ok(LoadedIntegration {
            tools: stored.into_entries(invoker),
            upgraded: None,
        })
    }

    fn status(&self, document: &str) -> String {
        match load(document) {
            Ok(stored) if stored.state == State::NeedsLogin => "needs login".into(),
            Ok(_) => "ok".into(),
            Err(why) => format!("unavailable: {why}"),
        }
    }

    /// A server that answered with an OAuth challenge asks for a login;
    /// what else it takes (a header) is not declared anywhere.
    fn auth(&self, document: &str) -> Vec<String> {
        match load(document) {
            Ok(stored) if stored.state == State::NeedsLogin || stored.challenge.is_some() => {
                vec!["OAuth 2.0 (a login)".to_string()]
            }
            _ => Vec::new(),
        }
    }

    fn transport(&self, document: &str) -> Option<String> {
        load(document)
            .ok()
            .map(|stored| stored.endpoint.transport_name())
    }
}
