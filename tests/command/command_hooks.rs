//! Command hooks with real processes: bash and python3 scripts written into temp dirs.

use crate::support;

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use support::{
    alive,
    command::{Scripts, agent, contexts_after_tools, on, tool_text, warnings},
    wait_dead,
};
use tower::service_fn;
use tower_agent::{
    Agent, BoxError,
    agent::Outcome,
    command::{CommandHooks, HookEvent},
    layers::{
        hooks::{ApprovalDecision, ApprovalRequest},
        summarize::SummarizeLayer,
    },
    message::{Message, Role},
    model::{ModelRequest, ScriptedModel},
    tool::tool_fn,
};

// ===== helpers =====

/// The model calls `bash` with `command`, then answers "done".
fn calls_bash(command: &str) -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("bash", json!({ "command": command }))
        .text("done")
        .recording()
}

/// Waits (at most [`PATIENCE`](crate::support::PATIENCE)) until `path` holds something.
async fn wait_for_file(path: &Path) -> String {
    crate::support::eventually(&format!("{} holding something", path.display()), || {
        std::fs::read_to_string(path)
            .ok()
            .filter(|text| !text.trim().is_empty())
    })
    .await
}

// ===== exit codes =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_blocks_and_the_model_sees_stderr() {
    let s = Scripts::new();
    let block = s.bash(
        "block.sh",
        r#"input=$(cat)
if echo "$input" | grep -q 'rm -rf'; then echo "no rm -rf, please" >&2; exit 2; fi"#,
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &block, json!({})));
    let model = calls_bash("rm -rf /");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("clean").await.unwrap();
    // hooks.md § "Exit code 2", as Claude Code 2.1.328 words it: the command, then stderr.
    assert_eq!(
        tool_text(&resp),
        format!("PreToolUse:bash hook error: [{block}]: no rm -rf, please")
    );
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
    // The model saw the reason in its next request.
    let last = model.requests()[1]
        .messages
        .last()
        .unwrap()
        .text()
        .into_owned();
    assert_eq!(
        last,
        format!("PreToolUse:bash hook error: [{block}]: no rm -rf, please")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_1_does_not_block_and_is_reported() {
    let s = Scripts::new();
    let fails = s.bash("fails.sh", "echo 'something broke' >&2; exit 1");
    let (hooks, warned) = warnings(
        s.hooks(on("PreToolUse", "*", &fails, json!({})))
            .into_hooks(),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("list").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let warned = warned.lock().unwrap().join("\n");
    assert!(
        warned.contains("failed with non-blocking status code 1: something broke"),
        "{warned}"
    );
}

// ===== JSON decisions =====

fn decision(decision: &str, reason: &str) -> String {
    json!({ "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    }})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_deny_ask_allow() {
    let s = Scripts::new();
    for (name, expected_ran) in [("deny", false), ("ask", false), ("allow", true)] {
        let script = s.bash(
            &format!("{name}.sh"),
            &format!(
                "cat > /dev/null; echo '{}'",
                decision(name, &format!("{name} reason"))
            ),
        );
        let hooks = s.hooks(on("PreToolUse", "bash", &script, json!({})));
        let model = calls_bash("ls");
        let (builder, seen) = agent(&model, hooks.into_hooks());
        let resp = builder.build().run("list").await.unwrap();
        let ran = !seen.lock().unwrap().is_empty();
        assert_eq!(ran, expected_ran, "{name}: {}", tool_text(&resp));
        if !ran {
            // A deny is the hook's error; an ask with no one to ask is refused with its
            // reason alone, as Claude Code `-p` does (vector `permission_ask_headless`).
            let expected = if name == "ask" {
                format!("{name} reason")
            } else {
                format!("PreToolUse:bash hook error: {name} reason")
            };
            assert_eq!(tool_text(&resp), expected);
        }
    }

    // An ask goes to the approval service, which sees the reason.
    let script = s.path("ask.sh").to_string_lossy().into_owned();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let a = Arc::clone(&asked);
    let approval = service_fn(move |req: ApprovalRequest| {
        a.lock().unwrap().push(req.reason);
        async { Ok::<_, BoxError>(ApprovalDecision::Allow) }
    });
    let hooks = s
        .hooks(on("PreToolUse", "bash", &script, json!({})))
        .into_hooks()
        .approval(approval);
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    builder.build().run("list").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(*asked.lock().unwrap(), ["ask reason"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_input_replaces_the_input() {
    let s = Scripts::new();
    // Replaces the whole input: `timeout` is gone, `command` rewritten.
    let rewrite = s.python(
        "rewrite.py",
        r#"import json, sys
data = json.load(sys.stdin)
command = data["tool_input"]["command"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "updatedInput": {"command": command + " --safe"}}}))"#,
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &rewrite, json!({})));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "deploy", "timeout": 5 }))
        .text("done");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [json!({ "command": "deploy --safe" })]
    );
    assert_eq!(tool_text(&resp), "ran: deploy --safe");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updated_tool_output_replaces_the_output_and_context_follows() {
    let s = Scripts::new();
    let redact = s.python(
        "redact.py",
        r#"import json, sys
data = json.load(sys.stdin)
assert data["hook_event_name"] == "PostToolUse"
out = data["tool_response"].replace("secret", "[redacted]")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
    "updatedToolOutput": out, "additionalContext": "output was redacted"}}))"#,
    );
    let hooks = s.hooks(on("PostToolUse", "bash", &redact, json!({})));
    let model = calls_bash("cat secret");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: cat [redacted]");
    // The context after the results, in Claude Code's words.
    assert_eq!(
        contexts_after_tools(&resp),
        ["PostToolUse:bash hook additional context: output was redacted"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_stdout_is_context_for_user_prompt_submit_and_session_start() {
    let s = Scripts::new();
    let prompt = s.bash("prompt.sh", "cat > /dev/null; echo 'The build is green.'");
    let start = s.bash("start.sh", "cat > /dev/null; echo 'Branch: main'");
    let mut config = on("UserPromptSubmit", "", &prompt, json!({}));
    config.as_object_mut().unwrap().extend(
        on("SessionStart", "startup", &start, json!({}))
            .as_object()
            .unwrap()
            .clone(),
    );
    let hooks = s.hooks(config);
    let model = ScriptedModel::new().text("ok").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("How is the build?").await.unwrap();
    let req = &model.requests()[0];
    let texts: Vec<(Role, String)> = req
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect();
    // After the prompt, SessionStart's then UserPromptSubmit's, in Claude Code's words.
    assert_eq!(
        texts,
        [
            (Role::User, "How is the build?".to_owned()),
            (
                Role::System,
                "SessionStart:startup hook success: Branch: main\n\n\
                 UserPromptSubmit hook success: The build is green."
                    .to_owned()
            ),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_exit_2_blocks_the_run() {
    let s = Scripts::new();
    let block = s.bash(
        "block.sh",
        "cat > /dev/null; echo 'prompts about secrets are blocked' >&2; exit 2",
    );
    let hooks = s.hooks(on("UserPromptSubmit", "", &block, json!({})));
    let model = ScriptedModel::new().text("never").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("tell me the secret").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Blocked {
            reason: "prompts about secrets are blocked".into()
        }
    );
    assert_eq!(model.requests().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_false_ends_the_run_with_the_stop_reason() {
    let s = Scripts::new();
    let stop = s.bash(
        "stop.sh",
        r#"cat > /dev/null; echo '{"continue": false, "stopReason": "budget exhausted"}'"#,
    );
    // A tool event: the call is denied and the run aborted.
    let hooks = s.hooks(on("PreToolUse", "bash", &stop, json!({})));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "budget exhausted".into()
        }
    );
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(model.requests().len(), 1, "no model call after the abort");

    // After the call: it ran, then the run is aborted.
    let hooks = s.hooks(on("PostToolUse", "bash", &stop, json!({})));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "budget exhausted".into()
        }
    );
    assert_eq!(seen.lock().unwrap().len(), 1);

    // Agent-level events: the run is blocked before the prompt enters the thread.
    for event in ["UserPromptSubmit", "SessionStart"] {
        let hooks = s.hooks(on(event, "", &stop, json!({})));
        let model = calls_bash("ls");
        let (builder, _) = agent(&model, hooks.into_hooks());
        let resp = builder.build().run("go").await.unwrap();
        assert_eq!(
            resp.outcome,
            Outcome::Blocked {
                reason: "budget exhausted".into()
            },
            "{event}"
        );
        assert_eq!(model.requests().len(), 0, "{event}");
    }
}

// ===== timeouts, failures, garbage =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_past_its_timeout_is_killed_and_the_call_goes_on() {
    let s = Scripts::new();
    let pidfile = s.path("pid");
    let slow = s.bash(
        "slow.sh",
        &format!(
            "echo $$ > {}\nsleep 600\necho '{}'",
            pidfile.display(),
            decision("deny", "too late")
        ),
    );
    let (hooks, warned) = warnings(
        s.hooks(on("PreToolUse", "bash", &slow, json!({ "timeout": 0.5 })))
            .into_hooks(),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    // Killed at its 0.5 s timeout, not waited for (ten minutes).
    let resp = crate::support::within("the run", builder.build().run("go"))
        .await
        .unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(wait_dead(pid).await, "hook process {pid} still runs");
    let warned = warned.lock().unwrap().join("\n");
    assert!(warned.contains("timed out after 500ms"), "{warned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_hooks_deny_when_they_crash() {
    let s = Scripts::new();
    let crash = s.bash("crash.sh", "cat > /dev/null; kill -SEGV $$");
    let hooks = s.hooks(on(
        "PreToolUse",
        "bash",
        &crash,
        json!({ "failClosed": true }),
    ));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    // In Claude Code's words, as a shell command's failure (its shell's stderr follows).
    let text = tool_text(&resp);
    let expected = format!(
        "PreToolUse:bash hook error: [{crash}]: failed; blocking because onFailure is \"block\""
    );
    assert!(text.starts_with(&expected), "{text}");

    // The same crash, fail-open: the call goes on.
    let hooks = s.hooks(on("PreToolUse", "bash", &crash, json!({})));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);

    // A missing executable, fail-closed: denied, and reported naming the command.
    let missing = s.path("nope.sh").to_string_lossy().into_owned();
    let (hooks, warned) = warnings(
        s.hooks(on(
            "PreToolUse",
            "bash",
            &missing,
            json!({ "failClosed": true }),
        ))
        .into_hooks(),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert!(
        tool_text(&resp).contains("cannot be run"),
        "{}",
        tool_text(&resp)
    );
    let warned = warned.lock().unwrap().join("\n");
    assert!(
        warned.contains(&missing) && warned.contains("cannot be run"),
        "{warned}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_stdout_is_reported_and_ignored() {
    let s = Scripts::new();
    let garbage = s.bash(
        "garbage.sh",
        "cat > /dev/null; echo '{\"permissionDecision\": deny'",
    );
    let (hooks, warned) = warnings(
        s.hooks(on("PreToolUse", "bash", &garbage, json!({})))
            .into_hooks(),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let warned = warned.lock().unwrap().join("\n");
    assert!(warned.contains("printed invalid JSON"), "{warned}");
}

// ===== merging, dedup =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disagreeing_hooks_merge_in_configuration_order() {
    let s = Scripts::new();
    // The first (in configuration order) is slow and sometimes fast; the second is fast.
    let first = s.bash(
        "first.sh",
        r#"cat > /dev/null; sleep 0.0$((RANDOM % 3))
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "first"}, "additionalContext": "first says"}}'"#,
    );
    let second = s.bash(
        "second.sh",
        r#"cat > /dev/null
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": "second"}, "additionalContext": "second says"}}'"#,
    );
    let hooks = s.hooks(json!({ "PreToolUse": [
        { "matcher": "bash", "hooks": [ { "type": "command", "command": first } ] },
        { "matcher": "*", "hooks": [ { "type": "command", "command": second } ] },
    ]}));
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "original" }))
        .text("done")
        .per_run();
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let agent = builder.build();
    for _ in 0..50 {
        let resp = agent.run("go").await.unwrap();
        assert_eq!(tool_text(&resp), "ran: second");
        assert_eq!(
            contexts_after_tools(&resp),
            ["PreToolUse:bash hook additional context: first says\n\n\
              PreToolUse:bash hook additional context: second says"]
        );
    }
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|a| a == &json!({ "command": "second" }))
    );
    assert_eq!(seen.lock().unwrap().len(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_handlers_run_once() {
    let s = Scripts::new();
    let counter = s.path("count");
    let count = s.bash(
        "count.sh",
        &format!("cat > /dev/null; echo run >> {}", counter.display()),
    );
    let handler = json!({ "type": "command", "command": count, "timeout": 5 });
    let settings = json!({ "hooks": { "PreToolUse": [
        { "matcher": "bash", "hooks": [handler.clone(), handler.clone()] },
        { "matcher": "Bash|bash", "hooks": [handler.clone()] },
    ]}});
    // Defined in two sources too.
    let file = s.path("settings.json");
    std::fs::write(&file, settings.to_string()).unwrap();
    let hooks = CommandHooks::builder()
        .settings_file(&file)
        .settings_json(settings, "inline")
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse), [count.as_str()]);
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    assert_eq!(s.read("count"), "run\n");
}

