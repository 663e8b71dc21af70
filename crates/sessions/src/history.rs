//! What the store keeps of past work, bounded in bytes (SPEC §12, issue 41
//! §5): execution records (with their tool calls) per org and in all, and
//! the delivered events of the SSE log in all. Retention and the replay
//! window bound them in time; under a sustained load time alone lets a
//! disk fill within minutes, so a periodic job, run by one node of all
//! those sharing the store, deletes the oldest until each is under its
//! bound, says so in the log and counts it on `/metrics`.
//!
//! A paused execution's record and an undelivered event are never trimmed:
//! the first is work a human has yet to decide, the second an answer no
//! client has read. The bounds are checked every [`HISTORY_CHECK_EVERY`],
//! so the store can overshoot one by what that interval writes.

use std::time::Duration;

use executor_store::Trimmed;

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
}

impl Default for HistoryBounds {
    fn default() -> Self {
        HistoryBounds {
            max_bytes: 2 << 30,
            max_org_bytes: 1 << 30,
            max_event_log_bytes: 256 << 20,
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
                        self.trimmed(Kept::Executions, trimmed, Some(org), bounds.max_org_bytes);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not trim an org's execution records")
                    }
                }
            }
        }
        if total > bounds.max_bytes {
            match store.trim_history(None, total - bounds.max_bytes).await {
                Ok(trimmed) => self.trimmed(Kept::Executions, trimmed, None, bounds.max_bytes),
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
                    self.trimmed(Kept::Events, trimmed, None, bounds.max_event_log_bytes)
                }
                Err(e) => tracing::warn!(error = %e, "could not trim the event log"),
            }
        }
    }

    /// Says what a trim deleted: a log line, and the counters.
    fn trimmed(&self, kind: Kept, trimmed: Trimmed, org: Option<&str>, bound: u64) {
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
            org = org.unwrap_or("(all)"),
            deleted = trimmed.rows,
            bytes = trimmed.bytes,
            bound,
            "the store held more {what} than its bound: the oldest were deleted"
        );
    }
}
