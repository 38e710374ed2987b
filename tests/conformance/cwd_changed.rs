//! CwdChanged: a run whose working directory is not the one its thread's previous run had.
//!
//! Hooks reference (Claude Code 2.1.x, 2026), § "CwdChanged": fires when the working
//! directory changes; its input has `old_cwd` and `new_cwd`; it has no matcher, cannot block,
//! and its hooks get `CLAUDE_ENV_FILE` (§ "Persist environment variables": SessionStart, Setup,
//! CwdChanged and FileChanged). In a library a run's directory is set by its caller, so the
//! change is between two runs of one thread.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest,
    agent::Outcome,
    layers::hooks::{CwdChanged, Hooks},
    model::ScriptedModel,
    store::MemoryStore,
};

use crate::support::command::Scripts;

fn dirs(s: &Scripts) -> (PathBuf, PathBuf) {
    let (a, b) = (s.path("a"), s.path("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (a, b)
}

/// A Rust hook sees each change of a thread's directory once: not on a thread's first run, not
/// when the directory stays, never for a run without a thread or for another thread.
#[tokio::test]
async fn a_rust_hook_sees_each_change_of_a_threads_directory_once() {
    let s = Scripts::new();
    let (a, b) = dirs(&s);
    let seen: Arc<Mutex<Vec<(PathBuf, PathBuf)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .on_cwd_changed(move |input, _ctx| {
            log.lock().unwrap().push((input.old_cwd, input.new_cwd));
            CwdChanged::Continue
        })
        .compile()
        .unwrap();
    let store = MemoryStore::new();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok").per_run())
        .store(store.clone())
        .hooks(hooks)
        .build();
    let run = |thread: Option<&str>, cwd: &PathBuf| {
        let mut req = AgentRequest::new("go").cwd(cwd);
        if let Some(thread) = thread {
            req = req.thread(thread);
        }
        agent.run(req)
    };

    run(Some("t"), &a).await.unwrap();
    assert!(seen.lock().unwrap().is_empty(), "a thread's first run");
    run(Some("t"), &b).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [(a.clone(), b.clone())]);
    run(Some("t"), &b).await.unwrap();
    run(None, &a).await.unwrap();
    run(Some("other"), &a).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1, "{:?}", seen.lock().unwrap());
    run(Some("t"), &a).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [(a.clone(), b.clone()), (b, a.clone())]
    );

    // The directory is kept with the thread, under the crate's key.
    let thread = store.get("t").unwrap();
    assert_eq!(
        thread.data.value("tower_agent.cwd"),
        Some(&json!(a.to_string_lossy()))
    );
}

/// A command hook gets the reference's input (`hook_event_name`, `old_cwd`, `new_cwd`, and the
/// common `cwd` = the new directory), runs before SessionStart, and what it exports through
/// `CLAUDE_ENV_FILE` reaches the run's later hooks. A block cannot stop the run (the event
/// cannot block): it is reported as a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_old_and_new_cwd_and_can_export_variables() {
    let s = Scripts::new();
    let (a, b) = dirs(&s);
    let input = s.path("cwd_input.json");
    let order = s.path("order");
    let changed = s.bash(
        "changed.sh",
        &format!(
            r#"cat > {input:?}
echo cwd >> {order:?}
echo 'export MOVED_TO=b' >> "$CLAUDE_ENV_FILE"
echo '{{"decision": "block", "reason": "cannot block"}}'"#
        ),
    );
    let start = s.bash(
        "start.sh",
        &format!(r#"cat >/dev/null; echo "start MOVED_TO=${{MOVED_TO:-unset}}" >> {order:?}"#),
    );
    let hooks = s.hooks(json!({
        "CwdChanged": [{ "hooks": [{ "type": "command", "command": changed }] }],
        "SessionStart": [{ "hooks": [{ "type": "command", "command": start }] }],
    }));
    let warnings: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&warnings);
    let hooks = hooks
        .into_hooks()
        .on_notification(move |message, _ctx| log.lock().unwrap().push(message.to_owned()))
        .compile()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok").per_run())
        .hooks(hooks)
        .build();

    let first = agent
        .run(AgentRequest::new("go").thread("t").cwd(&a))
        .await
        .unwrap();
    assert_eq!(first.outcome, Outcome::Finished);
    assert!(!input.exists(), "no change on the thread's first run");
    assert_eq!(s.read("order"), "start MOVED_TO=unset\n");

    let second = agent
        .run(AgentRequest::new("go").thread("t").cwd(&b))
        .await
        .unwrap();
    assert_eq!(second.outcome, Outcome::Finished, "CwdChanged cannot block");
    let got: Value = serde_json::from_str(&s.read("cwd_input.json")).unwrap();
    assert_eq!(got["hook_event_name"], "CwdChanged");
    assert_eq!(got["old_cwd"], json!(a.to_string_lossy()));
    assert_eq!(got["new_cwd"], json!(b.to_string_lossy()));
    assert_eq!(got["cwd"], json!(b.to_string_lossy()));
    assert!(got["session_id"].is_string(), "{got}");
    assert_eq!(
        s.read("order"),
        "start MOVED_TO=unset\ncwd\nstart MOVED_TO=b\n",
        "CwdChanged runs before SessionStart, whose hooks see what it exported"
    );
    let warnings = warnings.lock().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("a CwdChanged hook: cannot block")),
        "{warnings:?}"
    );
}
