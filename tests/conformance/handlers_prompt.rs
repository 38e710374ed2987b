//! `type: "prompt"` handlers: a model service given to `CommandHooks` answers `{ok, reason}`.

use std::time::Duration;

use serde_json::{Value, json};
use tower_agent::{
    agent::Outcome,
    command::{CommandHooks, HookEvent},
    message::Role,
    model::{ModelRequest, ScriptedModel},
};

use crate::support::command::{Scripts, agent, tool_text, warnings};

/// Command hooks of `hooks`, with `model` for prompt and agent handlers.
fn with_model(s: &Scripts, hooks: Value, model: &ScriptedModel) -> CommandHooks {
    CommandHooks::builder()
        .settings_json(json!({ "hooks": hooks }), "settings.json")
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .model(model.clone())
        .build()
        .unwrap()
}

fn prompt_on(event: &str, matcher: &str, handler: Value) -> Value {
    let mut h = json!({ "type": "prompt" });
    h.as_object_mut()
        .unwrap()
        .extend(handler.as_object().unwrap().clone());
    json!({ event: [{ "matcher": matcher, "hooks": [h] }] })
}

/// The system and user texts of a recorded hook-model request.
fn texts(req: &ModelRequest) -> (String, String) {
    let system = req
        .system()
        .map(|m| m.text().into_owned())
        .unwrap_or_default();
    let user = req
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.text().into_owned())
        .unwrap_or_default();
    (system, user)
}

// hooks.md § "Prompt hook configuration" ($ARGUMENTS is the hook's JSON input) and
// § "Response schema": on Stop, `ok: false` feeds the reason back as the next instruction and
// the turn continues; `ok: true` lets it stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_false_on_stop_continues_with_the_reason() {
    let s = Scripts::new();
    let judge = ScriptedModel::new()
        .text(r#"{"ok": false, "reason": "You did not run the tests."}"#)
        .text(r#"{"ok": true}"#)
        .recording();
    let hooks = with_model(
        &s,
        prompt_on(
            "Stop",
            "",
            json!({ "prompt": "Should it stop? Context: $ARGUMENTS. Answer." }),
        ),
        &judge,
    );
    let model = ScriptedModel::new()
        .text("all done")
        .text("tests ran, all green")
        .recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("fix the bug").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "tests ran, all green");
    // The agent's second call saw the reason as its next instruction.
    let second = &model.requests()[1];
    assert!(
        second
            .messages
            .last()
            .unwrap()
            .text()
            .contains("You did not run the tests.")
    );

    let asked = judge.requests();
    assert_eq!(asked.len(), 2);
    let (system, user) = texts(&asked[0]);
    assert!(
        system.contains("\"ok\""),
        "the model is told the JSON schema: {system}"
    );
    let input = user
        .strip_prefix("Should it stop? Context: ")
        .and_then(|u| u.strip_suffix(". Answer."))
        .unwrap_or_else(|| panic!("$ARGUMENTS not replaced in place: {user}"));
    let input: Value = serde_json::from_str(input).unwrap();
    assert_eq!(input["hook_event_name"], "Stop");
    assert_eq!(input["last_assistant_message"], "all done");
    assert_eq!(input["stop_hook_active"], false);
    let (_, user) = texts(&asked[1]);
    assert!(user.contains("\"stop_hook_active\":true"), "{user}");
}

// hooks.md § "Response schema": `impossible: true` with `ok: false` on Stop lets the turn end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_lets_the_stop_happen() {
    let s = Scripts::new();
    let judge = ScriptedModel::new()
        .text(r#"{"ok": false, "reason": "needs a human", "impossible": true}"#);
    let hooks = with_model(
        &s,
        prompt_on("Stop", "", json!({ "prompt": "Done? $ARGUMENTS" })),
        &judge,
    );
    let model = ScriptedModel::new().text("all done").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(model.requests().len(), 1);
}

// hooks.md § "Response schema": on PreToolUse `ok: false` denies the call and, by default,
// ends the turn with the reason; with `continueOnBlock: true` the reason goes back to the
// model as the tool error and the turn continues.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_false_on_pre_tool_use_denies() {
    let s = Scripts::new();
    for continue_on_block in [false, true] {
        let judge = ScriptedModel::new().text(r#"{"ok": false, "reason": "no network calls"}"#);
        let hooks = with_model(
            &s,
            prompt_on(
                "PreToolUse",
                "bash",
                json!({ "prompt": "Is this safe? $ARGUMENTS", "continueOnBlock": continue_on_block }),
            ),
            &judge,
        );
        let model = ScriptedModel::new()
            .tool_call("bash", json!({ "command": "curl example.com" }))
            .text("ok, I will not")
            .recording();
        let (builder, seen) = agent(&model, hooks.into_hooks());
        let resp = builder.build().run("go").await.unwrap();
        assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
        if continue_on_block {
            assert_eq!(
                tool_text(&resp),
                "PreToolUse:bash hook error: no network calls"
            );
            assert_eq!(resp.outcome, Outcome::Finished);
            assert_eq!(model.requests().len(), 2);
        } else {
            assert_eq!(
                resp.outcome,
                Outcome::Aborted {
                    error: "no network calls".into()
                }
            );
            assert_eq!(model.requests().len(), 1);
        }
    }
}

