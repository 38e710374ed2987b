//! hooks.md § "PermissionRequest" and § "PermissionDenied".

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower::service_fn;
use tower_agent::{
    BoxError,
    agent::Outcome,
    command::CommandHooks,
    layers::hooks::{ApprovalDecision, ApprovalRequest, Hooks},
};

use crate::{
    exit_codes::{calls_bash, dumped, dumping, last_seen},
    support::command::{Scripts, agent, tool_text},
};

const ASK: &str = r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "confirm this"}}'"#;

/// PreToolUse asks; `more` adds events (PermissionRequest, PermissionDenied …).
fn asking(s: &Scripts, more: Value) -> CommandHooks {
    let ask = s.bash("ask.sh", ASK);
    let mut hooks = json!({ "PreToolUse": [ { "matcher": "bash", "hooks": [ { "type": "command", "command": ask } ] } ] });
    hooks
        .as_object_mut()
        .unwrap()
        .extend(more.as_object().unwrap().clone());
    s.hooks(hooks)
}

fn group(command: &str) -> Value {
    json!([ { "matcher": "bash", "hooks": [ { "type": "command", "command": command } ] } ])
}

/// An approval service that records what it is asked and answers `decision`.
fn approval(hooks: Hooks, decision: ApprovalDecision) -> (Hooks, Arc<Mutex<Vec<ApprovalRequest>>>) {
    let asked: Arc<Mutex<Vec<ApprovalRequest>>> = Arc::default();
    let a = Arc::clone(&asked);
    let hooks = hooks.approval(service_fn(move |req: ApprovalRequest| {
        a.lock().unwrap().push(req);
        let d = decision.clone();
        async move { Ok::<_, BoxError>(d) }
    }));
    (hooks, asked)
}

// hooks.md § "PermissionRequest input": `tool_name` and `tool_input`, "but without
// tool_use_id"; § "PermissionRequest decision control": `behavior: "allow"` with
// `updatedInput` grants the permission and replaces the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_with_updated_input_runs_the_call_without_the_approval_service() {
    let s = Scripts::new();
    let req = dumping(
        &s,
        "req",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow", "updatedInput": {"command": "npm run lint"}}}}'"#,
    );
    let hooks = asking(&s, json!({ "PermissionRequest": group(&req) }));
    let (hooks, asked) = approval(hooks.into_hooks(), ApprovalDecision::Deny("user".into()));
    let model = calls_bash("rm -rf node_modules");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![json!({"command": "npm run lint"})]
    );
    assert_eq!(tool_text(&resp), "ran: npm run lint");
    assert!(asked.lock().unwrap().is_empty(), "the hook decided");
    let input = &dumped(&s, "req")[0];
    assert_eq!(input["hook_event_name"], "PermissionRequest");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(
        input["tool_input"],
        json!({"command": "rm -rf node_modules"})
    );
    assert!(input.get("tool_use_id").is_none(), "{input}");
}

// hooks.md § "PermissionRequest decision control": `deny` + `message` "tells Claude why";
// `interrupt: true` "stops Claude".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_tells_the_model_and_interrupt_stops_the_run() {
    let s = Scripts::new();
    let deny = s.bash(
        "deny.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "not on main"}}}'"#,
    );
    let hooks = asking(&s, json!({ "PermissionRequest": group(&deny) }));
    let model = calls_bash("git push");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(tool_text(&resp), "denied: not on main");
    assert_eq!(last_seen(&model, 1), "denied: not on main");
    assert_eq!(resp.outcome, Outcome::Finished);

    let s = Scripts::new();
    let stop = s.bash(
        "stop.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "stop everything", "interrupt": true}}}'"#,
    );
    let hooks = asking(&s, json!({ "PermissionRequest": group(&stop) }));
    let model = calls_bash("git push");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "stop everything".into()
        }
    );
    assert_eq!(model.calls(), 1);
}

// hooks.md § "PermissionRequest decision control": "A hook that exits 2 without a decision
// object leaves the permission flow unchanged, and its stderr is discarded": the approval
// service is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_decision_or_exit_2_falls_through_to_the_approval_service() {
    let s = Scripts::new();
    let silent = s.bash("silent.sh", "cat >/dev/null");
    let exit2 = s.bash(
        "exit2.sh",
        "cat >/dev/null; echo 'secret stderr' >&2; exit 2",
    );
    let hooks = asking(
        &s,
        json!({ "PermissionRequest": [ { "matcher": "bash", "hooks": [
            { "type": "command", "command": silent }, { "type": "command", "command": exit2 } ] } ] }),
    );
    let (hooks, asked) = approval(hooks.into_hooks(), ApprovalDecision::Allow);
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(asked.lock().unwrap()[0].reason, "confirm this");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(tool_text(&resp), "ran: ls");
    assert!(!last_seen(&model, 1).contains("secret stderr"));
}

// hooks.md § "PermissionRequest": "In sessions that can't show a prompt ... if no hook
// returns a decision, it denies the tool call"; § "PermissionDenied": it fires for such an
// automatic denial with `tool_name`, `tool_input`, `tool_use_id`, `reason`, and `retry: true`
// "adds a message to the conversation telling the model it may retry".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_denial_fires_permission_denied_whose_retry_reaches_the_model() {
    let s = Scripts::new();
    let denied = dumping(
        &s,
        "denied",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PermissionDenied", "retry": true}}'"#,
    );
    let hooks = asking(&s, json!({ "PermissionDenied": group(&denied) }));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    let text = tool_text(&resp);
    assert!(text.starts_with("denied: confirm this"), "{text}");
    assert!(text.contains("you may retry it"), "{text}");
    let input = &dumped(&s, "denied")[0];
    assert_eq!(input["hook_event_name"], "PermissionDenied");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], json!({"command": "ls"}));
    assert_eq!(
        input["tool_use_id"],
        json!(resp.messages[2].tool_call_id.clone().unwrap())
    );
    assert_eq!(input["reason"], "confirm this");
}

// hooks.md § "PermissionDenied": it "doesn't run when you manually deny a permission dialog"
// (the approval service's Deny is the user's answer), nor when "a PreToolUse hook blocks".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_denial_does_not_fire_permission_denied() {
    let s = Scripts::new();
    let denied = dumping(&s, "denied", "");
    let hooks = asking(&s, json!({ "PermissionDenied": group(&denied) }));
    let (hooks, asked) = approval(
        hooks.into_hooks(),
        ApprovalDecision::Deny("user says no".into()),
    );
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(tool_text(&resp), "denied: user says no");
    assert!(dumped(&s, "denied").is_empty());
}
