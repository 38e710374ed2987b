//! SessionStart: `source` (`startup`, `resume`), `model`, the matcher on the source, and
//! context from plain stdout or `additionalContext`.

use serde_json::json;
use tower_agent::{
    Agent, AgentRequest,
    model::{ModelSettings, ScriptedModel},
    store::MemoryStore,
};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::Scripts;

// hooks.md § "SessionStart" (matcher table) and § "SessionStart input": a new thread starts
// with `startup`, a thread that existed in the store with `resume`; `model` is the agent's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_is_startup_then_resume_and_matchers_pick_it() {
    let s = Scripts::new();
    let any = dump(&s, "any", "");
    let startup = dump(&s, "startup", "");
    let resume = dump(&s, "resume", "");
    let hooks = s.hooks(json!({ "SessionStart": [
        { "hooks": [{ "type": "command", "command": any }] },
        { "matcher": "startup", "hooks": [{ "type": "command", "command": startup }] },
        { "matcher": "resume", "hooks": [{ "type": "command", "command": resume }] },
    ]}));
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("one").text("two"))
        .settings(ModelSettings::default().model("claude-test-model"))
        .store(MemoryStore::new())
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();

    agent
        .run(AgentRequest::new("hi").thread("t1"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("again").thread("t1"))
        .await
        .unwrap();

    let all = inputs(&s, "any");
    assert_eq!(all.len(), 2);
    assert_common(&all[0], "SessionStart", s.dir.path());
    assert_eq!(all[0]["source"], "startup");
    assert_eq!(all[1]["source"], "resume");
    assert_eq!(all[0]["model"], "claude-test-model");
    assert_eq!(all[0]["session_id"], "t1");
    assert_eq!(
        inputs(&s, "startup").len(),
        1,
        "`startup` matches the first run only"
    );
    let resumed = inputs(&s, "resume");
    assert_eq!(resumed.len(), 1, "`resume` matches the second run only");
    assert_eq!(resumed[0]["source"], "resume");
}

// hooks.md § "SessionStart decision control": plain stdout and `additionalContext` both
// reach the model's context, before the first prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_stdout_and_additional_context_reach_the_model() {
    let s = Scripts::new();
    let plain = s.bash("plain.sh", "cat >/dev/null\necho 'Current branch: feat/x'");
    let json_hook = s.bash(
        "json.sh",
        r#"cat >/dev/null
echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "Open issue: #42"}}'"#,
    );
    let hooks = s.hooks(json!({ "SessionStart": [{ "matcher": "startup", "hooks": [
        { "type": "command", "command": plain },
        { "type": "command", "command": json_hook },
    ]}]}));
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    agent.run("hi").await.unwrap();
    let system = model.requests()[0].system().unwrap().text().into_owned();
    assert!(system.contains("Current branch: feat/x"), "{system}");
    assert!(system.contains("Open issue: #42"), "{system}");
}
