//! hooks.md § "Common input fields" (`transcript_path`), § "Stop input", § "SubagentStop input":
//! whenever a hook fires, the transcript at `transcript_path` exists and holds every message
//! of the session up to that moment, in Claude Code's line shape. A python3 hook reads the
//! file at hook time and records what it saw; the tests assert on that record.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent::{AgentEvent, Outcome},
    command::CommandHooks,
    layers::hooks::Hooks,
    model::ScriptedModel,
    tool::tool_fn,
};

use crate::support::{
    command::{Scripts, bash_tool, on},
    passed, rerun,
};

/// A hook that records, for the event it runs on, what `transcript_path` (and
/// `agent_transcript_path`) held at that moment: one JSON line per call in `log`.
fn recorder(s: &Scripts, log: &Path) -> String {
    s.python(
        "record.py",
        &format!(
            r#"import json, os, sys
data = json.load(sys.stdin)

def read(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return [json.loads(line) for line in f]

record = {{
    "event": data["hook_event_name"],
    "path": data["transcript_path"],
    "lines": read(data["transcript_path"]),
    "tool_use_id": data.get("tool_use_id"),
    "last_assistant_message": data.get("last_assistant_message"),
}}
if "agent_transcript_path" in data:
    record["agent_path"] = data["agent_transcript_path"]
    record["agent_lines"] = read(data["agent_transcript_path"])
with open({log:?}, "a") as f:
    f.write(json.dumps(record) + "\n")
"#,
            log = log.to_string_lossy()
        ),
    )
}

/// The records of `log`, in order.
fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect()
}

/// The one record of `event`.
fn record_of(log: &Path, event: &str) -> Value {
    let all: Vec<Value> = records(log)
        .into_iter()
        .filter(|r| r["event"] == event)
        .collect();
    assert_eq!(all.len(), 1, "{event}: {all:?}");
    all.into_iter().next().unwrap()
}

