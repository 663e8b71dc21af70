//! The host memory one execution's tool answers may hold (SPEC §12: an
//! upstream answer's parsed size is counted against the execution's
//! sandbox memory).
//!
//! A JSON value parsed on the host costs many times its text (a small
//! number is a 32-byte enum in a growing array), so an 8 MiB answer under
//! the response cap can take hundreds of MiB. Integrations estimate the
//! parsed size before parsing and [`HostBudget::hold`] it; the hold lasts
//! until the answer has been handed to the sandbox, where the sandbox's own
//! memory cap takes over. Concurrent calls of one execution share the
//! budget (a call waits for room), and one answer larger than the whole
//! budget is refused with a message that says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Budget units: the semaphore counts KiB, so large budgets fit its range.
const UNIT: usize = 1024;

/// One execution's budget; cheap to clone.
#[derive(Clone, Debug)]
pub struct HostBudget {
    /// Free room, in KiB; holds take from it and give back on drop.
    room: Arc<Semaphore>,
    bytes: usize,
    /// The largest single hold, to decide whether to give memory back to
    /// the system after the run.
    largest: Arc<AtomicUsize>,
}

/// Holds above this make the run give freed memory back to the system.
const LARGE_HOLD: usize = 8 << 20;

/// Room taken for one answer; given back when dropped.
#[derive(Debug)]
pub struct HostHold {
    _permit: OwnedSemaphorePermit,
}

impl HostBudget {
    pub fn new(bytes: usize) -> Self {
        let units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        HostBudget {
            room: Arc::new(Semaphore::new(units)),
            bytes: units * UNIT,
            largest: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Takes room for `bytes`, waiting while other answers of the execution
    /// hold it. Fails at once when `bytes` exceeds the whole budget.
    pub async fn hold(&self, bytes: usize) -> Result<HostHold, BudgetError> {
        if bytes > self.bytes {
            return Err(BudgetError::TooLarge {
                mib: bytes.div_ceil(1 << 20),
                budget_mib: self.bytes >> 20,
            });
        }
        self.largest.fetch_max(bytes, Ordering::Relaxed);
        let units = bytes.div_ceil(UNIT).max(1) as u32;
        let permit = self
            .room
            .clone()
            .acquire_many_owned(units)
            .await
            .map_err(|_| BudgetError::Ended)?;
        Ok(HostHold { _permit: permit })
    }
}

/// Why an answer gets no room; the message is for the agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "the answer would take about {mib} MiB of memory once parsed, more than the \
         {budget_mib} MiB an execution may hold; ask for less (a smaller page, fewer fields)"
    )]
    TooLarge { mib: usize, budget_mib: usize },
    #[error("the execution has ended")]
    Ended,
}

impl HostBudget {
    /// After the run: when it held a large answer, asks the allocator to
    /// return freed pages to the system (glibc keeps them otherwise), on a
    /// blocking thread.
    pub fn give_back_memory(&self) {
        if self.largest.load(Ordering::Relaxed) < LARGE_HOLD {
            return;
        }
        tokio::task::spawn_blocking(executor_call::release_freed_memory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn holds_share_the_budget_and_give_it_back() {
        let budget = HostBudget::new(10 * UNIT);
        let first = budget.hold(6 * UNIT).await.unwrap();
        // No room for a second 6 KiB until the first is given back.
        let second =
            tokio::time::timeout(std::time::Duration::from_millis(50), budget.hold(6 * UNIT)).await;
        assert!(second.is_err());
        drop(first);
        let _second = budget.hold(6 * UNIT).await.unwrap();
        let too_big = budget.hold(11 * UNIT).await.unwrap_err();
        assert_eq!(
            too_big,
            BudgetError::TooLarge {
                mib: 1,
                budget_mib: 0
            }
        );
        assert!(
            too_big.to_string().contains("more than the 0 MiB"),
            "{too_big}"
        );
    }
}