// hooks.md § "Response schema": UserPromptSubmit `ok: false` ends the turn (the prompt is
// blocked); `ok: true` lets everything through without deciding anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_and_ok_true() {
    let s = Scripts::new();
    let judge = ScriptedModel::new().text(r#"{"ok": false, "reason": "no secrets in prompts"}"#);
    let hooks = with_model(
        &s,
        prompt_on("UserPromptSubmit", "", json!({ "prompt": "$ARGUMENTS" })),
        &judge,
    );
    let model = ScriptedModel::new().text("hi");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("my password is hunter2").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "no secrets in prompts".into()
        }
    );

    let judge = ScriptedModel::new().text(r#"{"ok": true, "reason": "fine"}"#);
    let hooks = with_model(
        &s,
        prompt_on("PreToolUse", "bash", json!({ "prompt": "$ARGUMENTS" })),
        &judge,
    );
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(resp.outcome, Outcome::Finished);
}

// hooks.md § "Prompt hook configuration": without `$ARGUMENTS` the input JSON is appended;
// § "Prompt and agent hook fields": `\$` is a literal `$`; `model` picks the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_appended_escapes_and_model() {
    let s = Scripts::new();
    let judge = ScriptedModel::new().text(r#"{"ok": true}"#).recording();
    let hooks = with_model(
        &s,
        prompt_on(
            "PreToolUse",
            "bash",
            json!({ "prompt": "Spend at most \\$1.00 (not \\$ARGUMENTS).", "model": "fast-judge" }),
        ),
        &judge,
    );
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    let asked = judge.requests();
    assert_eq!(asked[0].settings.model.as_deref(), Some("fast-judge"));
    let (_, user) = texts(&asked[0]);
    let (head, input) = user.split_once("\n\n").unwrap();
    assert_eq!(head, "Spend at most $1.00 (not $ARGUMENTS).");
    let input: Value = serde_json::from_str(input).unwrap();
    assert_eq!(input["tool_input"], json!({ "command": "ls" }));
}

// A malformed answer (no `{ok}` JSON), a failed model call and a timeout are non-blocking
// errors: the action goes on and the run is warned (hooks.md § "JSON output": output that
// fails schema validation is a non-blocking error; § "Timeouts").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_errors_and_timeouts_do_not_block() {
    let s = Scripts::new();
    let cases = [
        (
            ScriptedModel::new().text("Looks fine to me!"),
            json!({}),
            "answered no",
        ),
        (
            ScriptedModel::new().text(r#"{"ok": "no"}"#),
            json!({}),
            "answered no",
        ),
        (
            ScriptedModel::new().fail("overloaded"),
            json!({}),
            "the model call failed",
        ),
        (
            ScriptedModel::new()
                .text(r#"{"ok": false, "reason": "late"}"#)
                .latency(Duration::from_secs(600)),
            json!({ "timeout": 1 }),
            "timed out after 1s",
        ),
    ];
    for (judge, extra, expect) in cases {
        let mut handler = json!({ "prompt": "$ARGUMENTS" });
        handler
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let hooks = with_model(&s, prompt_on("PreToolUse", "bash", handler), &judge);
        let model = ScriptedModel::new()
            .tool_call("bash", json!({ "command": "ls" }))
            .text("done");
        let (hooks, log) = warnings(hooks.into_hooks());
        let (builder, seen) = agent(&model, hooks);
        let resp = crate::support::within("the run", builder.build().run("go"))
            .await
            .unwrap();
        assert_eq!(seen.lock().unwrap().len(), 1, "{expect}: the tool runs");
        assert_eq!(resp.outcome, Outcome::Finished);
        let log = log.lock().unwrap();
        assert!(log.iter().any(|w| w.contains(expect)), "{expect}: {log:?}");
    }
}

// hooks.md § "Prompt-based hooks": prompt hooks do not run on SessionStart, Notification …;
// without a model service they cannot run: both load with a warning and are skipped.
#[test]
fn where_prompt_hooks_are_skipped() {
    let settings = json!({ "hooks": {
        "SessionStart": [{ "hooks": [{ "type": "prompt", "prompt": "x" }] }],
        "Stop": [{ "hooks": [{ "type": "prompt", "prompt": "x" }, { "type": "agent", "prompt": "y" }] }],
    }});
    let hooks = CommandHooks::builder()
        .settings_json(settings.clone(), "settings.json")
        .build()
        .unwrap();
    assert!(hooks.commands(HookEvent::Stop).is_empty());
    let w = hooks.warnings().join("\n");
    assert!(w.contains("do not run on SessionStart"), "{w}");
    assert!(w.contains("`prompt` hooks need a model service"), "{w}");
    assert!(w.contains("`agent` hooks need a model service"), "{w}");
    let hooks = CommandHooks::builder()
        .settings_json(settings, "settings.json")
        .model(ScriptedModel::new())
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::Stop).len(), 2);
    let err = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": { "Stop": [{ "hooks": [{ "type": "prompt" }] }] } }),
            "s.json",
        )
        .model(ScriptedModel::new())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("missing `prompt`"), "{err}");
}