// ===== Stop, transcripts =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_hook_continues_once_and_sees_stop_hook_active() {
    let s = Scripts::new();
    let log = s.path("stop.log");
    let stop = s.python(
        "stop.py",
        &format!(
            r#"import json, sys
data = json.load(sys.stdin)
with open({log:?}, "a") as f:
    f.write(json.dumps([data["stop_hook_active"], data["last_assistant_message"]]) + "\n")
if not data["stop_hook_active"]:
    print(json.dumps({{"decision": "block", "reason": "Run the tests first."}}))"#,
            log = log.to_string_lossy()
        ),
    );
    let hooks = s.hooks(on("Stop", "", &stop, json!({})));
    let model = ScriptedModel::new()
        .text("finished")
        .text("tests pass, finished")
        .recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(resp.text, "tests pass, finished");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // The reason as user text, then the command named in a system message, as Claude Code
    // 2.1.328 sends a JSON block (tests/reference: stop_continues_once).
    let messages: Vec<_> = requests[1].messages.iter().collect();
    let [.., reason, named] = messages.as_slice() else {
        panic!("{messages:?}")
    };
    assert_eq!(
        (reason.role, reason.text().as_ref()),
        (Role::User, "Run the tests first.")
    );
    let words = format!("Stop hook blocking error from command: \"{stop}\": Run the tests first.");
    assert_eq!(
        (named.role, named.text().into_owned()),
        (Role::System, words)
    );
    assert_eq!(
        s.read("stop.log"),
        "[false, \"finished\"]\n[true, \"tests pass, finished\"]\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_get_the_transcript_path_of_a_valid_jsonl_transcript() {
    let s = Scripts::new();
    let transcripts = s.path("transcripts");
    let seen = s.path("seen");
    // The Stop hook copies the path and the transcript as it is when it runs.
    let stop = s.bash(
        "stop.sh",
        &format!(
            r#"path=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["transcript_path"])')
echo "$path" > {seen}
cp "$path" {seen}.copy"#,
            seen = seen.display()
        ),
    );
    let hooks = s.hooks(on("Stop", "", &stop, json!({})));
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder
        .transcripts(&transcripts)
        .build()
        .run(tower_agent::AgentRequest::new("list the files").thread("t-1"))
        .await
        .unwrap();
    let path = s.read("seen").trim().to_owned();
    assert_eq!(path, transcripts.join("t-1.jsonl").to_string_lossy());
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // One line per message: the prompt, the call, its result, the answer.
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
    assert_eq!(lines.len(), resp.messages.len());
    assert_eq!(lines[3]["message"]["content"][0]["text"], resp.text);
    assert!(lines.iter().all(|l| l["sessionId"] == "t-1"));
    // When the Stop hook ran, the transcript already held the answer being stopped on.
    let copy = std::fs::read_to_string(format!("{}.copy", seen.display())).unwrap();
    assert_eq!(copy, text);
}

