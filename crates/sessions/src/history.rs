//! What the store keeps of past work, bounded in bytes (SPEC §12, issue 41
//! §5): execution records (with their tool calls) per org and in all, and
//! the delivered events of the SSE log in all. Retention and the replay
//! window bound them in time; under a sustained load time alone lets a
//! disk fill within minutes, so a periodic job, run by one node of all
//! those sharing the store, deletes the oldest until each is under its
//! bound, says so in the log and counts it on `/metrics`.
//!
//! A paused execution's record is never trimmed: it is work a human has yet
//! to decide. The log in all keeps every undelivered event; one session's
//! log, and one org's, are bounded in all they hold: past the bound their
//! oldest delivered events go first, then their oldest undelivered ones,
//! an answer replaced by an error answer to its request, so that a client
//! waiting for it is told rather than left waiting. The bounds are checked
//! every [`HISTORY_CHECK_EVERY`], so the store can overshoot one by what
//! that interval writes.

use std::time::Duration;

use std::collections::HashMap;

use executor_store::{DroppedAnswer, EventScope, Trimmed, TrimmedEvents};

use crate::Sessions;

/// How often the sizes are looked at.
pub const HISTORY_CHECK_EVERY: Duration = Duration::from_secs(10);

/// The byte bounds, from `--max-history-bytes`, `--max-org-history-bytes`
/// and `--max-event-log-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBounds {
    /// Execution records in all.
    pub max_bytes: u64,
    /// Execution records of one org.
    pub max_org_bytes: u64,
    /// Delivered events of the SSE log in all.
    pub max_event_log_bytes: u64,
    /// The SSE log of one session.
    pub max_session_event_bytes: u64,
    /// The SSE logs of one org's sessions.
    pub max_org_event_bytes: u64,
}

impl Default for HistoryBounds {
    fn default() -> Self {
        HistoryBounds {
            max_bytes: 2 << 30,
            max_org_bytes: 1 << 30,
            max_event_log_bytes: 256 << 20,
            max_session_event_bytes: 16 << 20,
            max_org_event_bytes: 64 << 20,
        }
    }
}

/// Which kind of history a trim was of, for the log and `/metrics`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kept {
    Executions,
    Events,
}

impl Sessions {
    /// Trims every kind of history that is over its bound.
    pub(crate) async fn bound_history(&self) {
        let bounds = self.inner.config.history;
        self.bound_executions(bounds).await;
        self.bound_events(bounds).await;
        self.bound_session_events(bounds).await;
    }

    async fn bound_executions(&self, bounds: HistoryBounds) {
        let store = &self.inner.store;
        let by_org = match store.history_bytes_by_org().await {
            Ok(by_org) => by_org,
            Err(e) => return tracing::warn!(error = %e, "could not size the execution records"),
        };
        let mut total: u64 = by_org.iter().map(|(_, bytes)| bytes).sum();
        for (org, bytes) in &by_org {
            if *bytes > bounds.max_org_bytes {
                let over = bytes - bounds.max_org_bytes;
                match store.trim_history(Some(org), over).await {
                    Ok(trimmed) => {
                        total = total.saturating_sub(trimmed.bytes);
                        self.trimmed(
                            Kept::Executions,
                            trimmed,
                            &format!("org {org}"),
                            bounds.max_org_bytes,
                        );
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not trim an org's execution records")
                    }
                }
            }
        }
        if total > bounds.max_bytes {
            match store.trim_history(None, total - bounds.max_bytes).await {
                Ok(trimmed) => self.trimmed(Kept::Executions, trimmed, "all", bounds.max_bytes),
                Err(e) => tracing::warn!(error = %e, "could not trim the execution records"),
            }
        }
    }