/// `(type, text of the text blocks)` of each line.
fn summary(lines: &Value) -> Vec<(String, String)> {
    lines
        .as_array()
        .unwrap_or_else(|| panic!("the transcript did not exist: {lines}"))
        .iter()
        .map(|l| {
            let text: String = l["message"]["content"]
                .as_array()
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter(|b| b["type"] == "text")
                        .filter_map(|b| b["text"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            (l["type"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// Hooks of `events` (all running the recorder), with the transcripts directory set
/// explicitly (never the real state directory).
fn recording_hooks(s: &Scripts, events: &[(&str, &str)], log: &Path) -> CommandHooks {
    let script = recorder(s, log);
    let mut all = serde_json::Map::new();
    for (event, matcher) in events {
        let section = on(event, matcher, &script, json!({}));
        all.extend(section.as_object().unwrap().clone());
    }
    s.hooks(Value::Object(all))
}

async fn wait_for_records(log: &Path, event: &str) {
    let what = format!("a {event} record in {}", log.display());
    crate::support::eventually(&what, || {
        records(log)
            .iter()
            .any(|r| r["event"] == event)
            .then_some(())
    })
    .await;
}

// hooks.md § "UserPromptSubmit" + § "Common input fields": the file exists when the first
// hook of a session fires, and holds the earlier runs of the thread. The prompt being
// submitted is in the input's `prompt`, not yet in the file (a blocked prompt never enters
// the thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_sees_an_existing_transcript_of_the_earlier_runs() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("UserPromptSubmit", "")], &log);
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("one").text("two"))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    agent
        .run(AgentRequest::new("first").thread("t-1"))
        .await
        .unwrap();
    agent
        .run(AgentRequest::new("second").thread("t-1"))
        .await
        .unwrap();
    let all = records(&log);
    assert_eq!(all.len(), 2);
    assert_eq!(
        all[0]["lines"],
        json!([]),
        "the file exists (empty) on the session's first hook"
    );
    assert_eq!(
        summary(&all[1]["lines"]),
        pairs(&[("user", "first"), ("assistant", "one")])
    );
}

// hooks.md § "Common input fields": the same holds when the prompt-level hooks are placed by
// hand as a layer of the start stack (`HookSet::start_layer`): with a thread id,
// `transcript_path` is the thread's file, which exists and holds the earlier runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_hooks_as_a_start_layer_see_the_threads_transcript() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("UserPromptSubmit", "")], &log);
    let set = hooks.into_hooks().compile().unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("one").text("two"))
        .transcripts(s.path("transcripts"))
        .start_layer(set.start_layer())
        .build();
    for prompt in ["first", "second"] {
        agent
            .run(AgentRequest::new(prompt).thread("t-1"))
            .await
            .unwrap();
    }
    let all = records(&log);
    assert_eq!(all.len(), 2);
    let path = all[0]["path"].as_str().unwrap();
    assert!(path.ends_with("t-1.jsonl"), "{path}");
    assert_eq!(
        all[0]["lines"],
        json!([]),
        "the file exists on the first hook"
    );
    assert_eq!(
        summary(&all[1]["lines"]),
        pairs(&[("user", "first"), ("assistant", "one")])
    );
}

// hooks.md § "PreToolUse input": the assistant message holding the call is in the file, with
// its `tool_use` block (`id` = the input's `tool_use_id`, `name`, `input`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_sees_the_assistant_message_with_its_tool_use() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("PreToolUse", "bash")], &log);
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({"command": "ls"}))
                .text("done"),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .cwd(s.dir.path())
        .build();
    agent
        .run(AgentRequest::new("list the files").thread("t"))
        .await
        .unwrap();
    let r = record_of(&log, "PreToolUse");
    let lines = r["lines"].as_array().expect("the transcript exists");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["type"], "user");
    assert_eq!(lines[0]["message"]["content"][0]["text"], "list the files");
    assert_eq!(lines[1]["type"], "assistant");
    assert_eq!(lines[1]["message"]["role"], "assistant");
    let tool_use = &lines[1]["message"]["content"][0];
    assert_eq!(tool_use["type"], "tool_use");
    assert_eq!(tool_use["id"], r["tool_use_id"]);
    assert_eq!(tool_use["name"], "bash");
    assert_eq!(tool_use["input"], json!({"command": "ls"}));
    // Claude Code's bookkeeping fields.
    assert_eq!(lines[0]["parentUuid"], Value::Null);
    assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
    for l in lines {
        assert_eq!(l["sessionId"], "t");
        assert_eq!(l["cwd"], s.dir.path().to_string_lossy().as_ref());
        assert!(l["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(l["uuid"].as_str().unwrap().len(), 36);
    }
}

// hooks.md § "PostToolUse input": the file holds the `tool_result` of THIS call (two calls
// run concurrently; each hook finds its own result).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_sees_the_result_of_its_own_call() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("PostToolUse", "bash")], &log);
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_calls([
                    ("bash", json!({"command": "ls"})),
                    ("bash", json!({"command": "pwd"})),
                ])
                .text("done"),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    let resp = agent
        .run(AgentRequest::new("look").thread("t"))
        .await
        .unwrap();
    let all = records(&log);
    assert_eq!(all.len(), 2);
    for r in &all {
        let id = r["tool_use_id"].as_str().unwrap();
        let lines = r["lines"].as_array().expect("the transcript exists");
        let results: Vec<&Value> = lines
            .iter()
            .filter(|l| l["type"] == "user")
            .flat_map(|l| l["message"]["content"].as_array().unwrap())
            .filter(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
            .collect();
        assert_eq!(results.len(), 1, "{lines:?}");
        let command = if id.ends_with("_0") { "ls" } else { "pwd" };
        assert_eq!(results[0]["content"], format!("ran: {command}"));
        assert_eq!(results[0]["is_error"], false);
    }
    // Afterwards, every result is in the file once.
    let path = s.path("transcripts").join("t.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    assert_eq!(text.matches("\"tool_result\"").count(), 2, "{text}");
    assert_eq!(text.lines().count(), resp.messages.len());
}

// hooks.md § "PostToolUseFailure input": the failed call's error result is in the file, with
// `is_error: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_failure_sees_the_error_result() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("PostToolUseFailure", "flaky")], &log);
    let flaky = tool_fn(
        "flaky",
        "fails",
        json!({"type": "object"}),
        |_: Value, _| async { Err::<String, BoxError>("disk on fire".into()) },
    );
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("flaky", json!({}))
                .text("oh"),
        )
        .tool(flaky)
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    agent
        .run(AgentRequest::new("try").thread("t"))
        .await
        .unwrap();
    let r = record_of(&log, "PostToolUseFailure");
    let lines = r["lines"].as_array().expect("the transcript exists");
    let last = &lines.last().unwrap()["message"]["content"][0];
    assert_eq!(last["type"], "tool_result");
    assert_eq!(last["tool_use_id"], r["tool_use_id"]);
    assert_eq!(last["is_error"], true);
    assert!(
        last["content"].as_str().unwrap().contains("disk on fire"),
        "{last}"
    );
}

