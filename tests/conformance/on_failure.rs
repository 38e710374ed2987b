//! `onFailure: "block"`: a hook that fails blocks what it guards.
//!
//! Hooks reference (Claude Code 2.1.295, October 2026), handler field `onFailure`: on a
//! `command` or `http` handler, `"block"` makes a hook that cannot start, times out or exits
//! with an unexpected code block the action instead of letting it through; without it hooks
//! fail open (the default is unchanged). This crate's own `failClosed: true` is the same
//! switch. Each failure mode is tried with each spelling, and without it.

use serde_json::{Value, json};
use tower_agent::{agent::Outcome, model::ScriptedModel};

use crate::support::command::{Scripts, agent, on, tool_text, warnings};

fn calls_rm() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("bash", json!({ "command": "rm -rf /" }))
        .text("done")
}

/// The ways a guard fails, each a PreToolUse handler for `bash` (with `extra` fields added).
fn failing_guards(s: &Scripts) -> Vec<(&'static str, String, Value)> {
    vec![
        (
            "times out",
            s.bash("slow.sh", "cat > /dev/null; sleep 30"),
            json!({ "timeout": 1 }),
        ),
        (
            "cannot start",
            s.path("missing.sh").to_string_lossy().into_owned(),
            json!({}),
        ),
        (
            "exits with an unexpected code",
            s.bash("one.sh", "cat > /dev/null; echo oops >&2; exit 1"),
            json!({}),
        ),
        (
            "answers invalid JSON",
            s.bash(
                "garbage.sh",
                "cat > /dev/null; echo '{\"permissionDecision\": deny'",
            ),
            json!({}),
        ),
        (
            "crashes",
            s.bash("crash.sh", "cat > /dev/null; kill -SEGV $$"),
            json!({}),
        ),
    ]
}

fn with(extra: &Value, field: Option<(&str, Value)>) -> Value {
    let mut extra = extra.clone();
    if let Some((key, value)) = field {
        extra[key] = value;
    }
    extra
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_of_a_blocking_guard_denies_the_call() {
    let s = Scripts::new();
    for (how, command, extra) in failing_guards(&s) {
        for field in [
            Some(("onFailure", json!("block"))),
            Some(("failClosed", json!(true))),
        ] {
            let hooks = s.hooks(on(
                "PreToolUse",
                "bash",
                &command,
                with(&extra, field.clone()),
            ));
            let (builder, seen) = agent(&calls_rm(), hooks.into_hooks());
            let resp = builder.build().run("clean up").await.unwrap();
            assert!(
                seen.lock().unwrap().is_empty(),
                "a guard that {how} with {field:?} let the call run"
            );
            let text = tool_text(&resp);
            // A shell command's exit or timeout in Claude Code's words; the rest in the
            // crate's own.
            let claude = text.contains("; blocking because onFailure is \"block\"");
            assert!(
                text.starts_with("PreToolUse:bash hook error: ")
                    && (claude || text.contains("fail-closed")),
                "{how}, {field:?}: {text}"
            );
        }
        // Without it, the same failure lets the call through (fail-open, the default).
        let hooks = s.hooks(on("PreToolUse", "bash", &command, extra.clone()));
        let (builder, seen) = agent(&calls_rm(), hooks.into_hooks());
        builder.build().run("clean up").await.unwrap();
        assert_eq!(
            seen.lock().unwrap().len(),
            1,
            "a fail-open guard that {how}"
        );
    }
}

/// An http handler that cannot be reached, with `onFailure: "block"`, denies the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_http_guard_that_blocks_denies_the_call() {
    let s = Scripts::new();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");
    for (block, runs) in [(true, 0), (false, 1)] {
        let mut handler = json!({ "type": "http", "url": url, "timeout": 2 });
        if block {
            handler["onFailure"] = json!("block");
        }
        let hooks = s.hooks(json!({
            "PreToolUse": [{ "matcher": "bash", "hooks": [handler] }],
        }));
        let (builder, seen) = agent(&calls_rm(), hooks.into_hooks());
        let resp = builder.build().run("clean up").await.unwrap();
        assert_eq!(seen.lock().unwrap().len(), runs, "onFailure block: {block}");
        if block {
            assert!(
                tool_text(&resp).contains("fail-closed"),
                "{}",
                tool_text(&resp)
            );
        }
    }
}

