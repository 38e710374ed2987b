//! UserPromptSubmit: input `prompt`; block (`decision: "block"` + `reason`, exit 2), context
//! (plain stdout, `additionalContext`), `continue: false`.

use serde_json::json;
use tower_agent::{Agent, agent::Outcome, model::ScriptedModel};

use super::common_ev2::{assert_common, dump, inputs};
use crate::support::command::Scripts;

fn run_with(s: &Scripts, then: &str) -> (Agent, ScriptedModel) {
    let hook = dump(s, "prompt", then);
    let hooks = s.hooks(
        json!({ "UserPromptSubmit": [{ "hooks": [{ "type": "command", "command": hook }] }] }),
    );
    let model = ScriptedModel::new().text("answer").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .cwd(s.dir.path())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    (agent, model)
}

// hooks.md § "UserPromptSubmit input" and § "UserPromptSubmit decision control":
// `decision: "block"` prevents the prompt from being processed and erases it; the reason
// goes to the user (the run's outcome), not to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_with_reason_erases_the_prompt() {
    let s = Scripts::new();
    let (agent, model) = run_with(
        &s,
        r#"echo '{"decision": "block", "reason": "no secrets in prompts"}'"#,
    );
    let resp = agent.run("my password is hunter2").await.unwrap();
    let got = inputs(&s, "prompt");
    assert_common(&got[0], "UserPromptSubmit", s.dir.path());
    assert_eq!(got[0]["prompt"], "my password is hunter2");
    assert_eq!(got[0]["permission_mode"], "default");
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "no secrets in prompts".into()
        }
    );
    assert_eq!(model.calls(), 0, "the prompt is not processed");
    assert!(resp.messages.iter().all(|m| !m.text().contains("hunter2")));
}

// hooks.md § "Exit code 2 behavior per event": UserPromptSubmit "blocks prompt processing
// and erases the prompt", with stderr as the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_blocks_with_stderr() {
    let s = Scripts::new();
    let (agent, model) = run_with(&s, "echo 'prompt rejected' >&2; exit 2");
    let resp = agent.run("hello").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "prompt rejected".into()
        }
    );
    assert_eq!(model.calls(), 0);
}

// hooks.md § "UserPromptSubmit decision control": plain stdout and `additionalContext` are
// both added to the context, alongside the prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_stdout_and_additional_context_are_context() {
    for (then, expected) in [
        (
            "echo 'The deploy target is staging.'",
            "The deploy target is staging.",
        ),
        (
            r#"echo '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "Branch is main."}}'"#,
            "Branch is main.",
        ),
    ] {
        let s = Scripts::new();
        let (agent, model) = run_with(&s, then);
        let resp = agent.run("deploy it").await.unwrap();
        assert!(resp.outcome.is_finished());
        let request = &model.requests()[0];
        let texts: Vec<String> = request
            .messages
            .iter()
            .map(|m| m.text().into_owned())
            .collect();
        let prompt_at = texts
            .iter()
            .position(|t| t == "deploy it")
            .expect("the prompt");
        assert!(
            texts[prompt_at + 1..].iter().any(|t| t.contains(expected)),
            "context after the prompt: {texts:?}"
        );
    }
}

// hooks.md § "JSON output": `continue: false` stops processing; `stopReason` goes to the
// user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_false_stops_with_stop_reason() {
    let s = Scripts::new();
    let (agent, model) = run_with(
        &s,
        r#"echo '{"continue": false, "stopReason": "maintenance window"}'"#,
    );
    let resp = agent.run("hello").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "maintenance window".into()
        }
    );
    assert_eq!(model.calls(), 0);
}
