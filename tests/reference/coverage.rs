//! Every hook event the crate fires is measured against Claude Code by some vector, or this
//! list says why it cannot be yet — enumerated from the crate's own list of events
//! ([`HookEvent::ALL`]), so a new event fails here until it is measured or explained. And
//! every hook event of the pinned Claude Code — read from its program — is one the crate
//! fires or lists as not fired ([`HookEvent::NOT_FIRED`]), so a version that brings a new
//! event fails here until the crate knows it.

use std::{collections::BTreeSet, path::Path, process::Command};

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

/// The hook events of the Claude Code program at `program`: the longest list of event names
/// in its bundle that holds PreToolUse, Stop and SessionStart (the settings schema's list of
/// events; shorter lists are the subsets an event's properties hold).
fn claude_code_events(program: &Path) -> Vec<String> {
    let out = Command::new("grep")
        .args(["-aoE", r#"\[("[A-Za-z]+",){8,}"[A-Za-z]+"\]"#])
        .arg(program)
        .output()
        .expect("run grep");
    let lists = String::from_utf8_lossy(&out.stdout);
    let events = lists
        .lines()
        .filter_map(|line| serde_json::from_str::<Vec<String>>(line).ok())
        .filter(|list| {
            ["PreToolUse", "Stop", "SessionStart"]
                .iter()
                .all(|e| list.iter().any(|x| x == e))
        })
        .max_by_key(Vec::len)
        .expect("a list of hook events in Claude Code's program");
    // 2.1.328 has 33: a list much shorter than that is not the whole one.
    assert!(events.len() >= 30, "{events:?}");
    events
}

#[test]
fn every_event_of_claude_code_is_fired_or_listed_as_not_fired() {
    let theirs = claude_code_events(&super::claude_program());
    let fired: Vec<&str> = HookEvent::ALL.iter().map(|e| e.name()).collect();
    let not_fired: Vec<&str> = HookEvent::NOT_FIRED.iter().map(|(n, _)| *n).collect();
    let mut wrong = Vec::new();
    for event in &theirs {
        if !fired.contains(&event.as_str()) && !not_fired.contains(&event.as_str()) {
            wrong.push(format!(
                "{event}: Claude Code {} has it; the crate neither fires it nor lists it in \
                 HookEvent::NOT_FIRED (a settings file naming it fails to load)",
                super::VERSION
            ));
        }
    }
    for name in &not_fired {
        if !theirs.iter().any(|e| e == name) {
            wrong.push(format!(
                "{name}: listed as not fired, not an event of Claude Code"
            ));
        }
    }
    // The crate's own events, and only they, are not Claude Code's.
    for name in &fired {
        let own = NOT_MEASURED
            .iter()
            .any(|(n, why)| n == name && why.starts_with("tower-agent's own event"));
        if theirs.iter().any(|e| e == name) == own {
            wrong.push(format!(
                "{name}: {} Claude Code's, and NOT_MEASURED says it {} the crate's own",
                if own { "is" } else { "is not" },
                if own { "is" } else { "is not" }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
