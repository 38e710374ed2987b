//! Interrupts and durable approvals: a run that needs a person's decision ends with
//! [`Outcome::Interrupted`](super::Outcome::Interrupted), its pending calls are saved with the
//! thread ([`Thread::pending`](crate::store::Thread::pending)), and a later request — from any
//! process sharing the store, hours or days later — answers them with [`Approvals`]
//! ([`AgentRequest::approvals`](super::AgentRequest::approvals), or the server's
//! `POST /threads/{id}/approvals`).
//!
//! ```
//! use serde_json::json;
//! use tower::filter::FilterLayer;
//! use tower_agent_core::{
//!     Agent, AgentRequest, BoxError,
//!     agent::{Approved, Outcome, PendingApproval, interrupt::Approvals},
//!     model::ScriptedModel,
//!     store::MemoryStore,
//!     tool::{ToolRequest, tool_fn},
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! // A tool layer that parks every `deploy` call until a person approves it.
//! let gate = FilterLayer::new(|req: ToolRequest| {
//!     if req.call.name == "deploy" && req.extensions.get::<Approved>().is_none() {
//!         return Err(PendingApproval::new(req.call.clone(), "deploys need a person"));
//!     }
//!     Ok(req)
//! });
//! let deploy = tool_fn("deploy", "Deploys", json!({"type": "object"}), |_args, _ctx| async {
//!     Ok::<_, BoxError>("deployed v2".to_owned())
//! });
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("deploy", json!({"env": "prod"})).text("Done."))
//!     .tool(deploy)
//!     .tool_layer(gate)
//!     .store(MemoryStore::new())
//!     .build();
//!
//! let resp = agent.run(AgentRequest::new("Deploy to prod.").thread("t")).await?;
//! let Outcome::Interrupted { pending } = &resp.outcome else { panic!("{:?}", resp.outcome) };
//! assert_eq!(pending[0].reason, "deploys need a person");
//!
//! // Later, from this process or any other sharing the store: the person's answer.
//! let answer = Approvals::new().approve(&pending[0].id);
//! let resp = agent.run(AgentRequest::approvals("t", answer)).await?;
//! assert_eq!(resp.outcome, Outcome::Finished);
//! assert!(resp.messages.iter().any(|m| m.text() == "deployed v2"));
//! # Ok(())
//! # }
//! ```
//!
//! # The deferring policy
//!
//! With `Hooks::defer_approvals`, a call that a
//! PreToolUse hook answers with `PreToolUse::Ask`
//! (and no PermissionRequest hook decides), or with
//! `PreToolUse::Defer` — for any number of calls in
//! the step — is not run and not sent to an `Approval`
//! service: it becomes a [`PendingCall`]. The other calls of the step run to the end and their
//! results are kept in the thread; then the run ends with
//! [`Outcome::Interrupted`](super::Outcome::Interrupted) listing the pending calls (also in
//! the last event, [`AgentEvent::AgentStop`](super::AgentEvent::AgentStop)). A deny of a hook
//! still wins over an ask or a defer; an abort still ends the run with `Aborted`. Claude
//! Code command hooks (`permissionDecision: "ask"` or `"defer"`) get the policy the same way:
//! `CommandHooks::into_hooks().defer_approvals()` (see
//! `command`).
//!
//! A step that ends otherwise (an abort, a cancellation) keeps its pending calls as well: the
//! thread waits for their answer (or a new prompt) either way.
//!
//! # Answering
//!
//! An [`Approvals`] request must decide **exactly** the pending calls of the thread, each once:
//!
//! - [`Decision::Approve`]: the call runs (once) with the arguments the model generated;
//! - [`Decision::Edit`]: the call runs with other arguments (PreToolUse hooks run again on
//!   them — a deny still wins — and PostToolUse hooks see them);
//! - [`Decision::Deny`]: the call never runs; the model gets `denied: {reason}` as its output.
//!
//! The calls' asks and defers are settled by the decision: the hooks that asked are not asked
//! again for these calls. A request that names a call that is not pending (already decided, or
//! never asked: a forged id), that misses a pending call, names one twice, or comes for a
//! thread with nothing pending is refused with an [`ApprovalError`] (the run's
//! [`Error`](crate::Error) is [`is_approvals`](crate::Error::is_approvals)) and changes
//! nothing.
//!
//! # Exactly once
//!
//! The decision is taken in one save: the run that answers first saves the thread with the
//! decided calls out of `pending` (and a placeholder output for each approved call: "may or may
//! not have happened", replaced by the real output when the call ends) **before** any approved
//! call starts. A second request for the same calls then finds nothing pending and is refused.
//! Across replicas this relies on the server's per-thread lease and the store's
//! compare-and-swap ([`ThreadStore::lease`](crate::store::ThreadStore::lease), `Postgres`); in
//! one process, on the server's one-run-per-thread rule. [`Agent::run`](super::Agent::run)
//! takes no lease: calling it with approvals from two tasks or processes at once is the
//! caller's race to avoid, by taking the lease around the run (the threads guide, "Who takes
//! a thread's lease").
//!
//! The approved calls are saved with the thread
//! ([`Thread::approved`](crate::store::Thread::approved)) from the decision's save until
//! their outputs are. A run that stops in between (its process killed) is finished by
//! [`AgentRequest::recover`](super::AgentRequest::recover) with the journal's rules
//! ([`store::journal`](crate::store::journal)): a call that never started runs, once; one
//! that finished has its recorded output replayed; one in doubt runs again only if its tool
//! is idempotent, else the model is told it may or may not have happened. A new prompt
//! instead of a recovery runs nothing: each approved call gets its recorded output, or an
//! output saying it did not happen (not started) or may have (in doubt).
//!
//! A new prompt on a thread with pending calls denies them (`denied: a new prompt was sent
//! instead of an answer to the approval`) before the prompt: the thread stays valid.
//!
//! # Caps
//!
//! [`MAX_DECISIONS`] (1024) decisions per request; the pending calls of a thread are the calls
//! of one model response.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use crate::event::PendingCall;
use crate::message::{Message, Messages, Role, ToolCall, ToolOutput};

