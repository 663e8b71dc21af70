//! An execution's model (SPEC §9): its states ([`ExecutionState`], whose
//! transitions are drawn and made in `lifecycle.rs`), its saved form
//! (`SavedExecution`, journal and decisions, what a replay after a restart
//! reads), the approval gate its waiting calls sit in (`ApprovalGate`), the
//! registry of paused runs (`Executions`), the decisions a human gives
//! (`Action`) and the envelopes a pause or a refusal answers with.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_sandbox::{AgentError, RunOutcome};

use executor_call::{Action, ApprovalRequest, args_preview};

use crate::admission::Slot;
use executor_store::{ApprovalChannel, Fence, Principal, Store, now_ms};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot, watch};

/// How long a human has to decide, by default (SPEC §12).
pub const APPROVAL_WINDOW: Duration = Duration::from_secs(4 * 60);

/// Longest argument preview in the paused message, by default (SPEC §12):
/// enough to judge a call, short enough to read before deciding.
pub const MAX_ARGS_PREVIEW_CHARS: usize = 4_000;

/// The decision a waiting tool call receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Accept,
    Decline {
        reason: &'static str,
    },
    /// The call could not wait for a human at all (the paused bounds of
    /// SPEC §4): it throws with this message.
    Unavailable(String),
}

/// The call an execution waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call's position among the execution's tool calls.
    pub index: usize,
    pub path: String,
    pub args: Value,
    #[serde(rename = "expiresAtMs")]
    pub expires_at_ms: i64,
    /// The integration's own question about the call (an upstream MCP
    /// server's `input_required`, SPEC §8); None for a policy's approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

/// One answered tool call, for deterministic replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub index: usize,
    pub path: String,
    pub args: Value,
    pub answer: Result<Value, AgentError>,
}

/// What the runner reports to whoever is waiting on the execution.
pub(crate) enum RunEvent {
    Paused(PendingCall),
    Finished(RunOutcome),
}

/// Most bytes of tool-call arguments and answers an execution journals for
/// replay (SPEC §12). Past it the journal is dropped: the run can still be
/// resumed in this process, but not replayed after a restart.
pub const MAX_JOURNAL_BYTES: usize = 16 * 1024 * 1024;

/// The answers a paused run would replay after a restart, bounded.
#[derive(Default)]
struct Journal {
    entries: Vec<JournalEntry>,
    /// Indices of `entries`, so remembering a call is O(1).
    indices: std::collections::HashSet<usize>,
    bytes: usize,
    /// The bound was passed and the entries dropped.
    overflowed: bool,
}

/// A paused run's lease on the store (SPEC §10): taken when the run first
/// pauses, or claimed for a replay. From then on every save of its state
/// and every tool call it starts is a write fenced by it, so a node that
/// lost the run (stopped past its lease) can neither save it nor send a
/// call of it.
pub(crate) struct RunLease {
    pub store: Arc<dyn Store>,
    pub execution_id: String,
    pub fence: Fence,
}

/// Answers "may this call run?" for one execution. Created per run.
pub(crate) struct ApprovalGate {
    events: mpsc::UnboundedSender<RunEvent>,
    /// The calls waiting for a human, by call index: two calls of one
    /// `Promise.all` are decided each on its own.
    waiting: Mutex<HashMap<usize, oneshot::Sender<Decision>>>,
    /// Decisions known in advance (replay after a restart), by call index.
    preset: Mutex<HashMap<usize, Decision>>,
    journal: Mutex<Journal>,
    max_journal_bytes: usize,
    /// Answers to replay for calls made before a restart, by call index.
    replay: HashMap<usize, JournalEntry>,
    next_index: AtomicUsize,
    window: Duration,
    /// The execution's fair-share slot: given up while calls wait for a
    /// human, released when the run ends.
    slot: Mutex<Option<Slot>>,
    /// Bumped whenever an answer is journaled, [`JOURNAL_CLOSED`] when the
    /// run ends: a paused execution's saved state follows its journal.
    journal_version: watch::Sender<u64>,
    /// Tool calls of the run in flight now (waiting ones included). The run
    /// counts as paused only while every call in flight waits for a human:
    /// one approval left pending while other calls go on is not a pause.
    active: AtomicUsize,
    /// Woken whenever the calls in flight change (see
    /// [`ApprovalGate::until_paused_or_idle`]).
    calls_changed: Notify,
    /// The run's lease, once it has paused (or was claimed for a replay).
    lease: Mutex<Option<Arc<RunLease>>>,
    /// Calls up to this index that have no journaled answer were started
    /// by a holder that stopped (-1: none): a replay answers them as in
    /// doubt instead of sending them again (at most once).
    in_doubt_through: i64,
    /// Set once a call has waited for a human: from then on the run's
    /// answer may go to another caller than the one that started it.
    has_paused: AtomicBool,
    /// Who decided each decided call, and through what, for the audit
    /// trail: set before the decision is handed over, read by the call
    /// once it has it. A call whose window closed has no entry.
    deciders: Mutex<HashMap<usize, Decider>>,
}

