//! InstructionsLoaded: the `Memory` built-in loads AGENTS.md files.

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest,
    builtins::memory::Memory,
    model::{ModelResponse, ScriptedModel},
    store::MemoryStore,
};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::Scripts;

// hooks.md § "InstructionsLoaded" and § "InstructionsLoaded input": one call per file loaded
// into context, with `file_path` (absolute), `memory_type` and `load_reason`
// (`session_start` for files loaded at the start); the matcher runs against `load_reason`.
// No decision control: exit 2 changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_memory_file_loaded_fires_it() {
    let s = Scripts::new();
    std::fs::write(s.path("AGENTS.md"), "- Run the tests with `make test`.\n").unwrap();
    let any = dump(&s, "loaded", "exit 2");
    let lazy = dump(&s, "lazy", "");
    let hooks = s.hooks(json!({ "InstructionsLoaded": [
        { "matcher": "session_start", "hooks": [{ "type": "command", "command": any }] },
        { "matcher": "path_glob_match|nested_traversal", "hooks": [{ "type": "command", "command": lazy }] },
    ]}));
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .cwd(s.dir.path())
        .stage(Memory::new(["AGENTS.md", "missing/AGENTS.md"]))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("how do I test?").await.unwrap();
    assert!(resp.outcome.is_finished());

    // The run waited for the hook (see below): its input is there when the run ends.
    let got = inputs(&s, "loaded");
    assert_common(&got[0], "InstructionsLoaded", s.dir.path());
    assert_eq!(
        got[0]["file_path"],
        s.path("AGENTS.md").to_string_lossy().as_ref()
    );
    assert_eq!(got[0]["memory_type"], "Project");
    assert_eq!(got[0]["load_reason"], "session_start");
    assert_eq!(
        inputs(&s, "loaded").len(),
        1,
        "a missing file is not loaded"
    );
    assert!(
        inputs(&s, "lazy").is_empty(),
        "the matcher filters on load_reason"
    );
    let system = model.requests()[0].system().unwrap().text().into_owned();
    assert!(
        system.contains("make test"),
        "loading is unchanged by the hook's exit 2"
    );
}

/// A hook script that appends `<name> start`, takes a while (a hook the run must wait for)
/// when `slow`, then appends `<name> end` to `order.log`.
fn logs(s: &Scripts, name: &str, slow: bool) -> String {
    let log = s.path("order.log");
    let pause = if slow { "sleep 0.3" } else { "" };
    s.bash(
        &format!("{name}.sh"),
        &format!(
            "cat >/dev/null\necho '{name} start' >> {log:?}\n{pause}\necho '{name} end' >> {log:?}"
        ),
    )
}

// Measured against Claude Code 2.1.328 (`tests/reference`, scenario `instructions_loaded`):
// InstructionsLoaded hooks run as the session starts, after SessionStart and before
// UserPromptSubmit — here a slow one has ended before UserPromptSubmit starts, in a new
// session and in a resumed one (the files are loaded at each run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn they_end_before_user_prompt_submit_starts() {
    let s = Scripts::new();
    std::fs::write(s.path("AGENTS.md"), "- Run the tests with `make test`.\n").unwrap();
    let command =
        |name, slow| json!([{ "hooks": [{ "type": "command", "command": logs(&s, name, slow) }] }]);
    let hooks = s.hooks(json!({
        "SessionStart": command("session", false),
        "InstructionsLoaded": command("loaded", true),
        "UserPromptSubmit": command("prompt", false),
    }));
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok").text("ok"))
        .store(MemoryStore::new())
        .cwd(s.dir.path())
        .stage(Memory::new(["AGENTS.md"]))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    for prompt in ["how do I test?", "and build?"] {
        let resp = agent
            .run(AgentRequest::new(prompt).thread("t"))
            .await
            .unwrap();
        assert!(resp.outcome.is_finished());
    }
    let once = [
        "session start",
        "session end",
        "loaded start",
        "loaded end",
        "prompt start",
        "prompt end",
    ];
    let log = s.read("order.log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines, [once, once].concat(), "startup, then resume");
}

// An agent whose hooks have no SessionStart or UserPromptSubmit hook loads the files after
// its start stack: the InstructionsLoaded hooks have ended before the first model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_start_hooks_they_end_before_the_first_model_call() {
    let s = Scripts::new();
    std::fs::write(s.path("AGENTS.md"), "- Run the tests with `make test`.\n").unwrap();
    let hooks = s.hooks(json!({ "InstructionsLoaded": [{ "hooks": [
        { "type": "command", "command": logs(&s, "loaded", true) },
    ]}]}));
    let log = s.path("order.log");
    let model = ScriptedModel::from_fn(move |_req| {
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        Ok(ModelResponse::text(seen))
    });
    let agent = Agent::builder()
        .model(model)
        .cwd(s.dir.path())
        .stage(Memory::new(["AGENTS.md"]))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("how do I test?").await.unwrap();
    assert_eq!(resp.text, "loaded start\nloaded end\n");
}
