//! A Rust hook that panics (issue 27): skipped by default (fail-open), the event's blocking
//! decision when marked `fail_closed()` — the Agent SDK's `on_failure="block"`, Claude Code's
//! `"onFailure": "block"` for command hooks. Each deciding event, a panic in the call and in
//! the hook's future, both ways.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use serde_json::json;
use tower_agent::{
    Agent, AgentResponse,
    agent::Outcome,
    layers::hooks::{Hooks, PostToolBatch, PreToolUse, Stop, UserPrompt, state::Added},
    model::ScriptedModel,
    tool::tool_fn,
};

/// An agent whose model calls `bash` once, then answers; the tool counts its runs.
async fn run(hooks: Hooks, model: ScriptedModel) -> (AgentResponse, usize) {
    let ran = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&ran);
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn(
            "bash",
            "Runs",
            json!({ "type": "object" }),
            move |_, _| {
                count.fetch_add(1, Ordering::SeqCst);
                async { Ok("ran") }
            },
        ))
        .hooks(hooks.compile().unwrap())
        .build();
    let resp = agent.run("go").await.unwrap();
    (resp, ran.load(Ordering::SeqCst))
}

fn calls_bash() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("bash", json!({ "command": "rm -rf /" }))
        .text("done")
}

fn tool_text(resp: &AgentResponse) -> String {
    resp.messages
        .iter()
        .find(|m| m.tool_call_id.is_some())
        .map(|m| m.text().into_owned())
        .unwrap_or_default()
}

/// `hooks` with its last hook fail-closed or not.
fn marked(hooks: Hooks<Added>, closed: bool) -> Hooks {
    if closed {
        hooks.fail_closed().into()
    } else {
        hooks.into()
    }
}

#[tokio::test]
async fn a_panicking_pre_tool_use_hook_denies_only_when_fail_closed() {
    for in_future in [false, true] {
        for closed in [true, false] {
            let hooks = Hooks::new().before_tool_use("bash", move |_call, _ctx| {
                if !in_future {
                    panic!("boom");
                }
                async move {
                    tokio::task::yield_now().await;
                    panic!("boom later");
                    #[allow(unreachable_code)]
                    PreToolUse::Continue
                }
            });
            let hooks = marked(hooks.name("guard"), closed);
            let (resp, ran) = run(hooks, calls_bash()).await;
            assert_eq!(resp.outcome, Outcome::Finished);
            if closed {
                assert_eq!(ran, 0, "in future: {in_future}");
                let text = tool_text(&resp);
                assert!(
                    text.starts_with("PreToolUse:bash hook error: hook `guard` panicked: boom")
                        && text.contains("fail-closed"),
                    "{text}"
                );
            } else {
                assert_eq!(
                    ran, 1,
                    "a fail-open hook is skipped (in future: {in_future})"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_panicking_prompt_hook_blocks_the_run_only_when_fail_closed() {
    for closed in [true, false] {
        let hooks = Hooks::new().on_user_prompt(|_prompt, _ctx| -> UserPrompt { panic!("no") });
        let (resp, _) = run(marked(hooks, closed), ScriptedModel::new().text("hi")).await;
        if closed {
            let Outcome::Blocked { reason } = &resp.outcome else {
                panic!("{:?}", resp.outcome)
            };
            assert!(reason.contains("panicked: no"), "{reason}");
        } else {
            assert_eq!(resp.outcome, Outcome::Finished);
        }
    }
}

/// A Stop hook's block keeps the agent going: fail-closed, a panicking Stop hook does that,
/// bounded by the stop cap.
#[tokio::test]
async fn a_panicking_stop_hook_keeps_the_agent_going_only_when_fail_closed() {
    for (closed, calls) in [(true, 2), (false, 1)] {
        let hooks = Hooks::new()
            .stop_cap(1)
            .on_stop(|_input, _ctx| -> Stop { panic!("stop") });
        let model = ScriptedModel::new().text("a").text("b").recording();
        let (resp, _) = run(marked(hooks, closed), model.clone()).await;
        assert_eq!(resp.outcome, Outcome::Finished);
        assert_eq!(model.requests().len(), calls, "fail-closed: {closed}");
    }
}

/// After a step with tool calls, a panicking PostToolBatch hook stops the loop and a
/// panicking `should_continue` ends the run — only when fail-closed; else the run goes on.
#[tokio::test]
async fn a_panicking_step_hook_ends_the_run_only_when_fail_closed() {
    let step_hooks: [fn() -> Hooks<Added>; 2] = [
        || Hooks::new().on_post_tool_batch(|_batch, _ctx| -> PostToolBatch { panic!("batch") }),
        || Hooks::new().should_continue(|_step, _ctx| panic!("continue?")),
    ];
    for (i, hooks) in step_hooks.into_iter().enumerate() {
        for closed in [true, false] {
            let (resp, ran) = run(marked(hooks(), closed), calls_bash()).await;
            assert_eq!(ran, 1);
            assert_eq!(
                matches!(resp.outcome, Outcome::Blocked { .. }),
                closed,
                "hook {i}, fail-closed {closed}: {:?}",
                resp.outcome
            );
            if !closed {
                assert_eq!(resp.outcome, Outcome::Finished);
            }
        }
    }
}

/// An observer that panics is skipped either way: the run is not hurt.
#[tokio::test]
async fn a_panicking_observer_is_skipped() {
    for closed in [true, false] {
        let hooks = Hooks::new().after_step(|_step, _ctx| panic!("observer"));
        let (resp, ran) = run(marked(hooks, closed), calls_bash()).await;
        assert_eq!((resp.outcome, ran), (Outcome::Finished, 1));
    }
}
