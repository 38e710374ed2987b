//! ConfigChange: a settings file changed while the hooks were in use.
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "ConfigChange" — fires when a settings (or
//! skills) file changes; the matcher is compared with the `source` (`user_settings`,
//! `project_settings`, `local_settings`, `policy_settings`, `skills`); the input adds `source`
//! and `file_path`; `decision: "block"` (or exit 2) keeps the change from being applied,
//! except for `policy_settings`. In a library the change is applied when the caller reloads
//! the hooks ([`CommandHooks::reload`]).

use serde_json::{Value, json};
use tower_agent::command::{CommandHooks, HookEvent, Reload};

use crate::support::command::Scripts;

/// Writes `file` with a PreToolUse hook running `command`, and a ConfigChange hook.
fn settings(s: &Scripts, file: &str, command: &str, config_change: &str) {
    let path = s.path(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let value = json!({ "hooks": {
        "PreToolUse": [{ "matcher": "bash", "hooks": [{ "type": "command", "command": command }] }],
        "ConfigChange": [{ "hooks": [{ "type": "command", "command": config_change }] }],
    }});
    std::fs::write(path, value.to_string()).unwrap();
}

fn load(s: &Scripts, file: &str) -> CommandHooks {
    CommandHooks::builder()
        .settings_file(s.path(file))
        .project_dir(s.dir.path())
        .without_transcripts()
        .build()
        .unwrap()
}

/// Unchanged files reload to `Unchanged` (no hook runs); a changed file fires the hooks with
/// `source` and `file_path` and reloads to the new configuration; a block keeps the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_fires_config_change_and_a_block_keeps_the_old_configuration() {
    let s = Scripts::new();
    let inputs = s.path("inputs.jsonl");
    let allow = s.bash(
        "allow.sh",
        &format!("cat >> {inputs:?}; echo >> {inputs:?}"),
    );
    let file = ".claude/settings.json";
    settings(&s, file, "echo one", &allow);
    let hooks = load(&s, file);

    assert!(matches!(hooks.reload().await.unwrap(), Reload::Unchanged));
    assert!(!inputs.exists(), "no change, no hook");

    settings(&s, file, "echo two", &allow);
    let Reload::Changed(new) = hooks.reload().await.unwrap() else {
        panic!("the change is applied");
    };
    assert_eq!(new.commands(HookEvent::PreToolUse), ["echo two"]);
    assert_eq!(
        hooks.commands(HookEvent::PreToolUse),
        ["echo one"],
        "the old hooks stay"
    );
    let got: Value = serde_json::from_str(s.read("inputs.jsonl").lines().next().unwrap()).unwrap();
    assert_eq!(got["hook_event_name"], "ConfigChange");
    assert_eq!(got["source"], "project_settings");
    assert_eq!(got["file_path"], json!(s.path(file).to_string_lossy()));
    assert!(matches!(new.reload().await.unwrap(), Reload::Unchanged));

    // The new configuration's ConfigChange hook blocks the next change.
    let block = s.bash(
        "block.sh",
        r#"cat >/dev/null; echo '{"decision": "block", "reason": "frozen"}'"#,
    );
    settings(&s, file, "echo three", &block);
    let Reload::Changed(frozen) = new.reload().await.unwrap() else {
        panic!("the hook of the configuration in use (allow.sh) lets it through");
    };
    settings(&s, file, "echo four", &block);
    match frozen.reload().await.unwrap() {
        Reload::Blocked { file: f, reason } => {
            assert_eq!(f, s.path(file));
            assert_eq!(reason, "frozen");
        }
        other => panic!("blocked, not {other:?}"),
    }
    assert_eq!(frozen.commands(HookEvent::PreToolUse), ["echo three"]);
}

/// The source follows the file's place, the matcher picks it, exit 2 blocks, and a policy
/// file's change cannot be blocked; a file that no longer loads is an error (nothing changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_matchers_policy_and_errors() {
    let s = Scripts::new();
    let refuse = s.bash("refuse.sh", "cat >/dev/null; echo 'no edits' >&2; exit 2");
    for (file, source) in [
        ("a/settings.local.json", "local_settings"),
        ("b/managed-settings.json", "policy_settings"),
        ("c/settings.json", "project_settings"),
    ] {
        let path = s.path(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let write = |command: &str| {
            let value = json!({ "hooks": {
                "PreToolUse": [{ "hooks": [{ "type": "command", "command": command }] }],
                "ConfigChange": [
                    { "matcher": source, "hooks": [{ "type": "command", "command": refuse }] },
                    { "matcher": "user_settings", "hooks": [{ "type": "command", "command": "exit 2" }] },
                ],
            }});
            std::fs::write(&path, value.to_string()).unwrap();
        };
        write("echo one");
        let hooks = load(&s, file);
        write("echo two");
        let reloaded = hooks.reload().await.unwrap();
        if source == "policy_settings" {
            let Reload::Changed(new) = reloaded else {
                panic!("a policy change cannot be blocked: {reloaded:?}");
            };
            assert_eq!(new.commands(HookEvent::PreToolUse), ["echo two"]);
        } else {
            let Reload::Blocked { reason, .. } = reloaded else {
                panic!("{source}: blocked, not {reloaded:?}");
            };
            assert_eq!(reason, "no edits");
        }
        // A file that no longer loads: the hook is asked first (it blocks); past a policy
        // file's hook, the load fails, naming the file.
        std::fs::write(&path, "{ not json").unwrap();
        match hooks.reload().await {
            Err(err) if source == "policy_settings" => {
                assert!(err.to_string().contains(file), "{err}");
            }
            Ok(Reload::Blocked { .. }) if source != "policy_settings" => {}
            other => panic!("{source}: {other:?}"),
        }
        assert_eq!(hooks.commands(HookEvent::PreToolUse), ["echo one"]);
    }
}

/// A settings file that a tool call changes during a run (measured against Claude Code
/// 2.1.328: vector `config_change`): ConfigChange fires between the steps, with the run's
/// `session_id` and `prompt_id`, and the hooks of the file as it is now run the next call — or,
/// when a ConfigChange hook blocks, the old ones still do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_during_a_run_is_used_for_the_rest_of_it_unless_blocked() {
    for blocked in [false, true] {
        let s = Scripts::new();
        let inputs = s.path("inputs.jsonl");
        let marks = s.path("marks.txt");
        let record = s.bash(
            "record.sh",
            &format!(
                "cat >> {inputs:?}; echo >> {inputs:?}{}",
                if blocked {
                    r#"; echo '{"decision": "block", "reason": "frozen"}'"#
                } else {
                    ""
                }
            ),
        );
        let mark = |m: &str| format!("cat >/dev/null; echo {m} >> {marks:?}");
        let file = ".claude/settings.json";
        settings(&s, file, &mark("one"), &record);
        let hooks = load(&s, file);
        let (next, path) = (s.path("next.json"), s.path(file));
        settings(&s, "next.json", &mark("two"), &record);
        let swap = tower_agent::tool::tool_fn(
            "bash",
            "Runs a command",
            json!({"type": "object"}),
            move |_, _| {
                let (next, path) = (next.clone(), path.clone());
                async move {
                    std::fs::copy(&next, &path)?;
                    Ok::<_, tower_agent::BoxError>("copied")
                }
            },
        );
        let model = tower_agent::model::ScriptedModel::new()
            .tool_call("bash", json!({"command": "cp"}))
            .tool_call("bash", json!({"command": "cp"}))
            .text("done");
        let agent = tower_agent::Agent::builder()
            .model(model)
            .tool(swap)
            .hooks(hooks.into_hooks().compile().unwrap())
            .build();
        let resp = agent
            .run(
                tower_agent::AgentRequest::new("go")
                    .thread("t")
                    .cwd(s.dir.path()),
            )
            .await
            .unwrap();
        assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);

        let second = if blocked { "one" } else { "two" };
        assert_eq!(
            s.read("marks.txt"),
            format!("one\n{second}\n"),
            "blocked: {blocked}"
        );
        let got: Vec<Value> = s
            .read("inputs.jsonl")
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), 1, "one change, once: {got:?}");
        assert_eq!(got[0]["hook_event_name"], "ConfigChange");
        assert_eq!(got[0]["source"], "project_settings");
        assert_eq!(got[0]["file_path"], json!(s.path(file).to_string_lossy()));
        assert_eq!(got[0]["session_id"], "t");
        assert_eq!(got[0]["prompt_id"], json!(resp.run_id));
        assert!(got[0].get("permission_mode").is_none());
        if blocked {
            assert!(
                resp.warnings.iter().any(|w| w.contains("frozen")),
                "{:?}",
                resp.warnings
            );
        }
    }
}