// hooks.md § "Stop input": on a first text answer (no tool step), the file already holds the
// assistant message being stopped on — the same text as `last_assistant_message`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_sees_the_answer_being_stopped_on() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("Stop", "")], &log);
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("All done."))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    agent
        .run(AgentRequest::new("do it").thread("t"))
        .await
        .unwrap();
    let r = record_of(&log, "Stop");
    assert_eq!(
        summary(&r["lines"]),
        pairs(&[("user", "do it"), ("assistant", "All done.")])
    );
    assert_eq!(r["last_assistant_message"], "All done.");
}

// hooks.md § "SubagentStop input": `transcript_path` is the main session's; the subagent's own
// messages are in `agent_transcript_path`, in a nested `subagents/` folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_stop_sees_the_subagent_transcript() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("SubagentStop", "research")], &log);
    let researcher = Agent::builder()
        .model(ScriptedModel::new().text("Tower is a library."))
        .build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({"prompt": "What is tower?"}))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    lead.run(AgentRequest::new("find out").thread("t-1"))
        .await
        .unwrap();
    let r = record_of(&log, "SubagentStop");
    let main = s.path("transcripts").join("t-1.jsonl");
    assert_eq!(r["path"], main.to_string_lossy().as_ref());
    let agent_path = PathBuf::from(r["agent_path"].as_str().unwrap());
    assert_eq!(
        agent_path.parent().unwrap(),
        s.path("transcripts").join("t-1").join("subagents"),
        "{agent_path:?}"
    );
    assert!(
        agent_path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("agent-")
    );
    assert_eq!(
        summary(&r["agent_lines"]),
        pairs(&[
            ("user", "What is tower?"),
            ("assistant", "Tower is a library.")
        ])
    );
    let agent_lines = r["agent_lines"].as_array().unwrap();
    assert!(agent_lines.iter().all(|l| l["isSidechain"] == true));
    // The main transcript has the lead's call, not the subagent's messages.
    let main_lines = summary(&r["lines"]);
    assert_eq!(main_lines[0], ("user".to_owned(), "find out".to_owned()));
    assert!(!main_lines.iter().any(|(_, t)| t.contains("Tower is")));
}

// hooks.md § "SessionEnd": the whole session is in the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_end_sees_the_whole_session() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("SessionEnd", "")], &log);
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({"command": "ls"}))
                .text("done"),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("t"))
        .await
        .unwrap();
    wait_for_records(&log, "SessionEnd").await;
    let r = record_of(&log, "SessionEnd");
    let kinds: Vec<String> = summary(&r["lines"]).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
    assert_eq!(kinds.len(), resp.messages.len());
}

// hooks.md § "Common input fields": thread (session) ids map to distinct files, each holding
// only its own session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_threads_have_two_transcripts() {
    let s = Scripts::new();
    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("Stop", "")], &log);
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("answer").per_run())
        .hooks(hooks.into_hooks().compile().unwrap())
        .transcripts(s.path("transcripts"))
        .build();
    for thread in ["a/b", "a_b"] {
        agent
            .run(AgentRequest::new(format!("prompt of {thread}")).thread(thread))
            .await
            .unwrap();
    }
    let all = records(&log);
    assert_eq!(all.len(), 2);
    assert_ne!(all[0]["path"], all[1]["path"]);
    for (r, thread) in all.iter().zip(["a/b", "a_b"]) {
        assert_eq!(
            summary(&r["lines"]),
            pairs(&[
                ("user", &format!("prompt of {thread}")),
                ("assistant", "answer")
            ])
        );
        assert!(
            r["lines"]
                .as_array()
                .unwrap()
                .iter()
                .all(|l| l["sessionId"] == thread)
        );
    }
}

// A run cut off while a tool runs keeps a transcript of whole lines: the prompt and the
// assistant message that made the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_off_keeps_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(Mutex::new(Some(started_tx)));
    let slow = tool_fn(
        "slow",
        "sleeps",
        json!({"type": "object"}),
        move |_: Value, _| {
            if let Some(tx) = started_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, BoxError>("late")
            }
        },
    );
    let agent = Agent::builder()
        .model(ScriptedModel::new().tool_call("slow", json!({"n": "x".repeat(100_000)})))
        .tool(slow)
        .transcripts(dir.path())
        .build();
    let run = tokio::spawn(async move { agent.run(AgentRequest::new("go").thread("t")).await });
    started_rx.await.unwrap();
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    let text = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("whole lines"))
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "assistant"]);
}

// ===== the default directory =====

