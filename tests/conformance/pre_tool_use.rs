//! hooks.md § "PreToolUse".

use serde_json::json;
use tower_agent::{agent::Outcome, model::ScriptedModel};

use crate::{
    exit_codes::{calls_bash, dumped, dumping, last_seen},
    support::command::{Scripts, agent, contexts_after_tools, tool_text, tool_texts, warnings},
};

fn answer(s: &Scripts, name: &str, specific: serde_json::Value) -> String {
    let out = json!({ "hookSpecificOutput": specific }).to_string();
    s.bash(name, &format!("cat >/dev/null; echo '{out}'"))
}

// hooks.md § "PreToolUse input": the common fields plus `tool_name`, `tool_input`,
// `tool_use_id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_has_the_documented_fields() {
    let s = Scripts::new();
    let hook = dumping(&s, "pre", "");
    let model = calls_bash("npm test");
    let (builder, _) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    let input = &dumped(&s, "pre")[0];
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], json!({"command": "npm test"}));
    assert_eq!(
        input["tool_use_id"],
        json!(resp.messages[2].tool_call_id.clone().unwrap())
    );
    assert_eq!(input["permission_mode"], "default");
    assert_eq!(input["session_id"], json!(resp.thread_id));
    assert!(input["cwd"].is_string() && input["transcript_path"].is_string());
}

// hooks.md § "PreToolUse decision control": `updatedInput` "Replaces the entire input
// object"; `additionalContext` is added "alongside the tool result".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_input_replaces_the_input_and_context_follows_the_result() {
    let s = Scripts::new();
    let hook = answer(
        &s,
        "h.sh",
        json!({"hookEventName": "PreToolUse", "permissionDecision": "allow",
               "permissionDecisionReason": "for the user only",
               "updatedInput": {"command": "npm run lint"},
               "additionalContext": "The target is staging."}),
    );
    let model = calls_bash("npm test");
    let (builder, seen) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![json!({"command": "npm run lint"})]
    );
    assert_eq!(tool_text(&resp), "ran: npm run lint");
    let context = contexts_after_tools(&resp).concat();
    assert!(context.contains("The target is staging."), "{context}");
    // An allow's reason is shown to the user, not to Claude.
    assert!(!last_seen(&model, 1).contains("for the user only"));
}

// hooks.md § "Defer a tool call for later": with `-p` (non-interactive, as this library
// is), "The tool doesn't execute. The process exits with stop_reason tool_deferred", and
// the deferred call carries its id, name and input; the reason is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_ends_the_run_with_the_pending_call() {
    let s = Scripts::new();
    let hook = answer(
        &s,
        "h.sh",
        json!({"hookEventName": "PreToolUse", "permissionDecision": "defer",
               "permissionDecisionReason": "ignored",
               "updatedInput": {"command": "ignored"}}),
    );
    let model = calls_bash("ask the user");
    let (builder, seen) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
    let id = resp.messages[1].tool_calls[0].id.clone();
    assert_eq!(
        resp.outcome,
        Outcome::Deferred {
            id,
            name: "bash".into(),
            input: json!({"command": "ask the user"}),
        }
    );
    assert_eq!(model.calls(), 1, "the model is not called again");
}

// hooks.md § "Defer a tool call for later": "If Claude makes several tool calls at once,
// defer is ignored with a warning and the tool proceeds through the normal permission flow."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defer_in_a_batch_of_several_calls_is_ignored_with_a_warning() {
    let s = Scripts::new();
    let hook = answer(
        &s,
        "h.sh",
        json!({"hookEventName": "PreToolUse", "permissionDecision": "defer"}),
    );
    let model = ScriptedModel::new()
        .tool_calls([
            ("bash", json!({"command": "a"})),
            ("bash", json!({"command": "b"})),
        ])
        .text("done");
    let (hooks, warned) = warnings(s.pre_tool_use(&hook, json!({})).into_hooks());
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(tool_texts(&resp), vec!["ran: a", "ran: b"]);
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(
        warned
            .lock()
            .unwrap()
            .iter()
            .any(|w| w.contains("deferral is ignored"))
    );
}

// hooks.md § "PreToolUse decision control": "precedence is deny > defer > ask > allow"; a
// deny's reason is shown to Claude.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_beats_defer() {
    let s = Scripts::new();
    let defer = answer(
        &s,
        "defer.sh",
        json!({"hookEventName": "PreToolUse", "permissionDecision": "defer"}),
    );
    let deny = answer(
        &s,
        "deny.sh",
        json!({"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no writes"}),
    );
    let hooks = s.hooks(json!({ "PreToolUse": [ { "matcher": "bash", "hooks": [
        { "type": "command", "command": defer }, { "type": "command", "command": deny } ] } ] }));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(tool_text(&resp), "PreToolUse:bash hook error: no writes");
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(
        last_seen(&model, 1),
        "PreToolUse:bash hook error: no writes"
    );
}
