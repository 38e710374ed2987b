//! The Claude Code tools in an agent with hooks: the `Agent` tool (subagents, Claude Code's
//! `tool_response`, SubagentStart / SubagentStop) and a `Bash` `cd` firing CwdChanged. Unit
//! tests of `builtins::claude_code` before; here because they need the hook layers, which the
//! built-ins crate does not depend on.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tower_agent::{
    Agent,
    agent::StopInput,
    builtins::claude_code::{AgentTool, ClaudeCode, GENERAL_PURPOSE},
    command::TOOL_RESPONSE,
    context::RunContext,
    layers::hooks::{Hooks, PostToolUse, Stop, SubagentStart},
    model::{ModelSettings, ScriptedModel},
};

/// Runs a lead agent whose model makes the `Agent` call `input`, then answers "Done.";
/// the general-purpose subagent answers from `sub`. What the model got back (text, error),
/// the `tool_response`, and the agent ids SubagentStart and SubagentStop saw.
async fn play(input: Value, sub: ScriptedModel) -> (String, bool, Value, Vec<String>) {
    let general = Agent::builder()
        .model(sub)
        .settings(ModelSettings::default().model("sub-model"))
        .build();
    let ids = Arc::new(Mutex::new(Vec::new()));
    let response = Arc::new(Mutex::new(Value::Null));
    let hooks = Hooks::new()
        .on_subagent_start(GENERAL_PURPOSE, {
            let ids = Arc::clone(&ids);
            move |input: tower_agent::agent::SubagentStartInput, _| {
                ids.lock().unwrap().push(input.agent_id);
                SubagentStart::Continue
            }
        })
        .on_subagent_stop(GENERAL_PURPOSE, {
            let ids = Arc::clone(&ids);
            move |input: StopInput, _| {
                assert_eq!(input.agent_name.as_deref(), Some(GENERAL_PURPOSE));
                ids.lock().unwrap().extend(input.agent_id);
                Stop::Finish
            }
        })
        .after_tool_use("Agent", {
            let response = Arc::clone(&response);
            move |_call, output, _ctx| {
                let seen = output.metadata.get(TOOL_RESPONSE).cloned();
                *response.lock().unwrap() = seen.unwrap_or_default();
                PostToolUse::Keep
            }
        });
    let model = ScriptedModel::new()
        .tool_call("Agent", input)
        .text("Done.")
        .recording();
    let tool = AgentTool::new().agent_type(GENERAL_PURPOSE, "Does anything", general);
    let lead = Agent::builder()
        .model(model.clone())
        .tool(tool)
        .hooks(hooks.compile().unwrap())
        .build();
    lead.run("delegate").await.unwrap();
    let request = &model.requests()[1];
    let result = request.messages.last().unwrap();
    let ids = ids.lock().unwrap().clone();
    let response = response.lock().unwrap().clone();
    (result.text().into_owned(), result.is_error, response, ids)
}

fn call(prompt: &str) -> Value {
    json!({"description": "sub", "prompt": prompt, "subagent_type": "general-purpose",
           "run_in_background": false})
}

