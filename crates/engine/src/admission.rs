//! Fair share of the sandbox between orgs (SPEC §4, §12).
//!
//! Every execution holds a [`Slot`] from admission to its end. A running
//! slot counts against its org's share and the global limit; a paused one
//! (waiting for a human) counts only against the paused bounds, so an org
//! whose programs wait for approval never holds another org's work. An
//! execution over its org's share is refused at once with a message that
//! says so; over the global limit, with a "busy, retry" answer (a 503
//! `Retry-After` where the transport can still give one). Nothing queues.
//!
//! A resumed execution takes its running slot back even when its org is at
//! its share: it was admitted once, and refusing a human's approval would
//! lose work. The running count can so exceed a share by at most the
//! paused bound, which is what keeps this finite.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The bounds, from `--max-concurrent-executions` and `--max-org-executions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// Running executions in all.
    pub running: usize,
    /// Running executions of one org.
    pub running_per_org: usize,
    /// Paused executions in all (each keeps a sandbox thread parked).
    pub paused: usize,
    /// Paused executions of one org.
    pub paused_per_org: usize,
}

impl ShareLimits {
    /// SPEC §12's defaults; paused executions are bounded like running ones.
    pub fn new(running: usize, running_per_org: usize) -> Self {
        let running = running.max(1);
        let running_per_org = running_per_org.clamp(1, running);
        ShareLimits {
            running,
            running_per_org,
            paused: running,
            paused_per_org: running_per_org,
        }
    }

    /// Sandbox threads the bounds can keep busy at once.
    pub fn threads(&self) -> usize {
        self.running + self.paused
    }
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits::new(64, 16)
    }
}

/// Why an execution was not admitted, or could not pause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "this organisation already has {0} executions running, its share of this server; \
         wait for one to finish, then run execute again"
    )]
    OrgShare(usize),
    #[error("the server is running {0} executions, its limit; retry in a moment")]
    ServerFull(usize),
    #[error(
        "this organisation already has {0} executions waiting for approval; \
         settle one of them (resume) before starting more that need approval"
    )]
    OrgPaused(usize),
    #[error("the server holds {0} executions waiting for approval, its limit; retry later")]
    ServerPaused(usize),
}

#[derive(Default)]
struct Counts {
    running: usize,
    paused: usize,
    by_org: HashMap<String, OrgCounts>,
}

#[derive(Default, Clone, Copy)]
struct OrgCounts {
    running: usize,
    paused: usize,
}

/// The counts, shared by every slot.
pub(crate) struct Admission {
    limits: ShareLimits,
    /// Held only to read or change counts, never across an await.
    counts: Mutex<Counts>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Running,
    Paused,
}

/// One execution's place in the counts; released when dropped.
pub(crate) struct Slot {
    admission: Arc<Admission>,
    org: String,
    state: Mutex<SlotState>,
}

impl Admission {
    pub(crate) fn new(limits: ShareLimits) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a new execution of `org` would be refused, without taking a
    /// slot: for transports that must choose a status before running.
    pub(crate) fn would_refuse(&self, org: &str) -> Option<Refused> {
        let counts = self.counts();
        self.refusal(&counts, org)
    }

    fn refusal(&self, counts: &Counts, org: &str) -> Option<Refused> {
        let of_org = counts.by_org.get(org).copied().unwrap_or_default();
        if of_org.running >= self.limits.running_per_org {
            Some(Refused::OrgShare(self.limits.running_per_org))
        } else if counts.running >= self.limits.running {
            Some(Refused::ServerFull(self.limits.running))
        } else {
            None
        }
    }

    /// A running slot for a new execution of `org`, or why not.
    pub(crate) fn admit(self: &Arc<Self>, org: &str) -> Result<Slot, Refused> {
        let mut counts = self.counts();
        if let Some(refused) = self.refusal(&counts, org) {
            return Err(refused);
        }
        Ok(self.running_slot(&mut counts, org))
    }

    /// A running slot for an execution resumed after a restart (it was
    /// admitted before): taken even over the share, see the module doc.
    pub(crate) fn readmit(self: &Arc<Self>, org: &str) -> Slot {
        let mut counts = self.counts();
        self.running_slot(&mut counts, org)
    }

