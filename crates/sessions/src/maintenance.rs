//! A node's maintenance, run in the background until shutdown: the
//! reaper's tick, this node's lease renewal, the store's notices (catalog
//! changes; the events and tool-list changes of sessions held elsewhere
//! with a GET stream here; sessions terminated elsewhere, whose runtimes
//! and streams here go), activity flushes, and the store-wide
//! sweeps (events past their replay window, retention GC). The transitions
//! they trigger (disposal, a lapse) are `lifecycle.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use executor_store::{
    ElicitationMode, Notice, Renewal, SHARE_LINGER, SessionTouch, next_notice, now_ms,
};

use crate::history::HISTORY_CHECK_EVERY;
use crate::lifecycle::{Sessions, Slot};
use crate::runtime::Runtime;

/// How often catalog versions are compared for `tools/list_changed`.
const CATALOG_CHECK_EVERY: Duration = Duration::from_secs(1);
/// The same check behind a store's catalog notices, for a lost one.
const CATALOG_CHECK_FALLBACK: Duration = Duration::from_secs(10);
/// How often delivered events past their replay window are deleted: often
/// enough that the log holds minutes of events, not days.
const EVENT_SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How far back a look for sessions terminated elsewhere reaches past the
/// previous look.
const TERMINATION_SLACK_MS: i64 = 5_000;

/// How often sessions and execution records past their retention are
/// deleted, store-wide.
const RETENTION_GC_EVERY: Duration = Duration::from_secs(3600);

impl Sessions {
    /// Runs the reaper, activity flushes, event-log sweeps and retention GC
    /// until `stop` turns true (`serve` flips it after the drain and awaits
    /// this task). Spawn once per server.
    pub async fn run_maintenance(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let tick = (self.inner.config.idle_timeout / 5)
            .clamp(Duration::from_millis(50), Duration::from_secs(5));
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_flush = Instant::now();
        let mut last_gc: Option<Instant> = None;
        let mut last_event_sweep: Option<Instant> = None;
        let mut last_history_check: Option<Instant> = None;
        let mut last_catalog_check = Instant::now();
        let mut terminations_seen_to = now_ms();
        let mut renewal = tokio::time::interval(self.inner.node.renew_every());
        renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut give_back = tokio::time::interval(SHARE_LINGER);
        give_back.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A store that pushes catalog changes (Postgres) is polled only as a
        // fallback for a lost notice; one that cannot is polled each second.
        let mut notices = self.inner.store.subscribe();
        let catalog_check_every = if notices.is_some() {
            CATALOG_CHECK_FALLBACK
        } else {
            CATALOG_CHECK_EVERY
        };
        loop {
            // Awaited after the select: none of its branches' outputs (the
            // stop flag's read guard) may live across an await.
            let (notice, renew, shares) = tokio::select! {
                _ = interval.tick() => (None, false, false),
                notice = next_notice(&mut notices) => (Some(notice), false, false),
                _ = renewal.tick() => (None, true, false),
                _ = give_back.tick() => (None, false, true),
                _ = stop.wait_for(|s| *s) => return,
            };
            if shares {
                self.give_back_shares().await;
                continue;
            }
            if renew {
                self.renew_node().await;
                continue;
            }
            if let Some(notice) = notice {
                if matches!(
                    notice,
                    Notice::Events { .. } | Notice::ListChanged { .. } | Notice::SessionGone { .. }
                ) {
                    self.on_session_notice(notice).await;
                    continue;
                }
                if notice == Notice::Lagged {
                    self.feed_all_remote().await;
                }
                if matches!(notice, Notice::Catalog { .. } | Notice::Lagged) {
                    // One check answers a burst of notices.
                    if let Some(pending) = notices.as_mut() {
                        while pending.try_recv().is_ok() {}
                    }
                    last_catalog_check = Instant::now();
                    self.refresh_tool_lists().await;
                }
                continue;
            }
            self.dispose_idle();
            if last_catalog_check.elapsed() >= catalog_check_every {
                last_catalog_check = Instant::now();
                self.refresh_tool_lists().await;
                self.feed_all_remote().await;
                self.forget_terminated_elsewhere(&mut terminations_seen_to)
                    .await;
            }
            // The store-wide sweeps: every server asks each minute, one of
            // all the servers on the store runs each per interval.
            if last_event_sweep.is_none_or(|t| t.elapsed() >= EVENT_SWEEP_EVERY) {
                last_event_sweep = Some(Instant::now());
                if self
                    .claim_job("delete_lapsed_events", EVENT_SWEEP_EVERY)
                    .await
                {
                    self.delete_lapsed_events().await;
                }
            }
            if last_history_check.is_none_or(|t| t.elapsed() >= HISTORY_CHECK_EVERY) {
                last_history_check = Some(Instant::now());
                if self.claim_job("bound_history", HISTORY_CHECK_EVERY).await {
                    self.bound_history().await;
                }
            }
            if last_flush.elapsed() >= Duration::from_secs(30) {
                last_flush = Instant::now();
                self.flush_activity().await;
            }
            if last_gc.is_none_or(|t| t.elapsed() >= EVENT_SWEEP_EVERY) {
                last_gc = Some(Instant::now());
                if self.claim_job("gc_sessions", RETENTION_GC_EVERY).await {
                    self.gc_sessions().await;
                }
                if self.claim_job("gc_executions", RETENTION_GC_EVERY).await {
                    self.gc_executions().await;
                }
            }
        }
    }

