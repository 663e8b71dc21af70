//! Who is calling a tool, and from where.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use executor_store::Principal;

/// Who is calling a tool and from where.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub principal: Principal,
    /// None for sessionless (2026-07-28) requests and the CLI.
    pub session_id: Option<String>,
    /// Whether a call that needs approval waits for a human.
    pub approval: ApprovalMode,
    /// For a session's call: whether this node still holds the session,
    /// asked before every outbound call and write made on its behalf
    /// (SPEC §10). None where no lease is held (sessionless, the CLI).
    pub holder: Option<Holder>,
}

/// Asks whether this node still holds the session a call is made for:
/// locally (its own clock) and then on the store.
#[derive(Clone)]
pub struct Holder {
    local: Arc<dyn Fn() -> bool + Send + Sync>,
    store: Arc<dyn Fn() -> HoldFuture + Send + Sync>,
}

type HoldFuture = Pin<Box<dyn Future<Output = Hold> + Send>>;

/// What a [`Holder`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The lease is this node's, at the epoch it was taken with.
    Held,
    /// Another node may hold the session now: nothing more is sent or
    /// written for it from here.
    Lost,
    /// The store did not answer; the call is not made either.
    Unknown(String),
}

impl Hold {
    /// What a store's answer to "does this lease still hold?" means.
    pub fn answered<E: std::fmt::Display>(held: Result<bool, E>) -> Hold {
        match held {
            Ok(true) => Hold::Held,
            Ok(false) => Hold::Lost,
            Err(e) => Hold::Unknown(e.to_string()),
        }
    }
}

impl Holder {
    /// `local` answers from this node's own view, with no I/O; `store`
    /// makes a future that asks the store.
    pub fn new(
        local: impl Fn() -> bool + Send + Sync + 'static,
        store: impl Fn() -> HoldFuture + Send + Sync + 'static,
    ) -> Self {
        Holder {
            local: Arc::new(local),
            store: Arc::new(store),
        }
    }

    /// Both halves: what an outbound call asks first.
    pub async fn check(&self) -> Hold {
        match (self.local)() {
            true => (self.store)().await,
            false => Hold::Lost,
        }
    }

    /// This node's own view only (no round trip).
    pub fn check_locally(&self) -> Hold {
        match (self.local)() {
            true => Hold::Held,
            false => Hold::Lost,
        }
    }
}

impl std::fmt::Debug for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Holder")
    }
}

/// Whether a call that needs approval (SPEC §9) waits for a human.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ApprovalMode {
    /// It pauses until someone decides (every agent's call).
    #[default]
    AskAHuman,
    /// The caller is the operator calling one tool by name (the management
    /// API's `tools/call`, SPEC §13): the approval counts as given, by the
    /// caller; `block` still applies.
    GivenByCaller,
    /// It pauses until someone decides in the console (a session opened
    /// with `elicitation_mode=console`, SPEC §14): the agent's `resume`
    /// does not decide, it waits for that decision.
    InConsole,
}

/// Resolves once the client that sent a request has gone away (its
/// connection closed). A transport whose work outlives its client (an SSE
/// POST answer waits in the event log for the next GET) hands this down,
/// so that work which has not started yet — an execution still waiting
/// for its turn in its org's queue — leaves instead of running for no one.
#[derive(Clone)]
pub struct ClientGone(Arc<dyn Fn() -> GoneFuture + Send + Sync>);

type GoneFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

impl ClientGone {
    /// `gone` makes a future that resolves when the client has gone; it
    /// may be called more than once.
    pub fn new(gone: impl Fn() -> GoneFuture + Send + Sync + 'static) -> Self {
        ClientGone(Arc::new(gone))
    }

    /// Waits until the client has gone.
    pub async fn wait(&self) {
        (self.0)().await
    }
}

impl std::fmt::Debug for ClientGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientGone")
    }
}
