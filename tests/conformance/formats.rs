//! Beyond Claude Code: Gemini CLI's and Codex's hook configurations drive real scripts, their
//! event names mapped to ours.

use serde_json::{Value, json};
use tower_agent::command::{CommandHooks, HookEvent};

use crate::{run_calls, support::command::Scripts};

/// Command hooks from a Gemini CLI `settings.json` holding `settings`, written in the
/// scripts' directory (also the project directory).
fn gemini_hooks(scripts: &Scripts, settings: Value) -> CommandHooks {
    let file = scripts.path("gemini-settings.json");
    std::fs::write(&file, settings.to_string()).unwrap();
    CommandHooks::builder()
        .gemini_settings_file(&file)
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap()
}

// Gemini CLI hooks reference: `BeforeTool` gets `hook_event_name: "BeforeTool"` (the crate's
// `Bash` as Gemini's shell tool, `run_shell_command`, which its matchers name), its
// `decision: "deny"` + `reason` blocks the tool (`Tool execution blocked: <reason>`);
// `AfterTool`'s `hookSpecificOutput.additionalContext` is appended to the result in
// `<hook_context>` tags; `timeout` is in ms;
// an event with no equivalent (`BeforeToolSelection`) is skipped with a warning.
#[tokio::test]
async fn gemini_settings_drive_scripts() {
    let scripts = Scripts::new();
    let before = scripts.python(
        "before.py",
        r#"import json, sys
event = json.load(sys.stdin)
open("before.log", "a").write(json.dumps(event) + "\n")
if "rm" in event["tool_input"].get("command", ""):
    print(json.dumps({"decision": "deny", "reason": "gemini says no"}))
else:
    print(json.dumps({"decision": "allow"}))"#,
    );
    let after = scripts.python(
        "after.py",
        r#"import json, sys
event = json.load(sys.stdin)
open("after.log", "a").write(json.dumps(event) + "\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "checked by gemini"}}))"#,
    );
    let hooks = gemini_hooks(
        &scripts,
        json!({"hooks": {
            "BeforeTool": [{"matcher": "run_shell_command", "sequential": false, "hooks": [
                {"type": "command", "command": before, "name": "guard", "timeout": 20000}
            ]}],
            "AfterTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": after}]}],
            "BeforeToolSelection": [{"hooks": [{"type": "command", "command": "true"}]}]
        }}),
    );
    assert!(
        hooks
            .warnings()
            .iter()
            .any(|w| w.contains("BeforeToolSelection"))
    );
    assert_eq!(hooks.commands(HookEvent::PreToolUse).len(), 1);
    let (resp, _) = run_calls(
        hooks.into_hooks(),
        &[
            ("Bash", json!({"command": "ls"})),
            ("Bash", json!({"command": "rm -rf /"})),
        ],
    )
    .await;
    let texts = crate::support::command::tool_texts(&resp);
    let contexts = crate::support::command::contexts_after_tools(&resp).concat();
    // The context in the result, as Gemini CLI appends it; the denial in its words.
    assert_eq!(
        texts[0], "ok Bash\n\n<hook_context>checked by gemini</hook_context>",
        "{texts:?}"
    );
    assert!(!contexts.contains("checked by gemini"), "{contexts}");
    assert_eq!(
        texts[1], "Tool execution blocked: gemini says no",
        "{texts:?}"
    );
    let first: Value =
        serde_json::from_str(scripts.read("before.log").lines().next().unwrap()).unwrap();
    assert_eq!(first["hook_event_name"], "BeforeTool");
    assert!(
        first["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let after: Value =
        serde_json::from_str(scripts.read("after.log").lines().next().unwrap()).unwrap();
    assert_eq!(after["hook_event_name"], "AfterTool");
    assert_eq!(after["tool_response"]["llmContent"], "ok Bash");
}

// Gemini: `hooksConfig.disabled` names hooks to skip (by their `name`).
#[test]
fn gemini_disabled_by_name() {
    let scripts = Scripts::new();
    let hooks = gemini_hooks(
        &scripts,
        json!({"hooksConfig": {"disabled": ["noisy"]}, "hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": "echo a", "name": "noisy"},
            {"type": "command", "command": "echo b", "name": "quiet"}
        ]}]}}),
    );
    assert_eq!(hooks.commands(HookEvent::SessionStart), ["echo b"]);
}