/// The most decisions one [`Approvals`] request may carry; more is refused
/// ([`ApprovalError::TooMany`]).
pub const MAX_DECISIONS: usize = 1024;

/// The decision on one pending call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Run the call as the model asked.
    Approve,
    /// Do not run it; the model gets `denied: {reason}`.
    Deny {
        /// Why (for the model).
        reason: String,
    },
    /// Run it with these arguments instead.
    Edit {
        /// The arguments to run it with.
        arguments: serde_json::Value,
    },
}

/// A decision with the id of the call it is for (the JSON of one entry of
/// `POST /threads/{id}/approvals`: `{"call_id": "...", "decision": "approve"}`,
/// `{"call_id": "...", "decision": "deny", "reason": "..."}`,
/// `{"call_id": "...", "decision": "edit", "arguments": {...}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallDecision {
    /// The pending call's id.
    pub call_id: String,
    /// What to do with it.
    #[serde(flatten)]
    pub decision: Decision,
}

/// The decisions on a thread's pending calls: one per call, in any order.
///
/// ```
/// use serde_json::json;
/// use tower_agent_core::agent::Approvals;
///
/// let approvals = Approvals::new()
///     .approve("call_1_0")
///     .deny("call_1_1", "not on production")
///     .edit("call_1_2", json!({"path": "/tmp/x"}));
/// assert_eq!(approvals.decisions().len(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[must_use]
pub struct Approvals {
    /// The decisions.
    pub decisions: Vec<CallDecision>,
}

impl Approvals {
    /// No decisions yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `decision` for the call `call_id`.
    pub fn decide(mut self, call_id: impl Into<String>, decision: Decision) -> Self {
        self.decisions.push(CallDecision {
            call_id: call_id.into(),
            decision,
        });
        self
    }