    async fn bound_events(&self, bounds: HistoryBounds) {
        let store = &self.inner.store;
        let bytes = match store.delivered_event_bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return tracing::warn!(error = %e, "could not size the event log"),
        };
        if bytes > bounds.max_event_log_bytes {
            match store
                .trim_delivered_events(bytes - bounds.max_event_log_bytes)
                .await
            {
                Ok(trimmed) => {
                    self.trimmed(Kept::Events, trimmed, "all", bounds.max_event_log_bytes)
                }
                Err(e) => tracing::warn!(error = %e, "could not trim the event log"),
            }
        }
    }

    /// Each session's log, then each org's, within its bound.
    async fn bound_session_events(&self, bounds: HistoryBounds) {
        let store = &self.inner.store;
        let sessions = match store.event_bytes_by_session().await {
            Ok(sessions) => sessions,
            Err(e) => return tracing::warn!(error = %e, "could not size the sessions' event logs"),
        };
        let mut by_org: HashMap<&str, u64> = HashMap::new();
        for s in &sessions {
            let mut bytes = s.bytes;
            if bytes > bounds.max_session_event_bytes {
                let scope = EventScope::Session(&s.session_id);
                let freed = self
                    .trim_events(
                        scope,
                        bytes - bounds.max_session_event_bytes,
                        bounds.max_session_event_bytes,
                    )
                    .await;
                bytes = bytes.saturating_sub(freed);
            }
            *by_org.entry(&s.org_id).or_default() += bytes;
        }
        for (org, bytes) in by_org {
            if bytes > bounds.max_org_event_bytes {
                self.trim_events(
                    EventScope::Org(org),
                    bytes - bounds.max_org_event_bytes,
                    bounds.max_org_event_bytes,
                )
                .await;
            }
        }
    }

    /// Trims `scope`'s log by `over` bytes and says so; returns the bytes
    /// freed.
    async fn trim_events(&self, scope: EventScope<'_>, over: u64, bound: u64) -> u64 {
        let (what, id) = match scope {
            EventScope::Session(id) => ("session", id),
            EventScope::Org(id) => ("organisation", id),
        };
        let why = format!(
            "the answer to this request was dropped before it was delivered: this {what}'s \
             event log was over its bound of {bound} bytes; run the request again"
        );
        let dropped: DroppedAnswer =
            std::sync::Arc::new(move |data: &str| executor_mcp::dropped_answer(data, &why));
        let trimmed: TrimmedEvents = match self.inner.store.trim_events(scope, over, dropped).await
        {
            Ok(trimmed) => trimmed,
            Err(e) => {
                tracing::warn!(error = %e, scope = what, "could not trim an event log");
                return 0;
            }
        };
        self.trimmed(
            Kept::Events,
            trimmed.deleted,
            &format!("{what} {id}"),
            bound,
        );
        if trimmed.dropped.rows > 0 {
            let metrics = &self.inner.metrics;
            metrics.dropped_events.inc_by(trimmed.dropped.rows);
            metrics.dropped_answers.inc_by(trimmed.answers);
            tracing::warn!(
                scope = what,
                id,
                dropped = trimmed.dropped.rows,
                answers = trimmed.answers,
                bytes = trimmed.dropped.bytes,
                bound,
                "an event log held more than its bound after its delivered events went: \
                 its oldest undelivered answers were replaced by error answers to their requests"
            );
        }
        trimmed.deleted.bytes + trimmed.dropped.bytes
    }

    /// Says what a trim deleted: a log line, and the counters.
    fn trimmed(&self, kind: Kept, trimmed: Trimmed, scope: &str, bound: u64) {
        if trimmed.rows == 0 {
            return;
        }
        let metrics = &self.inner.metrics;
        let (rows, bytes, what) = match kind {
            Kept::Executions => (
                &metrics.trimmed_records,
                &metrics.trimmed_record_bytes,
                "execution records",
            ),
            Kept::Events => (
                &metrics.trimmed_events,
                &metrics.trimmed_event_bytes,
                "delivered SSE events",
            ),
        };
        rows.inc_by(trimmed.rows);
        bytes.inc_by(trimmed.bytes);
        tracing::warn!(
            scope,
            deleted = trimmed.rows,
            bytes = trimmed.bytes,
            bound,
            "the store held more {what} than its bound: the oldest were deleted"
        );
    }
}
