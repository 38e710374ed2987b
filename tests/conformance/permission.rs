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
    support::command::{Scripts, agent, contexts_after_tools, tool_text},
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

/// Command hooks whose settings ask about every `bash` call (`permissions.ask`), with `hooks`.
fn rule_asking(s: &Scripts, hooks: Value) -> CommandHooks {
    CommandHooks::builder()
        .settings_json(
            json!({ "hooks": hooks, "permissions": { "ask": ["Bash"] } }),
            "settings.json",
        )
        .project_dir(s.path(""))
        .transcripts_dir(s.path("transcripts"))
        .build()
        .unwrap()
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
// `interrupt: true` "stops Claude". Measured against Claude Code 2.1.328 (vectors
// `permission_request_deny`, `permission_request_deny_interrupt`): the model gets the message
// alone, and an interrupt ends the session at once (one model request). Headless, Claude Code
// asks PermissionRequest hooks about a call a rule asks about (not about a hook's ask: see
// `a_hooks_ask_with_no_one_to_ask_is_refused_with_its_reason_alone`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_tells_the_model_and_interrupt_stops_the_run() {
    let s = Scripts::new();
    let deny = s.bash(
        "deny.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "not on main"}}}'"#,
    );
    let hooks = rule_asking(&s, json!({ "PermissionRequest": group(&deny) }));
    let model = calls_bash("git push");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(tool_text(&resp), "not on main");
    assert_eq!(last_seen(&model, 1), "not on main");
    assert_eq!(resp.outcome, Outcome::Finished);

    let s = Scripts::new();
    let stop = s.bash(
        "stop.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "stop everything", "interrupt": true}}}'"#,
    );
    let hooks = rule_asking(&s, json!({ "PermissionRequest": group(&stop) }));
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

// hooks.md § "PreToolUse decision control": `ask` "prompts the user to confirm". With no one
// to ask, Claude Code 2.1.328 `-p` refuses the call at once with the hook's reason alone: no
// PermissionRequest, no PermissionDenied (vectors `permission_ask_headless`,
// `permission_ask_over_allow`). With an approval service, PermissionRequest hooks run first
// (`allow_with_updated_input_runs_the_call_without_the_approval_service`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_ask_with_no_one_to_ask_is_refused_with_its_reason_alone() {
    let s = Scripts::new();
    let req = dumping(&s, "req", "");
    let denied = dumping(&s, "denied", "");
    let hooks = asking(
        &s,
        json!({ "PermissionRequest": group(&req), "PermissionDenied": group(&denied) }),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(tool_text(&resp), "confirm this");
    assert!(dumped(&s, "req").is_empty());
    assert!(dumped(&s, "denied").is_empty());
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
// returns a decision, it denies the tool call". Measured against Claude Code 2.1.328 `-p`
// (vector `permission_rule_ask`): PermissionRequest fires (without `permission_suggestions`
// for a call an ask rule asks about), the call is refused in Claude Code's words, and no
// PermissionDenied fires — hooks.md's PermissionDenied is the auto mode classifier's denial,
// whose counterpart here is an approval service that fails: then it fires with `tool_name`,
// `tool_input`, `tool_use_id`, `reason`, and `retry: true` "adds a message to the
// conversation telling the model it may retry".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_denial_fires_permission_denied_whose_retry_reaches_the_model() {
    let s = Scripts::new();
    let req = dumping(&s, "req", "");
    let denied = dumping(
        &s,
        "denied",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PermissionDenied", "retry": true}}'"#,
    );
    let more = json!({ "PermissionRequest": group(&req), "PermissionDenied": group(&denied) });
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, rule_asking(&s, more.clone()).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        tool_text(&resp),
        "Claude requested permissions to use bash, but you haven't granted it yet."
    );
    let input = &dumped(&s, "req")[0];
    assert_eq!(input["tool_input"], json!({"command": "ls"}));
    assert!(input.get("permission_suggestions").is_none(), "{input}");
    assert!(
        dumped(&s, "denied").is_empty(),
        "nobody to ask is no automatic denial"
    );

    let failing =
        rule_asking(&s, more)
            .into_hooks()
            .approval(service_fn(|_: ApprovalRequest| async {
                Err::<ApprovalDecision, BoxError>("the UI is gone".into())
            }));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, failing);
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    let text = tool_text(&resp);
    assert!(
        text.starts_with("denied: approval failed: the UI is gone"),
        "{text}"
    );
    let context = contexts_after_tools(&resp).concat();
    assert!(context.contains("you may retry it"), "{context}");
    let input = &dumped(&s, "denied")[0];
    assert_eq!(input["hook_event_name"], "PermissionDenied");
    assert_eq!(input["tool_name"], "bash");
    assert_eq!(input["tool_input"], json!({"command": "ls"}));
    assert_eq!(
        input["tool_use_id"],
        json!(resp.messages[2].tool_call_id.clone().unwrap())
    );
    assert_eq!(input["reason"], "denied: approval failed: the UI is gone");
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
