//! MessageDisplay: assistant text as it is displayed (the event stream), never what the
//! model or the history keep.

use futures_util::StreamExt;
use serde_json::json;
use tower_agent::{Agent, agent::AgentEvent, model::ScriptedModel};

use super::common_ev2::{assert_common, inputs};
use crate::support::command::Scripts;

// hooks.md § "MessageDisplay", § "MessageDisplay input" and § "MessageDisplay output": in a
// non-interactive run the hook runs once per assistant message with text (`index` 0,
// `final` true, `delta` the whole text); `displayContent` replaces the displayed text only:
// the transcript and what Claude sees keep the original. Messages without text (tool calls
// only) don't trigger it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn display_content_replaces_the_display_only() {
    let s = Scripts::new();
    let hook = s.python(
        "plain.py",
        &format!(
            r#"import json, sys
data = json.load(sys.stdin)
with open({:?}, "a") as f:
    f.write(json.dumps(data) + "\n")
text = data["delta"].replace("**", "").replace("`", "")
print(json.dumps({{"hookSpecificOutput": {{"hookEventName": "MessageDisplay", "displayContent": text}}}}))"#,
            s.path("display.jsonl").display().to_string()
        ),
    );
    let hooks = s.hooks(
        json!({ "MessageDisplay": [{ "hooks": [{ "type": "command", "command": hook }] }] }),
    );
    let model = ScriptedModel::new()
        .tool_call("noop", json!({}))
        .text("Run **`cargo test`** now.")
        .text("again")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tower_agent::tool::tool_fn(
            "noop",
            "Does nothing",
            json!({"type": "object"}),
            |_, _| async { Ok::<_, tower_agent::BoxError>("ok") },
        ))
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let events: Vec<AgentEvent> = agent.stream("go").collect().await;

    let shown: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageDisplay { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["Run cargo test now."]);
    let got = inputs(&s, "display");
    assert_eq!(
        got.len(),
        1,
        "a tool-call-only message does not trigger it: {got:?}"
    );
    assert_common(&got[0], "MessageDisplay", s.dir.path());
    assert_eq!(got[0]["delta"], "Run **`cargo test`** now.");
    assert_eq!(got[0]["index"], 0);
    assert_eq!(got[0]["final"], true);
    assert!(got[0]["turn_id"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(got[0]["message_id"].as_str().is_some_and(|t| !t.is_empty()));
    match events.last() {
        Some(AgentEvent::AgentStop { text, .. }) => assert_eq!(text, "Run **`cargo test`** now."),
        other => panic!("{other:?}"),
    }
}