// Codex hooks.json: Claude Code's shape and protocol (exit 2 blocks with stderr, `Stop`'s
// `decision: "block"` continues); an event this crate does not know is skipped with a warning
// instead of failing the file.
#[tokio::test]
async fn codex_hooks_drive_scripts() {
    let scripts = Scripts::new();
    let guard = scripts.bash(
        "guard.sh",
        r#"input=$(cat)
echo "$input" >> codex.log
case "$input" in *'"rm '*) echo "codex blocks rm" >&2; exit 2;; esac"#,
    );
    let file = scripts.path("hooks.json");
    std::fs::write(
        &file,
        json!({"description": "team hooks", "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": guard, "timeout": 10, "statusMessage": "checking"}
            ]}],
            "Interrupt": [{"hooks": [{"type": "command", "command": "true"}]}]
        }})
        .to_string(),
    )
    .unwrap();
    let hooks = CommandHooks::builder()
        .codex_hooks_file(&file)
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap();
    assert!(
        hooks.warnings().iter().any(|w| w.contains("Interrupt")),
        "{:?}",
        hooks.warnings()
    );
    let (resp, _) = run_calls(
        hooks.into_hooks(),
        &[
            ("Bash", json!({"command": "ls"})),
            ("Bash", json!({"command": "rm x"})),
        ],
    )
    .await;
    let texts = crate::support::command::tool_texts(&resp);
    assert_eq!(texts[0], "ok Bash");
    // The denial in Codex's words.
    assert_eq!(
        texts[1], "Command blocked by PreToolUse hook: codex blocks rm. Command: rm x",
        "{texts:?}"
    );
    let first: Value =
        serde_json::from_str(scripts.read("codex.log").lines().next().unwrap()).unwrap();
    assert_eq!(first["hook_event_name"], "PreToolUse");
}

// Codex hooks reference, PreToolUse: `updatedInput` rewrites the call only together with
// `permissionDecision: "allow"`; alone (or with `ask`), the rewrite is ignored and the call
// runs with its own arguments. Claude Code's files keep Claude Code's rule (the rewrite
// applies on its own), so the same script is tried in both formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_rewrites_only_with_allow() {
    use crate::support::command::agent;
    use tower_agent::model::ScriptedModel;

    let scripts = Scripts::new();
    let rewrite = |name: &str, decision: Option<&str>| {
        let mut specific = json!({
            "hookEventName": "PreToolUse",
            "updatedInput": { "command": "echo rewritten" },
        });
        if let Some(decision) = decision {
            specific["permissionDecision"] = json!(decision);
        }
        let answer = json!({ "hookSpecificOutput": specific }).to_string();
        scripts.bash(name, &format!("cat > /dev/null; echo '{answer}'"))
    };
    for (decision, codex_rewrites) in [(Some("allow"), true), (None, false)] {
        let script = rewrite(
            &format!("rewrite-{}.sh", decision.unwrap_or("none")),
            decision,
        );
        let hooks_json = json!({ "hooks": {
            "PreToolUse": [{ "matcher": "bash", "hooks": [{ "type": "command", "command": script }] }]
        }});
        let file = scripts.path("codex-hooks.json");
        std::fs::write(&file, hooks_json.to_string()).unwrap();
        for (codex, expected) in [(true, codex_rewrites), (false, true)] {
            let builder = CommandHooks::builder()
                .project_dir(scripts.dir.path())
                .transcripts_dir(scripts.path("transcripts"));
            let builder = if codex {
                builder.codex_hooks_file(&file)
            } else {
                builder.settings_json(hooks_json.clone(), "settings.json")
            };
            let hooks = builder.build().unwrap();
            let model = ScriptedModel::new()
                .tool_call("bash", json!({ "command": "ls" }))
                .text("done");
            let (agent, seen) = agent(&model, hooks.into_hooks());
            agent.build().run("go").await.unwrap();
            let seen = seen.lock().unwrap();
            let command = seen[0]["command"].as_str().unwrap().to_owned();
            let want = if expected { "echo rewritten" } else { "ls" };
            assert_eq!(command, want, "codex: {codex}, decision: {decision:?}");
        }
    }
}