/// Who decided a call that waited for approval (an account, when known)
/// and through what (SPEC §14: the console, `resume`, the client, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    pub by: Option<String>,
    pub via: ApprovalChannel,
}

impl Decider {
    pub fn new(by: Option<String>, via: ApprovalChannel) -> Self {
        Decider { by, via }
    }

    /// A decision posted for another process, as the store keeps it: the
    /// action, then the channel and the account (`accept console acc_1`).
    pub(crate) fn posted_text(action: Action, decider: &Decider) -> String {
        let text = format!(
            "{} {} {}",
            action.as_str(),
            decider.via.as_str(),
            decider.by.as_deref().unwrap_or("")
        );
        text.trim_end().to_string()
    }

    /// A posted decision read back: its action, and who posted it when the
    /// text says (a bare action, as older processes post it, says nobody).
    pub(crate) fn parse_posted(text: &str) -> Option<(Action, Option<Decider>)> {
        let mut words = text.split_whitespace();
        let action = words.next()?.parse::<Action>().ok()?;
        let decider = words
            .next()
            .and_then(|via| via.parse::<ApprovalChannel>().ok())
            .map(|via| Decider {
                by: words.next().map(str::to_string),
                via,
            });
        Some((action, decider))
    }
}

/// Call `index` waiting for a human in [`ApprovalGate::decide`]; dropping
/// it ends the wait.
struct Waiting {
    gate: Arc<ApprovalGate>,
    index: usize,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.gate.stop_waiting(self.index);
    }
}

/// One tool call in flight; see [`ApprovalGate::call_started`].
pub(crate) struct ActiveCall(Arc<ApprovalGate>);

impl Drop for ActiveCall {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.rebalance();
    }
}

/// The journal version once the run has ended.
pub(crate) const JOURNAL_CLOSED: u64 = u64::MAX;

impl ApprovalGate {
    pub(crate) fn new(
        events: mpsc::UnboundedSender<RunEvent>,
        journal: Vec<JournalEntry>,
        preset: Vec<(usize, Decision)>,
        window: Duration,
    ) -> Self {
        ApprovalGate {
            window,
            events,
            waiting: Mutex::new(HashMap::new()),
            preset: Mutex::new(preset.into_iter().collect()),
            replay: journal.iter().map(|e| (e.index, e.clone())).collect(),
            journal: Mutex::new(Journal {
                indices: journal.iter().map(|e| e.index).collect(),
                bytes: journal.iter().map(JournalEntry::size).sum(),
                entries: journal,
                overflowed: false,
            }),
            max_journal_bytes: MAX_JOURNAL_BYTES,
            next_index: AtomicUsize::new(0),
            slot: Mutex::new(None),
            journal_version: watch::channel(0).0,
            active: AtomicUsize::new(0),
            calls_changed: Notify::new(),
            lease: Mutex::new(None),
            in_doubt_through: -1,
            has_paused: AtomicBool::new(false),
            deciders: Mutex::new(HashMap::new()),
        }
    }

    /// Notes who decides call `index` (before the decision is handed over).
    pub(crate) fn set_decider(&self, index: usize, decider: Option<Decider>) {
        if let (Some(decider), Ok(mut deciders)) = (decider, self.deciders.lock()) {
            deciders.insert(index, decider);
        }
    }

    /// Who decided call `index`, when known.
    pub(crate) fn decider(&self, index: usize) -> Option<Decider> {
        self.deciders.lock().ok()?.get(&index).cloned()
    }

    /// Whether a call of this run has waited for a human.
    pub(crate) fn has_paused(&self) -> bool {
        self.has_paused.load(Ordering::Acquire)
    }

    /// A replay of a run claimed from another node, with its lease and the
    /// highest call index that node started.
    pub(crate) fn with_lease(mut self, lease: RunLease, calling: i64) -> Self {
        self.in_doubt_through = calling;
        if let Ok(mut l) = self.lease.lock() {
            *l = Some(Arc::new(lease));
        }
        self
    }

    /// The run's lease, if it has one.
    pub(crate) fn lease(&self) -> Option<Arc<RunLease>> {
        self.lease.lock().ok().and_then(|l| l.clone())
    }

    /// Takes the run's lease away (a one-shot process released it): its
    /// writes are no longer fenced.
    pub(crate) fn take_lease(&self) -> Option<Arc<RunLease>> {
        self.lease.lock().ok()?.take()
    }

