//! Requests in flight, counted so that shutdown can wait for them (SPEC
//! §11): a request holds an [`InFlightGuard`] from its arrival until its
//! answer is handed to the connection — for an SSE answer, until its stream
//! ends.

use std::sync::Arc;

use tokio::sync::watch;

/// The count of `/mcp` requests in flight. Cheap to clone.
#[derive(Clone)]
pub struct InFlight {
    /// The count; shutdown waits for it to reach zero.
    count: Arc<watch::Sender<usize>>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            count: Arc::new(watch::channel(0).0),
        }
    }
}

impl InFlight {
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.count.send_modify(|n| *n += 1);
        InFlightGuard {
            count: self.count.clone(),
        }
    }

    pub fn current(&self) -> usize {
        *self.count.borrow()
    }

    /// Resolves when no request is in flight.
    pub async fn idle(&self) {
        let mut rx = self.count.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

/// One request in flight; dropping it ends the request's count.
pub(crate) struct InFlightGuard {
    count: Arc<watch::Sender<usize>>,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.count.send_modify(|n| *n = n.saturating_sub(1));
    }
}
