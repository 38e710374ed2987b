//! Hooks written in Python and JavaScript: `tests/wasm/guests_src/guard.py` and `guard.js`,
//! built into components of the crate's `hook` world by componentize-py (PyPI) and jco's
//! QuickJS backend (npm), at pinned versions, through the project's own `.ci/wasm-guests` on
//! first use. The same guard in each language, through the same agent: a deny, a blocking
//! error (Python `raise Err(...)`, JavaScript `throw`: a command hook's exit 2), a pass.

use serde_json::json;
use tower_agent::{AgentRequest, model::ScriptedModel, wasm::WasmHook};

use crate::support::command::{Scripts, agent, tool_texts};

async fn guard_denies_blocks_and_lets_through(language: &str, who: &str) {
    let path = crate::guests::built("guard", language);
    let hook = WasmHook::load(&path).unwrap();
    assert_eq!(hook.description()["events"], json!(["PreToolUse"]));
    assert!(hook.is_stateless());
    let s = Scripts::new();
    let hooks = crate::guests::command_hooks(hook.clone(), s.dir.path());
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "rm -rf /tmp/x"}))
        .tool_call("bash", json!({"command": "sudo reboot"}))
        .tool_call("bash", json!({"command": "ls"}))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run(AgentRequest::new("go")).await.unwrap();
    let texts = tool_texts(&resp);
    assert!(
        texts[0].contains(&format!("rm -rf is not allowed ({who} guard)")),
        "{texts:?}"
    );
    assert!(
        texts[1].contains(&format!("sudo is not allowed ({who} guard)")),
        "{texts:?}"
    );
    assert_eq!(texts[2], "ran: ls");
    assert_eq!(*seen.lock().unwrap(), [json!({"command": "ls"})]);
    assert_eq!(
        hook.instances(),
        1,
        "the stateless guest's one instance, kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_guard_denies_blocks_and_lets_through() {
    guard_denies_blocks_and_lets_through("py", "python").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_guard_denies_blocks_and_lets_through() {
    guard_denies_blocks_and_lets_through("js", "javascript").await;
}