    /// Gives the run its lease at its first pause; a lease it has stays.
    pub(crate) fn lease_or(&self, lease: impl FnOnce() -> RunLease) -> Option<Arc<RunLease>> {
        let mut current = self.lease.lock().ok()?;
        Some(current.get_or_insert_with(|| Arc::new(lease())).clone())
    }

    /// Whether call `index` was started by a holder that stopped and left
    /// no answer: it may or may not have reached the integration.
    pub(crate) fn in_doubt(&self, index: usize) -> bool {
        i64::try_from(index).is_ok_and(|i| i <= self.in_doubt_through)
    }

    /// Holds `slot` for the run: paused while calls wait, released by
    /// [`ApprovalGate::release_slot`].
    pub(crate) fn with_slot(self, slot: Slot) -> Self {
        if let Ok(mut s) = self.slot.lock() {
            *s = Some(slot);
        }
        self
    }

    /// Bounds the journal at `bytes` (SPEC §12: 16 MiB by default).
    pub(crate) fn with_journal_bound(mut self, bytes: usize) -> Self {
        self.max_journal_bytes = bytes;
        self
    }

    /// The run ended: its slot goes back to the org's share.
    pub(crate) fn release_slot(&self) {
        if let Ok(mut s) = self.slot.lock() {
            s.take();
        }
        self.journal_version.send_replace(JOURNAL_CLOSED);
    }

    /// Changes when an answer is journaled; [`JOURNAL_CLOSED`] at the end.
    pub(crate) fn journal_changes(&self) -> watch::Receiver<u64> {
        self.journal_version.subscribe()
    }

    /// Whether a call waits for a human now (the wall clock stops then).
    pub(crate) fn is_paused(&self) -> bool {
        self.waiting
            .lock()
            .is_ok_and(|w| Self::all_waiting(&w, self.active.load(Ordering::Acquire)))
    }

    /// Returns once every call in flight waits for a human, or none is in
    /// flight. A pause is reported (and saved) only then: a call accepted a
    /// moment ago may still be running beside the next one that waits
    /// (two approvals of one `Promise.all`), and the saved journal must
    /// hold its answer, or a restart would replay it and call the tool a
    /// second time. Bounded by the run's wall clock.
    pub(crate) async fn until_paused_or_idle(&self) {
        loop {
            let changed = self.calls_changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change between the check
            // and the wait is not missed.
            changed.as_mut().enable();
            if self.is_paused() || self.active.load(Ordering::Acquire) == 0 {
                return;
            }
            changed.await;
        }
    }

    /// Whether call `index` still waits for a human.
    pub(crate) fn is_waiting(&self, index: usize) -> bool {
        self.waiting.lock().is_ok_and(|w| w.contains_key(&index))
    }

    fn all_waiting(waiting: &HashMap<usize, oneshot::Sender<Decision>>, active: usize) -> bool {
        !waiting.is_empty() && waiting.len() >= active
    }

    /// A tool call starts; dropping the guard (also when the call is
    /// aborted) ends it.
    pub(crate) fn call_started(self: &Arc<Self>) -> ActiveCall {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.rebalance();
        ActiveCall(self.clone())
    }

    /// Puts the slot where the calls say: paused while every call in
    /// flight waits for a human, running otherwise. A pause the paused
    /// bounds refuse here just leaves the run counted as running.
    fn rebalance(&self) {
        self.calls_changed.notify_waiters();
        let Ok(waiting) = self.waiting.lock() else {
            return;
        };
        let paused = Self::all_waiting(&waiting, self.active.load(Ordering::Acquire));
        if let Ok(slot) = self.slot.lock()
            && let Some(slot) = slot.as_ref()
        {
            if paused {
                let _ = slot.pause();
            } else {
                slot.resume();
            }
        }
    }

    /// The answers journaled so far, for the saved state.
    pub(crate) fn journal_entries(&self) -> Vec<JournalEntry> {
        self.journal
            .lock()
            .map(|j| j.entries.clone())
            .unwrap_or_default()
    }

    /// Whether the journal passed its bound (no replay after a restart).
    pub(crate) fn journal_overflowed(&self) -> bool {
        self.journal.lock().is_ok_and(|j| j.overflowed)
    }

    /// Numbers a tool call in the order the program made it.
    pub(crate) fn next_call_index(&self) -> usize {
        self.next_index.fetch_add(1, Ordering::AcqRel)
    }

    /// The journaled answer of call `index`, when replaying and the program
    /// made the same call again.
    pub(crate) fn replayed(
        &self,
        index: usize,
        path: &str,
        args: &Value,
    ) -> Option<Result<Value, AgentError>> {
        let entry = self.replay.get(&index)?;
        if entry.path == path && entry.args == *args {
            Some(entry.answer.clone())
        } else {
            Some(Err(AgentError::new(format!(
                "the execution could not be resumed: after the restart the program called {path} where it had called {} (run execute again)",
                entry.path
            ))))
        }
    }

