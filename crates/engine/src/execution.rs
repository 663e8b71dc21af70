//! The execution lifecycle, in one place (SPEC §9, model-mode approvals).
//!
//! ```text
//!   execute ──► Running ──(tool call needs approval)──► Waiting ──resume──► Running …
//!                  │                                        │
//!                  └──────────(program ends)──► Settled ◄───┘ (decline/cancel/timeout
//!                                                             make the call throw)
//! ```
//!
//! A run that never pauses is never registered here. A paused run keeps its
//! sandbox thread blocked inside the tool call (its compute clock stopped)
//! and is continued in place by `resume`. Its state is also saved to the
//! store with a journal of every tool-call answer so far, so that after a
//! restart `resume` can replay the program deterministically up to the
//! pending call (answering earlier calls from the journal, not upstream) and
//! apply the decision there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor_sandbox::RunOutcome;
use executor_store::{Principal, now_ms};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

/// How long a human has to decide, by default (SPEC §12).
pub const APPROVAL_WINDOW: Duration = Duration::from_secs(4 * 60);

/// Longest argument preview in the paused message (SPEC §12).
const MAX_ARGS_PREVIEW_CHARS: usize = 4_000;

/// What the human decided about one pending call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Accept,
    Decline,
    Cancel,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
        }
    }
}

impl std::str::FromStr for Action {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "accept" => Ok(Action::Accept),
            "decline" => Ok(Action::Decline),
            "cancel" => Ok(Action::Cancel),
            other => Err(format!(
                "action must be accept, decline or cancel, not {other:?}"
            )),
        }
    }
}

/// A pending approval as the human is asked about it, inline (native
/// elicitation) rather than through the `resume` tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub execution_id: String,
    /// `Approve <address>?` with the arguments (≤ 4,000 chars).
    pub message: String,
}

impl ApprovalRequest {
    fn new(execution_id: &str, address: &str, args: &Value) -> Self {
        ApprovalRequest {
            execution_id: execution_id.to_string(),
            message: format!("Approve {address}?\n\nArguments:\n{}", args_preview(args)),
        }
    }

    pub(crate) fn of(execution_id: &str, pending: &PendingCall) -> Self {
        Self::new(execution_id, &pending.path, &pending.args)
    }

    /// The request a paused envelope (SPEC §9) stands for.
    pub fn from_paused(paused: &Value) -> Option<Self> {
        if !is_paused(paused) {
            return None;
        }
        let sc = &paused["structuredContent"];
        Some(Self::new(
            sc["executionId"].as_str()?,
            sc["interaction"]["address"].as_str()?,
            &sc["interaction"]["args"],
        ))
    }
}

/// Asks the human about a pending call inline (native elicitation mode).
/// `None` means nobody could answer (the client failed or went away): the
/// call is then cancelled. The transport that can reach the client
/// implements this; the engine only waits on it, bounded by the window.
pub trait ApprovalPrompt: Send + Sync {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'static, Option<Action>>;
}

/// The decision a waiting tool call receives.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    Accept,
    Decline { reason: &'static str },
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
}

/// One answered tool call, for deterministic replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub index: usize,
    pub path: String,
    pub args: Value,
    pub answer: Result<Value, String>,
}

/// What the runner reports to whoever is waiting on the execution.
pub(crate) enum RunEvent {
    Paused(PendingCall, Vec<JournalEntry>),
    Finished(RunOutcome),
}

/// Answers "may this call run?" for one execution. Created per run.
pub(crate) struct ApprovalGate {
    events: mpsc::UnboundedSender<RunEvent>,
    waiting: Mutex<Option<oneshot::Sender<Decision>>>,
    /// Decisions known in advance (replay after a restart), by call index.
    preset: Mutex<HashMap<usize, Decision>>,
    journal: Mutex<Vec<JournalEntry>>,
    /// Answers to replay for calls made before a restart, by call index.
    replay: HashMap<usize, JournalEntry>,
    next_index: AtomicUsize,
    window: Duration,
}

impl ApprovalGate {
    pub(crate) fn new(
        events: mpsc::UnboundedSender<RunEvent>,
        journal: Vec<JournalEntry>,
        preset: Option<(usize, Decision)>,
        window: Duration,
    ) -> Self {
        ApprovalGate {
            window,
            events,
            waiting: Mutex::new(None),
            preset: Mutex::new(preset.into_iter().collect()),
            replay: journal.iter().map(|e| (e.index, e.clone())).collect(),
            journal: Mutex::new(journal),
            next_index: AtomicUsize::new(0),
        }
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
    ) -> Option<Result<Value, String>> {
        let entry = self.replay.get(&index)?;
        if entry.path == path && entry.args == *args {
            Some(entry.answer.clone())
        } else {
            Some(Err(format!(
                "the execution could not be resumed: after the restart the program called {path} where it had called {} (run execute again)",
                entry.path
            )))
        }
    }

