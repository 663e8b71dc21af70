//! The listen streams of the sessionless revision (`subscriptions/listen`,
//! 2026-07-28, SPEC §2). They belong to no session, so they are kept here
//! by org: the catalog check that refreshes the sessions' tool lists (on a
//! change notice from any node, or its periodic round) rebuilds each
//! watched org's list too, and tells that org's streams when it differs.
//! A stream is counted against its (account, org) while it is open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_mcp::ToolList;
use executor_store::{ElicitationMode, Principal};
use tokio::sync::broadcast;

use crate::lifecycle::Sessions;
use crate::streams::StreamLimit;

/// One org's open listen streams and the tool list they last saw.
struct Watched {
    streams: usize,
    /// The catalog version `tools` was built at.
    version: i64,
    tools: Arc<ToolList>,
    changed: broadcast::Sender<()>,
}

#[derive(Default)]
pub(crate) struct Subscriptions {
    /// A std lock: held for one map update, never across an await.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    orgs: HashMap<String, Watched>,
    per_principal: HashMap<Principal, usize>,
}

/// An open listen stream: `changed` fires when its org's tool list
/// changes. Dropping it closes the count it holds.
pub struct Subscription {
    pub changed: broadcast::Receiver<()>,
    _open: Open,
}

/// Gives back a stream's place in the counts when it ends.
struct Open {
    subscriptions: Arc<Subscriptions>,
    principal: Principal,
    /// Whether it is counted among its org's streams yet.
    in_org: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut state = self.subscriptions.lock();
        if let Some(n) = state.per_principal.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                state.per_principal.remove(&self.principal);
            }
        }
        let org = &self.principal.org_id;
        if !self.in_org {
            return;
        }
        if let Some(w) = state.orgs.get_mut(org) {
            w.streams -= 1;
            if w.streams == 0 {
                state.orgs.remove(org);
            }
        }
    }
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The orgs watched now, with the catalog version each last saw.
    pub(crate) fn watched(&self) -> Vec<(String, i64)> {
        self.lock()
            .orgs
            .iter()
            .map(|(org, w)| (org.clone(), w.version))
            .collect()
    }

    /// Records `org`'s list at `version`; its streams are told when it
    /// differs from the one they saw.
    pub(crate) fn update(&self, org: &str, version: i64, tools: Arc<ToolList>) {
        let mut state = self.lock();
        if let Some(w) = state.orgs.get_mut(org) {
            w.version = version;
            if w.tools != tools {
                w.tools = tools;
                let _ = w.changed.send(());
            }
        }
    }
}

impl Sessions {
    /// Opens a listen stream for `principal`, at most
    /// `max_get_streams_per_session` per (account, org) at once (the GET
    /// stream's bound: this stream replaces it at 2026-07-28).
    pub async fn subscribe(&self, principal: &Principal) -> Result<Subscription, StreamLimit> {
        let limit = self.inner.config.max_get_streams_per_session;
        let subscriptions = self.inner.subscriptions.clone();
        {
            let mut state = subscriptions.lock();
            let open = state.per_principal.entry(principal.clone()).or_insert(0);
            if *open >= limit {
                return Err(StreamLimit(limit));
            }
            *open += 1;
        }
        // From here the count is held; `_open` gives it back on any exit.
        let mut open = Open {
            subscriptions: subscriptions.clone(),
            principal: principal.clone(),
            in_org: false,
        };
        let org = &principal.org_id;
        let watched = subscriptions.lock().orgs.get_mut(org).map(|w| {
            w.streams += 1;
            w.changed.subscribe()
        });
        open.in_org = watched.is_some();
        let changed = match watched {
            Some(receiver) => receiver,
            None => {
                // The list the stream starts from, read before it is
                // registered so that a change after this is not missed.
                let version = self.inner.store.catalog_version(org).await.unwrap_or(-1);
                let tools = self
                    .inner
                    .server
                    .build_tool_list(org, ElicitationMode::Model)
                    .await;
                let mut state = subscriptions.lock();
                let w = state.orgs.entry(org.clone()).or_insert_with(|| Watched {
                    streams: 0,
                    version,
                    tools,
                    changed: broadcast::channel(4).0,
                });
                w.streams += 1;
                open.in_org = true;
                w.changed.subscribe()
            }
        };
        Ok(Subscription {
            changed,
            _open: open,
        })
    }
}