    pub(crate) fn remember(
        &self,
        index: usize,
        path: &str,
        args: &Value,
        answer: &Result<Value, AgentError>,
    ) {
        let Ok(mut j) = self.journal.lock() else {
            return;
        };
        if j.overflowed || j.indices.contains(&index) {
            return;
        }
        // Sized before it is copied: an answer that cannot fit is never cloned.
        j.bytes += json_size(&(index, path, args, answer));
        if j.bytes > self.max_journal_bytes {
            *j = Journal {
                overflowed: true,
                ..Journal::default()
            };
            return;
        }
        let entry = JournalEntry {
            index,
            path: path.to_string(),
            args: args.clone(),
            answer: answer.clone(),
        };
        j.indices.insert(index);
        j.entries.push(entry);
        drop(j);
        // Never reopens a closed journal (a call aborted mid-poll may
        // finish remembering after the run ended).
        self.journal_version.send_if_modified(|v| {
            let open = *v != JOURNAL_CLOSED;
            if open {
                *v = v.saturating_add(1).min(JOURNAL_CLOSED - 1);
            }
            open
        });
    }

    /// Pauses the execution until a decision arrives or the window closes.
    /// `question` is the integration's, when it asks about the call.
    pub(crate) fn decide(
        self: &Arc<Self>,
        index: usize,
        path: &str,
        args: &Value,
        question: Option<String>,
    ) -> BoxFuture<'static, Decision> {
        let preset = self.preset.lock().ok().and_then(|mut p| p.remove(&index));
        if let Some(decision) = preset {
            return Box::pin(async move { decision });
        }
        let (tx, rx) = oneshot::channel();
        {
            let Ok(mut waiting) = self.waiting.lock() else {
                return Box::pin(async {
                    Decision::Unavailable("the execution state is unavailable".into())
                });
            };
            // The run pauses when this call is the only one in flight; then
            // it must be allowed to wait at all (the paused bounds).
            if waiting.is_empty()
                && self.active.load(Ordering::Acquire) <= 1
                && let Some(Err(refused)) = self
                    .slot
                    .lock()
                    .ok()
                    .and_then(|s| s.as_ref().map(Slot::pause))
            {
                return Box::pin(async move { Decision::Unavailable(refused.to_string()) });
            }
            waiting.insert(index, tx);
        }
        self.calls_changed.notify_waiters();
        let pending = PendingCall {
            index,
            path: path.to_string(),
            args: args.clone(),
            expires_at_ms: now_ms() + self.window.as_millis() as i64,
            question,
        };
        self.has_paused.store(true, Ordering::Release);
        let _ = self.events.send(RunEvent::Paused(pending));
        let window = self.window;
        // Removes the entry however the wait ends: decided, timed out, or
        // dropped with an aborted call.
        let waiting = Waiting {
            gate: self.clone(),
            index,
        };
        Box::pin(async move {
            let _waiting = waiting;
            match tokio::time::timeout(window, rx).await {
                Ok(Ok(decision)) => decision,
                Ok(Err(_)) => Decision::Decline {
                    reason: "cancelled",
                },
                Err(_) => Decision::Decline {
                    reason: "approval_timeout",
                },
            }
        })
    }

    /// Call `index` no longer waits: the run takes its running slot back.
    fn stop_waiting(&self, index: usize) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(&index);
        }
        self.rebalance();
    }

    /// Hands the human's decision to waiting call `index`. False when that
    /// call is not waiting (it timed out, or the run is gone).
    pub(crate) fn answer(&self, index: usize, decision: Decision) -> bool {
        let waiting = self.waiting.lock().ok().and_then(|mut w| w.remove(&index));
        waiting.is_some_and(|tx| tx.send(decision).is_ok())
    }
}

impl JournalEntry {
    fn size(&self) -> usize {
        json_size(self)
    }
}

/// A value's size as JSON, counted without building the text.
fn json_size<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = ByteCounter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The message a declined call throws inside the sandbox.
pub(crate) fn declined_message(path: &str, reason: &str) -> String {
    match reason {
        "declined" => {
            format!("Tool \"{path}\" requires approval but the request was declined by the user.")
        }
        other => format!(
            "Tool \"{path}\" requires approval but the request was declined by the user ({other})."
        ),
    }
}