    pub(crate) fn remember(
        &self,
        index: usize,
        path: &str,
        args: &Value,
        answer: &Result<Value, String>,
    ) {
        if let Ok(mut j) = self.journal.lock()
            && !j.iter().any(|e| e.index == index)
        {
            j.push(JournalEntry {
                index,
                path: path.to_string(),
                args: args.clone(),
                answer: answer.clone(),
            });
        }
    }

    /// Pauses the execution until a decision arrives or the window closes.
    pub(crate) fn decide(
        self: &Arc<Self>,
        index: usize,
        path: &str,
        args: &Value,
    ) -> BoxFuture<'static, Decision> {
        let preset = self.preset.lock().ok().and_then(|mut p| p.remove(&index));
        if let Some(decision) = preset {
            return Box::pin(async move { decision });
        }
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            *w = Some(tx);
        }
        let pending = PendingCall {
            index,
            path: path.to_string(),
            args: args.clone(),
            expires_at_ms: now_ms() + self.window.as_millis() as i64,
        };
        let journal = self.journal.lock().map(|j| j.clone()).unwrap_or_default();
        let _ = self.events.send(RunEvent::Paused(pending, journal));
        let window = self.window;
        Box::pin(async move {
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

    /// Hands the human's decision to the waiting call. False when no call
    /// is waiting (it timed out, or the run is gone).
    pub(crate) fn answer(&self, decision: Decision) -> bool {
        let waiting = self.waiting.lock().ok().and_then(|mut w| w.take());
        waiting.is_some_and(|tx| tx.send(decision).is_ok())
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

/// The paused `CallToolResult` (SPEC §9).
pub(crate) fn paused_envelope(execution_id: &str, pending: &PendingCall) -> Value {
    let preview = args_preview(&pending.args);
    let ttl_ms = (pending.expires_at_ms - now_ms()).max(0);
    let expires_at = iso8601(pending.expires_at_ms);
    let message = format!("Approve {}?", pending.path);
    let text = format!(
        "Execution paused: Approve {path}?\n\nArguments:\n{preview}\n\nexecutionId: {execution_id}\nExpires at: {expires_at} (in {secs} s)\n\nAsk the user whether to run this call. Then call the `resume` tool with {{\"executionId\": \"{execution_id}\", \"action\": \"accept\"}} to run it, or \"decline\" to refuse it (the call then throws inside the program).",
        path = pending.path,
        secs = ttl_ms / 1000,
    );
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": {
            "status": "waiting_for_interaction",
            "executionId": execution_id,
            "expiresAt": expires_at,
            "ttlMs": ttl_ms,
            "interaction": { "kind": "form", "message": message, "address": pending.path, "args": pending.args },
        },
    })
}

/// The arguments as pretty JSON, cut at 4,000 characters.
fn args_preview(args: &Value) -> String {
    let args_text = serde_json::to_string_pretty(args).unwrap_or_default();
    let preview: String = args_text.chars().take(MAX_ARGS_PREVIEW_CHARS).collect();
    if preview.len() < args_text.len() {
        format!("{preview}\n… (arguments truncated)")
    } else {
        preview
    }
}

/// Whether a `CallToolResult` is the paused envelope.
pub fn is_paused(result: &Value) -> bool {
    result["structuredContent"]["status"] == "waiting_for_interaction"
}

/// Why a resume cannot proceed (SPEC §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeRefusal {
    NotFound,
    Expired,
    Forbidden,
    AlreadySettled,
}

impl ResumeRefusal {
    fn status(self) -> &'static str {
        match self {
            ResumeRefusal::NotFound => "execution_not_found",
            ResumeRefusal::Expired => "execution_expired",
            ResumeRefusal::Forbidden => "execution_forbidden",
            ResumeRefusal::AlreadySettled => "execution_already_settled",
        }
    }

    fn explanation(self) -> &'static str {
        match self {
            ResumeRefusal::NotFound => "was not found",
            ResumeRefusal::Expired => "is no longer waiting: its approval window closed",
            ResumeRefusal::Forbidden => "belongs to another account",
            ResumeRefusal::AlreadySettled => "has already been settled with a different action",
        }
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
    pub(crate) posted: watch::Sender<Option<Action>>,
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
                    keep(&s) && s.pending.as_ref().is_some_and(|p| p.expires_at_ms > now)
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
    pub pending: Option<PendingCall>,
    pub journal: Vec<JournalEntry>,
    /// The action and envelope of the resume that settled it.
    pub settled: Option<(Action, Value)>,
}

impl SavedExecution {
    /// The owner's context: who the run acts for when it is continued.
    pub(crate) fn owner_context(&self) -> crate::CallContext {
        crate::CallContext {
            principal: self.owner.clone(),
            session_id: self.session_id.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_582_979_415_123), "2020-02-29T12:30:15.123Z");
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
        let gate = ApprovalGate::new(tx, vec![entry], None, APPROVAL_WINDOW);
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
