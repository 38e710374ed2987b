//! The decision of each hook event, and what hook callbacks may return.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;

use tower_agent_core::{
    message::ToolOutput,
    model::{ModelRequest, ModelResponse},
};

/// What a PreToolUse hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum PreToolUse {
    /// No opinion: go on.
    Continue,
    /// Allow the call (later hooks may still deny or ask).
    Allow,
    /// Deny the call; the model sees `PreToolUse:<tool> hook error: <reason>` (an error), in
    /// Claude Code's words. [`Refuse`](Self::Refuse) words it otherwise.
    Deny(String),
    /// Deny the call and answer it with this output: what the model sees is the hook's own
    /// (its text, error flag, parts, metadata; the call id is set to the call's), for hooks
    /// that word a refusal as another agent does (Codex's `Command blocked by PreToolUse
    /// hook: …`, Gemini CLI's `Tool execution blocked: …`, as the command
    /// hooks (`tower_agent::command`) of their files answer). Otherwise it is a `Deny`: the first
    /// `Deny`, `Refuse` or `Abort` ends the chain (later hooks do not run, an earlier
    /// hook's ask, defer or allow counts for nothing), the contexts added before it are
    /// added to the output, and no PostToolUse, PostToolUseFailure or PermissionDenied hook
    /// sees the call (it did not run, and no approval denied it).
    Refuse(ToolOutput),
    /// Ask for approval: the PermissionRequest hooks
    /// ([`Hooks::on_permission_request`](super::Hooks::on_permission_request)), then the
    /// [`Approval`](super::Approval) service. With nobody to ask (no service, no
    /// [deferring policy](super::Hooks::defer_approvals)) the call is refused at once with
    /// the reason alone, no PermissionRequest hook asked, as Claude Code does headless (unless
    /// a [permission rule](super::Permission) asks about the call too).
    Ask(String),
    /// Defer the call (the reference's non-interactive `defer`): when it is the only call of
    /// its step, the tool does not run and the run ends
    /// [`Outcome::Deferred`](tower_agent_core::agent::Outcome::Deferred) with the call, so the caller can
    /// decide it later; in a step with several calls it is ignored with a warning and the
    /// call goes on through the normal permission flow. Precedence: deny > defer > ask >
    /// allow.
    Defer,
    /// Replace the call's arguments (the next hooks see the new ones).
    Rewrite(serde_json::Value),
    /// Add context for the model about the call: it follows the step's tool results (a
    /// [hook context](tower_agent_core::message::Message::hook_context) message; the output carries it
    /// until then, [`ToolOutput::add_context`]), also when the call is denied.
    AddContext(String),
    /// Deny the call and end the run: the tool path fails with an
    /// [`Abort`](tower_agent_core::error::Abort), and the run ends
    /// [`Outcome::Aborted`](tower_agent_core::agent::Outcome::Aborted) with this reason once the step's
    /// other calls are done.
    Abort(String),
    /// Several decisions, applied in order as if returned by consecutive hooks (a `Deny`,
    /// `Refuse` or `Abort` stops the rest). For hooks that decide several things at once, such as
    /// command hooks (`tower_agent::command`).
    Many(Vec<PreToolUse>),
}

/// What a PostToolUse hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum PostToolUse {
    /// Keep the output.
    Keep,
    /// Replace the output (text, error flag, metadata; the call id is kept).
    Replace(ToolOutput),
    /// Add context for the model about the call: it follows the step's tool results (a
    /// [hook context](tower_agent_core::message::Message::hook_context) message).
    AddContext(String),
    /// End the run: the tool path fails with an [`Abort`](tower_agent_core::error::Abort), and the run
    /// ends [`Outcome::Aborted`](tower_agent_core::agent::Outcome::Aborted) with this reason once the
    /// step's other calls are done.
    Abort(String),
    /// Several decisions, applied in order as if returned by consecutive hooks (an `Abort`
    /// stops the rest).
    Many(Vec<PostToolUse>),
}

