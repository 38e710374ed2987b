//! `type: "agent"` handlers: a subagent with read-only tools verifies a condition.

use serde_json::{Value, json};
use tower_agent::{
    BoxError,
    agent::Outcome,
    command::CommandHooks,
    message::{Role, ToolCall},
    model::{ModelRequest, ModelResponse, ScriptedModel},
    tool::tool_fn,
};

use crate::support::command::{Scripts, agent, tool_text};

/// A verifier that reads `status.txt` with `read_file`, then answers from what it read.
fn verifier() -> ScriptedModel {
    ScriptedModel::from_fn(|req: &ModelRequest| {
        let last = req.messages.last().unwrap();
        if last.role == Role::User {
            return Ok(ModelResponse::tool_calls([ToolCall::new(
                "r1",
                "read_file",
                json!({ "path": "status.txt" }),
            )]));
        }
        let seen = last.text();
        let answer = if seen.contains("FAILED") {
            json!({ "ok": false, "reason": "status.txt says the tests failed; fix them" })
        } else {
            json!({ "ok": true })
        };
        Ok(ModelResponse::text(answer.to_string()))
    })
    .recording()
}

fn agent_hook(
    s: &Scripts,
    event: &str,
    matcher: &str,
    prompt: &str,
    model: &ScriptedModel,
) -> CommandHooks {
    CommandHooks::builder()
        .settings_json(
            json!({ "hooks": { event: [{ "matcher": matcher, "hooks": [{ "type": "agent", "prompt": prompt }] }] } }),
            "settings.json",
        )
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .model(model.clone())
        .build()
        .unwrap()
}

// hooks.md § "How agent hooks work": the subagent reads real files with read-only tools and
// answers `{ok, reason}`; on Stop, `ok: false` sends the agent back to work with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verifier_reads_a_file_and_keeps_the_agent_working() {
    let s = Scripts::new();
    std::fs::write(s.path("status.txt"), "tests: FAILED (3)\n").unwrap();
    let judge = verifier();
    let hooks = agent_hook(
        &s,
        "Stop",
        "",
        "Verify that the tests pass. $ARGUMENTS",
        &judge,
    );
    let status = s.path("status.txt");
    let fix = tool_fn(
        "fix",
        "Fixes the tests",
        json!({"type": "object"}),
        move |_: Value, _| {
            let status = status.clone();
            async move {
                std::fs::write(&status, "tests: PASSED\n")?;
                Ok::<_, BoxError>("fixed")
            }
        },
    );
    let model = ScriptedModel::new()
        .text("all done")
        .tool_call("fix", json!({}))
        .text("fixed for real")
        .recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder
        .tool(fix)
        .build()
        .run("make the tests pass")
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "fixed for real");
    // The agent was sent back with the verifier's reason.
    let second = &model.requests()[1];
    assert!(
        second
            .messages
            .last()
            .unwrap()
            .text()
            .contains("status.txt says the tests failed"),
        "{:?}",
        second.messages.last()
    );
    // The verifier read the real file, twice (once per Stop), through `read_file`.
    let asked = judge.requests();
    let results: Vec<String> = asked
        .iter()
        .filter(|r| r.messages.last().unwrap().role == Role::Tool)
        .map(|r| r.messages.last().unwrap().text().into_owned())
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("tests: FAILED (3)"), "{}", results[0]);
    assert!(results[1].contains("tests: PASSED"), "{}", results[1]);
    // Read-only tools only.
    let mut tools: Vec<String> = asked[0].tools.iter().map(|t| t.name.clone()).collect();
    tools.sort();
    assert_eq!(tools, ["glob", "grep", "ls", "read_file"]);
    // The prompt with the input in place of $ARGUMENTS.
    let user = asked[0]
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .unwrap()
        .text()
        .into_owned();
    assert!(user.starts_with("Verify that the tests pass. {"), "{user}");
    assert!(user.contains("\"hook_event_name\":\"Stop\""), "{user}");
}

// hooks.md § "How agent hooks work": on PreToolUse an agent hook's `ok: false` is handled as
// a prompt hook with `continueOnBlock: true`: the call is denied with the reason, the turn
// goes on. A subagent that tries to write gets an unknown-tool error (read-only tools).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_denies_and_the_verifier_cannot_write() {
    let s = Scripts::new();
    std::fs::write(s.path("status.txt"), "deploys: FAILED\n").unwrap();
    let judge = ScriptedModel::new()
        .tool_call(
            "write_file",
            json!({ "path": "status.txt", "content": "PASSED" }),
        )
        .tool_call("read_file", json!({ "path": "status.txt" }))
        .decide(|req| {
            let seen = req.messages.last().unwrap().text().into_owned();
            let ok = !seen.contains("FAILED");
            Ok(ModelResponse::text(
                json!({ "ok": ok, "reason": format!("saw: {}", seen.trim()) }).to_string(),
            ))
        })
        .recording();
    let hooks = agent_hook(
        &s,
        "PreToolUse",
        "bash",
        "May it deploy? $ARGUMENTS",
        &judge,
    );
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "deploy" }))
        .text("I will wait")
        .recording();
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("deploy").await.unwrap();
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(
        tool_text(&resp).starts_with("PreToolUse:bash hook error: saw:"),
        "{}",
        tool_text(&resp)
    );
    assert!(tool_text(&resp).contains("deploys: FAILED"));
    assert_eq!(
        std::fs::read_to_string(s.path("status.txt")).unwrap(),
        "deploys: FAILED\n"
    );
    let write_result = judge.requests()[1]
        .messages
        .last()
        .unwrap()
        .text()
        .into_owned();
    assert!(
        write_result.contains("unknown tool `write_file`"),
        "{write_result}"
    );
}
