//! FileChanged: a watched file was changed, created or removed.
//!
//! Hooks reference (Claude Code 2.1.x, 2026): § "FileChanged" — its matcher is a list of
//! literal file names (`.envrc|.env`) that builds the watch list; the input adds `file_path`
//! and `event` (`change`, `add`, `unlink`); it cannot block; `hookSpecificOutput.watchPaths`
//! (also from § "CwdChanged") sets more paths to watch; § "Persist environment variables": its
//! hooks get `CLAUDE_ENV_FILE`. In a library the files are compared after each step's tool
//! calls, before the next model call.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    layers::{
        hooks::{CwdChanged, FileChanged, FileEvent, Hooks},
        matcher::ToolMatcher,
    },
    model::ScriptedModel,
    store::MemoryStore,
    tool::tool_fn,
};

use crate::support::command::Scripts;

/// A `fs` tool: `{"write": name, "text": …}` writes a file of the run's directory,
/// `{"remove": name}` removes one; then `env` runs `printenv NAME` through the session's
/// environment as seen by a hook.
fn fs_tool() -> impl tower_agent::tool::Tool {
    tool_fn(
        "fs",
        "Writes or removes a file",
        json!({"type": "object"}),
        |args: Value, ctx| async move {
            if let Some(name) = args["write"].as_str() {
                std::fs::write(
                    ctx.cwd().join(name),
                    args["text"].as_str().unwrap_or_default(),
                )?;
            }
            if let Some(name) = args["remove"].as_str() {
                std::fs::remove_file(ctx.cwd().join(name))?;
            }
            Ok::<_, BoxError>("done".to_owned())
        },
    )
}

/// Each kind of change of a watched file fires once, after the step whose tool made it:
/// `add`, `change`, `unlink`; a file not watched fires nothing; a hook answering `Watch` adds
/// a path.
#[tokio::test]
async fn a_rust_hook_sees_add_change_and_unlink_of_watched_files() {
    let s = Scripts::new();
    let seen: Arc<Mutex<Vec<(PathBuf, FileEvent)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let watch_more = s.path("more.toml");
    let hooks = Hooks::new()
        .on_file_changed(
            ToolMatcher::exact([".env", "more.toml"]),
            move |input, _ctx| {
                log.lock()
                    .unwrap()
                    .push((input.file_path.clone(), input.event));
                FileChanged::Watch(vec!["more.toml".into()])
            },
        )
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("fs", json!({"write": ".env", "text": "A=1"}))
        .tool_call("fs", json!({"write": "other.txt", "text": "x"}))
        .tool_call("fs", json!({"write": ".env", "text": "A=22"}))
        .tool_call("fs", json!({"write": "more.toml", "text": "x"}))
        .tool_call("fs", json!({"remove": ".env"}))
        .text("ok");
    let agent = Agent::builder()
        .model(model)
        .tool(fs_tool())
        .hooks(hooks)
        .build();
    agent
        .run(AgentRequest::new("go").cwd(s.dir.path()))
        .await
        .unwrap();
    let env = s.path(".env");
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (env.clone(), FileEvent::Add),
            (env.clone(), FileEvent::Change),
            (watch_more, FileEvent::Add),
            (env, FileEvent::Unlink),
        ]
    );
}

/// A CwdChanged hook's answer (`watchPaths`) is watched from the start of the run that moved.
#[tokio::test]
async fn the_paths_a_cwd_changed_hook_answers_are_watched() {
    let s = Scripts::new();
    let (a, b) = (s.path("a"), s.path("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let seen: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
    let log = Arc::clone(&seen);
    let hooks = Hooks::new()
        .on_cwd_changed(|_, _| CwdChanged::Watch(vec!["flake.nix".into()]))
        .on_file_changed("*", move |input, _ctx| {
            log.lock().unwrap().push(input.file_path);
            FileChanged::Continue
        })
        .compile()
        .unwrap();
    let model = ScriptedModel::new()
        .tool_call("fs", json!({"write": "flake.nix", "text": "{}"}))
        .text("ok")
        .per_run();
    let agent = Agent::builder()
        .model(model)
        .tool(fs_tool())
        .store(MemoryStore::new())
        .hooks(hooks)
        .build();
    agent
        .run(AgentRequest::new("go").thread("t").cwd(&a))
        .await
        .unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing watched in a: {:?}",
        seen.lock().unwrap()
    );
    agent
        .run(AgentRequest::new("go").thread("t").cwd(&b))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [b.join("flake.nix")]);
}

