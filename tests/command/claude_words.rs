//! What command hooks' answers read as, in Claude Code's words (each measured against Claude
//! Code 2.1.328 by the differential suite, `tests/reference`): exit 2 reasons, a failing
//! `onFailure: "block"` guard, stdout that is not JSON, `updatedToolOutput` of a tool with a
//! structured response.

use crate::support;

use serde_json::{Value, json};
use support::command::{Scripts, agent, on, tool_text};
use tower_agent::{
    BoxError,
    command::TOOL_RESPONSE,
    message::ToolOutput,
    model::{ModelRequest, ScriptedModel},
    tool::tool_fn,
};

/// The model calls `bash` with `command`, then answers "done".
fn calls_bash(command: &str) -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("bash", json!({ "command": command }))
        .text("done")
        .text("done again")
        .recording()
}

/// Every text of a request's messages, one per line.
fn texts(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exit_2_of_post_tool_use_and_stop_gives_the_command_in_brackets() {
    let s = Scripts::new();
    let post = s.bash("post.sh", "cat > /dev/null; echo post-err >&2; exit 2");
    // Once: a second exit 2 would keep the run going.
    let stop = s.bash(
        "stop.sh",
        &format!(
            "cat > /dev/null; [ -e {0} ] && exit 0; touch {0}; echo stop-err >&2; exit 2",
            s.path("stopped").display()
        ),
    );
    let mut hooks = on("PostToolUse", "bash", &post, json!({}));
    hooks["Stop"] = on("Stop", "", &stop, json!({}))["Stop"].clone();
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, s.hooks(hooks).into_hooks());
    builder.build().run("go").await.unwrap();
    let requests = model.requests();
    let after_call = texts(&requests[1]);
    assert!(
        after_call.contains(&format!("[{post}]: post-err")),
        "{after_call}"
    );
    let after_stop = texts(&requests[2]);
    assert!(
        after_stop.contains(&format!("[{stop}]: stop-err")),
        "{after_stop}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_guard_that_blocks_says_so_as_claude_code_does() {
    let s = Scripts::new();
    let broken = s.bash(
        "broken.sh",
        "cat > /dev/null; echo broken-guard >&2; exit 1",
    );
    let slow = s.bash("slow.sh", "cat > /dev/null; sleep 5");
    for (command, timeout, expected) in [
        (
            &broken,
            600,
            format!("[{broken}]: failed; blocking because onFailure is \"block\"\nbroken-guard"),
        ),
        (
            &slow,
            1,
            format!("[{slow}]: timed out; blocking because onFailure is \"block\""),
        ),
    ] {
        let extra = json!({ "onFailure": "block", "timeout": timeout });
        let hooks = s.hooks(on("PreToolUse", "bash", command, extra));
        let (builder, seen) = agent(&calls_bash("rm -rf /"), hooks.into_hooks());
        let resp = builder.build().run("go").await.unwrap();
        assert!(seen.lock().unwrap().is_empty(), "{command}: the call ran");
        assert_eq!(
            tool_text(&resp),
            format!("PreToolUse:bash hook error: {expected}")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_that_starts_with_a_brace_but_is_not_json_is_plain_text() {
    let s = Scripts::new();
    let hook = s.bash("ups.sh", "cat > /dev/null; echo '{not-json context'");
    let model = calls_bash("ls");
    let (builder, seen) = agent(
        &model,
        s.hooks(on("UserPromptSubmit", "", &hook, json!({})))
            .into_hooks(),
    );
    builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    let first = texts(&model.requests()[0]);
    assert!(first.contains("{not-json context"), "{first}");
}

/// A tool answering as Claude Code's Bash: the text is `stdout`, hooks see the structure.
fn structured_bash() -> impl tower_agent::tool::Tool {
    tool_fn(
        "bash",
        "Runs a command",
        json!({"type": "object"}),
        |_: Value, _| async {
            let response = json!({"stdout": "secret-output", "stderr": "", "interrupted": false});
            Ok::<_, BoxError>(
                ToolOutput::text("", "secret-output").with_metadata(TOOL_RESPONSE, response),
            )
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_tool_output_of_a_structured_response_must_have_its_shape() {
    let s = Scripts::new();
    let redacted = json!({"stdout": "redacted", "stderr": "", "interrupted": false});
    for (update, expected) in [
        (redacted, "redacted"),
        // Not the response's shape: ignored, as Claude Code ignores it.
        (json!("redacted"), "secret-output"),
        (json!({"stdout": 7}), "secret-output"),
        (json!({"stdout": "redacted", "other": ""}), "secret-output"),
    ] {
        let answer = json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
            "updatedToolOutput": update}});
        let hook = s.bash("post.sh", &format!("cat > /dev/null; echo '{answer}'"));
        let hooks = s.hooks(on("PostToolUse", "bash", &hook, json!({})));
        let model = calls_bash("ls");
        let agent = tower_agent::Agent::builder()
            .model(model.clone())
            .tool(structured_bash())
            .hooks(hooks.into_hooks().compile().unwrap())
            .build();
        let resp = agent.run("go").await.unwrap();
        assert_eq!(tool_text(&resp), expected, "{update}");
    }
}