/// What a PostToolUseFailure hook decides (the call failed or its output is an error).
#[derive(Debug, Clone, PartialEq)]
pub enum PostToolUseFailure {
    /// Nothing to add.
    Keep,
    /// Add context next to the error.
    AddContext(String),
    /// End the run: the tool path fails with an [`Abort`](tower_agent_core::error::Abort), and the run
    /// ends [`Outcome::Aborted`](tower_agent_core::agent::Outcome::Aborted) with this reason.
    Abort(String),
}

/// What a PermissionRequest hook decides about a call that needs approval (before the
/// [`Approval`](super::Approval) service is asked).
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionRequest {
    /// No decision: the next hooks, then the approval service, decide.
    NoDecision,
    /// Grant the permission: the call runs, with `updated_input` as its arguments if given
    /// (the whole input is replaced).
    Allow {
        /// The new arguments, if any.
        updated_input: Option<serde_json::Value>,
    },
    /// Deny it: the model sees the message alone (as in Claude Code); `interrupt` also ends
    /// the run
    /// ([`Outcome::Aborted`](tower_agent_core::agent::Outcome::Aborted) with the message).
    Deny {
        /// Why, for the model.
        message: String,
        /// End the run too.
        interrupt: bool,
    },
}

/// What permission rules say about a tool call, once its PreToolUse hooks have run (see
/// [`Hooks::permission_rules`](super::Hooks::permission_rules)): Claude Code's
/// `permissions.deny`, `permissions.ask` and `permissions.allow`, as command
/// hooks (`tower_agent::command`) read them, or any policy of yours.
///
/// Several checks of one set combine, the most cautious first: `Deny` > `Ask` > `Allow` >
/// `NotAllowed` > `NoRule`. Each text is what the model sees if the call is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// No rule speaks of the call: it runs (unless a PreToolUse hook asks).
    NoRule,
    /// A rule allows the call: it runs without being asked about (unless a PreToolUse hook
    /// asks).
    Allow,
    /// No rule allows the call, and calls must be allowed: unless a PreToolUse hook allowed
    /// it, it goes the approval path (PermissionRequest hooks, then the
    /// [`Approval`](super::Approval) service), and is refused with this text when nobody
    /// approves it.
    NotAllowed(String),
    /// A rule asks about the call: the approval path, even when a PreToolUse hook allowed
    /// it; refused with this text when nobody approves it.
    Ask(String),
    /// A rule denies the call: refused with this text, with no PermissionRequest hook, no
    /// approval, whatever the hooks said.
    Deny(String),
}

impl Permission {
    /// How cautious: the higher wins when checks combine.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Permission::NoRule => 0,
            Permission::NotAllowed(_) => 1,
            Permission::Allow => 2,
            Permission::Ask(_) => 3,
            Permission::Deny(_) => 4,
        }
    }
}

/// What a PermissionDenied hook decides about a call the approval path denied on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionDenied {
    /// The denial stands; the model sees the original denial.
    Stand,
    /// Tell the model it may retry the call (the denial itself stands).
    Retry,
}

/// What a PostToolBatch hook decides once every call of a step has resolved, before the next
/// model call.
#[derive(Debug, Clone, PartialEq)]
pub enum PostToolBatch {
    /// Go on.
    Continue,
    /// Add context for the next model call (a [hook
    /// context](tower_agent_core::message::Message::hook_context) message after the tool results).
    AddContext(String),
    /// Stop the loop before the next model call: the reason is added to the conversation (a
    /// `<system-hook>` block, so the model sees it if the thread goes on) and the run ends
    /// [`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked) with it.
    Stop(String),
    /// Several decisions, in order (a `Stop` ends the rest).
    Many(Vec<PostToolBatch>),
}

/// What a Notification hook sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Notification {
    /// The type, which matchers match: `permission_prompt` (an approval is asked) or
    /// `warning` (a [`RunContext::warn`](tower_agent_core::context::RunContext::warn)).
    pub notification_type: &'static str,
    /// The text.
    pub message: String,
    /// A title, if the type has one (`Permission needed` for `permission_prompt`).
    pub title: Option<String>,
}

impl Notification {
    /// A notification of `notification_type`.
    pub fn new(
        notification_type: &'static str,
        message: impl Into<String>,
        title: Option<String>,
    ) -> Self {
        Notification {
            notification_type,
            message: message.into(),
            title,
        }
    }
}