/// The paused `CallToolResult` (SPEC §9); the arguments in its text are cut
/// at `max_preview_chars`.
pub(crate) fn paused_envelope(
    execution_id: &str,
    pending: &PendingCall,
    max_preview_chars: usize,
    reader: Reader,
    console_approvals_url: Option<&str>,
) -> Value {
    let preview = args_preview(&pending.args, max_preview_chars);
    let ttl_ms = (pending.expires_at_ms - now_ms()).max(0);
    let expires_at = iso8601(pending.expires_at_ms);
    let message = match &pending.question {
        Some(question) => format!("Approve {}? It asks: {question}", pending.path),
        None => format!("Approve {}?", pending.path),
    };
    let asks = pending
        .question
        .as_ref()
        .map(|question| format!("\n\nThe integration asks: {question}"))
        .unwrap_or_default();
    let next = match reader {
        Reader::Agent => format!(
            "Ask the user whether to run this call. Then call the `resume` tool with {{\"executionId\": \"{execution_id}\", \"action\": \"accept\"}} to run it, or \"decline\" to refuse it (the call then throws inside the program)."
        ),
        Reader::ConsoleAgent => {
            let place = match console_approvals_url {
                Some(base) => format!("in the Executor console: {base}{execution_id}"),
                None => "in the Executor console (Approvals)".to_string(),
            };
            format!(
                "The user approves or declines this call {place}\nTell them, then call the `resume` tool with {{\"executionId\": \"{execution_id}\"}}: it waits for their decision and returns what the program did next."
            )
        }
        Reader::Shell => format!(
            "To run this call: executor resume {execution_id} --action accept\nTo refuse it (the call then throws inside the program): executor resume {execution_id} --action decline"
        ),
    };
    let text = format!(
        "Execution paused: Approve {path}?{asks}\n\nArguments:\n{preview}\n\nexecutionId: {execution_id}\nExpires at: {expires_at} (in {secs} s)\n\n{next}",
        path = pending.path,
        secs = ttl_ms / 1000,
    );
    let mut envelope = json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": {
            "status": "waiting_for_interaction",
            "executionId": execution_id,
            "expiresAt": expires_at,
            "ttlMs": ttl_ms,
            "interaction": { "kind": "form", "message": message, "address": pending.path, "args": pending.args },
        },
    });
    if let (Reader::ConsoleAgent, Some(base)) = (reader, console_approvals_url) {
        envelope["structuredContent"]["approvalUrl"] = json!(format!("{base}{execution_id}"));
    }
    envelope
}

/// Who reads a paused envelope: an agent over MCP, told to call the
/// `resume` tool, or a person at a shell, told to run `executor resume`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    Agent,
    /// An agent whose session approves in the console
    /// (`elicitation_mode=console`, SPEC §14): told where the human
    /// decides, and that `resume` waits for it.
    ConsoleAgent,
    Shell,
}

/// An execution waiting for a human's decision, as
/// [`crate::Engine::pending_approvals`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingApproval {
    pub execution_id: String,
    pub session_id: Option<String>,
    /// The account the run acts for (its owner).
    pub account_id: String,
    /// The tool call that waits.
    pub tool_path: String,
    /// Its arguments as pretty JSON, cut at the approval preview length.
    pub args_preview: String,
    /// The integration's question about the call, when it asked one.
    pub question: Option<String>,
    /// The org's rule that matches the tool now; None: the tool's default.
    pub policy_rule: Option<String>,
    /// When the call paused (its expiry less this engine's approval window).
    pub paused_at_ms: i64,
    pub expires_at_ms: i64,
}

/// Why a resume cannot proceed (SPEC §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeRefusal {
    NotFound,
    Expired,
    Forbidden,
    /// Nothing waits, and no decision is known (the fallback of the ones
    /// below).
    AlreadySettled,
    /// A decision was given already: another than the one asked now (the
    /// run is `settled`), or the run it let go on has not finished.
    AlreadyDecided {
        action: Action,
        settled: bool,
    },
    /// The execution finished without waiting for anyone (or its wait is
    /// long over): there is nothing to decide.
    Finished,
    /// Its journal was over the bound, so it was not kept across a restart.
    NotReplayable,
}

impl ResumeRefusal {
    fn status(self) -> &'static str {
        match self {
            ResumeRefusal::NotFound => "execution_not_found",
            ResumeRefusal::Expired => "execution_expired",
            ResumeRefusal::Forbidden => "execution_forbidden",
            ResumeRefusal::AlreadySettled
            | ResumeRefusal::AlreadyDecided { .. }
            | ResumeRefusal::Finished => "execution_already_settled",
            ResumeRefusal::NotReplayable => "execution_expired",
        }
    }

    fn explanation(self) -> String {
        let text = match self {
            ResumeRefusal::NotFound => "was not found",
            ResumeRefusal::Expired => "is no longer waiting: its approval window closed",
            ResumeRefusal::Forbidden => "belongs to another account",
            ResumeRefusal::AlreadySettled => "has already been settled",
            ResumeRefusal::AlreadyDecided { action, settled } => {
                let decision = match action {
                    Action::Accept => "approved",
                    Action::Decline => "declined",
                    Action::Cancel => "cancelled",
                };
                let then = match settled {
                    true => "and has already been settled",
                    false => "and its run goes on",
                };
                return format!("was already decided ({decision}) {then}");
            }
            ResumeRefusal::Finished => "has finished; it is not waiting for a decision",
            ResumeRefusal::NotReplayable => {
                "cannot be continued after the server restarted: its tool calls before the \
                 pause exceeded the journal kept for replay (--max-journal-bytes)"
            }
        };
        text.to_string()
    }

    pub(crate) fn envelope(self, execution_id: &str) -> Value {
        json!({
            "content": [{ "type": "text", "text": format!(
                "Execution {execution_id} {}. Run `execute` again to start over.", self.explanation()
            ) }],
            "structuredContent": { "status": self.status(), "executionId": execution_id, "recovery": "re_execute" },
            "isError": true,
        })
    }
}