    fn running_slot(self: &Arc<Self>, counts: &mut Counts, org: &str) -> Slot {
        counts.running += 1;
        counts.by_org.entry(org.to_string()).or_default().running += 1;
        Slot {
            admission: self.clone(),
            org: org.to_string(),
            state: Mutex::new(SlotState::Running),
        }
    }

    /// (running, paused) executions in all, for `/metrics`.
    pub(crate) fn totals(&self) -> (usize, usize) {
        let counts = self.counts();
        (counts.running, counts.paused)
    }

    /// (running, paused) of `org`, for tests and metrics.
    pub(crate) fn of_org(&self, org: &str) -> (usize, usize) {
        let counts = self.counts();
        let c = counts.by_org.get(org).copied().unwrap_or_default();
        (c.running, c.paused)
    }
}

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The execution waits for a human: it gives its running slot up, if
    /// the paused bounds allow it to wait at all.
    pub(crate) fn pause(&self) -> Result<(), Refused> {
        let mut state = self.state();
        if *state == SlotState::Paused {
            return Ok(());
        }
        let limits = self.admission.limits;
        let mut counts = self.admission.counts();
        let of_org = counts.by_org.get(&self.org).copied().unwrap_or_default();
        if of_org.paused >= limits.paused_per_org {
            return Err(Refused::OrgPaused(limits.paused_per_org));
        }
        if counts.paused >= limits.paused {
            return Err(Refused::ServerPaused(limits.paused));
        }
        counts.running -= 1;
        counts.paused += 1;
        let org = counts.by_org.entry(self.org.clone()).or_default();
        org.running -= 1;
        org.paused += 1;
        *state = SlotState::Paused;
        Ok(())
    }

    /// The human answered: the execution runs again.
    pub(crate) fn resume(&self) {
        let mut state = self.state();
        if *state == SlotState::Running {
            return;
        }
        let mut counts = self.admission.counts();
        counts.paused -= 1;
        counts.running += 1;
        let org = counts.by_org.entry(self.org.clone()).or_default();
        org.paused -= 1;
        org.running += 1;
        *state = SlotState::Running;
    }

    #[cfg(test)]
    pub(crate) fn is_paused(&self) -> bool {
        *self.state() == SlotState::Paused
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let state = *self.state();
        let mut counts = self.admission.counts();
        let org = counts.by_org.entry(self.org.clone()).or_default();
        match state {
            SlotState::Running => org.running = org.running.saturating_sub(1),
            SlotState::Paused => org.paused = org.paused.saturating_sub(1),
        }
        let empty = org.running == 0 && org.paused == 0;
        if empty {
            counts.by_org.remove(&self.org);
        }
        match state {
            SlotState::Running => counts.running = counts.running.saturating_sub(1),
            SlotState::Paused => counts.paused = counts.paused.saturating_sub(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_pauses_and_releases() {
        let admission = Admission::new(ShareLimits {
            running: 3,
            running_per_org: 2,
            paused: 2,
            paused_per_org: 1,
        });
        let a1 = admission.admit("a").unwrap();
        let a2 = admission.admit("a").unwrap();
        assert_eq!(admission.admit("a").err(), Some(Refused::OrgShare(2)));
        let b1 = admission.admit("b").unwrap();
        assert_eq!(admission.admit("b").err(), Some(Refused::ServerFull(3)));
        // A paused execution holds no running slot.
        a1.pause().unwrap();
        assert_eq!(admission.of_org("a"), (1, 1));
        let a3 = admission.admit("a").unwrap();
        // Only one of a's may wait.
        assert_eq!(a2.pause().err(), Some(Refused::OrgPaused(1)));
        b1.pause().unwrap();
        assert_eq!(a3.pause().err(), Some(Refused::OrgPaused(1)));
        // Resuming takes a running slot back even over the share.
        a1.resume();
        assert_eq!(admission.of_org("a"), (3, 0));
        drop((a1, a2, a3));
        assert_eq!(admission.of_org("a"), (0, 0));
        assert!(b1.is_paused());
        drop(b1);
        assert!(admission.would_refuse("a").is_none());
        assert_eq!(admission.counts().by_org.len(), 0);
    }
}
