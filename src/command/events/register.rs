//! Each event's callback on the [`Hooks`] registry: one per event with handlers.

use super::super::config::{Entry, HookEvent};
use super::{Inner, TRIGGER, union};
use crate::{
    context::RunContext,
    layers::{
        hooks::{HookFuture, Hooks, state::Added},
        summarize::{CompactDecision, CompactInfo},
    },
    model::ModelRequest,
};
use std::sync::Arc;

/// Adds one callback per configured event to `hooks`, in the order of [`EVENTS`].
///
/// Each callback is named `command:{event}` (`command:PreToolUse` …), so that a Rust hook can
/// be ordered against it with `before` / `after`, unless a hook of the registry has that name
/// already (a second set of command hooks: its callbacks stay unnamed).
pub(crate) fn register(inner: &Arc<Inner>, hooks: Hooks) -> Hooks {
    EVENTS.iter().fold(hooks, |hooks, &(event, add)| {
        let entries = inner.entries(event);
        if entries.is_empty() {
            return hooks;
        }
        let name = format!("command:{}", event.name());
        let taken = hooks.has_name(&name);
        let added = add(inner, entries, hooks);
        if taken {
            added.into()
        } else {
            added.name(name).into()
        }
    })
}

/// Adds the callback of one event to a registry; the event's configured handlers (never
/// none) give the callback's matcher.
pub(super) type Add = fn(&Arc<Inner>, &[Entry], Hooks) -> Hooks<Added>;

/// The events [`register`] adds a callback for, in registration order (the registry labels
/// hooks by their position), each with how it is added.
pub(super) const EVENTS: [(HookEvent, Add); 21] = [
    (HookEvent::PreToolUse, add_pre_tool_use),
    (HookEvent::PostToolUse, add_post_tool_use),
    (HookEvent::PostToolUseFailure, add_post_tool_use_failure),
    (HookEvent::UserPromptSubmit, add_user_prompt_submit),
    (HookEvent::Stop, add_stop),
    (HookEvent::SubagentStop, add_subagent_stop),
    (HookEvent::SessionStart, add_session_start),
    (HookEvent::SessionEnd, add_session_end),
    (HookEvent::StopFailure, add_stop_failure),
    (HookEvent::SubagentStart, add_subagent_start),
    (HookEvent::TaskCreated, add_task_created),
    (HookEvent::TaskCompleted, add_task_completed),
    (HookEvent::InstructionsLoaded, add_instructions_loaded),
    (HookEvent::PostCompact, add_post_compact),
    (HookEvent::MessageDisplay, add_message_display),
    (HookEvent::Notification, add_notification),
    (HookEvent::PermissionRequest, add_permission_request),
    (HookEvent::PermissionDenied, add_permission_denied),
    (HookEvent::PostToolBatch, add_post_tool_batch),
    (HookEvent::BeforeModel, add_before_model),
    (HookEvent::AfterModel, add_after_model),
];

pub(super) fn add_pre_tool_use(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_tool_use(union(entries), move |call, ctx| {
        let i = Arc::clone(&i);
        async move { i.pre_tool_use(&call, &ctx).await }
    })
}

pub(super) fn add_post_tool_use(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_tool_use(union(entries), move |call, output, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_use(&call, &output, &ctx).await }
    })
}

pub(super) fn add_post_tool_use_failure(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_tool_failure(union(entries), move |call, failure, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_use_failure(&call, &failure, &ctx).await }
    })
}

pub(super) fn add_permission_request(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_request(union(entries), move |call, ctx| {
        let i = Arc::clone(&i);
        async move { i.permission_request(&call, &ctx).await }
    })
}

pub(super) fn add_permission_denied(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_denied(union(entries), move |call, reason, ctx| {
        let i = Arc::clone(&i);
        async move { i.permission_denied(&call, &reason, &ctx).await }
    })
}

pub(super) fn add_post_tool_batch(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_tool_batch(move |batch, ctx| {
        let i = Arc::clone(&i);
        async move { i.post_tool_batch(&batch, &ctx).await }
    })
}

pub(super) fn add_user_prompt_submit(
    inner: &Arc<Inner>,
    _: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_user_prompt(move |prompt, ctx| {
        let i = Arc::clone(&i);
        async move { i.user_prompt(&prompt, &ctx).await }
    })
}

pub(super) fn add_stop(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop(move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.stop(HookEvent::Stop, input, &ctx).await }
    })
}

pub(super) fn add_subagent_stop(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_stop(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.stop(HookEvent::SubagentStop, input, &ctx).await }
    })
}

pub(super) fn add_session_start(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_start_for(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.session_start(input, &ctx).await }
    })
}

pub(super) fn add_session_end(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_session_end(move |response, ctx| i.session_end(response, ctx))
}

pub(super) fn add_stop_failure(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_stop_failure(union(entries), move |input, ctx| i.stop_failure(input, ctx))
}

pub(super) fn add_subagent_start(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_subagent_start(union(entries), move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.subagent_start(input, &ctx).await }
    })
}

pub(super) fn add_task_created(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_created(move |input, ctx: RunContext| {
        let i = Arc::clone(&i);
        async move { i.task(HookEvent::TaskCreated, input, &ctx).await }
    })
}

pub(super) fn add_task_completed(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_task_completed(move |input, ctx: RunContext| {
        let i = Arc::clone(&i);
        async move { i.task(HookEvent::TaskCompleted, input, &ctx).await }
    })
}

pub(super) fn add_instructions_loaded(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_instructions_loaded(union(entries), move |input, ctx| {
        i.instructions_loaded(input, ctx)
    })
}

pub(super) fn add_post_compact(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_compact(union(entries), move |input, ctx| i.post_compact(input, ctx))
}

pub(super) fn add_message_display(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_message_display(move |input, ctx| {
        let i = Arc::clone(&i);
        async move { i.message_display(input, &ctx).await }
    })
}

pub(super) fn add_notification(
    inner: &Arc<Inner>,
    entries: &[Entry],
    hooks: Hooks,
) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_notify(union(entries), move |notification, ctx| {
        i.notification(notification, ctx)
    })
}

pub(super) fn add_before_model(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_model(move |req| {
        let i = Arc::clone(&i);
        async move { i.before_model(req).await }
    })
}

pub(super) fn add_after_model(inner: &Arc<Inner>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_model(move |resp, ctx| {
        let i = Arc::clone(&i);
        async move { i.after_model(resp, &ctx).await }
    })
}

/// The PreCompact callback for [`SummarizeLayer::on_compact`](crate::layers::summarize::SummarizeLayer::on_compact).
pub(crate) fn pre_compact(
    inner: &Arc<Inner>,
) -> impl Fn(CompactInfo, ModelRequest) -> HookFuture<CompactDecision> + Clone + Send + Sync + 'static
{
    let inner = inner
        .wants(HookEvent::PreCompact, TRIGGER)
        .then(|| Arc::clone(inner));
    move |info, req| match &inner {
        None => HookFuture::ready(CompactDecision::Proceed),
        Some(i) => {
            let i = Arc::clone(i);
            HookFuture::boxed(async move { i.pre_compact(info, &req.ctx).await })
        }
    }
}