/// A command hook with the matcher `.envrc|.env` gets `file_path` and `event`, can export
/// through `CLAUDE_ENV_FILE` (the next hooks see it), and its `watchPaths` are watched too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_gets_path_and_event_exports_and_watches_more() {
    let s = Scripts::new();
    let inputs = s.path("inputs.jsonl");
    let changed = s.bash(
        "changed.sh",
        &format!(
            r#"cat >> {inputs:?}; echo >> {inputs:?}
echo 'export FROM_ENVRC=yes' >> "$CLAUDE_ENV_FILE"
echo '{{"hookSpecificOutput": {{"hookEventName": "FileChanged", "watchPaths": ["config.toml"]}}}}'"#
        ),
    );
    let all = s.bash(
        "all.sh",
        &format!(
            r#"cat >/dev/null; echo "all FROM_ENVRC=${{FROM_ENVRC:-unset}}" >> {:?}"#,
            s.path("order")
        ),
    );
    let hooks = s.hooks(json!({
        "FileChanged": [
            { "matcher": ".envrc|.env", "hooks": [{ "type": "command", "command": changed }] },
            { "hooks": [{ "type": "command", "command": all }] },
        ],
    }));
    let model = ScriptedModel::new()
        .tool_call("fs", json!({"write": ".envrc", "text": "use nix"}))
        .tool_call("fs", json!({"write": "config.toml", "text": "a = 1"}))
        .text("ok");
    let (hooks, warned) = crate::support::command::warnings(hooks.into_hooks());
    let agent = Agent::builder()
        .model(model)
        .tool(fs_tool())
        .hooks(hooks.compile().unwrap())
        .build();
    agent
        .run(AgentRequest::new("go").cwd(s.dir.path()))
        .await
        .unwrap();

    let got: Vec<Value> = s
        .read("inputs.jsonl")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        got.len(),
        1,
        "config.toml's name is not in the first matcher: {got:?} {:?}",
        warned.lock().unwrap()
    );
    assert_eq!(got[0]["hook_event_name"], "FileChanged");
    assert_eq!(
        got[0]["file_path"],
        json!(s.path(".envrc").to_string_lossy())
    );
    assert_eq!(got[0]["event"], "add");
    assert_eq!(
        s.read("order"),
        "all FROM_ENVRC=unset\nall FROM_ENVRC=yes\n",
        "the hook without a matcher fired for .envrc, then (watched since) config.toml, seeing the export"
    );
}

/// The same command under `*` and under a file's name (as a settings file that observes every
/// event and watches one file has it): the name is still watched, and the command runs once
/// for its change (measured against Claude Code 2.1.328: vector `file_changed`; before, the
/// `*` entry swallowed the name and nothing was watched).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_watched_beside_a_star_of_the_same_command() {
    let s = Scripts::new();
    let inputs = s.path("inputs.jsonl");
    let hook = s.bash(
        "changed.sh",
        &format!(r#"cat >> {inputs:?}; echo >> {inputs:?}"#),
    );
    let hooks = s.hooks(json!({
        "FileChanged": [
            { "matcher": "*", "hooks": [{ "type": "command", "command": hook }] },
            { "matcher": "notes.txt", "hooks": [{ "type": "command", "command": hook }] },
        ],
    }));
    std::fs::write(s.path("notes.txt"), "orig").unwrap();
    let model = ScriptedModel::new()
        .tool_call("fs", json!({"write": "notes.txt", "text": "changed"}))
        .text("ok");
    let agent = Agent::builder()
        .model(model)
        .tool(fs_tool())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    agent
        .run(AgentRequest::new("go").cwd(s.dir.path()))
        .await
        .unwrap();
    let got: Vec<Value> = s
        .read("inputs.jsonl")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["event"], "change");
    assert_eq!(
        got[0]["file_path"],
        json!(s.path("notes.txt").to_string_lossy())
    );
    assert!(got[0].get("permission_mode").is_none(), "{}", got[0]);
}