    /// Sessions another process terminated since the last look leave this
    /// node: the CLI on SQLite cannot notify a server, and a notice can be
    /// lost. `seen_to` is where the last look ended; the slack covers a
    /// terminating process's clock and commit running behind ours.
    async fn forget_terminated_elsewhere(&self, seen_to: &mut i64) {
        let now = now_ms();
        let since = seen_to.saturating_sub(TERMINATION_SLACK_MS);
        match self.inner.store.sessions_terminated_since(since).await {
            Ok(ids) => {
                for id in ids {
                    self.forget_terminated(&id);
                }
                *seen_to = now;
            }
            Err(e) => tracing::warn!(error = %e, "could not look for terminated sessions"),
        }
    }

    /// Deletes the session records (and events) past their retention.
    async fn gc_sessions(&self) {
        let before = now_ms().saturating_sub(millis(self.inner.config.retention));
        match self.inner.store.gc_sessions(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, "garbage-collected old sessions"),
            Err(e) => tracing::warn!(error = %e, "session retention GC failed"),
        }
    }

    /// Deletes the finished execution records (and their tool calls) past
    /// their retention; a paused one stays.
    async fn gc_executions(&self) {
        let before = now_ms().saturating_sub(millis(self.inner.config.execution_retention));
        match self.inner.store.gc_executions(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, "garbage-collected old execution records"),
            Err(e) => tracing::warn!(error = %e, "execution retention GC failed"),
        }
    }

    /// Writes the activity of live runtimes to their records (so retention
    /// sees them) without touching the store on every request.
    pub async fn flush_activity(&self) {
        let touches: Vec<SessionTouch> = self
            .slots()
            .values()
            .filter_map(|s| match s {
                Slot::Live(rt) => Some(rt.activity()),
                Slot::Building(..) => None,
            })
            .collect();
        if let Err(e) = self.inner.store.touch_sessions(touches).await {
            tracing::warn!(error = %e, "could not record session activity");
        }
    }

    /// Picks up catalog changes made by other processes (the CLI): a live
    /// runtime built against an older catalog version gets a rebuilt tool
    /// list and, when it differs, `notifications/tools/list_changed` on its
    /// GET streams (SPEC §2).
    pub async fn refresh_tool_lists(&self) {
        let live: Vec<Arc<Runtime>> = self
            .slots()
            .values()
            .filter_map(|s| match s {
                Slot::Live(rt) => Some(rt.clone()),
                Slot::Building(..) => None,
            })
            .collect();
        let mut versions: HashMap<String, i64> = HashMap::new();
        let notification = executor_mcp::tools_list_changed();
        for rt in live {
            let org = rt.record.owner.org_id.clone();
            let current = match versions.get(&org) {
                Some(v) => *v,
                None => match self.inner.store.catalog_version(&org).await {
                    Ok(v) => *versions.entry(org.clone()).or_insert(v),
                    Err(_) => continue,
                },
            };
            if rt.catalog_version() == current {
                continue;
            }
            rt.set_catalog_version(current);
            let tools = self
                .inner
                .server
                .build_tool_list(&org, rt.elicitation_mode())
                .await;
            if rt.replace_tools(tools) {
                rt.notify_listeners(&notification);
                // GET streams of the session on other nodes.
                let changed = Notice::ListChanged {
                    session_id: rt.id().to_string(),
                };
                if let Err(e) = self.inner.store.publish(changed).await {
                    tracing::warn!(error = %e, "could not announce a changed tool list");
                }
            }
        }
        // The sessionless listen streams, by org.
        for (org, seen) in self.inner.subscriptions.watched() {
            let current = match versions.get(&org) {
                Some(v) => *v,
                None => match self.inner.store.catalog_version(&org).await {
                    Ok(v) => *versions.entry(org.clone()).or_insert(v),
                    Err(_) => continue,
                },
            };
            if current == seen {
                continue;
            }
            let tools = self
                .inner
                .server
                .build_tool_list(&org, ElicitationMode::Model)
                .await;
            self.inner.subscriptions.update(&org, current, tools);
        }
    }

    /// Deletes the delivered events of POST streams whose last event is
    /// older than the replay window (SPEC §12): a `Last-Event-ID` replay
    /// cannot need them any more. Undelivered events stay until the
    /// session's next GET takes them. Returns how many were deleted.
    pub async fn delete_lapsed_events(&self) -> u64 {
        let before = now_ms() - self.inner.config.replay_window.as_millis() as i64;
        match self.inner.store.delete_replayed_events(before).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "could not delete lapsed events");
                0
            }
        }
    }

    /// Whether this server runs the store-wide job `name` now (see
    /// `Store::claim_job`). A store error skips this round: the job is
    /// asked for again at the next.
    async fn claim_job(&self, name: &str, every: Duration) -> bool {
        let every_ms = i64::try_from(every.as_millis()).unwrap_or(i64::MAX);
        match self
            .inner
            .store
            .claim_job(name, self.inner.node.id(), every_ms, now_ms())
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, job = name, "could not claim a periodic job");
                false
            }
        }
    }

    /// Renews this node's lease; a lapse disposes every runtime it held.
    async fn renew_node(&self) {
        let node = &self.inner.node;
        if !node.is_registered() {
            return;
        }
        match node.renew(self.inner.store.as_ref()).await {
            Renewal::Alive => {}
            Renewal::Lapsed => {
                self.lapse_locally();
                if let Err(e) = node.register(self.inner.store.as_ref()).await {
                    tracing::warn!(error = %e, "could not register this node again");
                }
            }
            Renewal::Failed if !node.valid() => self.lapse_locally(),
            Renewal::Failed => {}
        }
    }

    /// Acts on a notice about one session's streams.
    async fn on_session_notice(&self, notice: Notice) {
        match notice {
            Notice::Events { session_id } => self.feed_remote(&session_id).await,
            Notice::ListChanged { session_id } => {
                let changed = executor_mcp::tools_list_changed().to_string();
                self.inner.remote.broadcast(&session_id, &changed);
            }
            // Terminated elsewhere (an operator, or a DELETE handed to
            // another node): gone from this node too, runtime and all.
            Notice::SessionGone { session_id } => self.forget_terminated(&session_id),
            _ => {}
        }
    }

    /// The fallback for lost notices: every session with a GET stream here
    /// that another node holds is fed from the log.
    /// A session terminated meanwhile ends its streams here: its notice is
    /// lost, or the store cannot push one (SQLite).
    async fn feed_all_remote(&self) {
        for session_id in self.inner.remote.open_sessions() {
            match self.inner.store.get_session(&session_id).await {
                Ok(Some(record)) if record.terminated_at_ms.is_none() => {
                    self.feed_remote(&session_id).await;
                }
                Ok(_) => self.inner.remote.end(&session_id),
                Err(e) => {
                    tracing::warn!(error = %e, "could not check a session with a stream here")
                }
            }
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
