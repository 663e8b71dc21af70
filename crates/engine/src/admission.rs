//! Fair share of the sandbox between orgs (SPEC §4, §12).
//!
//! Every execution holds a [`Slot`] from admission to its end. A running
//! slot counts against its org's share and the global limit; a paused one
//! (waiting for a human) counts only against the paused bounds, so an org
//! whose programs wait for approval never holds another org's work. An
//! execution over its org's share waits in its org's own queue, first in,
//! first out: a running slot the org gives up goes to the queue's head
//! before anyone else can take it. The queue is bounded in length and in
//! time ([`QueueLimits`]); past either the answer is a clear refusal. Over
//! the global limit the answer is "busy, retry" at once (a 503
//! `Retry-After` where the transport can still give one): another org
//! never waits behind an org's queue.
//!
//! A resumed execution takes its running slot back even when its org is at
//! its share: it was admitted once, and refusing a human's approval would
//! lose work. The running count can so exceed a share by at most the
//! paused bound, which is what keeps this finite.
//!
//! In a server the running bounds hold across every node of the store
//! (`executor_store::Shares`): a node runs an execution within the units
//! its grant holds, without a round trip, and asks the store for more only
//! past it. An org whose share other nodes hold waits in its queue here;
//! its head asks again every [`ASK_AGAIN`] (units another node stopped
//! using come back within `SHARE_LINGER`). Short of units of all, it
//! waits at most that long (they may be units another node stopped using)
//! and then the answer is "busy, retry", as on one node.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_call::ClientGone;
use executor_store::{SHARE_LINGER, Share, Shares};
use tokio::sync::oneshot;

/// How often the head of an org's queue asks the store again for units
/// other nodes hold.
pub(crate) const ASK_AGAIN: Duration = Duration::from_millis(200);

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

/// An org's queue of executions over its share (SPEC §4, §12), from
/// `--max-org-queued-executions` and `--org-queue-wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Executions of one org waiting at once.
    pub max_queued: usize,
    /// How long one waits for a slot.
    pub max_wait: Duration,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            max_queued: 512,
            max_wait: Duration::from_secs(30),
        }
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
    #[error(
        "this organisation already has {running} executions running, its share of this server, \
         and {queued} more waiting for a turn; wait for some to finish, then run execute again"
    )]
    OrgQueueFull { running: usize, queued: usize },
    #[error(
        "this organisation's {running} executions, its share of this server, stayed busy for \
         the {secs} s this one could wait for a turn; run execute again later",
        secs = .waited.as_secs()
    )]
    OrgQueueTimeout { running: usize, waited: Duration },
    #[error(
        "the client went away while this execution waited for a turn in its organisation's \
         queue; it did not run"
    )]
    ClientGone,
}

/// The org queues at one moment, for `/metrics`: a label per org would
/// grow without bound, so an org's view is its class — waiting at all
/// (`orgs`), and the worst of them (`longest`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueTotals {
    /// Executions waiting, in all orgs' queues.
    pub waiting: usize,
    /// Orgs with at least one execution waiting.
    pub orgs: usize,
    /// The longest one org's queue.
    pub longest: usize,
}

#[derive(Default)]
struct Counts {
    running: usize,
    paused: usize,
    by_org: HashMap<String, OrgCounts>,
    /// The executions waiting for a turn, by org, oldest first.
    queues: HashMap<String, VecDeque<Waiter>>,
}

/// An execution in its org's queue: the slot is sent to it.
struct Waiter {
    id: u64,
    turn: oneshot::Sender<Slot>,
}

#[derive(Default, Clone, Copy)]
struct OrgCounts {
    running: usize,
    paused: usize,
}

/// The counts, shared by every slot.
pub(crate) struct Admission {
    limits: ShareLimits,
    queue: QueueLimits,
    /// Held only to read or change counts, never across an await.
    counts: Mutex<Counts>,
    next_waiter: AtomicU64,
    /// This node's grants of the cluster's bounds; unset, the bounds are
    /// this process's alone (a one-shot command, a test).
    shares: std::sync::OnceLock<Arc<Shares>>,
    /// When an execution was last refused because no node had a unit of
    /// all to spare (see `would_refuse`).
    cluster_full_at: Mutex<Option<std::time::Instant>>,
}

