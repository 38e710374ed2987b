//! The table of events against the hooks reference, event by event: the default timeout of a
//! handler that sets none, whether plain stdout is context, whether matchers apply.
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "Configuration" (a command handler's
//! `timeout` defaults to 600 s; UserPromptSubmit 30 s, MessageDisplay 10 s, SessionEnd 1.5 s),
//! § "Exit code 0" (plain stdout is added to the context for SessionStart,
//! UserPromptSubmit and UserPromptExpansion; elsewhere it goes to the debug log), § "Matchers" (the events that take
//! no matcher). Every event of the crate's table is checked, so a new event must be placed
//! here too.

use std::time::Duration;

use tower_agent::command::HookEvent;

/// What the reference says of an event (`None`: an event of this crate, not of the
/// reference — Gemini CLI's BeforeModel / AfterModel).
fn reference(event: HookEvent) -> Option<(Duration, bool, bool)> {
    let secs = Duration::from_secs;
    // (default timeout, plain stdout is context, takes a matcher)
    Some(match event.name() {
        "UserPromptSubmit" => (secs(30), true, false),
        "SessionStart" => (secs(600), true, true),
        // § "Exit code 0": UserPromptExpansion's plain stdout is context, as UserPromptSubmit's;
        // § "Matchers": its matcher is the command's name.
        "UserPromptExpansion" => (secs(600), true, true),
        "MessageDisplay" => (secs(10), false, false),
        "SessionEnd" => (Duration::from_millis(1500), false, true),
        "Stop" | "PostToolBatch" | "TaskCreated" | "TaskCompleted" | "CwdChanged" => {
            (secs(600), false, false)
        }
        "PreToolUse" | "PostToolUse" | "PostToolUseFailure" | "PermissionRequest"
        | "PermissionDenied" | "SubagentStop" | "SubagentStart" | "PreCompact" | "PostCompact"
        | "Notification" | "StopFailure" | "InstructionsLoaded" | "Elicitation"
        | "ElicitationResult" | "Setup" | "ConfigChange" | "DirectoryAdded" | "FileChanged" => {
            (secs(600), false, true)
        }
        // Issue 27, from Claude Code 2.1.251+ (that reference was not reachable here): both
        // 30 s, PostModelSwitch's plain stdout is context; the matcher (the new model's name)
        // is this crate's.
        "PreModelSwitch" => (secs(30), false, true),
        "PostModelSwitch" => (secs(30), true, true),
        "BeforeModel" | "AfterModel" => return None,
        other => panic!("{other} is not placed in this test: add it from the reference"),
    })
}

#[test]
fn every_event_has_the_references_timeout_stdout_rule_and_matcher_rule() {
    for event in HookEvent::ALL {
        let Some((timeout, stdout, matcher)) = reference(event) else {
            assert!(!event.stdout_is_context(), "{event}");
            continue;
        };
        assert_eq!(event.default_timeout(), timeout, "{event}: default timeout");
        assert_eq!(event.stdout_is_context(), stdout, "{event}: plain stdout");
        assert_eq!(event.has_matcher(), matcher, "{event}: matcher");
    }
}
