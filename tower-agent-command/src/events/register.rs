//! Each event's callback on the [`Hooks`] registry: one per event with handlers.

use super::{Live, environment, model, session, tool};
use crate::{config::HookEvent, handler::Entry};
use std::sync::Arc;
use tower_agent_layers::hooks::{Hooks, state::Added};

/// Adds one callback per configured event to `hooks`: the tool events first, then the run's,
/// then the model's (each area's `EVENTS`).
///
/// Each callback is named `command:{event}` (`command:PreToolUse` …), so that a Rust hook can
/// be ordered against it with `before` / `after`, unless a hook of the registry has that name
/// already (a second set of command hooks: its callbacks stay unnamed).
///
/// The callbacks call the hooks as they are at the time (see [`Live`]): when a settings file
/// changes during a run, the step hook layer asks `live` between steps, and the hooks read from
/// the files as they are now take over once the ConfigChange hooks let them.
pub(crate) fn register(live: &Arc<Live>, hooks: Hooks) -> Hooks {
    let inner = &live.current();
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
        let live = Arc::clone(live);
        hooks.permission_rules(move |call, ctx| {
            let i = live.current();
            i.config.rules.check(call, &i.hook_dir(ctx), &i.project_dir)
        })
    };
    let events = tool::EVENTS
        .iter()
        .chain(session::EVENTS)
        .chain(environment::EVENTS)
        .chain(model::EVENTS);
    let hooks = if live.watches() {
        hooks.watch_settings(Arc::clone(live) as _)
    } else {
        hooks
    };
    events.fold(hooks, |hooks, &(event, add)| {
        let entries = inner.entries(event);
        if entries.is_empty() {
            return hooks;
        }
        let name = format!("command:{}", event.name());
        let taken = hooks.has_name(&name);
        let added = add(live, entries, hooks);
        if taken {
            added.into()
        } else {
            added.name(name).into()
        }
    })
}

/// Adds the callback of one event to a registry; the event's configured handlers (never
/// none) give the callback's matcher.
pub(super) type Add = fn(&Arc<Live>, &[Entry], Hooks) -> Hooks<Added>;
