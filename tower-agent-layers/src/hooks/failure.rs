//! What a Rust hook that panics decides: by default it fails open (the event's neutral
//! decision: the hook is skipped), and a hook marked [`fail_closed`](super::Hooks::fail_closed)
//! fails closed (the event's blocking decision), as a command hook with Claude Code's
//! `"onFailure": "block"` or the Agent SDK's `on_failure="block"`.
//!
//! The panic is caught where the hook is called and where its future is polled; it is logged
//! (`tracing` error, naming the hook) and its message is the blocking decision's reason. Two
//! events have no decision to stand for a failed hook: BeforeModel and AfterModel hooks take
//! the request or response by value, so after their panic there is nothing to go on with, and
//! the panic goes on unwinding as before.

use std::{
    any::Any,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::Arc,
};

use super::{
    BeforeModel, HookFuture, MessageDisplay, PermissionDenied, PermissionRequest, PostModelSwitch,
    PostToolBatch, PostToolUse, PostToolUseFailure, PreModelSwitch, PreToolUse, SessionStart, Stop,
    SubagentStart, Task, UserPrompt,
};
use tower_agent_core::model::ModelResponse;

/// How one registered hook fails: its label (for the reason) and whether it blocks.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) label: String,
    pub(crate) fail_closed: bool,
}

impl Policy {
    /// The decision that stands for the hook after `panic`, or the panic again when the event
    /// has none.
    #[cold]
    #[inline(never)]
    pub(crate) fn failed<D: Failed>(&self, panic: Box<dyn Any + Send>) -> D {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".to_owned());
        let reason = if self.fail_closed {
            format!(
                "hook {} panicked: {what} (the hook is fail-closed)",
                self.label
            )
        } else {
            format!("hook {} panicked: {what}", self.label)
        };
        tracing::error!(hook = %self.label, fail_closed = self.fail_closed, "{reason}");
        match D::failed(reason, self.fail_closed) {
            Some(decision) => decision,
            None => std::panic::resume_unwind(panic),
        }
    }
}

/// Calls a deciding hook: a panic in the call or in its future becomes the decision that
/// stands for a failed hook.
#[inline]
pub(crate) fn guard<D: Failed + 'static>(
    policy: &Arc<Policy>,
    call: impl FnOnce() -> HookFuture<D>,
) -> HookFuture<D> {
    if !D::RECOVERS {
        return call();
    }
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(fut) => fut.guarded(policy),
        Err(panic) => HookFuture::ready(policy.failed(panic)),
    }
}

/// Calls an observing hook: a panic becomes the answer that stands for a failed hook.
#[inline]
pub(crate) fn guard_sync<T: Failed>(policy: &Policy, call: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|panic| policy.failed(panic))
}

/// A decision a failed hook stands for: the blocking one when `block`, else the one that
/// lets things go on as if the hook had not been there. `None`: the event has none.
pub(crate) trait Failed: Sized {
    /// Whether a decision can stand for a failed hook of this event (`false`: `failed` is
    /// always `None`, and the hook is called unguarded — nothing to catch a panic for).
    const RECOVERS: bool = true;

    fn failed(reason: String, block: bool) -> Option<Self>;
}

/// `Failed` for a decision type: `$block` (with the reason `r`) when the hook fails closed,
/// `$open` when it fails open.
macro_rules! failed {
    ($($t:ty => |$r:ident| $block:expr, $open:expr;)*) => {$(
        impl Failed for $t {
            fn failed($r: String, block: bool) -> Option<Self> {
                Some(if block { $block } else { $open })
            }
        }
    )*};
}

failed! {
    PreToolUse => |r| PreToolUse::Deny(r), PreToolUse::Continue;
    PostToolUse => |r| PostToolUse::Abort(r), PostToolUse::Keep;
    PostToolUseFailure => |r| PostToolUseFailure::Abort(r), PostToolUseFailure::Keep;
    PermissionRequest => |r| PermissionRequest::Deny { message: r, interrupt: false },
        PermissionRequest::NoDecision;
    PermissionDenied => |_r| PermissionDenied::Stand, PermissionDenied::Stand;
    PostToolBatch => |r| PostToolBatch::Stop(r), PostToolBatch::Continue;
    UserPrompt => |r| UserPrompt::Block(r), UserPrompt::Continue;
    // A Stop hook blocks the stop: the agent goes on (bounded by the stop cap).
    Stop => |r| Stop::Continue(r), Stop::Finish;
    SessionStart => |r| SessionStart::Block(r), SessionStart::Continue;
    SubagentStart => |_r| SubagentStart::Continue, SubagentStart::Continue;
    Task => |r| Task::Block(r), Task::Continue;
    MessageDisplay => |_r| MessageDisplay::Keep, MessageDisplay::Keep;
    PreModelSwitch => |r| PreModelSwitch::Block(r), PreModelSwitch::Allow;
    PostModelSwitch => |_r| PostModelSwitch::Continue, PostModelSwitch::Continue;
    // Observers: nothing to decide. `should_continue`: `false` ends the run.
    () => |_r| (), ();
    bool => |_r| false, true;
}

impl Failed for BeforeModel {
    const RECOVERS: bool = false;

    fn failed(_: String, _: bool) -> Option<Self> {
        None
    }
}

impl Failed for ModelResponse {
    const RECOVERS: bool = false;

    fn failed(_: String, _: bool) -> Option<Self> {
        None
    }
}
