//! `CLAUDE_ENV_FILE`: what SessionStart hooks export reaches later command hooks and the
//! `execute` tool.

use serde_json::json;
use tower_agent::{Agent, builtins::filesystem::Filesystem, model::ScriptedModel};

use crate::support::command::{Scripts, tool_text};

// hooks.md § "Persist environment variables": a SessionStart hook appends `export` lines to
// `$CLAUDE_ENV_FILE` (including one that extends a variable with `$VAR`); later commands of
// the session see them. Other events don't get `CLAUDE_ENV_FILE` (the note under that
// section).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_reach_later_hooks_and_the_execute_tool() {
    let s = Scripts::new();
    let start = s.bash(
        "start.sh",
        r#"cat >/dev/null
if [ -n "$CLAUDE_ENV_FILE" ]; then
  echo 'export NODE_ENV=production' >> "$CLAUDE_ENV_FILE"
  echo 'export DEBUG_LOG=true' >> "$CLAUDE_ENV_FILE"
  echo 'export TOOLS_PATH="$HOME:./node_modules/.bin"' >> "$CLAUDE_ENV_FILE"
  echo "$CLAUDE_ENV_FILE" > env_file_path
fi"#,
    );
    let pre = s.bash(
        "pre.sh",
        r#"cat >/dev/null
echo "NODE_ENV=$NODE_ENV DEBUG_LOG=$DEBUG_LOG ENV_FILE=${CLAUDE_ENV_FILE:-unset}" > pre_env"#,
    );
    let hooks = s.hooks(json!({
        "SessionStart": [{ "hooks": [{ "type": "command", "command": start }] }],
        "PreToolUse": [{ "matcher": "execute", "hooks": [{ "type": "command", "command": pre }] }],
    }));
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call(
                    "execute",
                    json!({ "command": "echo \"node=$NODE_ENV tools=$TOOLS_PATH\"" }),
                )
                .text("done"),
        )
        .setup(Filesystem::local(s.dir.path()))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("build it").await.unwrap();

    let home = std::env::var("HOME").unwrap_or_default();
    let out = tool_text(&resp);
    assert!(
        out.starts_with(&format!(
            "node=production tools={home}:./node_modules/.bin\n"
        )),
        "{out}"
    );
    assert_eq!(
        s.read("pre_env").trim(),
        "NODE_ENV=production DEBUG_LOG=true ENV_FILE=unset"
    );
    let file = s.read("env_file_path");
    assert!(
        !file.trim().is_empty(),
        "the SessionStart hook got CLAUDE_ENV_FILE"
    );
    assert!(
        !std::path::Path::new(file.trim()).exists(),
        "the env file is removed once read"
    );
}

// hooks.md § "Persist environment variables": the file is data, never run. A command
// substitution is not executed (its line is skipped with a warning) and the other lines
// still count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_env_file_is_parsed_not_run() {
    let s = Scripts::new();
    let marker = s.path("ran");
    let start = s.bash(
        "start.sh",
        &format!(
            r#"cat >/dev/null
echo 'export BAD=$(touch {})' >> "$CLAUDE_ENV_FILE"
echo 'export GOOD=yes' >> "$CLAUDE_ENV_FILE""#,
            marker.display()
        ),
    );
    let hooks = s.hooks(json!({
        "SessionStart": [{ "hooks": [{ "type": "command", "command": start }] }],
    }));
    let (hooks, warnings) = crate::support::command::warnings(hooks.into_hooks());
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call(
                    "execute",
                    json!({ "command": "echo \"good=$GOOD bad=${BAD:-none}\"" }),
                )
                .text("done"),
        )
        .setup(Filesystem::local(s.dir.path()))
        .hooks(hooks.compile().unwrap())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert!(
        tool_text(&resp).starts_with("good=yes bad=none\n"),
        "{}",
        tool_text(&resp)
    );
    assert!(!marker.exists(), "the command substitution was not run");
    let warnings = warnings.lock().unwrap().clone();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("CLAUDE_ENV_FILE line 1")),
        "{warnings:?}"
    );
}