/// Runs in a child (see `transcripts_default_on_*`): command hooks built without a
/// transcripts directory; a Stop hook writes the `transcript_path` it got and the number of
/// lines the file held. Reads the scripts directory from `TR_DIR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child role of transcripts_default_on_for_command_hooks"]
async fn default_transcripts_child() {
    let dir = PathBuf::from(std::env::var("TR_DIR").unwrap());
    let script = dir.join("stop.py");
    std::fs::write(
        &script,
        format!(
            r#"#!/usr/bin/env python3
import json, sys
data = json.load(sys.stdin)
with open(data["transcript_path"]) as f:
    lines = [json.loads(l) for l in f]
with open({out:?}, "w") as f:
    json.dump({{"path": data["transcript_path"], "lines": len(lines)}}, f)
"#,
            out = dir.join("out.json").to_string_lossy()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": script}]}]}}),
            "settings.json",
        )
        .project_dir(dir.join("my project"))
        .build()
        .unwrap();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("hi"))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run(AgentRequest::new("hello")).await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
}

/// The `transcript_path` the child's Stop hook got, and how many lines the file had.
fn default_run(env: &[(&str, &Path)], remove: &[&str]) -> (PathBuf, u64, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("my project")).unwrap();
    let mut cmd = rerun(&crate::support::test_name!("default_transcripts_child"));
    cmd.env("TR_DIR", dir.path());
    for name in remove {
        cmd.env_remove(name);
    }
    for (name, value) in env {
        cmd.env(name, value);
    }
    passed(&cmd.output().unwrap(), "the child run");
    let out: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap())
            .unwrap();
    let path = PathBuf::from(out["path"].as_str().unwrap());
    (path, out["lines"].as_u64().unwrap(), dir)
}

// hooks.md § "Common input fields" (`transcript_path`): never empty when command hooks are
// configured — on by default, per project, under the user's state directory. Run in a child
// whose state directory is a temp dir, so nothing is written in the real home.
#[test]
fn transcripts_default_on_for_command_hooks() {
    let state = tempfile::tempdir().unwrap();
    let (path, lines, dir) = default_run(&[("XDG_STATE_HOME", state.path())], &[]);
    let project = dir.path().join("my project");
    let encoded: String = project
        .to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
        .replace(' ', "%20");
    assert_eq!(
        path.parent().unwrap(),
        state
            .path()
            .join("tower-agent")
            .join("projects")
            .join(encoded)
    );
    assert!(path.to_string_lossy().ends_with(".jsonl"), "{path:?}");
    // The prompt and the answer being stopped on.
    assert_eq!(lines, 2);

    // Without XDG_STATE_HOME: ~/.local/state.
    let home = tempfile::tempdir().unwrap();
    let (path, lines, _dir) = default_run(&[("HOME", home.path())], &["XDG_STATE_HOME"]);
    assert!(
        path.starts_with(home.path().join(".local/state/tower-agent/projects")),
        "{path:?}"
    );
    assert_eq!(lines, 2);
}

// The default is computed without touching the disk, and only for configured hooks; an
// explicit directory wins over it, and `AgentBuilder::transcripts` over both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_transcript_directories_win() {
    let s = Scripts::new();
    let none = CommandHooks::builder()
        .settings_json(json!({"hooks": {}}), "empty")
        .project_dir(s.dir.path())
        .build()
        .unwrap();
    assert_eq!(none.transcripts_dir(), None);
    let off = CommandHooks::builder()
        .settings_json(
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}),
            "settings",
        )
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(off.transcripts_dir(), None);

    let log = s.path("log");
    let hooks = recording_hooks(&s, &[("Stop", "")], &log);
    assert_eq!(
        hooks.transcripts_dir(),
        Some(s.path("transcripts").as_path())
    );
    let run = |hooks: Hooks, explicit: Option<PathBuf>| async move {
        let mut builder = Agent::builder()
            .model(ScriptedModel::new().text("hi"))
            .hooks(hooks.compile().unwrap());
        if let Some(dir) = explicit {
            builder = builder.transcripts(dir);
        }
        let agent = builder.build();
        let mut stream = agent.stream(AgentRequest::new("x").thread("t"));
        use futures_util::StreamExt;
        while let Some(event) = stream.next().await {
            assert!(!matches!(event, AgentEvent::Warning { .. }), "{event:?}");
        }
    };
    run(hooks.clone().into_hooks(), None).await;
    run(hooks.into_hooks(), Some(s.path("explicit"))).await;
    let all = records(&log);
    assert_eq!(
        all[0]["path"],
        s.path("transcripts/t.jsonl").to_string_lossy().as_ref()
    );
    assert_eq!(
        all[1]["path"],
        s.path("explicit/t.jsonl").to_string_lossy().as_ref()
    );
}
