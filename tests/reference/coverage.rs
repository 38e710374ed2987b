//! Every hook event the crate fires is measured against Claude Code by some vector, or this
//! list says why it cannot be yet — enumerated from the crate's own list of events
//! ([`HookEvent::ALL`]), so a new event fails here until it is measured or explained.

use std::collections::BTreeSet;

use tower_agent::layers::hooks::HookEvent;

/// Events no vector fires, each with the reason (what was tried, headless, against 2.1.328).
pub(crate) const NOT_MEASURED: &[(&str, &str)] = &[
    (
        "BeforeModel",
        "tower-agent's own event (a model request, before the call): Claude Code has none",
    ),
    (
        "AfterModel",
        "tower-agent's own event (a model answer): Claude Code has none",
    ),
    (
        "Notification",
        "Claude Code notifies a person at a terminal (permission prompts, idle input): `-p` \
         shows none",
    ),
    (
        "PermissionDenied",
        "fired for calls the auto mode's classifier denies; `-p` in the default mode denies \
         without it (measured: a call no rule allows fires PermissionRequest only)",
    ),
    (
        "TaskCreated",
        "Claude Code's todo tool is off in `-p` (measured: `TodoWrite` answers that it is \
         disabled for the session)",
    ),
    ("TaskCompleted", "the same as TaskCreated"),
    (
        "ElicitationResult",
        "fires once a person has answered an MCP server's question: an Elicitation hook's \
         answer is the user's (measured: no ElicitationResult, vectors mcp_elicitation_*), and \
         with no hook answering, `-p` waits for a person (measured: no answer in 180 s)",
    ),
    (
        "DirectoryAdded",
        "`/add-dir` in `-p` neither fires it nor calls the model (measured)",
    ),
];

/// The events the vectors' expectations fire.
fn fired() -> BTreeSet<String> {
    super::vectors()
        .into_iter()
        .filter_map(|(_, v)| v.expected)
        .flat_map(|e| e.hooks)
        .filter_map(|h| h["event"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_event_is_measured_or_says_why_not() {
    let fired = fired();
    let mut missing = Vec::new();
    for event in HookEvent::ALL {
        let name = event.name();
        let listed = NOT_MEASURED.iter().any(|(n, _)| *n == name);
        match (fired.contains(name), listed) {
            (true, true) => missing.push(format!("{name}: measured now, its entry can go")),
            (false, false) => missing.push(format!("{name}: no vector fires it, and no reason")),
            _ => {}
        }
    }
    for (name, _) in NOT_MEASURED {
        if !HookEvent::ALL.iter().any(|e| e.name() == *name) {
            missing.push(format!("{name}: not an event of the crate"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