    /// Approves the call `call_id`.
    pub fn approve(self, call_id: impl Into<String>) -> Self {
        self.decide(call_id, Decision::Approve)
    }

    /// Denies the call `call_id`, with a reason for the model.
    pub fn deny(self, call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        self.decide(
            call_id,
            Decision::Deny {
                reason: reason.into(),
            },
        )
    }

    /// Approves the call `call_id` with other arguments.
    pub fn edit(self, call_id: impl Into<String>, arguments: serde_json::Value) -> Self {
        self.decide(call_id, Decision::Edit { arguments })
    }

    /// The decisions.
    pub fn decisions(&self) -> &[CallDecision] {
        &self.decisions
    }
}

/// Why an [`Approvals`] request was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The request has no thread id, or the thread does not exist.
    NoThread,
    /// The thread has no pending call: its calls were decided already (a stale request).
    NothingPending,
    /// The call is not pending on the thread (decided already, or never asked: a forged id).
    NotPending(String),
    /// The call is decided twice in the request.
    Duplicate(String),
    /// These pending calls have no decision.
    Missing(Vec<String>),
    /// More than [`MAX_DECISIONS`] decisions.
    TooMany(usize),
}

impl ApprovalError {
    /// Whether the request is stale: the decisions came after the calls were decided (HTTP
    /// `409`); the other errors are malformed requests (`422`), or `404` for
    /// [`NoThread`](Self::NoThread).
    pub fn is_stale(&self) -> bool {
        matches!(self, ApprovalError::NothingPending)
    }

    /// The `ApprovalError` in an error's source chain, if any.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ApprovalError> {
        crate::error::Abort::find_source::<ApprovalError>(err)
    }
}

impl std::fmt::Display for ApprovalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalError::NoThread => f.write_str("approvals need an existing thread"),
            ApprovalError::NothingPending => {
                f.write_str("the thread has no call waiting for approval (already decided?)")
            }
            ApprovalError::NotPending(id) => {
                write!(f, "call `{id}` is not waiting for approval on this thread")
            }
            ApprovalError::Duplicate(id) => write!(f, "call `{id}` is decided twice"),
            ApprovalError::Missing(ids) => {
                write!(f, "pending calls without a decision: {}", ids.join(", "))
            }
            ApprovalError::TooMany(n) => {
                write!(f, "{n} decisions: at most {MAX_DECISIONS} per request")
            }
        }
    }
}

impl std::error::Error for ApprovalError {}

/// The error a tool layer (or a tool) fails a call with to **park** it for a person's
/// decision: the loop does not run the call, keeps it as a [`PendingCall`] (with `reason`),
/// lets the step's other calls finish, and ends the run with
/// [`Outcome::Interrupted`](super::Outcome::Interrupted); the thread keeps the pending call
/// until [`Approvals`] answer it (see the [module](self) for the rules). A call a person then
/// approves runs through the same tool stack with an [`Approved`] mark in its request's
/// extensions, so the layer that parked it lets it through.
///
/// The crate's hook layer parks calls this way for its deferring policy
/// (`Hooks::defer_approvals`); a layer of
/// yours can do the same (the stateful-layer guide, "A layer that asks a person", has one).
/// The error is found anywhere in the error's source chain. The loop needs a thread to keep
/// the call in: a run without a store and thread id ends `Interrupted` all the same, and the
/// decision cannot be given later ([`ApprovalError::NoThread`]).
///
/// ```
/// use tower_agent_core::agent::{Approved, PendingApproval};
/// use tower_agent_core::{BoxError, context::RunContext, message::ToolCall, tool::ToolRequest};
///
/// // In a tool layer's `call`: park a call the first time, let it through once approved.
/// fn gate(req: &ToolRequest) -> Result<(), BoxError> {
///     if req.call.name == "deploy" && req.extensions.get::<Approved>().is_none() {
///         return Err(PendingApproval::new(req.call.clone(), "deploys need a person").into());
///     }
///     Ok(())
/// }
/// let call = ToolCall::new("c1", "deploy", serde_json::json!({}));
/// # let ctx = RunContext::new();
/// let err = gate(&ToolRequest::new(call.clone(), ctx.clone())).unwrap_err();
/// assert_eq!(PendingApproval::find(&*err).unwrap().reason(), "deploys need a person");
/// assert!(gate(&ToolRequest::new(call, ctx).with_extension(Approved)).is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct PendingApproval {
    call: ToolCall,
    reason: String,
}

