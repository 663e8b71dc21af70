//! Requests in flight, counted so that shutdown can wait for them (SPEC
//! §11): a request holds an [`InFlightGuard`] from its arrival until its
//! answer is handed to the connection — for an SSE answer, until its stream
//! ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The count of `/mcp` requests in flight. Cheap to clone.
///
/// An atomic count and a [`Notify`] rather than a watch channel: entering
/// and leaving are on every request, and a watch channel takes a lock and
/// wakes its waiters on each of them.
#[derive(Clone, Default)]
pub struct InFlight {
    inner: Arc<Counter>,
}

#[derive(Default)]
struct Counter {
    /// The count; shutdown waits for it to reach zero.
    count: AtomicUsize,
    /// Woken when the count reaches zero.
    zero: Notify,
}

impl InFlight {
    pub(crate) fn enter(&self) -> InFlightGuard {
        self.inner.count.fetch_add(1, Ordering::AcqRel);
        InFlightGuard {
            inner: self.inner.clone(),
        }
    }

    pub fn current(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    /// Resolves when no request is in flight.
    pub async fn idle(&self) {
        loop {
            // Registered before the check, so a drop to zero between the
            // check and the wait still wakes this waiter.
            let zero = self.inner.zero.notified();
            tokio::pin!(zero);
            zero.as_mut().enable();
            if self.current() == 0 {
                return;
            }
            zero.await;
        }
    }
}

/// One request in flight; dropping it ends the request's count.
pub(crate) struct InFlightGuard {
    inner: Arc<Counter>,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.inner.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.inner.zero.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn idle_waits_for_the_last_request_only() {
        let in_flight = InFlight::default();
        in_flight.idle().await;
        let (first, second) = (in_flight.enter(), in_flight.enter());
        assert_eq!(in_flight.current(), 2);
        let waiter = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.idle().await }
        });
        drop(first);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one request is still in flight");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("idle once the last request ends")
            .expect("waiter");
        assert_eq!(in_flight.current(), 0);
    }
}
