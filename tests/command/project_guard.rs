//! A project's guard, loaded by a server started from another directory (issue 35, item 5):
//! the project directory defaults to the one holding the `.claude` of the settings file read,
//! a hook whose script does not exist is reported when the hooks are built, a run's warnings
//! are logged through `tracing` with the run's ids and listed in the `POST …/runs` answer.
//!
//! The test process's own directory is the crate's, never the project's: nothing here changes
//! it (other tests run beside these).

use std::{
    future::IntoFuture,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tower_agent::{
    Agent, command::CommandHooks, layers::hooks::HookEvent, model::ScriptedModel, server,
};

use crate::support::{capture_events, command::bash_tool};

/// A project in a temp dir: `.claude/settings.json` whose PreToolUse hook for `bash` is
/// `command`; the guard script, if written, is `.claude/hooks/guard.sh`.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(command: &str, extra: Value) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude/hooks")).unwrap();
        let mut handler = json!({ "type": "command", "command": command });
        handler
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let settings =
            json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [handler] }] } });
        std::fs::write(
            dir.path().join(".claude/settings.json"),
            settings.to_string(),
        )
        .unwrap();
        let project = Project { dir };
        assert_ne!(
            std::env::current_dir().unwrap().canonicalize().unwrap(),
            project.path().canonicalize().unwrap(),
            "the test process runs elsewhere"
        );
        project
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn settings(&self) -> PathBuf {
        self.path().join(".claude/settings.json")
    }

    /// The guard: records each call in `guard.log`, denies `rm -rf` with exit 2.
    fn write_guard(&self) {
        let guard = self.path().join(".claude/hooks/guard.sh");
        std::fs::write(
            &guard,
            "#!/bin/sh\ninput=$(cat)\necho called >> \"$CLAUDE_PROJECT_DIR/guard.log\"\n\
             case \"$input\" in *'rm -rf'*) echo 'guard: rm -rf is not allowed' >&2; exit 2;; esac\n",
        )
        .unwrap();
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn guard_calls(&self) -> usize {
        std::fs::read_to_string(self.path().join("guard.log"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// The hooks as a user loads them: the settings file, no project directory (transcripts
    /// under the temp dir, never the user's state directory).
    fn hooks(&self) -> CommandHooks {
        CommandHooks::builder()
            .settings_file(self.settings())
            .transcripts_dir(self.path().join("transcripts"))
            .build()
            .unwrap()
    }
}

const GUARD: &str = "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh";

/// An agent whose model asks for `rm -rf /` once, then answers; and what its `bash` tool got.
fn agent(hooks: CommandHooks) -> (Agent, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({ "command": "rm -rf /" }))
                .text("done")
                .per_run(),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    (agent, seen)
}

/// Serves `agent` on 127.0.0.1, posts one run to it, stops the server; the answer's JSON.
async fn post_run(agent: Agent) -> Value {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let serve = server::serve(listener, agent, async move {
        let _ = stopped.await;
    });
    let url = format!("http://{}/threads/t1/runs", serve.local_addr().unwrap());
    let handle = tokio::spawn(serve.into_future());
    let response = reqwest::Client::new()
        .post(url)
        .json(&json!({ "prompt": "clean up" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let _ = stop.send(());
    handle.await.unwrap().unwrap();
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_elsewhere_runs_the_projects_guard() {
    let project = Project::new(GUARD, json!({}));
    project.write_guard();
    let hooks = project.hooks();
    let (agent, seen) = agent(hooks.clone());
    let body = post_run(agent).await;
    assert!(seen.lock().unwrap().is_empty(), "rm -rf never ran: {body}");
    assert_eq!(project.guard_calls(), 1, "the guard ran: {body}");
    assert_eq!(body["outcome"]["kind"], "finished");
    assert_eq!(body["warnings"], json!([]), "{body}");
    assert_eq!(hooks.project_dir(), project.path());
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
}

#[test]
fn only_a_project_settings_file_names_the_project() {
    let dir = tempfile::tempdir().unwrap();
    // Another settings file names no project: the current directory, as before.
    let other = dir.path().join("hooks.json");
    std::fs::write(&other, "{}").unwrap();
    let hooks = CommandHooks::builder()
        .settings_file(&other)
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(hooks.project_dir(), std::env::current_dir().unwrap());
    // A project's local settings do.
    let local = dir.path().join("app/.claude/settings.local.json");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::fs::write(&local, "{}").unwrap();
    let hooks = CommandHooks::builder()
        .settings_file(&other)
        .settings_file(&local)
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(hooks.project_dir(), dir.path().join("app"));
    // An explicit project directory wins over the settings file's.
    let project = Project::new(GUARD, json!({}));
    project.write_guard();
    let hooks = CommandHooks::builder()
        .settings_file(project.settings())
        .project_dir(dir.path())
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(hooks.project_dir(), dir.path());
    // Two projects' settings: the first wins, and a warning says so.
    let hooks = CommandHooks::builder()
        .settings_file(project.settings())
        .settings_file(&local)
        .without_transcripts()
        .build()
        .unwrap();
    assert_eq!(hooks.project_dir(), project.path());
    assert!(
        hooks
            .warnings()
            .iter()
            .any(|w| w.contains("set CommandHooksBuilder::project_dir")),
        "{:?}",
        hooks.warnings()
    );
}

#[test]
fn a_missing_script_is_reported_when_the_hooks_are_built() {
    let project = Project::new(GUARD, json!({}));
    // Not written: the guard's script does not exist.
    let hooks = project.hooks();
    let missing = project.path().join(".claude/hooks/guard.sh");
    let warnings = hooks.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let warning = &warnings[0];
    for part in [
        format!(
            "{}: hooks.PreToolUse[0].hooks[0]",
            project.settings().display()
        ),
        format!("hook `{GUARD}`"),
        format!("`{}` does not exist", missing.display()),
        "fails open".to_owned(),
    ] {
        assert!(warning.contains(&part), "{part:?} in {warning}");
    }
    // Loaded all the same (Claude Code loads it too): it fails at run time, loudly.
    assert_eq!(hooks.commands(HookEvent::PreToolUse), [GUARD]);

    // A fail-closed guard says it will block; a script that is there but not executable is
    // named too.
    let project = Project::new(GUARD, json!({ "failClosed": true }));
    let warnings = project.hooks().warnings().to_vec();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("fail-closed"), "{}", warnings[0]);
    let guard = project.path().join(".claude/hooks/guard.sh");
    std::fs::write(&guard, "#!/bin/sh\n").unwrap();
    let warnings = project.hooks().warnings().to_vec();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("is not executable"), "{}", warnings[0]);
}

#[test]
fn ordinary_commands_and_present_scripts_raise_no_alarm() {
    let project = Project::new(GUARD, json!({}));
    project.write_guard();
    std::fs::write(project.path().join("check.py"), "print('{}')\n").unwrap();
    let hooks = project.path().join("more-settings.json");
    let on = |command: &str| json!({ "matcher": "bash", "hooks": [{ "type": "command", "command": command }] });
    std::fs::write(
        &hooks,
        json!({ "hooks": { "PreToolUse": [
            on("echo hi"),
            on("jq -r .tool_name"),
            on("python3 -c 'import sys; sys.exit(0)'"),
            on("python3 check.py"),
            on("bash \"$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh\""),
            on("cd \"$CLAUDE_PROJECT_DIR\" && ./.claude/hooks/guard.sh"),
            on("\"$SOME_OTHER_DIR\"/x.sh"),
        ]}})
        .to_string(),
    )
    .unwrap();
    let hooks = CommandHooks::builder()
        .settings_file(project.settings())
        .settings_file(&hooks)
        .without_transcripts()
        .build()
        .unwrap();
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_that_cannot_run_fails_open_loudly() {
    let project = Project::new(GUARD, json!({}));
    let (agent, seen) = agent(project.hooks());
    let body = post_run(agent).await;
    // Today's semantics: a hook that cannot run fails open (it is not fail-closed) …
    assert_eq!(seen.lock().unwrap().len(), 1, "{body}");
    // … and the answer says so, naming the hook.
    let warnings = body["warnings"].as_array().expect("a `warnings` array");
    assert_eq!(warnings.len(), 1, "{body}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.contains(&format!(
            "PreToolUse hook `{GUARD}` cannot be run (exit 127)"
        )),
        "{warning}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn run_warnings_are_logged_at_warn_with_the_run_ids() {
    let project = Project::new(GUARD, json!({}));
    let (agent, _) = agent(project.hooks());
    let (log, _guard) = capture_events();
    let resp = agent.run("clean up").await.unwrap();
    let warnings: Vec<_> = log
        .events()
        .into_iter()
        .filter(|e| {
            e.level == tracing::Level::WARN
                && e.field("message")
                    .is_some_and(|m| m.contains("cannot be run"))
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{:#?}", log.events());
    let warning = &warnings[0];
    assert_eq!(warning.field("run_id"), Some(resp.run_id.as_str()));
    assert_eq!(warning.field("session_id"), Some(resp.thread_id.as_str()));
    assert_eq!(warning.field("step"), Some("0"));
    assert!(
        warning.field("message").unwrap().contains(GUARD),
        "{warning:?}"
    );
}
