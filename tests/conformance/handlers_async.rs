//! `async` and `asyncRewake` command hooks; `once`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tower_agent::{
    BoxError,
    agent::Outcome,
    model::{ModelRequest, ScriptedModel},
    tool::tool_fn,
};

use crate::support::command::{Scripts, agent, on};

/// A tool that takes `ms` milliseconds: time for a background hook to finish.
fn wait_tool(ms: u64) -> impl tower_agent::tool::Tool {
    tool_fn(
        "wait",
        "Waits",
        json!({"type": "object"}),
        move |_: Value, _| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, BoxError>("waited")
        },
    )
}

/// Every text of a model request, joined.
fn all_text(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

// hooks.md § "Run hooks in the background": an async hook does not block; its decision
// fields have no effect (here an exit 2 and a deny that would have blocked the call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_hook_neither_delays_nor_blocks() {
    let s = Scripts::new();
    let marker = s.path("finished");
    let hook = s.bash(
        "slow.sh",
        &format!(
            r#"sleep 2
echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny"}}}}'
touch '{}'
exit 2"#,
            marker.display()
        ),
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &hook, json!({ "async": true })));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let started = Instant::now();
    let resp = builder.build().run("go").await.unwrap();
    let took = started.elapsed();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(seen.lock().unwrap().len(), 1, "the tool ran");
    assert!(
        took < Duration::from_millis(1500),
        "the run waited for the hook: {took:?}"
    );
    assert!(!marker.exists(), "the hook was still running");
    // It did run to its end, in the background.
    for _ in 0..100 {
        if marker.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the async hook never finished");
}

// hooks.md § "How async hooks execute": after the background process exits, its
// `additionalContext` and `systemMessage` are delivered to the model on the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_hooks_context_reaches_the_next_turn() {
    let s = Scripts::new();
    let hook = s.bash(
        "report.sh",
        r#"echo '{"systemMessage": "lint ran", "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "3 lint warnings in main.rs"}}'"#,
    );
    let hooks = s.hooks(on("PostToolUse", "bash", &hook, json!({ "async": true })));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "edit main.rs" }))
        .tool_call("wait", json!({}))
        .text("done")
        .recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder
        .tool(wait_tool(1000))
        .build()
        .run("go")
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let third = all_text(&model.requests()[2]);
    assert!(
        third.contains("<system-hook>\n3 lint warnings in main.rs\n</system-hook>"),
        "{third}"
    );
    assert!(
        third.contains("<system-hook>\nlint ran\n</system-hook>"),
        "{third}"
    );
}

// hooks.md § "Command hook fields" (`asyncRewake`): it runs in the background; on exit 2 its
// stderr (or stdout if stderr is empty) is shown to the model as a system reminder, while the
// action it ran for was not blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_rewake_exit_2_reminds_the_model() {
    let s = Scripts::new();
    for (body, expect) in [
        (
            "sleep 0.3; echo 'the test suite broke: 2 failures' >&2; exit 2",
            "the test suite broke: 2 failures",
        ),
        (
            "sleep 0.3; echo 'stdout when stderr is empty'; exit 2",
            "stdout when stderr is empty",
        ),
    ] {
        let hook = s.bash("rewake.sh", body);
        let hooks = s.hooks(on(
            "PostToolUse",
            "bash",
            &hook,
            json!({ "asyncRewake": true }),
        ));
        let model = ScriptedModel::new()
            .tool_call("bash", json!({ "command": "make" }))
            .tool_call("wait", json!({}))
            .text("done")
            .recording();
        let (builder, seen) = agent(&model, hooks.into_hooks());
        let started = Instant::now();
        let resp = builder
            .tool(wait_tool(1500))
            .build()
            .run("go")
            .await
            .unwrap();
        assert_eq!(resp.outcome, Outcome::Finished);
        assert_eq!(seen.lock().unwrap().len(), 1);
        let requests = model.requests();
        // Not in the turn right after the call (the hook was still running) …
        assert!(!all_text(&requests[1]).contains(expect));
        // … but in the next one, as a reminder.
        let third = all_text(&requests[2]);
        assert!(
            third.contains(&format!("<system-hook>\n{expect}\n</system-hook>")),
            "{third}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    // Exit 0: nothing to wake the model for.
    let hook = s.bash("quiet.sh", "echo 'all good' >&2; exit 0");
    let hooks = s.hooks(on(
        "PostToolUse",
        "bash",
        &hook,
        json!({ "asyncRewake": true }),
    ));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "make" }))
        .tool_call("wait", json!({}))
        .text("done")
        .recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder
        .tool(wait_tool(500))
        .build()
        .run("go")
        .await
        .unwrap();
    assert!(!all_text(&model.requests()[2]).contains("all good"));
}

// hooks.md § "Common fields" (`once`): honoured only for hooks in skill frontmatter, ignored
// in settings files — a settings hook with `once: true` runs every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_is_ignored_in_settings() {
    let s = Scripts::new();
    let log = s.path("runs.log");
    let hook = s.bash("count.sh", &format!("echo run >> '{}'", log.display()));
    let hooks = s.hooks(on("PreToolUse", "bash", &hook, json!({ "once": true })));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "a" }))
        .tool_call("bash", json!({ "command": "b" }))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert_eq!(s.read("runs.log"), "run\nrun\n");
}