impl PendingApproval {
    /// Parks `call` (as the model made it: a person decides on these arguments) for `reason`,
    /// which the [`PendingCall`] keeps and the application shows the person.
    pub fn new(call: ToolCall, reason: impl Into<String>) -> Self {
        PendingApproval {
            call,
            reason: reason.into(),
        }
    }

    /// The call that waits.
    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    /// Why it waits.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The `PendingApproval` in an error's source chain, if any.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Self> {
        crate::error::Abort::find_source::<Self>(err)
    }
}

impl std::fmt::Display for PendingApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool call `{}` ({}) waits for approval: {}",
            self.call.name, self.call.id, self.reason
        )
    }
}

impl std::error::Error for PendingApproval {}

/// The mark the loop puts in the extensions of a tool request whose call a person approved
/// (or edited) with [`Approvals`]: the call's asks and defers are settled, so a layer that
/// parked it with [`PendingApproval`] lets it through. Only the calls of an answer to an
/// interrupted run carry it (not the calls the model makes next).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Approved;

/// The pending calls with their decisions, in the order the model made them.
pub(crate) fn check(
    pending: &[PendingCall],
    approvals: &Approvals,
) -> Result<Vec<(PendingCall, Decision)>, ApprovalError> {
    if approvals.decisions.len() > MAX_DECISIONS {
        return Err(ApprovalError::TooMany(approvals.decisions.len()));
    }
    if pending.is_empty() {
        return Err(ApprovalError::NothingPending);
    }
    let mut by_id: HashMap<&str, &Decision> = HashMap::new();
    for d in &approvals.decisions {
        if !pending.iter().any(|p| p.id == d.call_id) {
            return Err(ApprovalError::NotPending(d.call_id.clone()));
        }
        if by_id.insert(d.call_id.as_str(), &d.decision).is_some() {
            return Err(ApprovalError::Duplicate(d.call_id.clone()));
        }
    }
    let missing: Vec<String> = pending
        .iter()
        .filter(|p| !by_id.contains_key(p.id.as_str()))
        .map(|p| p.id.clone())
        .collect();
    if !missing.is_empty() {
        return Err(ApprovalError::Missing(missing));
    }
    Ok(pending
        .iter()
        .map(|p| (p.clone(), by_id[p.id.as_str()].clone()))
        .collect())
}

/// Why the pending calls of a thread that gets a new prompt are denied.
pub(crate) const SUPERSEDED: &str = "a new prompt was sent instead of an answer to the approval";

/// The output an approved call has in the thread until it ends.
pub(crate) fn placeholder(id: &str) -> ToolOutput {
    ToolOutput::error(
        id.to_owned(),
        "approved, but the run that was to make the call ended before the call finished: it \
         may or may not have happened",
    )
}

/// The output of a denied call.
pub(crate) fn denied(id: &str, reason: &str) -> ToolOutput {
    ToolOutput::error(id.to_owned(), format!("denied: {reason}"))
}

/// Inserts `outputs` (of calls of one assistant message) after that message's tool results in
/// `history`; the index of the first one inserted.
pub(crate) fn insert_outputs(history: &mut Messages, outputs: Vec<ToolOutput>) -> usize {
    let Some(first) = outputs.first() else {
        return history.len();
    };
    let at = results_end(history, &first.call_id);
    for (i, output) in outputs.into_iter().enumerate() {
        history.insert(at + i, Message::from(output));
    }
    at
}

