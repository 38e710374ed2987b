//! What a builder can read once is read once, not at every run or hook call (issue 16,
//! target 4): the process's working directory is read when the command hooks are built.
//!
//! The test changes the process's working directory: it runs alone in a child process
//! (`support::alone`), where no other test sees the change.

use crate::support;

use serde_json::json;
use support::command::{Scripts, agent, on};
use tower_agent::model::ScriptedModel;

/// Handlers run in the project directory when the run's directory is the one the process had
/// when the hooks were built — also after the process moved elsewhere (before, each hook call
/// read the process's directory again: the handler then ran in the run's directory).
#[tokio::test(flavor = "current_thread")]
async fn hooks_compare_the_run_directory_with_the_process_directory_read_at_build() {
    if !support::alone(&support::test_name!(
        "hooks_compare_the_run_directory_with_the_process_directory_read_at_build"
    )) {
        return;
    }
    let s = Scripts::new();
    let (start, moved) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let back = std::env::current_dir().unwrap();
    std::env::set_current_dir(start.path()).unwrap();

    let out = s.path("ran_in.txt");
    let hook = s.bash(
        "pwd.sh",
        &format!("cat > /dev/null; pwd -P > '{}'", out.display()),
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &hook, json!({})));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    // Built here: the agent's directory is `start`, the process's directory too.
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let agent = builder.build();

    std::env::set_current_dir(moved.path()).unwrap();
    let resp = agent.run("list").await;
    std::env::set_current_dir(back).unwrap();
    let resp = resp.unwrap();

    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(seen.lock().unwrap().len(), 1, "the tool ran");
    let ran_in = std::fs::read_to_string(&out).expect("the hook ran");
    assert_eq!(
        std::path::Path::new(ran_in.trim()),
        std::fs::canonicalize(s.dir.path()).unwrap(),
        "the handler runs in the project directory, not in the run's ({})",
        start.path().display()
    );
}