/// What a UserPromptSubmit hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum UserPrompt {
    /// Go on.
    Continue,
    /// Block the run: it ends with [`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked) and
    /// the prompt is not added to the thread.
    Block(String),
    /// Add context after the prompt (a [hook context](tower_agent_core::message::Message::hook_context)
    /// message, after the SessionStart hooks' contexts).
    AddContext(String),
    /// Replace the prompt (the next hooks see the new one).
    Rewrite(String),
}

/// What a Stop or SubagentStop hook decides when the agent is about to finish.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// Let it finish.
    Finish,
    /// Make it go on: the feedback is added as a user message and the agent continues, with
    /// `stop_hook_active` set for the rest of the run (at most 8 times in a row with no tool
    /// call in between, by default: see [`Hooks::stop_cap`](super::Hooks::stop_cap)).
    Continue(String),
    /// Add context for the model if the agent goes on: after the feedback, one [hook
    /// context](tower_agent_core::message::Message::hook_context) message holds every such context of
    /// the stop (Claude Code follows a blocking command's reason with `Stop hook blocking
    /// error from command: "<command>": <reason>`). Alone it does not keep the agent going.
    AddContext(String),
    /// Several decisions, as if returned by consecutive hooks. For hooks that decide several
    /// things at once, such as command hooks (`tower_agent::command`).
    Many(Vec<Stop>),
}

/// What a SessionStart hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionStart {
    /// Nothing to add.
    Continue,
    /// Add context to the system prompt of this run.
    AddContext(String),
    /// End the run before the prompt enters the thread: it ends with
    /// [`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked) and this reason.
    Block(String),
}

/// What a SubagentStart hook decides (it cannot block the subagent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentStart {
    /// Nothing to add.
    Continue,
    /// Add context for the subagent's model: it follows the subagent's prompt, with the
    /// other SubagentStart hooks' contexts, as one [hook
    /// context](tower_agent_core::message::Message::hook_context) (a system message of its first
    /// request), as Claude Code does.
    AddContext(String),
}

/// What a TaskCreated / TaskCompleted hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// Let the task be created / completed.
    Continue,
    /// Prevent it: the `write_todos` call fails with this feedback for the model, and the
    /// list is left unchanged.
    Block(String),
}

/// What a MessageDisplay hook decides (display only: the history keeps the original).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageDisplay {
    /// Display the text as it is (or as an earlier hook replaced it).
    Keep,
    /// Display this instead.
    Replace(String),
}

/// What a before-model hook decides.
#[derive(Debug, Clone)]
pub enum BeforeModel {
    /// Call the model with this (possibly modified) request.
    Continue(ModelRequest),
    /// Don't call the model: answer with this response.
    Respond(ModelResponse),
}

/// What the hooks of the loop's events see (defined by the loop, which builds them).
pub use tower_agent_core::agent::{
    InstructionsInput, MessageDisplayInput, PostCompactInput, PreCompactInput, ResumedSession,
    SessionSource, SessionStartInput, StopFailureInput, StopInput, SubagentStartInput, TaskEvent,
    TaskInput, ToolBatch,
};
/// The error of a deferred call (defined with the crate's errors: the loop recognises it).
pub use tower_agent_core::error::Deferred;

/// What a tool-failure hook sees of the failure.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolFailure {
    /// The error text the model will see.
    pub error: String,
    /// The error output, if the tool returned one (`None` if the tool stack failed).
    pub output: Option<ToolOutput>,
}

// ===== hook results =====

/// A hook's answer, now or later: what a hook closure may return. Implemented for each decision
/// type (answered at once, no allocation) and for any `Send` future of it (boxed).
///
/// `M` tells the two kinds of answer apart: the default for a decision itself, another one for
/// a future of it. It is inferred from what the closure returns and is never written; it lets
/// a type from another crate ([`ModelResponse`], the decision of
/// [`after_model`](super::Hooks::after_model)) be an answer without the compiler having to
/// prove it is not a future. A decision type of yours implements `HookResult<D>` (the default
/// `M`), with [`HookFuture::ready`].
pub trait HookResult<D, M = marker::Now>: Send {
    /// As a future.
    fn into_hook_future(self) -> HookFuture<D>;
}