// ===== cancellation =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_leaves_no_hook_process_behind() {
    let s = Scripts::new();
    let pidfile = s.path("pid");
    let children = s.path("children");
    let slow = s.bash(
        "slow.sh",
        &format!(
            "sleep 60 &\necho $! > {}\necho $$ > {}\nwait",
            children.display(),
            pidfile.display()
        ),
    );
    let hooks = s.hooks(on("PreToolUse", "bash", &slow, json!({})));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let agent = builder.build();
    let run = tokio::spawn(async move { agent.run("go").await });
    let pid: i32 = wait_for_file(&pidfile).await.trim().parse().unwrap();
    let child: i32 = wait_for_file(&children).await.trim().parse().unwrap();
    assert!(alive(pid) && alive(child));
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert!(wait_dead(pid).await, "hook {pid} still runs");
    assert!(
        wait_dead(child).await,
        "the hook's child {child} still runs"
    );
    assert!(seen.lock().unwrap().is_empty());
}

// ===== persistent hooks =====

const PERSISTENT: &str = r#"import json, os, sys
marker = os.environ.get("CRASH_MARKER")
for line in sys.stdin:
    event = json.loads(line)
    if marker and not os.path.exists(marker):
        open(marker, "w").write(str(os.getpid()))
        sys.exit(1)                      # crash before answering, once
    data = event["input"]
    answer = {"id": event["id"], "exit": 0, "output": {"hookSpecificOutput": {
        "hookEventName": data["hook_event_name"],
        "additionalContext": "pid %d" % os.getpid()}}}
    if "rm -rf" in data.get("tool_input", {}).get("command", ""):
        answer = {"id": event["id"], "exit": 2, "stderr": "blocked by pid %d" % os.getpid()}
    print(json.dumps(answer), flush=True)
