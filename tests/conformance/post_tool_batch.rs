//! hooks.md § "PostToolBatch".

use serde_json::{Value, json};
use tower_agent::{agent::Outcome, model::ScriptedModel};

use crate::{
    exit_codes::{dumped, dumping, last_seen},
    support::command::{Scripts, agent},
};

fn batch_hooks(s: &Scripts, command: &str) -> tower_agent::command::CommandHooks {
    // "There is no matcher for this event": a matcher is ignored.
    s.hooks(
        json!({ "PostToolBatch": [ { "matcher": "nothing-matches-this",
        "hooks": [ { "type": "command", "command": command } ] } ] }),
    )
}

fn two_calls() -> ScriptedModel {
    ScriptedModel::new()
        .tool_calls([
            ("bash", json!({"command": "a"})),
            ("bash", json!({"command": "b"})),
        ])
        .text("done")
        .recording()
}

// hooks.md § "PostToolBatch input": fires "exactly once with the full batch": `tool_calls`,
// each with `tool_name`, `tool_input`, `tool_use_id` and `tool_response` (the content the
// model receives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_once_per_batch_with_every_call() {
    let s = Scripts::new();
    let hook = dumping(&s, "batch", "");
    let model = two_calls();
    let (builder, _) = agent(&model, batch_hooks(&s, &hook).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let inputs = dumped(&s, "batch");
    assert_eq!(inputs.len(), 1, "{inputs:?}");
    let input = &inputs[0];
    assert_eq!(input["hook_event_name"], "PostToolBatch");
    let ids: Vec<Value> = resp.messages[1]
        .tool_calls
        .iter()
        .map(|c| json!(c.id))
        .collect();
    assert_eq!(
        input["tool_calls"],
        json!([
            {"tool_name": "bash", "tool_input": {"command": "a"}, "tool_use_id": ids[0], "tool_response": "ran: a"},
            {"tool_name": "bash", "tool_input": {"command": "b"}, "tool_use_id": ids[1], "tool_response": "ran: b"},
        ])
    );
}

// hooks.md § "PostToolBatch decision control": `additionalContext` is "injected once before
// the next model call".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn additional_context_reaches_the_next_model_call() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PostToolBatch", "additionalContext": "Run pytest before finishing."}}'"#,
    );
    let model = two_calls();
    let (builder, _) = agent(&model, batch_hooks(&s, &hook).into_hooks());
    builder.build().run("go").await.unwrap();
    let seen = last_seen(&model, 1);
    assert!(seen.contains("Run pytest before finishing."), "{seen}");
    let n = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.text().contains("Run pytest"))
        .count();
    assert_eq!(n, 1, "injected once");
}

/// Runs a batch whose hook is `body`; the run must stop before the next model call with
/// `reason`, kept in the conversation.
async fn stops_with(body: &str, reason: &str) {
    let s = Scripts::new();
    let hook = s.bash("h.sh", body);
    let model = two_calls();
    let (builder, seen) = agent(&model, batch_hooks(&s, &hook).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "the batch ran");
    assert_eq!(model.calls(), 1, "no next model call");
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: reason.into()
        }
    );
    let last = resp.messages.last().unwrap().text().into_owned();
    assert!(
        last.contains(reason),
        "the reason stays in the conversation: {last}"
    );
}

// hooks.md § "PostToolBatch decision control": `decision: "block"` "stops the agentic loop
// before the next model call"; the message comes from `reason`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_stops_the_loop_with_its_reason() {
    stops_with(
        r#"cat >/dev/null; echo '{"decision": "block", "reason": "tests are red"}'"#,
        "tests are red",
    )
    .await;
}

// hooks.md § "PostToolBatch decision control": `continue: false` stops it too, with
// `stopReason`, and takes precedence over `decision`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_false_stops_the_loop_with_its_stop_reason() {
    stops_with(
        r#"cat >/dev/null; echo '{"continue": false, "stopReason": "out of budget", "decision": "block", "reason": "other"}'"#,
        "out of budget",
    )
    .await;
}

// hooks.md § "Exit code 2 behavior per event": PostToolBatch "Stops the agentic loop before
// the next model call", with stderr as the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_stops_the_loop_with_stderr() {
    stops_with("cat >/dev/null; echo 'stop now' >&2; exit 2", "stop now").await;
}
