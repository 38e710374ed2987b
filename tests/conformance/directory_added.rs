//! DirectoryAdded: a run given a directory its thread did not have.
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "DirectoryAdded" — fires when a directory is
//! added to the session (`/add-dir`: source `slash_command`; `register_repo_root`); the input
//! adds `directory` and `source`; the matcher is compared with the source; it cannot block.
//! In a library the caller gives a run its directories ([`AgentRequest::add_dir`]); each
//! fires once per thread.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::Outcome,
    layers::hooks::{DirectoryAdded, Hooks},
    model::ScriptedModel,
    store::MemoryStore,
    tool::tool_fn,
};

use crate::support::command::{Scripts, warnings};

/// Each directory fires once per thread (a relative one resolved against the run's
/// directory), a run without a thread fires each time, and tools see the run's directories.
#[tokio::test]
async fn a_rust_hook_sees_each_new_directory_of_a_thread_once() {
    let s = Scripts::new();
    let seen: Arc<Mutex<Vec<(PathBuf, &'static str)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .on_directory_added("slash_command", move |input, _ctx| {
            log.lock().unwrap().push((input.directory, input.source));
            DirectoryAdded::Continue
        })
        .compile()
        .unwrap();
    let dirs = tool_fn(
        "dirs",
        "The run's directories",
        json!({"type": "object"}),
        |_, ctx| async move { Ok::<_, BoxError>(format!("{:?}", ctx.directories())) },
    );
    let model = ScriptedModel::new()
        .tool_call("dirs", json!({}))
        .text("ok")
        .per_run()
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(dirs)
        .store(MemoryStore::new())
        .hooks(hooks)
        .build();
    let cwd = s.dir.path().to_path_buf();
    let req = |dirs: &[&str]| {
        dirs.iter()
            .fold(AgentRequest::new("go").cwd(&cwd), |r, d| r.add_dir(*d))
    };

    agent
        .run(req(&["lib", "/srv/data"]).thread("t"))
        .await
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (cwd.join("lib"), "slash_command"),
            (PathBuf::from("/srv/data"), "slash_command")
        ]
    );
    agent.run(req(&["lib", "docs"]).thread("t")).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(seen.lock().unwrap()[2].0, cwd.join("docs"));
    agent.run(req(&["lib"]).thread("t")).await.unwrap();
    agent.run(req(&[])).await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3, "nothing new");
    agent.run(req(&["lib"])).await.unwrap();
    agent.run(req(&["lib"])).await.unwrap();
    assert_eq!(
        seen.lock().unwrap().len(),
        5,
        "a run without a thread has no memory"
    );

    let tool_saw = model.requests()[1]
        .messages
        .last()
        .unwrap()
        .text()
        .into_owned();
    assert!(
        tool_saw.contains(&*cwd.join("lib").to_string_lossy()),
        "{tool_saw}"
    );
}

/// A command hook gets `directory` and `source`; a matcher on another source does not fire;
/// a block is a warning, not a stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_directory_and_source_and_cannot_block() {
    let s = Scripts::new();
    let input = s.path("input.json");
    let added = s.bash(
        "added.sh",
        &format!(r#"cat >> {input:?}; echo; echo '{{"decision": "block", "reason": "no dirs"}}'"#),
    );
    let repo = s.bash(
        "repo.sh",
        &format!("cat >/dev/null; touch {:?}", s.path("repo-fired")),
    );
    let hooks = s.hooks(json!({
        "DirectoryAdded": [
            { "matcher": "slash_command", "hooks": [{ "type": "command", "command": added }] },
            { "matcher": "register_repo_root", "hooks": [{ "type": "command", "command": repo }] },
        ],
    }));
    let (hooks, warned) = warnings(hooks.into_hooks());
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok"))
        .hooks(hooks.compile().unwrap())
        .build();
    let extra = s.path("extra");
    let resp = agent
        .run(AgentRequest::new("go").add_dir(&extra))
        .await
        .unwrap();

    assert_eq!(resp.outcome, Outcome::Finished);
    let got: Value = serde_json::from_str(s.read("input.json").lines().next().unwrap()).unwrap();
    assert_eq!(got["hook_event_name"], "DirectoryAdded");
    assert_eq!(got["directory"], json!(extra.to_string_lossy()));
    assert_eq!(got["source"], "slash_command");
    assert!(!s.path("repo-fired").exists());
    let warned = warned.lock().unwrap();
    assert!(warned.iter().any(|w| w.contains("no dirs")), "{warned:?}");
}
