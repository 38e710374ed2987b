//! InstructionsLoaded: the `Memory` built-in loads AGENTS.md files.

use serde_json::json;
use tower_agent::{Agent, builtins::memory::Memory, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, inputs, wait_inputs};
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

    let got = wait_inputs(&s, "loaded", 1).await;
    assert_common(&got[0], "InstructionsLoaded", s.dir.path());
    assert_eq!(
        got[0]["file_path"],
        s.path("AGENTS.md").to_string_lossy().as_ref()
    );
    assert_eq!(got[0]["memory_type"], "Project");
    assert_eq!(got[0]["load_reason"], "session_start");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
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