/// A failing UserPromptSubmit hook with `onFailure: "block"` blocks the prompt: the run ends
/// `Blocked` before the model is called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_prompt_hook_that_blocks_blocks_the_prompt() {
    let s = Scripts::new();
    let fails = s.bash("fails.sh", "cat > /dev/null; exit 1");
    let hooks = s.hooks(json!({
        "UserPromptSubmit": [{ "hooks": [
            { "type": "command", "command": fails, "onFailure": "block" },
        ]}],
    }));
    let model = ScriptedModel::new().text("hi").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("hello").await.unwrap();
    assert!(
        matches!(resp.outcome, Outcome::Blocked { .. }),
        "{:?}",
        resp.outcome
    );
    assert!(model.requests().is_empty(), "the model was called");
}

/// A value other than `"block"` is read as `"block"`, with a warning naming it: an unknown
/// spelling never turns a guard that meant to block into one that lets everything through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_on_failure_value_fails_closed_with_a_warning() {
    let s = Scripts::new();
    let fails = s.bash("fails.sh", "cat > /dev/null; exit 1");
    let hooks = s.hooks(on(
        "PreToolUse",
        "bash",
        &fails,
        json!({ "onFailure": "deny" }),
    ));
    let loaded = hooks.warnings().join("\n");
    assert!(
        loaded.contains("`onFailure` \"deny\" is not known") && loaded.contains("fails closed"),
        "{loaded}"
    );
    let (hooks, _) = warnings(hooks.into_hooks());
    let (builder, seen) = agent(&calls_rm(), hooks);
    builder.build().run("clean up").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
}

/// A hook the user's settings disable stays disabled whatever a project's settings say, in
/// either order of the sources: an empty `disabledHooks`, `disableAllHooks: false`, the same
/// hook defined again (also fail-closed). The same for `disableAllHooks: true`.
#[test]
fn a_hook_disabled_by_the_user_cannot_be_re_enabled_by_a_project() {
    use tower_agent::command::{CommandHooks, HookEvent};
    let guard = "$CLAUDE_PROJECT_DIR/guard.sh";
    let defines = |extra: Value| {
        let mut handler = json!({ "type": "command", "command": guard });
        if let Value::Object(extra) = extra {
            handler.as_object_mut().unwrap().extend(extra);
        }
        json!({ "PreToolUse": [{ "matcher": "bash", "hooks": [handler] }] })
    };
    let user_disables = [
        json!({ "disabledHooks": [guard], "hooks": defines(json!({})) }),
        json!({ "disableAllHooks": true }),
    ];
    let project_attempts = [
        json!({ "disabledHooks": [], "hooks": defines(json!({})) }),
        json!({ "disableAllHooks": false, "hooks": defines(json!({})) }),
        json!({ "hooks": defines(json!({ "onFailure": "block" })) }),
    ];
    for user in &user_disables {
        for project in &project_attempts {
            for user_first in [true, false] {
                let (first, second) = if user_first {
                    ((user, "user.json"), (project, "project.json"))
                } else {
                    ((project, "project.json"), (user, "user.json"))
                };
                let hooks = CommandHooks::builder()
                    .settings_json(first.0.clone(), first.1)
                    .settings_json(second.0.clone(), second.1)
                    .build()
                    .unwrap();
                assert!(
                    hooks.commands(HookEvent::PreToolUse).is_empty(),
                    "user {user}, project {project}, user first: {user_first}"
                );
            }
        }
    }
}