/// A grant the store did not answer for is none more: the run waits in
/// its queue (whose head asks again) or is refused as busy.
fn unanswered_is_none(share: Share, granted: Result<usize, executor_store::StoreError>) -> usize {
    granted.unwrap_or_else(|e| {
        tracing::warn!(error = %e, share = share.as_str(), "could not ask the store for running units");
        0
    })
}

/// What is still short after asking the store for units.
enum Asked {
    Got,
    OrgShort,
    AllShort,
}

/// What a new execution of an org may do now.
enum Check {
    Free,
    Refused(Refused),
    /// Under the bounds, past this node's grant: ask the store for units
    /// (the org's, of all) before running.
    NeedsGrant {
        /// The org's executions running here now.
        running: usize,
        org: usize,
        all: usize,
    },
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
    pub(crate) fn new(limits: ShareLimits, queue: QueueLimits) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            queue,
            counts: Mutex::new(Counts::default()),
            next_waiter: AtomicU64::new(0),
            shares: std::sync::OnceLock::new(),
            cluster_full_at: Mutex::new(None),
        })
    }

    /// Counts the running bounds across the nodes that share `shares`'
    /// store from now on.
    pub(crate) fn share_with(&self, shares: Arc<Shares>) {
        let _ = self.shares.set(shares);
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a new execution of `org` would be refused, without taking a
    /// slot: for transports that must choose a status before running.
    pub(crate) fn would_refuse(&self, org: &str) -> Option<Refused> {
        let counts = self.counts();
        if let Some(refused) = self.refusal(&counts, org) {
            return Some(refused);
        }
        // The cluster had no unit of all left a moment ago, and this node
        // has none spare: busy, before the request is taken on.
        let cluster_full = self
            .cluster_full_at
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let recent = cluster_full.is_some_and(|at| at.elapsed() < SHARE_LINGER);
        let spare = self
            .shares
            .get()
            .is_some_and(|s| counts.running < s.granted(Share::Running, ""));
        (recent && !spare).then_some(Refused::ServerFull(self.limits.running))
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

    /// The bounds as this node counts them, then its grants of the
    /// cluster's (`queued` more of the org wait behind this one).
    fn check(&self, counts: &Counts, org: &str, queued: usize) -> Check {
        if let Some(refused) = self.refusal(counts, org) {
            return Check::Refused(refused);
        }
        let Some(shares) = self.shares.get() else {
            return Check::Free;
        };
        let of_org = counts.by_org.get(org).map_or(0, |c| c.running);
        let org_short = of_org >= shares.granted(Share::OrgRunning, org);
        let all_short = counts.running >= shares.granted(Share::Running, "");
        if !org_short && !all_short {
            return Check::Free;
        }
        Check::NeedsGrant {
            running: of_org,
            org: (of_org + 1 + queued).min(self.limits.running_per_org),
            all: (counts.running + 1 + queued).min(self.limits.running),
        }
    }

    /// Asks the store for the grants `check` found short (`running` of
    /// the org's run here now); what is still short afterwards.
    async fn ask(&self, org: &str, running: usize, want_org: usize, want_all: usize) -> Asked {
        let Some(shares) = self.shares.get() else {
            return Asked::Got;
        };
        // The org's units first: units of all held while the org waits
        // for its own would only keep other orgs' runs out.
        let org_grant = if shares.granted(Share::OrgRunning, org) < want_org {
            let granted = shares
                .ask(
                    Share::OrgRunning,
                    org,
                    want_org,
                    self.limits.running_per_org,
                )
                .await;
            unanswered_is_none(Share::OrgRunning, granted)
        } else {
            want_org
        };
        if org_grant <= running {
            return Asked::OrgShort;
        }
        let all_grant = if shares.granted(Share::Running, "") < want_all {
            let granted = shares
                .ask(Share::Running, "", want_all, self.limits.running)
                .await;
            unanswered_is_none(Share::Running, granted)
        } else {
            want_all
        };
        if all_grant < want_all {
            Asked::AllShort
        } else if org_grant < want_org {
            Asked::OrgShort
        } else {
            Asked::Got
        }
    }

    /// Tells the grants how many of `org`'s and of all are running now.
    fn report(&self, counts: &Counts, org: &str) {
        if let Some(shares) = self.shares.get() {
            let of_org = counts.by_org.get(org).map_or(0, |c| c.running);
            shares.using(Share::OrgRunning, org, of_org);
            shares.using(Share::Running, "", counts.running);
        }
    }

    /// A running slot for a new execution of `org`, or why not, at once.
    #[cfg(test)]
    pub(crate) fn admit(self: &Arc<Self>, org: &str) -> Result<Slot, Refused> {
        let mut counts = self.counts();
        if let Some(refused) = self.refusal(&counts, org) {
            return Err(refused);
        }
        Ok(self.running_slot(&mut counts, org))
    }

    /// A running slot for a new execution of `org`: at once when the org is
    /// under its share (and the server under its limit), else after a turn
    /// in the org's queue (then with how long it waited). A client gone
    /// (`gone` resolving, or the future dropped) leaves the queue at once.
    pub(crate) async fn admit_in_turn(
        self: &Arc<Self>,
        org: &str,
        gone: Option<&ClientGone>,
    ) -> Result<(Slot, Option<Duration>), Refused> {
        // Short of units of all after asking: other nodes may hold some they
        // stopped using, which come back within `SHARE_LINGER`; past that
        // wait the answer is "busy".
        let mut busy = false;
        loop {
            let (running, want_org, want_all) = {
                let mut counts = self.counts();
                if counts.queues.get(org).is_some_and(|q| !q.is_empty()) {
                    break;
                }
                match self.check(&counts, org, 0) {
                    Check::Free => return Ok((self.running_slot(&mut counts, org), None)),
                    Check::Refused(Refused::ServerFull(limit)) => {
                        return Err(Refused::ServerFull(limit));
                    }
                    Check::Refused(_) => break,
                    Check::NeedsGrant {
                        running, org, all, ..
                    } => (running, org, all),
                }
            };
            // Each ask that got what it wanted makes room (others of this
            // node may take it first: then ask for more); one that did not
            // means other nodes hold the rest.
            match self.ask(org, running, want_org, want_all).await {
                Asked::Got => {}
                Asked::OrgShort => break,
                Asked::AllShort => {
                    busy = true;
                    break;
                }
            }
        }
        let (id, turn) = {
            let mut counts = self.counts();
            let queued = counts.queues.get(org).map_or(0, VecDeque::len);
            if queued >= self.queue.max_queued {
                return Err(Refused::OrgQueueFull {
                    running: self.limits.running_per_org,
                    queued,
                });
            }
            let id = self.next_waiter.fetch_add(1, Ordering::Relaxed);
            let (sender, turn) = oneshot::channel();
            counts
                .queues
                .entry(org.to_string())
                .or_default()
                .push_back(Waiter { id, turn: sender });
            (id, turn)
        };
        let _in_queue = InQueue {
            admission: self.clone(),
            org: org.to_string(),
            id,
        };
        let waiting = std::time::Instant::now();
        let client_gone = async {
            match gone {
                Some(gone) => gone.wait().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(client_gone);
        let max_wait = if busy {
            self.queue.max_wait.min(SHARE_LINGER + 2 * ASK_AGAIN)
        } else {
            self.queue.max_wait
        };
        let turn = tokio::time::timeout(max_wait, turn);
        tokio::pin!(turn);
        let mut ask_again = tokio::time::interval(ASK_AGAIN);
        ask_again.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                turn = &mut turn => return match turn {
                    Ok(Ok(slot)) => Ok((slot, Some(waiting.elapsed()))),
                    _ if busy => {
                        *self.cluster_full_at.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(std::time::Instant::now());
                        Err(Refused::ServerFull(self.limits.running))
                    }
                    _ => Err(Refused::OrgQueueTimeout {
                        running: self.limits.running_per_org,
                        waited: self.queue.max_wait,
                    }),
                },
                () = &mut client_gone => return Err(Refused::ClientGone),
                _ = ask_again.tick(), if self.shares.get().is_some() => {
                    self.ask_for_queue(org, id).await;
                }
            }
        }
    }

    /// The head of `org`'s queue (when it is `id`) asks the store for the
    /// units the queue needs, and the queue is served from what it got.
    async fn ask_for_queue(self: &Arc<Self>, org: &str, id: u64) {
        let wants = {
            let counts = self.counts();
            let Some(queue) = counts.queues.get(org) else {
                return;
            };
            if queue.front().map(|w| w.id) != Some(id) {
                return;
            }
            match self.check(&counts, org, queue.len() - 1) {
                Check::NeedsGrant {
                    running, org, all, ..
                } => Some((running, org, all)),
                _ => None,
            }
        };
        if let Some((running, want_org, want_all)) = wants {
            self.ask(org, running, want_org, want_all).await;
        }
        let mut counts = self.counts();
        let unclaimed = self.hand_out(&mut counts);
        drop(counts);
        drop(unclaimed);
    }

    /// Gives running slots to the heads of the queues while the shares and
    /// the server's limit allow. Slots whose waiter has gone come back and
    /// are returned, to be dropped once the counts are no longer held.
    fn hand_out(self: &Arc<Self>, counts: &mut Counts) -> Vec<Slot> {
        let mut unclaimed = Vec::new();
        let orgs: Vec<String> = counts.queues.keys().cloned().collect();
        for org in orgs {
            loop {
                if !matches!(self.check(counts, &org, 0), Check::Free) {
                    break;
                }
                let Some(waiter) = counts.queues.get_mut(&org).and_then(VecDeque::pop_front) else {
                    break;
                };
                let slot = self.running_slot(counts, &org);
                if let Err(slot) = waiter.turn.send(slot) {
                    unclaimed.push(slot);
                }
            }
            if counts.queues.get(&org).is_some_and(VecDeque::is_empty) {
                counts.queues.remove(&org);
            }
        }
        unclaimed
    }

    /// The queues now, summed over orgs.
    pub(crate) fn queues(&self) -> QueueTotals {
        let counts = self.counts();
        let lengths = counts.queues.values().map(VecDeque::len);
        QueueTotals {
            waiting: lengths.clone().sum(),
            orgs: counts.queues.len(),
            longest: lengths.max().unwrap_or(0),
        }
    }

    /// (org, executions waiting) for every org with a queue.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> Vec<(String, usize)> {
        let counts = self.counts();
        counts
            .queues
            .iter()
            .map(|(org, queue)| (org.clone(), queue.len()))
            .collect()
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
        self.report(counts, org);
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

/// An execution's place in its org's queue; leaving (a turn given, the
/// wait over, the client gone) removes it.
struct InQueue {
    admission: Arc<Admission>,
    org: String,
    id: u64,
}

impl Drop for InQueue {
    fn drop(&mut self) {
        let mut counts = self.admission.counts();
        if let Some(queue) = counts.queues.get_mut(&self.org) {
            queue.retain(|waiter| waiter.id != self.id);
            if queue.is_empty() {
                counts.queues.remove(&self.org);
            }
        }
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
        self.admission.report(&counts, &self.org);
        let unclaimed = self.admission.hand_out(&mut counts);
        drop(counts);
        drop(state);
        drop(unclaimed);
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
        self.admission.report(&counts, &self.org);
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
        self.admission.report(&counts, &self.org);
        // Dropped once the counts are let go: each gives its slot back here.
        let unclaimed = self.admission.hand_out(&mut counts);
        drop(counts);
        drop(unclaimed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_pauses_and_releases() {
        let admission = Admission::new(
            ShareLimits {
                running: 3,
                running_per_org: 2,
                paused: 2,
                paused_per_org: 1,
            },
            QueueLimits::default(),
        );
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

    fn one_at_a_time(queue: QueueLimits) -> Arc<Admission> {
        Admission::new(
            ShareLimits {
                running: 4,
                running_per_org: 1,
                paused: 4,
                paused_per_org: 4,
            },
            queue,
        )
    }

    /// Waits until `org` has `n` executions queued.
    async fn queued(admission: &Admission, org: &str, n: usize) {
        for _ in 0..200 {
            let now = admission
                .queued()
                .into_iter()
                .find(|(o, _)| o == org)
                .map_or(0, |q| q.1);
            if now == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{org} never had {n} executions queued");
    }

    #[tokio::test]
    async fn over_its_share_an_org_waits_its_turn_in_order_and_another_org_does_not_wait() {
        let admission = one_at_a_time(QueueLimits::default());
        let first = admission.admit_in_turn("a", None).await.unwrap().0;
        let second = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit_in_turn("a", None).await }
        });
        queued(&admission, "a", 1).await;
        let third = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit_in_turn("a", None).await }
        });
        queued(&admission, "a", 2).await;
        // Org b is under its share: it runs at once.
        let other = admission.admit_in_turn("b", None).await.unwrap().0;
        assert_eq!(admission.of_org("b"), (1, 0));
        drop(first);
        let second = second.await.unwrap().unwrap().0;
        assert_eq!(
            admission.of_org("a"),
            (1, 0),
            "the slot went to the head of the queue"
        );
        queued(&admission, "a", 1).await;
        // Pausing gives the running slot up: the next in line gets it.
        second.pause().unwrap();
        let third = third.await.unwrap().unwrap().0;
        assert_eq!(admission.of_org("a"), (1, 1));
        drop((second, third, other));
        assert_eq!(admission.totals(), (0, 0));
        assert!(admission.queued().is_empty());
    }

    #[tokio::test]
    async fn the_queue_is_bounded_in_length_and_in_time() {
        let admission = one_at_a_time(QueueLimits {
            max_queued: 1,
            max_wait: Duration::from_millis(100),
        });
        let _running = admission.admit_in_turn("a", None).await.unwrap().0;
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit_in_turn("a", None).await }
        });
        queued(&admission, "a", 1).await;
        assert_eq!(
            admission.admit_in_turn("a", None).await.err(),
            Some(Refused::OrgQueueFull {
                running: 1,
                queued: 1
            })
        );
        assert_eq!(
            waiting.await.unwrap().err(),
            Some(Refused::OrgQueueTimeout {
                running: 1,
                waited: Duration::from_millis(100)
            })
        );
        assert!(admission.queued().is_empty());
    }

    #[tokio::test]
    async fn a_waiter_whose_client_went_away_leaves_the_queue_and_takes_no_slot() {
        let admission = one_at_a_time(QueueLimits::default());
        let running = admission.admit_in_turn("a", None).await.unwrap().0;
        let gone = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit_in_turn("a", None).await }
        });
        queued(&admission, "a", 1).await;
        gone.abort();
        let _ = gone.await;
        assert!(admission.queued().is_empty());
        drop(running);
        assert_eq!(
            admission.totals(),
            (0, 0),
            "nobody holds the slot it would have had"
        );
        assert!(admission.admit_in_turn("a", None).await.is_ok());
    }

    #[tokio::test]
    async fn a_waiter_told_its_client_went_away_leaves_the_queue_with_a_clear_error() {
        let admission = one_at_a_time(QueueLimits::default());
        let running = admission.admit_in_turn("a", None).await.unwrap().0;
        let (hang_up, hung_up) = tokio::sync::watch::channel(false);
        let gone = ClientGone::new(move || {
            let mut hung_up = hung_up.clone();
            Box::pin(async move {
                let _ = hung_up.wait_for(|gone| *gone).await;
            })
        });
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit_in_turn("a", Some(&gone)).await.err() }
        });
        queued(&admission, "a", 1).await;
        hang_up.send_replace(true);
        assert_eq!(waiting.await.unwrap(), Some(Refused::ClientGone));
        assert!(admission.queued().is_empty());
        drop(running);
        assert_eq!(admission.totals(), (0, 0));
    }
}
