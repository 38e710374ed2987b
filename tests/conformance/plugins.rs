//! hooks.md § "Reference scripts by path" and plugins-reference.md § "Hooks",
//! § "Environment variables", § "Persistent data directory": a plugin folder's hooks run with
//! `CLAUDE_PLUGIN_ROOT` / `CLAUDE_PLUGIN_DATA` set and substituted.

use std::{os::unix::fs::PermissionsExt, path::Path};

use serde_json::{Value, json};
use tower_agent::command::{CommandHooks, HookEvent};

use crate::{run_calls, support::command::Scripts};

/// Writes a plugin named `name` under `root/<name>`: a manifest, `hooks/hooks.json` running
/// `scripts/log.sh` (shell form, quoted placeholder as the reference writes it) on
/// PreToolUse, and the script, which records its environment.
fn write_plugin(root: &Path, name: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(dir.join("hooks")).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join(".claude-plugin/plugin.json"),
        json!({"name": name, "version": "1.0.0"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("hooks/hooks.json"),
        json!({"description": "logs", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "\"${CLAUDE_PLUGIN_ROOT}\"/scripts/log.sh \"${CLAUDE_PLUGIN_DATA}\""}
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let script = dir.join("scripts/log.sh");
    std::fs::write(
        &script,
        "#!/usr/bin/env bash\ncat > /dev/null\n\
         printf '%s|%s|%s\\n' \"$CLAUDE_PLUGIN_ROOT\" \"$CLAUDE_PLUGIN_DATA\" \"$1\" >> \"$1/runs.log\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn build(scripts: &Scripts, plugin: &Path, data: &Path, settings: Option<Value>) -> CommandHooks {
    let mut b = CommandHooks::builder();
    if let Some(s) = settings {
        b = b.settings_json(s, "settings.json");
    }
    b.plugin_dir(plugin)
        .plugin_data_dir(data)
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap()
}

// plugins-reference.md § "Environment variables": both are exported to hook processes and
// substituted "anywhere the placeholder appears" in hook commands; § "Persistent data
// directory": the data directory is per plugin (its id sanitized) and created for it.
#[tokio::test]
async fn env_vars_and_substitution() {
    let scripts = Scripts::new();
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = write_plugin(plugins.path(), "fmt@market");
    let hooks = build(&scripts, &dir, data.path(), None);
    let data_dir = data.path().join("fmt-market");
    assert!(data_dir.is_dir(), "the data directory is made");
    // The command is shown (and run) with the placeholders replaced.
    let commands = hooks.commands(HookEvent::PreToolUse);
    assert_eq!(
        commands,
        [format!(
            "\"{}\"/scripts/log.sh \"{}\"",
            dir.display(),
            data_dir.display()
        )]
    );
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    let log = std::fs::read_to_string(data_dir.join("runs.log")).unwrap();
    assert_eq!(
        log,
        format!(
            "{}|{}|{}\n",
            dir.display(),
            data_dir.display(),
            data_dir.display()
        )
    );
}

// hooks.md § "Hook handler fields": "If you define the same handler in more than one settings
// file, it runs once. A plugin's or skill's copy of the same handler stays separate."
#[tokio::test]
async fn a_plugins_copy_stays_separate_from_the_settings_copy() {
    let scripts = Scripts::new();
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = write_plugin(plugins.path(), "dup");
    let data_dir = data.path().join("dup");
    // The settings' copy: the very same command text, defined twice.
    let same = format!(
        "\"{}\"/scripts/log.sh \"{}\"",
        dir.display(),
        data_dir.display()
    );
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": same},
        {"type": "command", "command": same}
    ]}]}});
    let hooks = build(&scripts, &dir, data.path(), Some(settings));
    // Two definitions in the settings are one handler; the plugin's is another.
    assert_eq!(hooks.commands(HookEvent::PreToolUse).len(), 2);
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    let log = std::fs::read_to_string(data_dir.join("runs.log")).unwrap();
    let mut lines: Vec<&str> = log.lines().collect();
    lines.sort_unstable();
    // The settings' copy runs without the plugin's variables, the plugin's with them.
    let d = data_dir.display();
    assert_eq!(
        lines,
        [format!("{}|{d}|{d}", dir.display()), format!("||{d}")],
        "{log}"
    );
}

// Beyond Claude Code: one plugin's hooks disabled by name (builder and settings key).
#[tokio::test]
async fn disabled_by_name() {
    let scripts = Scripts::new();
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let off = write_plugin(plugins.path(), "off");
    let on = write_plugin(plugins.path(), "on");
    let hooks = CommandHooks::builder()
        .plugin_dir(&off)
        .plugin_dir(&on)
        .settings_json(json!({"disabledPlugins": ["off"]}), "settings.json")
        .plugin_data_dir(data.path())
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap();
    assert_eq!(hooks.commands(HookEvent::PreToolUse).len(), 1);
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert!(!data.path().join("off/runs.log").exists());
    assert!(data.path().join("on/runs.log").exists());

    let hooks = CommandHooks::builder()
        .plugin_dir(&on)
        .disable_plugin("on")
        .plugin_data_dir(data.path())
        .build()
        .unwrap();
    assert!(hooks.commands(HookEvent::PreToolUse).is_empty());
}

// Beyond Claude Code: one hook disabled by its command as written, without
// `disableAllHooks`; the others still run.
#[tokio::test]
async fn one_hook_disabled_by_name() {
    let scripts = Scripts::new();
    let rec = crate::recorder(&scripts);
    let settings = json!({
        "hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": format!("{rec} a")},
            {"type": "command", "command": format!("{rec} b")}
        ]}]},
        "disabledHooks": [format!("{rec} a")]
    });
    let hooks = CommandHooks::builder()
        .settings_json(settings, "settings.json")
        .project_dir(scripts.dir.path())
        .transcripts_dir(scripts.path("transcripts"))
        .build()
        .unwrap();
    run_calls(hooks.into_hooks(), &[("Bash", json!({"command": "ls"}))]).await;
    assert_eq!(crate::runs(&scripts), ["b"]);
}

// plugins-reference.md § "Component path fields": `hooks` in plugin.json names more hook
// files (paths starting with `./`); a path out of the plugin is an error.
#[tokio::test]
async fn manifest_hooks_paths() {
    let scripts = Scripts::new();
    let plugins = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let dir = plugins.path().join("extra");
    std::fs::create_dir_all(dir.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join(".claude-plugin/plugin.json"),
        json!({"name": "extra", "hooks": "./config/more.json"}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("config/more.json"),
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo ${CLAUDE_PLUGIN_ROOT}"}]}]}})
            .to_string(),
    )
    .unwrap();
    let hooks = build(&scripts, &dir, data.path(), None);
    assert_eq!(
        hooks.commands(HookEvent::Stop),
        [format!("echo {}", dir.display())]
    );
    std::fs::write(
        dir.join(".claude-plugin/plugin.json"),
        json!({"name": "extra", "hooks": "../elsewhere.json"}).to_string(),
    )
    .unwrap();
    let err = CommandHooks::builder()
        .plugin_dir(&dir)
        .plugin_data_dir(data.path())
        .build()
        .unwrap_err();
    assert_eq!(err.path(), "hooks");
}