/// The index past the tool results that follow the assistant message making the call `id`
/// (the end of the history if no message makes it).
fn results_end(history: &Messages, id: &str) -> usize {
    let asked = history
        .iter()
        .rposition(|m| m.role == Role::Assistant && m.tool_calls.iter().any(|c| c.id == id))
        .map_or(history.len(), |i| i + 1);
    let mut at = asked;
    while history.get(at).is_some_and(|m| m.role == Role::Tool) {
        at += 1;
    }
    at
}

/// What an approvals request does to the thread before its calls run: the outputs in the
/// order of the calls (denials final, approvals placeholders) and the approved calls, each
/// with the arguments it runs with ([`Thread::approved`](crate::store::Thread::approved)).
pub(crate) fn prepare(decided: &[(PendingCall, Decision)]) -> (Vec<ToolOutput>, Vec<PendingCall>) {
    let mut outputs = Vec::with_capacity(decided.len());
    let mut calls = Vec::new();
    for (p, d) in decided {
        match d {
            Decision::Deny { reason } => outputs.push(denied(&p.id, reason)),
            Decision::Approve => {
                outputs.push(placeholder(&p.id));
                calls.push(p.clone());
            }
            Decision::Edit { arguments } => {
                outputs.push(placeholder(&p.id));
                let mut call = p.clone();
                call.arguments = arguments.clone();
                calls.push(call);
            }
        }
    }
    (outputs, calls)
}

/// Puts `output` (a tool result message) in the place of its call's placeholder in
/// `history`, or after its call's results if the placeholder is not there.
pub(crate) fn replace_placeholder(history: &mut Messages, output: Message) {
    let id = output.tool_call_id.clone().unwrap_or_default();
    let placeholder = history
        .iter()
        .rposition(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&*id));
    match placeholder {
        Some(at) => history.splice(at..at + 1, [output]),
        None => {
            let at = results_end(history, &id);
            history.insert(at, output);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pending(ids: &[&str]) -> Vec<PendingCall> {
        ids.iter()
            .map(|id| PendingCall::new(ToolCall::new(*id, "t", json!({})), "asked".into()))
            .collect()
    }

    #[test]
    fn decisions_must_cover_exactly_the_pending_calls() {
        let p = pending(&["a", "b"]);
        let ok = check(&p, &Approvals::new().deny("b", "no").approve("a")).unwrap();
        assert_eq!(ok[0].0.id, "a");
        assert_eq!(
            ok[1].1,
            Decision::Deny {
                reason: "no".into()
            }
        );
        assert_eq!(
            check(&p, &Approvals::new().approve("a")),
            Err(ApprovalError::Missing(vec!["b".into()]))
        );
        assert_eq!(
            check(&p, &Approvals::new().approve("a").approve("b").approve("x")),
            Err(ApprovalError::NotPending("x".into()))
        );
        assert_eq!(
            check(
                &p,
                &Approvals::new().approve("a").deny("a", "n").approve("b")
            ),
            Err(ApprovalError::Duplicate("a".into()))
        );
        assert_eq!(
            check(&[], &Approvals::new().approve("a")),
            Err(ApprovalError::NothingPending)
        );
    }

    #[test]
    fn decisions_json() {
        let a: Approvals = serde_json::from_value(json!({"decisions": [
            {"call_id": "a", "decision": "approve"},
            {"call_id": "b", "decision": "deny", "reason": "no"},
            {"call_id": "c", "decision": "edit", "arguments": {"n": 2}},
        ]}))
        .unwrap();
        assert_eq!(
            a,
            Approvals::new()
                .approve("a")
                .deny("b", "no")
                .edit("c", json!({"n": 2}))
        );
    }
}
