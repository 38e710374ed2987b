//! hooks.md § "Exit code output": exit 0, exit 2, other exit codes, per event.

use std::path::Path;

use serde_json::{Value, json};
use tower_agent::{agent::Outcome, model::ScriptedModel};

use crate::support::command::{Scripts, agent, contexts_after_tools, on, tool_text, warnings};

// ===== helpers shared by the conformance files =====

/// The model calls `bash` with `command`, then answers "done".
pub(crate) fn calls_bash(command: &str) -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("bash", json!({ "command": command }))
        .text("done")
        .recording()
}

/// A bash hook that appends its stdin (one JSON line) to `<dir>/<name>.jsonl`, then runs
/// `rest`.
pub(crate) fn dumping(s: &Scripts, name: &str, rest: &str) -> String {
    let file = s.path(&format!("{name}.jsonl"));
    s.bash(
        &format!("{name}.sh"),
        &format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> '{}'\n{rest}",
            file.display()
        ),
    )
}

/// The inputs a [`dumping`] hook got, in order.
pub(crate) fn dumped(s: &Scripts, name: &str) -> Vec<Value> {
    s.read(&format!("{name}.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits (at most [`PATIENCE`](crate::support::PATIENCE)) until `path` holds something.
pub(crate) async fn wait_for_file(path: &Path) -> String {
    crate::support::eventually(&format!("{} holding something", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|text| !text.trim().is_empty())
    })
    .await
}

/// The text of the last message of the model's request `i`.
pub(crate) fn last_seen(model: &ScriptedModel, i: usize) -> String {
    model.requests()[i]
        .messages
        .last()
        .unwrap()
        .text()
        .into_owned()
}

// ===== exit 2 =====

// hooks.md § "Exit code 2": "The blocking message is the reason from your JSON's blocking
// decision when it makes one, and your stderr text otherwise." A `reason` without a blocking
// decision is not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_blocks_with_stderr_when_the_json_makes_no_blocking_decision() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"reason": "from json"}'; echo "from stderr" >&2; exit 2"#,
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        tool_text(&resp),
        format!("PreToolUse:bash hook error: [{hook}]: from stderr")
    );
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        last_seen(&model, 1),
        format!("PreToolUse:bash hook error: [{hook}]: from stderr")
    );
}

// hooks.md § "Exit code 2": the JSON's own blocking decision gives the reason, and "even a
// JSON permissionDecision of allow can't override" the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_uses_the_reason_of_a_json_deny_and_ignores_a_json_allow() {
    let s = Scripts::new();
    let deny = s.bash(
        "deny.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "json deny"}}'; echo "stderr text" >&2; exit 2"#,
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, s.pre_tool_use(&deny, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "PreToolUse:bash hook error: json deny");
    assert!(seen.lock().unwrap().is_empty());

    let allow = s.bash(
        "allow.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'; echo "blocked anyway" >&2; exit 2"#,
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, s.pre_tool_use(&allow, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        tool_text(&resp),
        format!("PreToolUse:bash hook error: [{allow}]: blocked anyway")
    );
    assert!(seen.lock().unwrap().is_empty());
}

// ===== other exit codes =====

// hooks.md § "Other exit codes": "With a parsed object that passes schema validation ...
// Claude Code ignores the exit code and the JSON alone decides the outcome ... and the hook
// isn't reported as an error."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_exit_code_with_a_json_object_lets_the_json_decide() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "json says no"}}'; exit 1"#,
    );
    let model = calls_bash("ls");
    let (hooks, warned) = warnings(s.pre_tool_use(&hook, json!({})).into_hooks());
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "PreToolUse:bash hook error: json says no");
    assert!(seen.lock().unwrap().is_empty());
    assert!(
        warned.lock().unwrap().is_empty(),
        "{:?}",
        warned.lock().unwrap()
    );
}

// hooks.md § "Other exit codes": plain or empty stdout is a non-blocking error: the action
// proceeds, and the notice carries the first line of stderr, prefixed with "Failed with
// non-blocking status code".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_exit_code_without_json_is_a_non_blocking_error() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        "cat >/dev/null; echo 'not json'; printf 'first line\\nsecond line\\n' >&2; exit 1",
    );
    let model = calls_bash("ls");
    let (hooks, warned) = warnings(s.pre_tool_use(&hook, json!({})).into_hooks());
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let warned = warned.lock().unwrap().join("\n");
    assert!(
        warned.contains("failed with non-blocking status code 1: first line"),
        "{warned}"
    );
    assert!(!warned.contains("second line"), "{warned}");
}