/// A paused (or being-resumed) execution in memory.
pub(crate) struct LiveExecution {
    pub(crate) saved: Mutex<SavedExecution>,
    pub(crate) gate: Arc<ApprovalGate>,
    /// The runner's events. Holding this lock is holding the execution:
    /// concurrent resumes queue here, and the second sees the first's result.
    pub(crate) events: tokio::sync::Mutex<mpsc::UnboundedReceiver<RunEvent>>,
    /// Set while the human is asked inline (native elicitation): a decision
    /// posted from outside (`executor resume`) then answers through
    /// `posted` instead of a `resume`.
    pub(crate) asked_inline: AtomicBool,
    pub(crate) posted: watch::Sender<Option<(Action, Option<Decider>)>>,
    /// A task keeps the saved state's journal current while paused.
    pub(crate) persisting: AtomicBool,
}

impl LiveExecution {
    pub(crate) fn new(
        saved: SavedExecution,
        gate: Arc<ApprovalGate>,
        events: mpsc::UnboundedReceiver<RunEvent>,
    ) -> Arc<Self> {
        Arc::new(LiveExecution {
            saved: Mutex::new(saved),
            gate,
            events: tokio::sync::Mutex::new(events),
            asked_inline: AtomicBool::new(false),
            posted: watch::channel(None).0,
            persisting: AtomicBool::new(false),
        })
    }

    pub(crate) fn snapshot(&self) -> Option<SavedExecution> {
        self.saved.lock().ok().map(|s| s.clone())
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut SavedExecution)) -> Option<SavedExecution> {
        let mut saved = self.saved.lock().ok()?;
        f(&mut saved);
        Some(saved.clone())
    }
}

/// Executions that have paused at least once and whose run is still alive.
#[derive(Default)]
pub(crate) struct Executions {
    live: Mutex<HashMap<String, Arc<LiveExecution>>>,
}

impl Executions {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<LiveExecution>> {
        self.live.lock().ok()?.get(id).cloned()
    }

    /// Registers `live` unless another is already registered under its id
    /// (two resumes restoring at once); returns the one that is.
    pub(crate) fn register(&self, id: &str, live: Arc<LiveExecution>) -> Arc<LiveExecution> {
        let Ok(mut map) = self.live.lock() else {
            return live;
        };
        map.entry(id.to_string()).or_insert(live).clone()
    }

    /// The run ended: nothing more can be resumed in memory.
    pub(crate) fn forget(&self, id: &str) {
        if let Ok(mut map) = self.live.lock() {
            map.remove(id);
        }
    }

    /// The run ended; it stays findable for `after`, so that a duplicate
    /// resume arriving while the first one saves the settled answer waits
    /// for that answer instead of replaying a finished run.
    pub(crate) fn forget_after(self: &Arc<Self>, id: &str, after: Duration) {
        let (this, id) = (self.clone(), id.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            this.forget(&id);
        });
    }

    /// The executions waiting for a decision now.
    pub(crate) fn waiting(&self) -> Vec<Arc<LiveExecution>> {
        self.waiting_where(|_| true)
    }

    /// Whether an execution of this session waits for approval now (the
    /// session's runtime is then kept up to the paused idle timeout).
    pub fn has_paused_in_session(&self, session_id: &str) -> bool {
        !self
            .waiting_where(|s| s.session_id.as_deref() == Some(session_id))
            .is_empty()
    }

    fn waiting_where(&self, keep: impl Fn(&SavedExecution) -> bool) -> Vec<Arc<LiveExecution>> {
        let now = now_ms();
        let Ok(map) = self.live.lock() else {
            return Vec::new();
        };
        map.values()
            .filter(|live| {
                live.saved.lock().is_ok_and(|s| {
                    keep(&s) && s.state.pending().is_some_and(|p| p.expires_at_ms > now)
                })
            })
            .cloned()
            .collect()
    }
}

