//! Each event's callback on the [`Hooks`] registry: one per event with handlers.

use super::super::config::{Entry, HookEvent};
use super::{Inner, environment, model, session, tool};
use crate::layers::hooks::{Hooks, state::Added};
use std::sync::Arc;

/// Adds one callback per configured event to `hooks`: the tool events first, then the run's,
/// then the model's (each area's `EVENTS`).
///
/// Each callback is named `command:{event}` (`command:PreToolUse` …), so that a Rust hook can
/// be ordered against it with `before` / `after`, unless a hook of the registry has that name
/// already (a second set of command hooks: its callbacks stay unnamed).
pub(crate) fn register(inner: &Arc<Inner>, hooks: Hooks) -> Hooks {
    // Their input has `duration_ms`: the tool hook layer times the calls they see.
    let timed = [HookEvent::PostToolUse, HookEvent::PostToolUseFailure];
    let hooks = if timed.iter().any(|&e| !inner.entries(e).is_empty()) {
        hooks.time_tool_calls()
    } else {
        hooks
    };
    // The permission rules: checked by the tool hook layer after the PreToolUse hooks.
    let hooks = if inner.config.rules.is_empty() {
        hooks
    } else {
        let i = Arc::clone(inner);
        hooks.permission_rules(move |call, ctx| {
            i.config.rules.check(call, &i.hook_dir(ctx), &i.project_dir)
        })
    };
    let events = tool::EVENTS
        .iter()
        .chain(session::EVENTS)
        .chain(environment::EVENTS)
        .chain(model::EVENTS);
    events.fold(hooks, |hooks, &(event, add)| {
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
