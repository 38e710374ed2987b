//! `async` and `asyncRewake` command hooks; `once`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tower_agent::{
    BoxError,
    agent::Outcome,
    model::{ModelRequest, ScriptedModel},
    tool::tool_fn,
};

use crate::support::{
    command::{Scripts, agent, on},
    eventually, within,
};

/// A tool `wait` that lets the background hooks go on (it creates `release`, which they wait
/// for) and waits until `n` reminders are queued for the run — the background hooks'
/// answers reaching it — leaving them queued for the next turn.
fn wait_tool(release: PathBuf, n: usize) -> impl tower_agent::tool::Tool {
    tool_fn(
        "wait",
        "Waits",
        json!({"type": "object"}),
        move |_: Value, ctx| {
            let release = release.clone();
            async move {
                std::fs::write(&release, "")?;
                let queued = eventually("the background hooks' reminders", || {
                    let queued = ctx.take_reminders();
                    if queued.len() >= n {
                        return Some(queued);
                    }
                    queued.into_iter().for_each(|r| ctx.remind(r));
                    None
                })
                .await;
                queued.into_iter().for_each(|r| ctx.remind(r));
                Ok::<_, BoxError>("waited")
            }
        },
    )
}

/// Shell lines that wait (at most about two minutes) until `release` exists.
fn wait_for(release: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done",
        release.display()
    )
}

/// Every text of a model request, joined.
/// The texts of the request's system messages (hook contexts) after its first message.
fn system_texts(req: &ModelRequest) -> Vec<String> {
    req.messages
        .iter()
        .skip(1)
        .filter(|m| m.role == tower_agent::message::Role::System)
        .map(|m| m.text().into_owned())
        .collect()
}

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
    let release = s.path("release");
    // The hook ends only once the test lets it: after the run has ended.
    let hook = s.bash(
        "slow.sh",
        &format!(
            r#"{}
echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny"}}}}'
touch '{}'
exit 2"#,
            wait_for(&release),
            marker.display()
        ),
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &hook, json!({ "async": true })));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    // The run ends while the hook still waits: it did not wait for the hook.
    let resp = within("the run, while its hook waits", builder.build().run("go"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(seen.lock().unwrap().len(), 1, "the tool ran");
    assert!(!marker.exists(), "the hook was still running");
    // It does run to its end, in the background.
    std::fs::write(&release, "").unwrap();
    eventually("the async hook's end", || marker.exists().then_some(())).await;
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
        .tool(wait_tool(s.path("release"), 2))
        .build()
        .run("go")
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    let third = all_text(&model.requests()[2]);
    // Both, in a hook context (a system message) after the results.
    let contexts = system_texts(&model.requests()[2]).join("\n\n");
    assert!(contexts.contains("3 lint warnings in main.rs"), "{third}");
    assert!(contexts.contains("lint ran"), "{third}");
}

// hooks.md § "Command hook fields" (`asyncRewake`): it runs in the background; on exit 2 its
// stderr (or stdout if stderr is empty) is shown to the model as a system reminder, while the
// action it ran for was not blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_rewake_exit_2_reminds_the_model() {
    let s = Scripts::new();
    let release = s.path("release");
    for (body, expect) in [
        (
            "echo 'the test suite broke: 2 failures' >&2; exit 2",
            "the test suite broke: 2 failures",
        ),
        (
            "echo 'stdout when stderr is empty'; exit 2",
            "stdout when stderr is empty",
        ),
    ] {
        // The hook answers once the second tool call lets it: after the first turn.
        let _ = std::fs::remove_file(&release);
        let hook = s.bash("rewake.sh", &format!("{}\n{body}", wait_for(&release)));
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
        let resp = builder
            .tool(wait_tool(release.clone(), 1))
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
            system_texts(&requests[2]).join("\n\n").contains(expect),
            "{third}"
        );
    }
    // Exit 0: nothing to wake the model for (its context, which comes after a wake, is the
    // sign the hook's answer was read).
    let hook = s.bash(
        "quiet.sh",
        r#"echo 'all good' >&2
echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "exit 0 read"}}'
exit 0"#,
    );
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
        .tool(wait_tool(s.path("release"), 1))
        .build()
        .run("go")
        .await
        .unwrap();
    let third = all_text(&model.requests()[2]);
    assert!(third.contains("exit 0 read"), "{third}");
    assert!(!third.contains("all good"), "{third}");
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
