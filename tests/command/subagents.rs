//! Claude Code's `Agent` tool with command hooks: the subagent shares its caller's session, as
//! Claude Code 2.1.328's do (measured: the `subagent*` vectors of `tests/reference`).

use crate::support;

use serde_json::{Value, json};
use support::command::{Scripts, bash_tool};
use tower_agent::{
    Agent,
    builtins::claude_code::{AgentTool, GENERAL_PURPOSE},
    model::ScriptedModel,
};

/// The subagent's tool hooks carry its `agent_id` and `agent_type` and its caller's
/// `session_id`, `transcript_path` and `prompt_id`; it fires no session events of its own;
/// SubagentStart and SubagentStop name the one id, and the subagent's transcript lies under
/// its caller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_shares_its_callers_session() {
    let s = Scripts::new();
    let log = s.path("hooks.log");
    let record = s.bash("record.sh", &format!("cat >> {log:?}; echo >> {log:?}"));
    let events = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "SubagentStart",
        "SubagentStop",
        "MessageDisplay",
        "Stop",
    ];
    let mut settings = serde_json::Map::new();
    for event in events {
        let handler = json!({"type": "command", "command": record});
        settings.insert(event.into(), json!([{"matcher": "*", "hooks": [handler]}]));
    }
    let hooks = s
        .hooks(Value::Object(settings))
        .into_hooks()
        .compile()
        .unwrap();
    let sub_model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "ls"}))
        .text("sub-done");
    let seen = Default::default();
    let general = Agent::builder()
        .model(sub_model)
        .tool(bash_tool(&seen))
        .hooks(hooks.clone())
        .build();
    let model = ScriptedModel::new()
        .tool_call(
            "Agent",
            json!({"description": "sub", "prompt": "SUBTASK", "subagent_type": "general-purpose"}),
        )
        .text("Done.");
    let lead = Agent::builder()
        .model(model)
        .tool(AgentTool::new().agent_type(GENERAL_PURPOSE, "Does anything", general))
        .hooks(hooks)
        .build();
    lead.run("delegate").await.unwrap();

    let inputs: Vec<Value> = s
        .read("hooks.log")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<String> = inputs
        .iter()
        .map(|i| {
            let tool = i["tool_name"].as_str().map(|t| format!(" {t}"));
            format!(
                "{}{}",
                i["hook_event_name"].as_str().unwrap(),
                tool.unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse Agent",
            "SubagentStart",
            "PreToolUse bash",
            "PostToolUse bash",
            "SubagentStop",
            "PostToolUse Agent",
            "MessageDisplay",
            "Stop",
        ]
    );
    let prompt = &inputs[1];
    let start = &inputs[3];
    let id = start["agent_id"].as_str().unwrap();
    assert!(id.len() == 17 && id.starts_with('a'), "{id}");
    assert_eq!(start["agent_type"], "general-purpose");
    for sub in &inputs[4..=5] {
        assert_eq!(sub["agent_id"], id);
        assert_eq!(sub["agent_type"], "general-purpose");
        for field in ["session_id", "transcript_path", "prompt_id"] {
            assert_eq!(sub[field], prompt[field], "{field}");
        }
    }
    let stop = &inputs[6];
    assert_eq!(stop["agent_id"], id);
    assert_eq!(stop["last_assistant_message"], "sub-done");
    let transcript = prompt["transcript_path"].as_str().unwrap();
    let dir = transcript.strip_suffix(".jsonl").unwrap();
    assert_eq!(
        stop["agent_transcript_path"],
        format!("{dir}/subagents/agent-{id}.jsonl")
    );
    // The caller's own events carry no subagent.
    assert!(inputs[2].get("agent_id").is_none());
    assert!(inputs[7].get("agent_id").is_none());
}