"#;

fn pid_in(text: &str) -> String {
    text.split("pid ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_answers_concurrent_events_from_one_process() {
    let s = Scripts::new();
    let hook = s.python("persistent.py", PERSISTENT);
    let hooks = s.hooks(json!({
        "PreToolUse": [{ "matcher": "bash", "hooks": [{ "type": "command", "command": hook, "persistent": true }] }],
        "PostToolUse": [{ "hooks": [{ "type": "command", "command": hook, "persistent": true }] }],
    }));
    let model = ScriptedModel::new()
        .tool_calls((0..4).map(|i| ("bash", json!({ "command": format!("echo {i}") }))))
        .tool_call("bash", json!({ "command": "rm -rf /" }))
        .text("done")
        .per_run();
    let (builder, seen) = agent(&model, hooks.into_hooks());
    let agent = builder.build();
    let mut pids = std::collections::HashSet::new();
    for _ in 0..2 {
        let resp = agent.run("go").await.unwrap();
        let outputs: Vec<String> = resp
            .messages
            .iter()
            .filter(|m| m.tool_call_id.is_some())
            .map(|m| m.text().into_owned())
            .collect();
        assert_eq!(outputs.len(), 5);
        for (i, out) in outputs[..4].iter().enumerate() {
            assert_eq!(out, &format!("ran: echo {i}"));
        }
        // After the four results, each call's PreToolUse context then its PostToolUse
        // context: all from the process.
        let contexts = contexts_after_tools(&resp);
        let parts: Vec<&str> = contexts[0].split("\n\n").collect();
        assert_eq!(parts.len(), 8, "{parts:?}");
        for (i, part) in parts.iter().enumerate() {
            let event = if i % 2 == 0 {
                "PreToolUse"
            } else {
                "PostToolUse"
            };
            let prefix = format!("{event}:bash hook additional context: pid ");
            assert!(part.starts_with(&prefix), "{part}");
            pids.insert(pid_in(part));
        }
        assert!(
            outputs[4].starts_with("PreToolUse:bash hook error: blocked by pid "),
            "{}",
            outputs[4]
        );
        pids.insert(pid_in(&outputs[4]));
    }
    assert_eq!(
        pids.len(),
        1,
        "one process for every event of both runs: {pids:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_persistent_hook_is_restarted_once() {
    let s = Scripts::new();
    let marker = s.path("crashed");
    let hook = s.python("persistent.py", PERSISTENT);
    let command = format!("CRASH_MARKER={} {hook}", marker.display());
    let (hooks, warned) = warnings(
        s.hooks(on(
            "PreToolUse",
            "bash",
            &command,
            json!({ "persistent": true }),
        ))
        .into_hooks(),
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    let out = contexts_after_tools(&resp).concat();
    assert!(
        out.starts_with("PreToolUse:bash hook additional context: pid "),
        "{out}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    let crashed_pid = s.read("crashed");
    assert_ne!(pid_in(&out), crashed_pid, "a new process answered");
    let warned = warned.lock().unwrap().join("\n");
    assert!(
        warned.contains("exited before answering; restarting it"),
        "{warned}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_hook_ends_with_its_command_hooks() {
    let s = Scripts::new();
    let pidfile = s.path("pid");
    let hook = s.python(
        "persistent.py",
        &format!(
            r#"import json, os, sys
open({pidfile:?}, "w").write(str(os.getpid()))
for line in sys.stdin:
    print(json.dumps({{"id": json.loads(line)["id"]}}), flush=True)"#,
            pidfile = pidfile.to_string_lossy()
        ),
    );
    let hooks = s.hooks(on(
        "PreToolUse",
        "bash",
        &hook,
        json!({ "persistent": true }),
    ));
    // Not recording: recorded requests would keep the run's context, and the hooks, alive.
    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .text("done");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let agent = builder.build();
    agent.run("go").await.unwrap();
    drop(model);
    let pid: i32 = wait_for_file(&pidfile).await.trim().parse().unwrap();
    assert!(alive(pid));
    drop(agent);
    assert!(
        wait_dead(pid).await,
        "persistent hook {pid} outlived its hooks"
    );
}

// ===== configuration =====

fn config_error(hooks: Value) -> String {
    CommandHooks::builder()
        .settings_json(hooks, "settings.json")
        .build()
        .unwrap_err()
        .to_string()
}

#[test]
fn config_errors_name_the_file_and_the_path() {
    let cmd = json!({ "type": "command", "command": "true" });
    let with = |extra: Value| {
        let mut h = cmd.clone();
        h.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [cmd.clone(), h] }] } })
    };
    assert_eq!(
        config_error(with(json!({ "timeout": 0 }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds"
    );
    assert_eq!(
        config_error(with(json!({ "timeout": "30" }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds"
    );
    assert_eq!(
        config_error(with(json!({ "type": "shell" }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].type: unknown handler type `shell` (supported: \"command\", \"http\", \"mcp_tool\", \"prompt\", \"agent\", \"wasm\")"
    );
    assert_eq!(
        config_error(with(json!({ "command": 3 }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].command: must be a string"
    );
    assert_eq!(
        config_error(with(json!({ "args": ["a", 1] }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].args[1]: must be a string"
    );
    assert_eq!(
        config_error(with(json!({ "failClosed": "yes" }))),
        "settings.json: hooks.PreToolUse[0].hooks[1].failClosed: must be true or false"
    );
    assert!(
        config_error(json!({ "hooks": { "PreToolUze": [] } })).starts_with(
            "settings.json: hooks.PreToolUze: unknown hook event `PreToolUze` (known: PreToolUse, "
        )
    );
    assert_eq!(
        config_error(json!({ "hooks": { "Stop": {} } })),
        "settings.json: hooks.Stop: must be an array of matcher groups"
    );
    assert!(
        config_error(json!({ "hooks": { "PreToolUse": [{ "matcher": "(", "hooks": [] }] } }))
            .starts_with("settings.json: hooks.PreToolUse[0].matcher: invalid tool matcher `(`")
    );
    assert_eq!(
        config_error(json!({ "hooks": { "PreToolUse": [{ "matcher": "x" }] } })),
        "settings.json: hooks.PreToolUse[0]: missing `hooks` (an array of handlers)"
    );
    assert_eq!(
        config_error(json!([])),
        "settings.json: settings must be a JSON object"
    );

    // A file: its name, and where the JSON breaks.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    std::fs::write(&file, "{ \"hooks\": ").unwrap();
    let err = CommandHooks::builder()
        .settings_file(&file)
        .build()
        .unwrap_err();
    assert_eq!(err.file(), file.to_string_lossy());
    assert_eq!(err.path(), "");
    assert!(err.to_string().contains("invalid JSON"), "{err}");
}

/// Every protocol event the crate does not fire (`HookEvent::NOT_FIRED`, from the one table of
/// events) loads from settings and is skipped with one warning naming its reason; none of them
/// is an event the crate fires.
#[test]
fn every_event_not_fired_loads_with_one_warning_giving_its_reason() {
    assert!(!HookEvent::NOT_FIRED.is_empty());
    for &(name, reason) in HookEvent::NOT_FIRED {
        assert!(
            HookEvent::parse(name).is_none(),
            "{name} is fired and listed as not fired"
        );
        let hooks = CommandHooks::builder()
            .settings_json(
                json!({ "hooks": { name: [{ "hooks": [{ "type": "command", "command": "true" }] }] } }),
                "settings.json",
            )
            .build()
            .unwrap();
        let warnings = hooks.warnings();
        assert_eq!(warnings.len(), 1, "{name}: {warnings:?}");
        assert!(
            warnings[0].contains(&format!(
                "the {name} event is not fired by tower-agent ({reason})"
            )),
            "{name}: {warnings:?}"
        );
    }
}

#[test]
fn unsupported_handlers_and_events_are_skipped_with_warnings() {
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": {
                "PreToolUse": [{ "hooks": [
                    { "type": "mcp_tool", "server": "s", "tool": "t" },
                    { "type": "prompt", "prompt": "ok?" },
                    { "type": "command", "command": "true", "if": "Bash(git *)" },
                    { "type": "command", "command": "true", "statusMessage": "checking" },
                ]}],
                "TeammateIdle": [{ "hooks": [{ "type": "command", "command": "true" }] }],
            }}),
            "settings.json",
        )
        .build()
        .unwrap();
    // The `if` handler loads (issue 12): it is another handler than the one without a rule.
    assert_eq!(hooks.commands(HookEvent::PreToolUse), ["true", "true"]);
    let warnings = hooks.warnings().join("\n");
    assert!(
        // Without MCP servers (`CommandHooksBuilder::mcp`), or without the `mcp` feature.
        warnings.contains("hooks.PreToolUse[0].hooks[0]: `mcp_tool` hooks need"),
        "{warnings}"
    );
    // Without a model service (`CommandHooksBuilder::model`).
    assert!(
        warnings.contains("`prompt` hooks need a model service"),
        "{warnings}"
    );
    assert!(
        warnings.contains("TeammateIdle event is not fired"),
        "{warnings}"
    );
    // Elicitation hooks load with the `mcp` feature (fired by `elicitation_layer`), and are
    // skipped with a warning without it.
    let elicit = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": { "Elicitation": [{ "hooks": [{ "type": "command", "command": "true" }] }] } }),
            "settings.json",
        )
        .build()
        .unwrap();
    if cfg!(feature = "mcp") {
        assert_eq!(elicit.commands(HookEvent::Elicitation), ["true"]);
    } else {
        assert!(elicit.commands(HookEvent::Elicitation).is_empty());
        assert!(
            elicit.warnings()[0].contains("the Elicitation event needs the `mcp` feature"),
            "{:?}",
            elicit.warnings()
        );
    }

    let disabled = CommandHooks::builder()
        .settings_json(json!({ "hooks": { "Stop": [{ "hooks": [{ "type": "command", "command": "true" }] }] } }), "a")
        .settings_json(json!({ "disableAllHooks": true }), "b")
        .build()
        .unwrap();
    assert!(disabled.is_disabled());
    assert!(disabled.commands(HookEvent::Stop).is_empty());
}

#[test]
fn seed_aliases() {
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": {
                "tool-call-start": [{ "hooks": [{ "type": "command", "command": "a" }] }],
                "tool-call-end": [{ "hooks": [{ "type": "command", "command": "b" }] }],
                "agent-start": [{ "hooks": [{ "type": "command", "command": "c" }] }],
                "step-start": [{ "hooks": [{ "type": "command", "command": "d" }] }],
                "agent-stop": [{ "hooks": [{ "type": "command", "command": "e" }] }],
            }}),
            "seed",
        )
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse), ["a"]);
    assert_eq!(hooks.commands(HookEvent::PostToolUse), ["b"]);
    assert_eq!(hooks.commands(HookEvent::SessionStart), ["c"]);
    assert_eq!(hooks.commands(HookEvent::BeforeModel), ["d"]);
    assert_eq!(hooks.commands(HookEvent::Stop), ["e"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_dir_describes_itself() {
    let s = Scripts::new();
    let dir = s.path("hooks");
    std::fs::create_dir(&dir).unwrap();
    let write = |name: &str, body: &str| s.script(&format!("hooks/{name}"), body);
    let guard = write(
        "10-guard.sh",
        r#"#!/usr/bin/env bash
if [ "$TOWER_AGENT_HOOK_ACTION" = describe ]; then
  echo '{"events": ["PreToolUse"], "matcher": "bash"}'; exit 0
fi
grep -q 'rm -rf' && { echo "guard says no" >&2; exit 2; }
exit 0"#,
    );
    let notes = write(
        "20-notes.py",
        r#"#!/usr/bin/env python3
import json, os, sys
if os.environ.get("TOWER_AGENT_HOOK_ACTION") == "describe":
    print(json.dumps({"events": ["PostToolUse", "Stop"], "timeout": 5}))
    sys.exit(0)
data = json.load(sys.stdin)
if data["hook_event_name"] == "PostToolUse":
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
        "additionalContext": "noted in " + os.environ["TOWER_AGENT_PROJECT_DIR"]}}))"#,
    );
    std::fs::write(dir.join("README.md"), "not a hook").unwrap();
    write(".hidden", "#!/bin/sh\nexit 1");
    let hooks = CommandHooks::builder()
        .hooks_dir(&dir)
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse), [guard.as_str()]);
    assert_eq!(hooks.commands(HookEvent::PostToolUse), [notes.as_str()]);
    assert_eq!(hooks.commands(HookEvent::Stop), [notes.as_str()]);

    let model = ScriptedModel::new()
        .tool_calls([
            ("bash", json!({"command": "rm -rf /"})),
            ("bash", json!({"command": "ls"})),
        ])
        .text("done");
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    let outputs: Vec<String> = resp
        .messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(outputs[0], "PreToolUse:bash hook error: guard says no");
    assert_eq!(outputs[1], "ran: ls");
    assert_eq!(
        contexts_after_tools(&resp),
        [format!(
            "PostToolUse:bash hook additional context: noted in {}",
            s.dir.path().display()
        )]
    );

    // A bad describer is an error naming it.
    let bad = write("30-bad.sh", "#!/bin/sh\necho 'I handle everything'");
    let err = CommandHooks::builder().hooks_dir(&dir).build().unwrap_err();
    assert_eq!(err.file(), bad);
    assert_eq!(err.path(), "describe");
    assert!(err.to_string().contains("expected `{\"events\""), "{err}");
    std::fs::write(&bad, "#!/bin/sh\necho '{\"events\": [\"Nope\"]}'").unwrap();
    let err = CommandHooks::builder().hooks_dir(&dir).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{bad}: describe.events[0]: unknown hook event `Nope`")
    );
}