/// The markers of [`HookResult`]'s two kinds of answer. Public in a private module, as axum's
/// `FromRequest` markers are: users never name them.
mod marker {
    /// The answer is the decision itself.
    #[derive(Debug)]
    pub enum Now {}

    /// The answer is a future of the decision.
    #[derive(Debug)]
    pub enum Later {}
}

/// The future of a hook's answer: ready at once for synchronous hooks.
pub struct HookFuture<D> {
    inner: Inner<D>,
}

enum Inner<D> {
    Ready(Option<D>),
    Boxed(BoxFuture<'static, D>),
    /// A registered hook's future: a panic while polling it becomes the decision that stands
    /// for a failed hook (see `failure`).
    Guarded(
        BoxFuture<'static, D>,
        std::sync::Arc<super::failure::Policy>,
        fn(&super::failure::Policy, Box<dyn std::any::Any + Send>) -> D,
    ),
}

impl<D> HookFuture<D> {
    /// An answer already there.
    pub fn ready(d: D) -> Self {
        HookFuture {
            inner: Inner::Ready(Some(d)),
        }
    }

    /// An answer to wait for.
    pub fn boxed(fut: impl Future<Output = D> + Send + 'static) -> Self {
        HookFuture {
            inner: Inner::Boxed(Box::pin(fut)),
        }
    }

    /// This future, with a panic while it is polled standing for a failed hook of `policy`.
    #[inline]
    pub(crate) fn guarded(self, policy: &std::sync::Arc<super::failure::Policy>) -> Self
    where
        D: super::failure::Failed,
    {
        match self.inner {
            Inner::Boxed(fut) => HookFuture {
                inner: Inner::Guarded(
                    fut,
                    std::sync::Arc::clone(policy),
                    super::failure::Policy::failed::<D>,
                ),
            },
            inner => HookFuture { inner },
        }
    }

    /// The answer, if it is already there (a synchronous hook): a layer can then decide in
    /// `call`, with nothing awaited between its inner service's readiness and its call.
    pub(crate) fn take_ready(&mut self) -> Option<D> {
        match &mut self.inner {
            Inner::Ready(d) => d.take(),
            Inner::Boxed(_) | Inner::Guarded(..) => None,
        }
    }
}

impl<D> HookFuture<D> {
    /// The answer if it is already there, else the future boxed: awaiting the box keeps a
    /// caller's own future small (no answer held inline across the await).
    pub(crate) fn ready_or_boxed(mut self) -> Result<D, Pin<Box<Self>>> {
        self.take_ready().ok_or_else(|| Box::pin(self))
    }
}

impl<D> Unpin for HookFuture<D> {}

impl<D> Future for HookFuture<D> {
    type Output = D;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<D> {
        match &mut self.inner {
            Inner::Ready(d) => Poll::Ready(d.take().expect("HookFuture polled after completion")),
            Inner::Boxed(f) => f.as_mut().poll(cx),
            Inner::Guarded(f, policy, failed) => {
                let poll =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.as_mut().poll(cx)));
                poll.unwrap_or_else(|panic| Poll::Ready(failed(policy, panic)))
            }
        }
    }
}

impl<D> std::fmt::Debug for HookFuture<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookFuture").finish_non_exhaustive()
    }
}

macro_rules! hook_result {
    ($($t:ty),*) => {$(
        impl HookResult<$t> for $t {
            fn into_hook_future(self) -> HookFuture<$t> {
                HookFuture::ready(self)
            }
        }
    )*};
}

hook_result!(
    PreToolUse,
    PermissionRequest,
    PermissionDenied,
    PostToolBatch,
    PostToolUse,
    PostToolUseFailure,
    UserPrompt,
    Stop,
    SessionStart,
    SubagentStart,
    Task,
    MessageDisplay,
    BeforeModel,
    ModelResponse
);

impl<D, F> HookResult<D, marker::Later> for F
where
    F: Future<Output = D> + Send + 'static,
{
    fn into_hook_future(self) -> HookFuture<D> {
        HookFuture::boxed(self)
    }
}