/// The subagent's answer is the result; hooks see Claude Code's `tool_response`, and
/// SubagentStart / SubagentStop one random id of Claude Code's shape, the response's
/// `agentId`.
#[tokio::test(flavor = "current_thread")]
async fn runs_the_subagent_and_answers_as_claude_code() {
    let sub = ScriptedModel::new()
        .tool_call("Nothing", json!({}))
        .text("sub-done");
    let (text, is_error, response, ids) = play(call("SUBTASK"), sub).await;
    // The model gets the report after the note of the tools it called, as in Claude Code
    // (subagent_bash, the model's request).
    let want = "<tools-used-before-summary>Nothing</tools-used-before-summary>\nsub-done";
    assert_eq!((text.as_str(), is_error), (want, false));
    let id = response["agentId"].as_str().unwrap();
    assert_eq!(ids, [id, id]);
    assert!(id.len() == 17 && id.starts_with('a'), "{id}");
    assert!(id[1..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["prompt"], "SUBTASK");
    assert_eq!(response["agentType"], "general-purpose");
    assert_eq!(response["resolvedModel"], "sub-model");
    assert_eq!(
        response["content"],
        json!([
            {"type": "text", "text": "<tools-used-before-summary>Nothing</tools-used-before-summary>\n"},
            {"type": "text", "text": "sub-done"},
        ])
    );
    assert_eq!(response["totalToolUseCount"], 1);
    assert_eq!(response["toolsUsed"], json!(["Nothing"]));
    assert_eq!(response["toolStats"]["otherToolCount"], 1);
    assert_eq!(response["canContinueAgent"], false);
    assert!(response["totalDurationMs"].is_u64());
    assert!(response["usage"]["input_tokens"].is_u64());
}

/// A subagent that called no tool: its answer alone, no `toolsUsed` nor `toolStats` (as
/// Claude Code's `subagent` vector).
#[tokio::test(flavor = "current_thread")]
async fn a_subagent_without_tool_calls_has_no_tool_fields() {
    let (_, _, response, _) = play(call("SUBTASK"), ScriptedModel::new().text("x")).await;
    assert_eq!(response["content"], json!([{"type": "text", "text": "x"}]));
    assert_eq!(response["totalToolUseCount"], 0);
    assert!(response.get("toolsUsed").is_none(), "{response}");
    assert!(response.get("toolStats").is_none(), "{response}");
}

/// `toolStats` counts the calls as Claude Code's does (`Agent` calls aside), edits with
/// the lines of their new and old texts; `toolsUsed` and the note are sorted.
#[tokio::test(flavor = "current_thread")]
async fn tool_stats_count_the_calls_as_claude_code() {
    let sub = ScriptedModel::new()
        .tool_calls([
            ("Write", json!({"file_path": "a", "content": "1\n2\n3\n"})),
            (
                "Edit",
                json!({"file_path": "a", "old_string": "1", "new_string": "x\ny"}),
            ),
            ("Read", json!({"file_path": "a"})),
            ("Grep", json!({"pattern": "x"})),
            ("Glob", json!({"pattern": "*"})),
            ("Bash", json!({"command": "true"})),
            ("Agent", json!({"prompt": "no"})),
            ("Other", json!({})),
            ("Read", json!({"file_path": "b"})),
        ])
        .text("done");
    let (_, _, response, _) = play(call("SUBTASK"), sub).await;
    assert_eq!(
        response["toolStats"],
        json!({"readCount": 2, "searchCount": 2, "bashCount": 1, "editFileCount": 2,
               "linesAdded": 6, "linesRemoved": 1, "otherToolCount": 1})
    );
    assert_eq!(response["totalToolUseCount"], 9);
    let used = [
        "Agent", "Bash", "Edit", "Glob", "Grep", "Other", "Read", "Write",
    ];
    assert_eq!(response["toolsUsed"], json!(used));
    let note = format!(
        "<tools-used-before-summary>{}</tools-used-before-summary>\n",
        used.join(", ")
    );
    assert_eq!(response["content"][0]["text"], note);
}

/// `totalTokens` and `usage` are the last answer's, `input_tokens` without the cached
/// tokens (the API's count), `totalTokens` all of them.
#[tokio::test(flavor = "current_thread")]
async fn usage_is_the_last_answers() {
    use tower_agent::{message::Usage, model::ModelResponse};
    let usage = |input, cached| Usage {
        input_tokens: input,
        output_tokens: 5,
        cache_read_tokens: cached,
        ..Usage::default()
    };
    let sub = ScriptedModel::new()
        .respond(
            ModelResponse::tool_calls([tower_agent::message::ToolCall::new(
                "c1",
                "Nothing",
                json!({}),
            )])
            .with_usage(usage(100, 0)),
        )
        .respond(ModelResponse::text("ok").with_usage(usage(130, 100)));
    let (_, _, response, _) = play(call("SUBTASK"), sub).await;
    assert_eq!(response["totalTokens"], 135);
    assert_eq!(
        response["usage"],
        json!({"input_tokens": 30, "output_tokens": 5, "cache_read_input_tokens": 100,
               "cache_creation_input_tokens": 0})
    );
}

/// Each call has an id of its own.
#[tokio::test(flavor = "current_thread")]
async fn each_call_has_its_own_id() {
    let (.., a) = play(call("one"), ScriptedModel::new().text("x")).await;
    let (.., b) = play(call("two"), ScriptedModel::new().text("x")).await;
    assert_ne!(a[0], b[0]);
}

/// `run_in_background: true` runs in the foreground, and the result says so.
#[tokio::test(flavor = "current_thread")]
async fn a_background_call_runs_in_the_foreground_and_says_so() {
    let mut input = call("SUBTASK");
    input["run_in_background"] = json!(true);
    let (text, is_error, response, _) = play(input, ScriptedModel::new().text("ok")).await;
    assert!(!is_error);
    assert!(text.starts_with("ok\n\n"), "{text}");
    assert!(text.contains("ran in the foreground"), "{text}");
    assert_eq!(response["status"], "completed");
}

/// An unknown type, or input of the wrong shape, is an error output naming the problem;
/// no subagent runs.
#[tokio::test(flavor = "current_thread")]
async fn an_unknown_type_or_bad_input_is_an_error() {
    let mut input = call("SUBTASK");
    input["subagent_type"] = json!("Explore");
    let (text, is_error, _, ids) = play(input, ScriptedModel::new().text("x")).await;
    assert!(is_error);
    assert_eq!(
        text,
        "Agent type 'Explore' not found. Available agents: general-purpose"
    );
    assert!(ids.is_empty());
    let (text, is_error, ..) = play(json!({"prompt": 3}), ScriptedModel::new()).await;
    assert!(is_error);
    assert!(
        text.starts_with("invalid arguments for tool `Agent`"),
        "{text}"
    );
}

/// With no `subagent_type`, the general-purpose agent runs.
#[tokio::test(flavor = "current_thread")]
async fn the_default_type_is_general_purpose() {
    let input = json!({"description": "sub", "prompt": "SUBTASK"});
    let (text, _, response, _) = play(input, ScriptedModel::new().text("gp")).await;
    assert_eq!(text, "gp");
    assert_eq!(response["agentType"], "general-purpose");
}

/// In an agent, a `cd` fires CwdChanged at the end of the step, and later hooks see the new
/// directory.
#[tokio::test]
async fn a_cd_fires_cwd_changed_in_an_agent() {
    use tower_agent::layers::hooks::{CwdChanged, PreToolUse};
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let model = ScriptedModel::new()
        .tool_call("Bash", json!({"command": "mkdir sub && cd sub"}))
        .tool_call("Bash", json!({"command": "pwd"}))
        .text("done");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (changes, pre) = (Arc::clone(&seen), Arc::clone(&seen));
    let hooks = Hooks::new()
        .on_cwd_changed(
            move |input: tower_agent::layers::hooks::CwdChangedInput, _ctx| {
                changes.lock().unwrap().push(format!(
                    "changed {} -> {}",
                    input.old_cwd.display(),
                    input.new_cwd.display()
                ));
                CwdChanged::Continue
            },
        )
        .before_tool_use("Bash", move |_call, ctx: RunContext| {
            pre.lock()
                .unwrap()
                .push(format!("pre in {}", ctx.cwd().display()));
            PreToolUse::Continue
        });
    let agent = Agent::builder()
        .model(model)
        .setup(ClaudeCode::local(&root))
        .hooks(hooks.compile().unwrap())
        .cwd(&root)
        .build();
    let resp = agent.run("move").await.unwrap();
    assert_eq!(resp.text, "done");
    let r = root.display();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("pre in {r}"),
            format!("changed {r} -> {r}/sub"),
            format!("pre in {r}/sub"),
        ]
    );
}