// ===== other events =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_form_and_tool_failures() {
    let s = Scripts::new();
    s.python(
        "echo.py",
        r#"import json, sys
data = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUseFailure",
    "additionalContext": sys.argv[1] + ": " + data["error"]}}))"#,
    );
    let hooks = s.hooks(json!({ "PostToolUseFailure": [{ "matcher": "broken", "hooks": [
        { "type": "command", "command": "${CLAUDE_PROJECT_DIR}/echo.py", "args": ["hint with spaces"] }
    ]}]}));
    let model = ScriptedModel::new()
        .tool_call("broken", json!({}))
        .text("done");
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn(
            "broken",
            "Fails",
            json!({"type": "object"}),
            |_, _| async { Err::<String, BoxError>("disk full".into()) },
        ))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "tool `broken` failed: disk full");
    assert_eq!(
        contexts_after_tools(&resp),
        ["PostToolUseFailure:broken hook additional context: \
          hint with spaces: tool `broken` failed: disk full"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_and_after_model_hooks() {
    let s = Scripts::new();
    // BeforeModel: rewrite the last user message; AfterModel: shout the answer.
    let before = s.python(
        "before.py",
        r#"import json, sys
data = json.load(sys.stdin)
req = data["llm_request"]
req["messages"][-1]["content"] = [{"type": "text", "text": "rewritten prompt"}]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "BeforeModel", "llm_request": {"messages": req["messages"]}}}))"#,
    );
    let after = s.python(
        "after.py",
        r#"import json, sys
resp = json.load(sys.stdin)["llm_response"]
text = resp["message"]["content"][0]["text"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "AfterModel",
    "llm_response": {"message": {"role": "assistant", "content": [{"type": "text", "text": text.upper()}]}}}}))"#,
    );
    let mut config = on("BeforeModel", "", &before, json!({}));
    config.as_object_mut().unwrap().extend(
        on("AfterModel", "", &after, json!({}))
            .as_object()
            .unwrap()
            .clone(),
    );
    let hooks = s.hooks(config);
    let model = ScriptedModel::from_fn(|req: &ModelRequest| {
        Ok(tower_agent::model::ModelResponse::text(format!(
            "you said {}",
            req.messages.last().unwrap().text()
        )))
    });
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("original").await.unwrap();
    assert_eq!(resp.text, "YOU SAID REWRITTEN PROMPT");

    // A BeforeModel block answers in the model's place.
    let block = s.bash(
        "block.sh",
        "cat > /dev/null; echo 'model calls are paused' >&2; exit 2",
    );
    let hooks = s.hooks(on("step-start", "", &block, json!({})));
    let model = ScriptedModel::new().text("never").recording();
    let (builder, _) = agent(&model, hooks.into_hooks());
    let resp = builder.build().run("hi").await.unwrap();
    assert_eq!(resp.text, "model calls are paused");
    assert_eq!(model.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_compact_hooks_veto_compaction() {
    let s = Scripts::new();
    let log = s.path("compact.log");
    let veto = s.bash(
        "veto.sh",
        &format!(
            "cat > {}; echo 'keep everything' >&2; exit 2",
            log.display()
        ),
    );
    let hooks = s.hooks(on("PreCompact", "auto", &veto, json!({})));
    let summarizer = ScriptedModel::new().text("summary").recording();
    let model = ScriptedModel::from_fn(|req: &ModelRequest| {
        Ok(tower_agent::model::ModelResponse::text(format!(
            "{} messages",
            req.messages.len()
        )))
    });
    let mut stack = tower::ServiceBuilder::new()
        .layer(
            SummarizeLayer::new(summarizer.clone())
                .context_window(100)
                .on_compact(hooks.pre_compact()),
        )
        .service(model);
    let messages: Vec<Message> = (0..20)
        .map(|i| Message::user(format!("message {i} {}", "x".repeat(40))))
        .collect();
    let resp = tower::ServiceExt::oneshot(&mut stack, ModelRequest::new(messages))
        .await
        .unwrap();
    assert_eq!(resp.message.text(), "20 messages");
    assert_eq!(summarizer.calls(), 0);
    let input: Value = serde_json::from_str(&s.read("compact.log")).unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "auto");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_end_and_notification_hooks_observe() {
    let s = Scripts::new();
    let end = s.path("end.json");
    let notes = s.path("notes.json");
    let session_end = s.bash("end.sh", &format!("cat > {}", end.display()));
    let notify = s.bash("notify.sh", &format!("cat >> {}", notes.display()));
    let warn = s.bash(
        "warn.sh",
        r#"cat > /dev/null; echo '{"systemMessage": "disk almost full"}'"#,
    );
    let mut config = on("SessionEnd", "", &session_end, json!({}));
    let map = config.as_object_mut().unwrap();
    map.extend(
        on("Notification", "", &notify, json!({}))
            .as_object()
            .unwrap()
            .clone(),
    );
    map.extend(
        on("PreToolUse", "", &warn, json!({}))
            .as_object()
            .unwrap()
            .clone(),
    );
    let hooks = s.hooks(config);
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    let end: Value = serde_json::from_str(&wait_for_file(&end).await).unwrap();
    assert_eq!(end["hook_event_name"], "SessionEnd");
    assert_eq!(end["outcome"], json!({ "kind": "finished" }));
    let note: Value = serde_json::from_str(&wait_for_file(&notes).await).unwrap();
    assert_eq!(note["hook_event_name"], "Notification");
    assert_eq!(
        note["message"],
        "PreToolUse hook `".to_owned()
            + &s.path("warn.sh").to_string_lossy()
            + "`: disk almost full"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_stop_hooks_match_the_subagent() {
    let s = Scripts::new();
    let log = s.path("sub.log");
    let hook = s.python(
        "sub.py",
        &format!(
            r#"import json, sys
data = json.load(sys.stdin)
open({log:?}, "a").write(data["agent_type"] + " " + str(data["stop_hook_active"]) + "\n")
if not data["stop_hook_active"]:
    print("Cite a source." , file=sys.stderr); sys.exit(2)"#,
            log = log.to_string_lossy()
        ),
    );
    let hooks = s.hooks(on("SubagentStop", "research", &hook, json!({})));
    let researcher = Agent::builder()
        .model(
            ScriptedModel::new()
                .text("Tower is great.")
                .text("Tower is great (docs.rs)."),
        )
        .build();
    let lead = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("research", json!({ "prompt": "What is tower?" }))
                .text("Done."),
        )
        .tool(researcher.into_tool("research", "Researches"))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = lead.run("find out").await.unwrap();
    assert_eq!(tool_text(&resp), "Tower is great (docs.rs).");
    assert_eq!(s.read("sub.log"), "research False\nresearch True\n");
}

// ===== order against Rust hooks =====

/// Command hooks are named `command:{event}` (the hooks guide, "The order of hooks"): a Rust
/// hook registered after them runs first with `.before("command:PreToolUse")`, and so sees the
/// call a settings script then denies; a Rust hook after them at the default priority never
/// sees it (a deny ends the chain). A second set of command hooks keeps its callbacks unnamed
/// instead of clashing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_hook_ordered_before_the_settings_scripts_sees_the_call_they_deny() {
    use std::sync::{Arc, Mutex};
    use tower_agent::layers::hooks::{Hooks, PreToolUse};

    let s = Scripts::new();
    let block = s.bash("block.sh", "cat > /dev/null; echo 'not here' >&2; exit 2");
    let audit = Arc::new(Mutex::new(Vec::<String>::new()));
    let (first, late) = (Arc::clone(&audit), Arc::clone(&audit));
    let hooks: Hooks = s
        .hooks(on("PreToolUse", "bash", &block, json!({})))
        .register(Hooks::new())
        .before_tool_use("*", move |call, _ctx| {
            first.lock().unwrap().push(format!("audit {}", call.name));
            PreToolUse::Continue
        })
        .before("command:PreToolUse")
        .before_tool_use("*", move |call, _ctx| {
            late.lock().unwrap().push(format!("late {}", call.name));
            PreToolUse::Continue
        })
        .into();
    // A second set registers beside the first: unnamed, no clash.
    let hooks = s
        .hooks(on("PreToolUse", "bash", &block, json!({})))
        .register(hooks);
    assert!(hooks.has_name("command:PreToolUse"));
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(
        tool_text(&resp),
        format!("PreToolUse:bash hook error: [{block}]: not here")
    );
    assert!(seen.lock().unwrap().is_empty(), "the tool must not run");
    assert_eq!(*audit.lock().unwrap(), ["audit bash"]);
}