// hooks.md § "Exit code 0": plain stdout is context only for UserPromptSubmit (and
// SessionStart); on another exit code it is not context.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_stdout_of_a_failed_user_prompt_hook_is_not_context() {
    let s = Scripts::new();
    let ok = s.bash("ok.sh", "cat >/dev/null; echo 'context from exit 0'");
    let bad = s.bash(
        "bad.sh",
        "cat >/dev/null; echo 'context from exit 1'; exit 1",
    );
    let hooks = s.hooks(json!({ "UserPromptSubmit": [
        { "hooks": [ { "type": "command", "command": ok }, { "type": "command", "command": bad } ] }
    ]}));
    let model = ScriptedModel::new().text("hi").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("hello").await.unwrap();
    let seen = last_seen(&model, 0);
    assert!(seen.contains("context from exit 0"), "{seen}");
    assert!(!seen.contains("context from exit 1"), "{seen}");
}

// ===== exit 2 per event =====

// hooks.md § "Exit code 2 behavior per event": PostToolUse "Shows stderr to Claude; the tool
// already ran".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_of_post_tool_use_shows_stderr_to_the_model() {
    let s = Scripts::new();
    let hook = s.bash("h.sh", "cat >/dev/null; echo 'lint failed' >&2; exit 2");
    let model = calls_bash("ls");
    let (builder, seen) = agent(
        &model,
        s.hooks(on("PostToolUse", "bash", &hook, json!({})))
            .into_hooks(),
    );
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1, "the tool already ran");
    // The result as it was; the block's reason follows it (Claude Code 2.1.328: a system
    // message after the result, `PostToolUse:<tool> hook blocking error from command: …`).
    assert_eq!(tool_text(&resp), "ran: ls");
    let context = contexts_after_tools(&resp).concat();
    assert!(
        context.starts_with("PostToolUse:bash hook blocking error from command: "),
        "{context}"
    );
    assert!(context.contains("lint failed"), "{context}");
    assert!(last_seen(&model, 1).contains("lint failed"));
}

// hooks.md § "Timeouts": a timed-out command hook "doesn't block the tool call".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_pre_tool_use_hook_does_not_block() {
    let s = Scripts::new();
    let hook = s.bash("slow.sh", "cat >/dev/null; sleep 600; exit 2");
    let model = calls_bash("ls");
    let (builder, seen) = agent(
        &model,
        s.pre_tool_use(&hook, json!({"timeout": 1})).into_hooks(),
    );
    // Killed at its 1 s timeout, not waited for (ten minutes).
    let resp = crate::support::within("the run", builder.build().run("go"))
        .await
        .unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(resp.outcome.is_finished());
}

// hooks.md § "SessionEnd": "SessionEnd hooks have a default timeout of 1.5 seconds" (a shared
// budget, raised by a longer per-hook `timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_end_hooks_share_a_one_and_a_half_second_budget() {
    let s = Scripts::new();
    let marks = s.path("marks");
    let pid = s.path("pid");
    let hook = s.bash(
        "end.sh",
        &format!(
            "cat >/dev/null; echo $$ > '{1}'; echo start >> '{0}'; sleep 30; echo end >> '{0}'",
            marks.display(),
            pid.display()
        ),
    );
    let hooks = s.hooks(
        json!({ "SessionEnd": [ { "hooks": [ { "type": "command", "command": hook } ] } ] }),
    );
    let model = ScriptedModel::new().text("hi");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("hello").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let pid: i64 = wait_for_file(&pid).await.trim().parse().unwrap();
    // Killed at the budget, the hook never writes `end`; not killed, it would after 30 s.
    assert!(crate::support::wait_dead(pid).await, "the hook still runs");
    assert_eq!(
        std::fs::read_to_string(&marks).unwrap(),
        "start\n",
        "the hook must be killed at the 1.5 s budget"
    );
}