// Codex config.toml: the inline `[hooks]` tables (same shape as hooks.json, in TOML) drive the
// same scripts; `[hooks.state]` and Codex's other settings are not hooks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_config_toml_hooks_drive_scripts() {
    let scripts = Scripts::new();
    let guard = scripts.bash(
        "guard.sh",
        r#"input=$(cat)
case "$input" in *'"rm '*) echo "codex toml blocks rm" >&2; exit 2;; esac"#,
    );
    let file = scripts.path("config.toml");
    std::fs::write(
        &file,
        format!(
            r#"model = "gpt-5"
approval_policy = "on-request"

[features]
hooks = true

[[hooks.PreToolUse]]
matcher = "Bash"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "{guard}"
timeout = 10

[hooks.state]
trusted = ["abc"]
"#
        ),
    )
    .unwrap();
    let hooks = CommandHooks::builder()
        .codex_hooks_file(&file)
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap();
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
    let (resp, _) = run_calls(
        hooks.into_hooks(),
        &[
            ("Bash", json!({"command": "ls"})),
            ("Bash", json!({"command": "rm x"})),
        ],
    )
    .await;
    let texts = crate::support::command::tool_texts(&resp);
    assert_eq!(texts[0], "ok Bash");
    assert!(texts[1].contains("codex toml blocks rm"), "{texts:?}");

    // Not TOML: a clear error naming the file.
    std::fs::write(&file, "[[hooks.PreToolUse]\n").unwrap();
    let err = CommandHooks::builder()
        .codex_hooks_file(&file)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("invalid TOML"), "{err}");
}

// Gemini CLI hooks reference, "Hook definition": `sequential: true` runs the group's hooks
// one after another; `false` (the default) in parallel. Two real scripts: the first waits for
// the second to start (two seconds at most when they must run in order — run in parallel,
// the second would start meanwhile —, two minutes when they run in parallel: it does start
// meanwhile, however slow the machine), then notes it is done; the second notes it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_sequential_groups_run_one_after_another() {
    let scripts = Scripts::new();
    let order = scripts.path("order.log");
    let slow = |tries: u32| {
        scripts.bash(
            &format!("slow{tries}.sh"),
            &format!(
                r#"cat > /dev/null
i=0; while ! grep -qs quick-start {order:?} && [ $i -lt {tries} ]; do sleep 0.05; i=$((i+1)); done
echo slow-done >> {order:?}; echo '{{}}'"#
            ),
        )
    };
    let quick = scripts.bash(
        "quick.sh",
        &format!(r#"cat > /dev/null; echo quick-start >> {order:?}; echo '{{}}'"#),
    );
    for sequential in [true, false] {
        let _ = std::fs::remove_file(&order);
        let slow = slow(if sequential { 40 } else { 2400 });
        let hooks = gemini_hooks(
            &scripts,
            json!({"hooks": {
                "BeforeTool": [{"matcher": "run_shell_command", "sequential": sequential, "hooks": [
                    {"type": "command", "command": slow, "timeout": 600_000},
                    {"type": "command", "command": quick, "timeout": 600_000}
                ]}]
            }}),
        );
        assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
        run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
        let want = if sequential {
            "slow-done\nquick-start\n"
        } else {
            "quick-start\nslow-done\n"
        };
        assert_eq!(scripts.read("order.log"), want, "sequential: {sequential}");
    }
}
