//! SubagentStart and SubagentStop, for subagents made with `Agent::into_tool`.

use serde_json::json;
use tower_agent::{Agent, message::Role, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::{Scripts, tool_text};

// hooks.md § "SubagentStart" and § "SubagentStart input": `agent_id` and `agent_type`; the
// matcher filters on the agent type; `additionalContext` is added to the subagent's context
// after its prompt. SubagentStop (§ "SubagentStop input") gets the same
// `agent_id` and `agent_type`, `last_assistant_message`, and its block sends the subagent
// back to work with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_start_gives_context_and_subagent_stop_sees_the_same_agent() {
    let s = Scripts::new();
    let start = dump(
        &s,
        "start",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "SubagentStart", "additionalContext": "Follow security guidelines for this task"}}'"#,
    );
    let other = dump(&s, "other_start", "");
    let stop = dump(
        &s,
        "stop",
        r#"case "$input" in *'"stop_hook_active":false'*) echo '{"decision": "block", "reason": "Cite your sources."}' ;; esac"#,
    );
    let hooks = s.hooks(json!({
        "SubagentStart": [
            { "matcher": "research", "hooks": [{ "type": "command", "command": start }] },
            { "matcher": "^other$", "hooks": [{ "type": "command", "command": other }] },
        ],
        "SubagentStop": [{ "matcher": "research", "hooks": [{ "type": "command", "command": stop }] }],
    }));
    let sub_model = ScriptedModel::new()
        .text("Tower is a library.")
        .text("Tower is a library (docs.rs/tower).")
        .recording();
    let researcher = Agent::builder().model(sub_model.clone()).build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "What is tower?" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches a question"))
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = lead.run("Find out").await.unwrap();

    let started = inputs(&s, "start");
    assert_eq!(started.len(), 1);
    assert_common(&started[0], "SubagentStart", s.dir.path());
    assert_eq!(started[0]["agent_type"], "research");
    let agent_id = started[0]["agent_id"].as_str().unwrap().to_owned();
    assert!(agent_id.starts_with("agent-"), "{agent_id}");
    assert!(
        inputs(&s, "other_start").is_empty(),
        "the matcher filters on agent_type"
    );
    // As Claude Code 2.1.328 puts it (tests/reference, subagent_stop_block): after the
    // subagent's prompt, a system message in Claude Code's words.
    let seen = |i: usize| -> Vec<(Role, String)> {
        sub_model.requests()[i]
            .messages
            .iter()
            .map(|m| (m.role, m.text().into_owned()))
            .collect()
    };
    let context = "SubagentStart hook additional context: Follow security guidelines for this task";
    assert_eq!(
        seen(0),
        [
            (Role::User, "What is tower?".to_owned()),
            (Role::System, context.to_owned()),
        ]
    );

    let stops = inputs(&s, "stop");
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[0]["hook_event_name"], "SubagentStop");
    assert_eq!(stops[0]["agent_type"], "research");
    assert_eq!(
        stops[0]["agent_id"],
        agent_id.as_str(),
        "the same subagent as SubagentStart"
    );
    assert_eq!(stops[0]["last_assistant_message"], "Tower is a library.");
    assert_eq!(stops[1]["stop_hook_active"], true);
    // A `decision: "block"`: its reason as user text, then in Claude Code's words as a system
    // message (measured: subagent_stop_block; an exit 2, as for Stop, gives the reason alone).
    assert_eq!(
        seen(1)[2..],
        [
            (Role::Assistant, "Tower is a library.".to_owned()),
            (Role::User, "Cite your sources.".to_owned()),
            (
                Role::System,
                format!(
                    "SubagentStop hook blocking error from command: \"{stop}\": Cite your sources."
                )
            ),
        ]
    );
    assert_eq!(tool_text(&resp), "Tower is a library (docs.rs/tower).");
}
