//! hooks.md § "Notification".

use std::sync::{Arc, Mutex};

use serde_json::json;
use tower::service_fn;
use tower_agent::{
    BoxError,
    layers::hooks::{ApprovalDecision, ApprovalRequest, Hooks, Notification},
};

use crate::{
    exit_codes::{calls_bash, dumped, dumping, wait_for_file},
    support::command::{Scripts, agent, tool_text},
};

const ASK: &str = r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "confirm this"}}'"#;

// hooks.md § "Notification input": `message`, `title` and `notification_type`; the matcher
// picks by type: `permission_prompt` when approval is asked. Exit code and stderr are
// ignored (§ "Exit code 2 behavior per event").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_prompt_notifies_with_message_and_title() {
    let s = Scripts::new();
    let ask = s.bash("ask.sh", ASK);
    let prompt = dumping(&s, "prompt", "echo 'ignored' >&2; exit 2");
    let warning = dumping(&s, "warning", "");
    let hooks = s.hooks(json!({
        "PreToolUse": [ { "matcher": "bash", "hooks": [ { "type": "command", "command": ask } ] } ],
        "Notification": [
            { "matcher": "permission_prompt", "hooks": [ { "type": "command", "command": prompt } ] },
            { "matcher": "warning", "hooks": [ { "type": "command", "command": warning } ] },
        ],
    }));
    let hooks = hooks
        .into_hooks()
        .approval(service_fn(|_: ApprovalRequest| async {
            Ok::<_, BoxError>(ApprovalDecision::Allow)
        }));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        tool_text(&resp),
        "ran: ls",
        "exit 2 of a Notification hook blocks nothing"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    wait_for_file(&s.path("prompt.jsonl")).await;
    let input = &dumped(&s, "prompt")[0];
    assert_eq!(input["hook_event_name"], "Notification");
    assert_eq!(input["notification_type"], "permission_prompt");
    assert_eq!(input["title"], "Permission needed");
    let message = input["message"].as_str().unwrap();
    assert!(
        message.contains("bash") && message.contains("confirm this"),
        "{message}"
    );
    assert!(
        dumped(&s, "warning").is_empty(),
        "the matcher picks by type"
    );
}

// hooks.md § "Notification": the library's warnings come as notifications of type `warning`
// (no documented type fits them), with the matcher on `notification_type`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_notify_with_their_own_type() {
    let s = Scripts::new();
    let warning = dumping(&s, "warning", "");
    let prompt = dumping(&s, "prompt", "");
    let failing = s.bash("fail.sh", "cat >/dev/null; echo 'oops' >&2; exit 1");
    let hooks = s.hooks(json!({
        "PreToolUse": [ { "matcher": "bash", "hooks": [ { "type": "command", "command": failing } ] } ],
        "Notification": [
            { "matcher": "warning", "hooks": [ { "type": "command", "command": warning } ] },
            { "matcher": "permission_prompt", "hooks": [ { "type": "command", "command": prompt } ] },
        ],
    }));
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    wait_for_file(&s.path("warning.jsonl")).await;
    let input = &dumped(&s, "warning")[0];
    assert_eq!(input["notification_type"], "warning");
    assert!(
        input["message"].as_str().unwrap().contains("oops"),
        "{input}"
    );
    assert!(dumped(&s, "prompt").is_empty());
}

// The registry side: `Hooks::on_notify` gets typed notifications, by matcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_on_notify_matches_the_type() {
    let s = Scripts::new();
    let ask = s.bash("ask.sh", ASK);
    let got: Arc<Mutex<Vec<Notification>>> = Arc::default();
    let g = Arc::clone(&got);
    let hooks = s
        .hooks(json!({ "PreToolUse": [ { "matcher": "bash", "hooks": [ { "type": "command", "command": ask } ] } ] }))
        .register(Hooks::new())
        .on_notify("permission_prompt", move |n, _| g.lock().unwrap().push(n.clone()))
        .approval(service_fn(|_: ApprovalRequest| async {
            Ok::<_, BoxError>(ApprovalDecision::Deny("no".into()))
        }));
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "denied: no");
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].notification_type, "permission_prompt");
    assert_eq!(got[0].title.as_deref(), Some("Permission needed"));
}
