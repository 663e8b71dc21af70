//! Changes pushed between nodes: Postgres `LISTEN/NOTIFY` (SPEC §10).
//!
//! Writers notify inside their own statement or transaction, so a notice
//! is delivered when (and only when) the change is committed: an
//! integration write notifies `executor_catalog` with the org id, a posted
//! decision `executor_decisions` with the execution id. Payloads are ids
//! only (NOTIFY carries at most 8000 bytes).
//!
//! Each process listens on one dedicated connection (not a pooled one: a
//! pooled connection is handed to other requests), started on the first
//! [`Store::subscribe`](crate::Store::subscribe) and fanned out to every
//! subscriber through a broadcast channel. Notices can be lost — while the
//! connection is down, or by a subscriber that fell behind — and both say
//! so with [`Notice::Lagged`], after which a reader re-checks what it
//! watches; every reader also keeps a slow poll. A lost notice costs
//! latency, never a change.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::Notice;

pub(super) const CATALOG_CHANNEL: &str = "executor_catalog";
pub(super) const DECISIONS_CHANNEL: &str = "executor_decisions";
/// Per-session notices between nodes: `ev:`, `lc:` or `gone:` and the id.
pub(super) const SESSIONS_CHANNEL: &str = "executor_sessions";
/// A token or a policy changed (a trigger notifies; no payload).
pub(super) const ACCESS_CHANNEL: &str = "executor_access";

/// A local counter of one kind of change, moved by its notifications and
/// by every loss or start of the listening connection; it is only trusted
/// while the connection listens, otherwise readers read through. Two kinds
/// are watched: access (`Store::access_revision`: tokens and policies) and
/// catalog versions (`PgStore::catalog_version`'s cache).
#[derive(Default)]
pub(super) struct Watch {
    listening: AtomicBool,
    revision: AtomicU64,
}

impl Watch {
    pub(super) fn current(&self) -> Option<u64> {
        // The revision first: a loss sets `listening` false before it
        // moves the revision, so a revision read here with `listening`
        // still true was current while notices flowed.
        let revision = self.revision.load(Ordering::SeqCst);
        self.listening.load(Ordering::SeqCst).then_some(revision)
    }

    pub(super) fn changed(&self) {
        self.revision.fetch_add(1, Ordering::SeqCst);
    }

    fn set_listening(&self, listening: bool) {
        if listening {
            self.changed();
            self.listening.store(true, Ordering::SeqCst);
        } else {
            self.listening.store(false, Ordering::SeqCst);
            self.changed();
        }
    }
}

/// The watches one listening connection keeps current.
#[derive(Default)]
pub(super) struct Watches {
    pub(super) access: Watch,
    pub(super) catalog: Watch,
}

impl Watches {
    fn set_listening(&self, listening: bool) {
        self.access.set_listening(listening);
        self.catalog.set_listening(listening);
    }
}

/// Notices a slow subscriber may be behind before it is told it lagged.
const BUFFER: usize = 1024;
/// Waits between reconnects, doubled from the first to the last.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// The listening connection of one store, running while the store lives.
pub(super) struct Listener {
    sender: broadcast::Sender<Notice>,
    watches: Arc<Watches>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Starts listening on the current runtime.
    pub(super) fn start(config: tokio_postgres::Config) -> Listener {
        let (sender, _) = broadcast::channel(BUFFER);
        let watches = Arc::new(Watches::default());
        let task = tokio::spawn(listen(config, sender.clone(), watches.clone()));
        Listener {
            sender,
            watches,
            task,
        }
    }

    pub(super) fn watches(&self) -> &Watches {
        &self.watches
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.sender.subscribe()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects, listens, forwards; on any loss says `Lagged` and starts over.
async fn listen(
    config: tokio_postgres::Config,
    sender: broadcast::Sender<Notice>,
    watches: Arc<Watches>,
) {
    let mut retry = FIRST_RETRY;
    loop {
        let outcome = listen_once(&config, &sender, &watches).await;
        watches.set_listening(false);
        match outcome {
            // The connection was up (and is now gone): retry at once.
            Ok(()) => retry = FIRST_RETRY,
            Err(e) => {
                tracing::warn!(error = %super::describe(&e), "the store's notice connection failed; retrying");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(LAST_RETRY);
            }
        }
        // Whatever was notified meanwhile was missed.
        let _ = sender.send(Notice::Lagged);
    }
}

/// One connection's life: LISTEN, then forward until it closes.
async fn listen_once(
    config: &tokio_postgres::Config,
    sender: &broadcast::Sender<Notice>,
    watches: &Arc<Watches>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    // The connection must be polled for the LISTEN to be sent; this task
    // polls it from here on and forwards what it carries.
    let forward = {
        let sender = sender.clone();
        let watches = watches.clone();
        tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notification(n)) if n.channel() == ACCESS_CHANNEL => {
                        watches.access.changed();
                    }
                    Ok(AsyncMessage::Notification(n)) => {
                        // Before subscribers hear of it: one that re-reads
                        // the catalog version on the notice reads through.
                        if n.channel() == CATALOG_CHANNEL {
                            watches.catalog.changed();
                        }
                        if let Some(notice) = parse(n.channel(), n.payload()) {
                            let _ = sender.send(notice);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %super::describe(&e), "the store's notice connection closed");
                        return;
                    }
                }
            }
        })
    };
    client
        .batch_execute(&format!(
            "LISTEN {CATALOG_CHANNEL}; LISTEN {DECISIONS_CHANNEL}; LISTEN {SESSIONS_CHANNEL}; \
             LISTEN {ACCESS_CHANNEL}"
        ))
        .await?;
    // Listening from here: anything before it may have been missed.
    watches.set_listening(true);
    let _ = sender.send(Notice::Lagged);
    let _ = forward.await;
    drop(client);
    Ok(())
}

fn parse(channel: &str, payload: &str) -> Option<Notice> {
    match channel {
        CATALOG_CHANNEL => Some(Notice::Catalog {
            org_id: payload.to_string(),
        }),
        DECISIONS_CHANNEL => Some(Notice::Decision {
            execution_id: payload.to_string(),
        }),
        SESSIONS_CHANNEL => {
            let (kind, id) = payload.split_once(':')?;
            let session_id = id.to_string();
            match kind {
                "ev" => Some(Notice::Events { session_id }),
                "lc" => Some(Notice::ListChanged { session_id }),
                "gone" => Some(Notice::SessionGone { session_id }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The channel and payload that carry `notice`; None for one that is never
/// sent (catalog and decision notices go out with their writes).
pub(super) fn payload(notice: &Notice) -> Option<(&'static str, String)> {
    match notice {
        Notice::Events { session_id } => Some((SESSIONS_CHANNEL, format!("ev:{session_id}"))),
        Notice::ListChanged { session_id } => Some((SESSIONS_CHANNEL, format!("lc:{session_id}"))),
        Notice::SessionGone { session_id } => {
            Some((SESSIONS_CHANNEL, format!("gone:{session_id}")))
        }
        Notice::Catalog { org_id } => Some((CATALOG_CHANNEL, org_id.clone())),
        Notice::Decision { execution_id } => Some((DECISIONS_CHANNEL, execution_id.clone())),
        Notice::Lagged => None,
    }
}