/// The durable state of a paused (or settled-after-pause) execution.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedExecution {
    pub id: String,
    pub owner: Principal,
    #[serde(rename = "sessionId")]
    pub session_id: Option<String>,
    /// The normalised body that ran (replay runs the same text).
    pub body: String,
    pub code: String,
    #[serde(flatten)]
    pub state: ExecutionState,
    pub journal: Vec<JournalEntry>,
    /// Decisions already given to calls whose answers may not be journaled
    /// yet (two approvals of one `Promise.all`): a replay presets them, so a
    /// human is never asked twice about one call.
    #[serde(default)]
    pub decided: Vec<(usize, Action)>,
    /// The journal passed its bound before the pause: the run can be
    /// resumed in this process, not replayed after a restart.
    #[serde(default, rename = "journalDropped")]
    pub journal_dropped: bool,
    /// The operator's own call (`ApprovalMode::GivenByCaller`): what needs
    /// approval is approved by the caller, in a replay too.
    #[serde(default, rename = "approvedByCaller")]
    pub approved_by_caller: bool,
}

/// Where an execution that has paused stands: its lifecycle, one state at
/// a time.
///
/// ```text
/// Running ──pause──▶ Waiting ──resume──▶ Running ──finish──▶ Settled
///    ▲                                      │
///    └─────────────── pause again ◀─────────┘
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredState", into = "StoredState")]
pub enum ExecutionState {
    /// The run goes on (started, or resumed): no call waits.
    Running,
    /// Paused on a call that waits for a human.
    Waiting(PendingCall),
    /// A resume ran it to the end: the decision and the answer it gave
    /// (repeated for a repeat of that decision).
    Settled { action: Action, envelope: Value },
}

impl ExecutionState {
    /// The call that waits, if any.
    pub fn pending(&self) -> Option<&PendingCall> {
        match self {
            ExecutionState::Waiting(pending) => Some(pending),
            _ => None,
        }
    }
}

/// The stored shape of [`ExecutionState`]: the fields saved executions have
/// always had, so that one paused by an earlier release still resumes.
#[derive(Clone, Serialize, Deserialize)]
struct StoredState {
    pending: Option<PendingCall>,
    settled: Option<(Action, Value)>,
}

impl From<StoredState> for ExecutionState {
    fn from(stored: StoredState) -> Self {
        match (stored.settled, stored.pending) {
            (Some((action, envelope)), _) => ExecutionState::Settled { action, envelope },
            (None, Some(pending)) => ExecutionState::Waiting(pending),
            (None, None) => ExecutionState::Running,
        }
    }
}

impl From<ExecutionState> for StoredState {
    fn from(state: ExecutionState) -> Self {
        let (pending, settled) = match state {
            ExecutionState::Running => (None, None),
            ExecutionState::Waiting(pending) => (Some(pending), None),
            ExecutionState::Settled { action, envelope } => (None, Some((action, envelope))),
        };
        StoredState { pending, settled }
    }
}

impl SavedExecution {
    /// The owner's context: who the run acts for when it is continued.
    pub(crate) fn owner_context(&self) -> executor_call::CallContext {
        executor_call::CallContext {
            principal: self.owner.clone(),
            session_id: self.session_id.clone(),
            approval: if self.approved_by_caller {
                executor_call::ApprovalMode::GivenByCaller
            } else {
                executor_call::ApprovalMode::AskAHuman
            },
            holder: None,
        }
    }
}

fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// What to ask the human about `pending`, the arguments cut at
/// `max_preview_chars`.
pub(crate) fn approval_request(
    execution_id: &str,
    pending: &PendingCall,
    max_preview_chars: usize,
) -> ApprovalRequest {
    ApprovalRequest::new(
        execution_id,
        &pending.path,
        &pending.args,
        pending.question.as_deref(),
        max_preview_chars,
    )
}

#[cfg(test)]
mod tests {
    use super::Decider;

    #[test]
    fn a_posted_decision_says_who_and_how_and_a_bare_action_says_nobody() {
        use executor_call::Action;
        use executor_store::ApprovalChannel;
        let console = Decider::new(Some("acc_1".into()), ApprovalChannel::Console);
        let text = Decider::posted_text(Action::Accept, &console);
        assert_eq!(text, "accept console acc_1");
        assert_eq!(
            Decider::parse_posted(&text),
            Some((Action::Accept, Some(console)))
        );
        let cli = Decider::new(None, ApprovalChannel::Cli);
        assert_eq!(Decider::posted_text(Action::Decline, &cli), "decline cli");
        assert_eq!(
            Decider::parse_posted("decline cli"),
            Some((Action::Decline, Some(cli)))
        );
        assert_eq!(
            Decider::parse_posted("accept"),
            Some((Action::Accept, None))
        );
        assert_eq!(Decider::parse_posted("maybe"), None);
    }

    use super::*;

