//! hooks.md § "PostToolUse" and § "PostToolUseFailure".

use serde_json::json;
use tower_agent::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};

use crate::{
    exit_codes::{calls_bash, dumped, dumping, last_seen},
    support::command::{Scripts, agent, contexts_after_tools, on, tool_text},
};

// hooks.md § "PostToolUse input": `tool_input`, `tool_response` (the tool's output) and
// `tool_use_id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_input_has_the_documented_fields() {
    let s = Scripts::new();
    let hook = dumping(&s, "post", "");
    let model = calls_bash("ls");
    let (builder, _) = agent(
        &model,
        s.hooks(on("PostToolUse", "bash", &hook, json!({})))
            .into_hooks(),
    );
    let resp = builder.build().run("go").await.unwrap();
    let input = &dumped(&s, "post")[0];
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], json!({"command": "ls"}));
    assert_eq!(input["tool_response"], "ran: ls");
    assert_eq!(
        input["tool_use_id"],
        json!(resp.messages[2].tool_call_id.clone().unwrap())
    );
}

// hooks.md § "PostToolUse decision control": `decision: "block"` "adds the reason next to
// the tool result. Claude still sees the original output".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_adds_the_reason_next_to_the_original_output() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"decision": "block", "reason": "format the file first"}'"#,
    );
    let model = calls_bash("ls");
    let (builder, _) = agent(
        &model,
        s.hooks(on("PostToolUse", "bash", &hook, json!({})))
            .into_hooks(),
    );
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    let context = contexts_after_tools(&resp).concat();
    assert!(context.contains("format the file first"), "{context}");
    assert!(last_seen(&model, 1).contains("format the file first"));
}

// hooks.md § "PostToolUse decision control": `updatedToolOutput` "Replaces the tool's output
// ... before it is sent to Claude"; `additionalContext` goes alongside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_tool_output_replaces_what_the_model_sees() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": "[redacted]", "additionalContext": "generated file"}}'"#,
    );
    let model = calls_bash("cat secrets");
    let (builder, _) = agent(
        &model,
        s.hooks(on("PostToolUse", "bash", &hook, json!({})))
            .into_hooks(),
    );
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "[redacted]");
    let context = contexts_after_tools(&resp).concat();
    assert!(context.contains("generated file"), "{context}");
}

// hooks.md § "PostToolUseFailure input": `tool_name`, `tool_input`, `tool_use_id`, `error`
// and `is_interrupt`; § "PostToolUseFailure decision control": `additionalContext` goes
// alongside the error; exit 2 "Shows stderr to Claude".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_failure_input_and_context() {
    let s = Scripts::new();
    let hook = dumping(
        &s,
        "fail",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PostToolUseFailure", "additionalContext": "install express first"}}'"#,
    );
    let stderr = s.bash("e.sh", "cat >/dev/null; echo 'from stderr' >&2; exit 2");
    let hooks = s.hooks(
        json!({ "PostToolUseFailure": [ { "matcher": "bash", "hooks": [
        { "type": "command", "command": hook }, { "type": "command", "command": stderr } ] } ] }),
    );
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "npm test"}))
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn(
            "bash",
            "Runs a command",
            json!({"type": "object"}),
            |_, _| async {
                Err::<String, BoxError>("Exit code 1\nCannot find module 'express'".into())
            },
        ))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("go").await.unwrap();
    let input = &dumped(&s, "fail")[0];
    assert_eq!(input["hook_event_name"], "PostToolUseFailure");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], json!({"command": "npm test"}));
    assert_eq!(
        input["tool_use_id"],
        json!(resp.messages[2].tool_call_id.clone().unwrap())
    );
    assert!(
        input["error"]
            .as_str()
            .unwrap()
            .contains("Cannot find module 'express'")
    );
    assert_eq!(input["is_interrupt"], false);
    let context = contexts_after_tools(&resp).concat();
    assert!(context.contains("install express first"), "{context}");
    assert!(context.contains("from stderr"), "{context}");
}