    #[tokio::test]
    async fn a_wait_for_a_human_ends_when_its_call_is_dropped() {
        let (events, _events) = mpsc::unbounded_channel();
        let gate = Arc::new(ApprovalGate::new(
            events,
            Vec::new(),
            Vec::new(),
            Duration::from_secs(60),
        ));
        let call = gate.call_started();
        let decision = gate.decide(0, "a.b", &json!({}), None);
        assert!(gate.is_waiting(0) && gate.is_paused());
        // The call is aborted while it waits.
        drop(decision);
        drop(call);
        assert!(!gate.is_waiting(0) && !gate.is_paused());
        assert!(!gate.answer(0, Decision::Accept));
    }

    #[test]
    fn saved_executions_keep_the_shape_earlier_releases_stored() {
        let stored = |pending: Value, settled: Value| {
            json!({
                "id": "ex1", "owner": {"account_id": "a", "org_id": "o"},
                "sessionId": null, "body": "b", "code": "c",
                "pending": pending, "journal": [], "settled": settled,
            })
        };
        let call = json!({"index": 2, "path": "a.b", "args": {}, "expiresAtMs": 9});
        let cases = [
            (stored(Value::Null, Value::Null), ExecutionState::Running),
            (
                stored(call.clone(), Value::Null),
                ExecutionState::Waiting(PendingCall {
                    index: 2,
                    path: "a.b".into(),
                    args: json!({}),
                    expires_at_ms: 9,
                    question: None,
                }),
            ),
            (
                stored(Value::Null, json!(["accept", {"done": true}])),
                ExecutionState::Settled {
                    action: Action::Accept,
                    envelope: json!({"done": true}),
                },
            ),
        ];
        for (json, state) in cases {
            let saved: SavedExecution = serde_json::from_value(json.clone()).expect("reads");
            assert_eq!(saved.state, state);
            // Written back in the same shape.
            let written = serde_json::to_value(&saved).expect("writes");
            assert_eq!(
                (&written["pending"], &written["settled"]),
                (&json["pending"], &json["settled"])
            );
        }
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_582_979_415_123), "2020-02-29T12:30:15.123Z");
    }

    #[test]
    fn the_journal_is_bounded_and_remembers_each_call_once() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gate = ApprovalGate::new(tx, Vec::new(), Vec::new(), APPROVAL_WINDOW)
            .with_journal_bound(1_000);
        let answer = Ok(json!({"ok": true, "data": "x".repeat(100)}));
        for index in 0..5 {
            gate.remember(index, "a.b", &json!({}), &answer);
            // A second answer for the same call is ignored.
            gate.remember(index, "a.b", &json!({"other": true}), &answer);
        }
        let entries = gate.journal_entries();
        assert_eq!(
            entries.iter().map(|e| e.index).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert!(entries.iter().all(|e| e.args == json!({})));
        assert!(!gate.journal_overflowed());
        // Past the bound the journal is dropped whole, and stays dropped.
        for index in 5..20 {
            gate.remember(index, "a.b", &json!({}), &answer);
        }
        assert!(gate.journal_overflowed());
        assert!(gate.journal_entries().is_empty());
    }

    #[tokio::test]
    async fn a_pause_waits_for_the_calls_still_running_beside_it() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let gate = Arc::new(ApprovalGate::new(
            tx,
            Vec::new(),
            Vec::new(),
            APPROVAL_WINDOW,
        ));
        // Two calls of one Promise.all: one accepted and still running, one
        // waiting for a human.
        let running = gate.call_started();
        let _waiting_call = gate.call_started();
        let decision = gate.decide(1, "a.b", &json!({}), None);
        assert!(gate.is_waiting(1));
        let until = gate.until_paused_or_idle();
        tokio::pin!(until);
        let early = tokio::time::timeout(Duration::from_millis(50), until.as_mut()).await;
        assert!(early.is_err(), "not a pause while a call still runs");
        drop(running);
        tokio::time::timeout(Duration::from_secs(5), until)
            .await
            .expect("a pause once every call in flight waits");
        // Answered, the call waits no more: a pause queued for it is stale.
        assert!(gate.answer(1, Decision::Accept));
        assert!(!gate.is_waiting(1));
        assert_eq!(decision.await, Decision::Accept);
    }

    #[test]
    fn replay_answers_matching_calls_and_refuses_divergent_ones() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let entry = JournalEntry {
            index: 0,
            path: "a.b".into(),
            args: json!({"x": 1}),
            answer: Ok(json!({"ok": true})),
        };
        let gate = ApprovalGate::new(tx, vec![entry], Vec::new(), APPROVAL_WINDOW);
        assert_eq!(
            gate.replayed(0, "a.b", &json!({"x": 1})),
            Some(Ok(json!({"ok": true})))
        );
        assert!(
            gate.replayed(0, "a.c", &json!({}))
                .is_some_and(|r| r.is_err())
        );
        assert_eq!(gate.replayed(1, "a.b", &json!({})), None);
    }
}
