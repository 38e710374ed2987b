//! hooks.md § "Reference scripts by path" and § "Common input fields", plugins-reference.md
//! § "Environment variables": `CLAUDE_PROJECT_DIR` is the project root whatever the
//! session's current directory, the hook runs in the session's current directory (its
//! input's `cwd`), and a plugin's hooks also get `CLAUDE_PLUGIN_ROOT` / `CLAUDE_PLUGIN_DATA`.
//!
//! Every test runs a whole agent whose working directory, the hooks' project directory and
//! the directory holding the hook scripts (the plugin folder, for a plugin) are three
//! different real directories, so a handler told the wrong one shows.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentRequest, AgentResponse, agent::Outcome, command::CommandHooks, model::ScriptedModel,
};

use crate::{
    loopback::{Reply, Server},
    support::command::{bash_tool, tool_texts},
};

/// The directories of one test, each a real temp dir, canonical (`pwd -P` compares equal).
struct Dirs {
    _temps: Vec<tempfile::TempDir>,
    /// The agent's working directory.
    cwd: PathBuf,
    /// The hooks' project directory.
    project: PathBuf,
    /// Where the settings' hook scripts live.
    scripts: PathBuf,
    /// Where the plugin folder lives.
    plugins: PathBuf,
    /// The plugins' data root.
    data: PathBuf,
    /// The records, and the transcripts.
    out: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let temps: Vec<tempfile::TempDir> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
        let path = |i: usize| temps[i].path().canonicalize().unwrap();
        Dirs {
            cwd: path(0),
            project: path(1),
            scripts: path(2),
            plugins: path(3),
            data: path(4),
            out: path(5),
            _temps: temps,
        }
    }

    fn log(&self) -> PathBuf {
        self.out.join("records.jsonl")
    }

    fn transcripts(&self) -> PathBuf {
        self.out.join("transcripts")
    }

    /// The records written so far, one per handler call.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn executable(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Python that appends, for one hook input `data`, what the handler sees: its label and
/// arguments, the event, its directory variables, its working directory and the input's
/// `cwd` and `transcript_path`.
fn record_fn(log: &Path) -> String {
    format!(
        r#"import json, os, sys
def record(label, args, data):
    names = ["CLAUDE_PROJECT_DIR", "TOWER_AGENT_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA"]
    rec = {{
        "label": label,
        "args": args,
        "event": data["hook_event_name"],
        "env": {{n: os.environ.get(n) for n in names}},
        "pwd": os.getcwd(),
        "cwd": data["cwd"],
        "transcript_path": data["transcript_path"],
        "transcript_exists": os.path.isfile(data["transcript_path"]),
    }}
    with open({log:?}, "a") as f:
        f.write(json.dumps(rec) + "\n")
"#,
        log = log.to_string_lossy()
    )
}

/// A one-shot recorder: `record.py LABEL ARGS…`.
fn write_recorder(path: &Path, log: &Path) {
    let body = format!(
        "#!/usr/bin/env python3\n{}\nrecord(sys.argv[1], sys.argv[2:], json.load(sys.stdin))\n",
        record_fn(log)
    );
    executable(path, &body);
}

/// A persistent recorder: one record per event line, then an answer that decides nothing.
fn write_persistent_recorder(path: &Path, log: &Path) {
    let body = format!(
        r#"#!/usr/bin/env python3
{}
for line in sys.stdin:
    event = json.loads(line)
    record("persistent", sys.argv[1:], event["input"])
    print(json.dumps({{"id": event["id"], "exit": 0}}), flush=True)
"#,
        record_fn(log)
    );
    executable(path, &body);
}

/// A plugin `rec-plugin` whose folder holds its own recorder, run on PreToolUse in shell
/// form and in exec form.
fn write_plugin(dirs: &Dirs) -> PathBuf {
    let root = dirs.plugins.join("rec-plugin");
    std::fs::create_dir_all(root.join(".claude-plugin")).unwrap();
    std::fs::create_dir_all(root.join("hooks")).unwrap();
    std::fs::write(
        root.join(".claude-plugin/plugin.json"),
        json!({ "name": "rec-plugin" }).to_string(),
    )
    .unwrap();
    write_recorder(&root.join("record.py"), &dirs.log());
    let hooks = json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [
        { "type": "command",
          "command": "\"${CLAUDE_PLUGIN_ROOT}\"/record.py plugin-shell \"$CLAUDE_PROJECT_DIR\"" },
        { "type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/record.py",
          "args": ["plugin-exec", "${CLAUDE_PROJECT_DIR}", "${CLAUDE_PLUGIN_DATA}"] },
    ]}]}});
    std::fs::write(root.join("hooks/hooks.json"), hooks.to_string()).unwrap();
    root
}

/// The settings: the shell-form recorder on every event the run fires, and on PreToolUse
/// an exec-form recorder and a persistent one.
fn settings(dirs: &Dirs) -> Value {
    let record = dirs.scripts.join("record.py");
    write_recorder(&record, &dirs.log());
    let persistent = dirs.scripts.join("persistent.py");
    write_persistent_recorder(&persistent, &dirs.log());
    let shell = json!({ "type": "command",
        "command": format!("'{}' shell \"$CLAUDE_PROJECT_DIR\"", record.display()) });
    let mut hooks = serde_json::Map::new();
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolBatch",
        "Stop",
        "SessionEnd",
    ] {
        hooks.insert(event.into(), json!([{ "hooks": [shell.clone()] }]));
    }
    hooks.insert(
        "PreToolUse".into(),
        json!([{ "matcher": "bash", "hooks": [
            shell,
            { "type": "command", "command": record, "args":
                ["exec", "${CLAUDE_PROJECT_DIR}", "${TOWER_AGENT_PROJECT_DIR}"] },
            { "type": "command", "command": persistent, "args": ["${CLAUDE_PROJECT_DIR}"],
              "persistent": true, "timeout": 10 },
        ]}]),
    );
    json!({ "hooks": hooks })
}

/// Runs the agent (working directory `dirs.cwd`, thread `dirs`): one `bash` call, then text.
async fn run(dirs: &Dirs, hooks: CommandHooks) -> AgentResponse {
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({ "command": "ls" }))
                .text("done"),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .cwd(&dirs.cwd)
        .build();
    let resp = agent
        .run(AgentRequest::new("go").thread("dirs"))
        .await
        .unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(seen.lock().unwrap().len(), 1, "the tool ran");
    resp
}

/// SessionEnd runs in the background, after the run: waits (at most
/// [`PATIENCE`](crate::support::PATIENCE)) for its record.
async fn wait_for_session_end(dirs: &Dirs) {
    crate::support::eventually("a SessionEnd record", || {
        dirs.records()
            .iter()
            .any(|r| r["event"] == "SessionEnd")
            .then_some(())
    })
    .await;
}

fn text(p: &Path) -> Value {
    Value::String(p.to_string_lossy().into_owned())
}

// hooks.md § "Reference scripts by path": `CLAUDE_PROJECT_DIR` is the project root, also
// when the session's current directory is elsewhere; § "Common input fields": `cwd` is the
// current working directory, where the hook runs, and `transcript_path` the transcript;
// plugins-reference.md § "Environment variables": a plugin's hooks get
// `CLAUDE_PLUGIN_ROOT` (the plugin folder) and `CLAUDE_PLUGIN_DATA`. Every handler kind
// (shell form, exec form with `${CLAUDE_PROJECT_DIR}` substituted, persistent, a plugin's in
// both forms) and every event the run fires, checked for every directory it is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_handler_sees_the_project_dir_and_runs_in_the_agents_cwd() {
    let dirs = Dirs::new();
    let plugin = write_plugin(&dirs);
    let hooks = CommandHooks::builder()
        .settings_json(settings(&dirs), "settings.json")
        .plugin_dir(&plugin)
        .plugin_data_dir(&dirs.data)
        .project_dir(&dirs.project)
        .transcripts_dir(dirs.transcripts())
        .build()
        .unwrap();
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());
    run(&dirs, hooks).await;
    wait_for_session_end(&dirs).await;

    let project = text(&dirs.project);
    let plugin_data = text(&dirs.data.join("rec-plugin"));
    let (root, data) = (text(&plugin), plugin_data.clone());
    let settings = |label, event, args: &[&Value], runs_in| Expected {
        label,
        event,
        args: args.iter().map(|a| (*a).clone()).collect(),
        runs_in,
        plugin: None,
    };
    let mut expected: Vec<Expected<'_>> = [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PostToolBatch",
        "Stop",
        "SessionEnd",
    ]
    .into_iter()
    .map(|event| settings("shell", event, &[&project], &dirs.cwd))
    .collect();
    expected.extend([
        settings("exec", "PreToolUse", &[&project, &project], &dirs.cwd),
        // Shared by every run: started once, in the project directory (documented).
        settings("persistent", "PreToolUse", &[&project], &dirs.project),
        Expected {
            plugin: Some((root.clone(), data.clone())),
            ..settings("plugin-shell", "PreToolUse", &[&project], &dirs.cwd)
        },
        Expected {
            plugin: Some((root, data)),
            ..settings(
                "plugin-exec",
                "PreToolUse",
                &[&project, &plugin_data],
                &dirs.cwd,
            )
        },
    ]);
    let records = dirs.records();
    assert_eq!(records.len(), expected.len(), "{records:#?}");
    for e in &expected {
        check(&dirs, &records, e);
    }
}

/// What one handler call must have seen.
struct Expected<'a> {
    label: &'a str,
    event: &'a str,
    args: Vec<Value>,
    /// Its working directory.
    runs_in: &'a Path,
    /// A plugin's `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`; `None`: the test process's
    /// own (inherited, usually unset).
    plugin: Option<(Value, Value)>,
}

/// The one record of `e.label` on `e.event` saw every directory as `e` says.
fn check(dirs: &Dirs, records: &[Value], e: &Expected<'_>) {
    let found: Vec<&Value> = records
        .iter()
        .filter(|r| r["label"] == e.label && r["event"] == e.event)
        .collect();
    let [r] = found.as_slice() else {
        panic!("{} on {}: {found:?}", e.label, e.event);
    };
    let what = format!("{} on {}: {r}", e.label, e.event);
    let inherited = |name: &str| std::env::var(name).map_or(Value::Null, Value::String);
    let (root, data) = e.plugin.clone().unwrap_or_else(|| {
        (
            inherited("CLAUDE_PLUGIN_ROOT"),
            inherited("CLAUDE_PLUGIN_DATA"),
        )
    });
    let project = text(&dirs.project);
    assert_eq!(r["env"]["CLAUDE_PROJECT_DIR"], project, "{what}");
    assert_eq!(r["env"]["TOWER_AGENT_PROJECT_DIR"], project, "{what}");
    assert_eq!(r["env"]["CLAUDE_PLUGIN_ROOT"], root, "{what}");
    assert_eq!(r["env"]["CLAUDE_PLUGIN_DATA"], data, "{what}");
    assert_eq!(r["args"], Value::Array(e.args.clone()), "{what}");
    assert_eq!(r["pwd"], text(e.runs_in), "{what}");
    assert_eq!(r["cwd"], text(&dirs.cwd), "{what}");
    let transcript = text(&dirs.transcripts().join("dirs.jsonl"));
    assert_eq!(r["transcript_path"], transcript, "{what}");
    assert_eq!(r["transcript_exists"], true, "{what}");
}

// hooks.md § "HTTP hook fields": header values name environment variables listed in
// `allowedEnvVars`; the hook's variables are those a command gets: `CLAUDE_PROJECT_DIR` and
// `TOWER_AGENT_PROJECT_DIR` name the project, a plugin's handler sees its
// `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`. The body's `cwd` and `transcript_path` are
// the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_handlers_see_the_project_dir_in_their_headers() {
    let dirs = Dirs::new();
    let server = Server::start();
    for _ in 0..2 {
        server.reply(Reply::Whole {
            status: 200,
            headers: vec![],
            body: Vec::new(),
        });
    }
    let handler = |label: &str| {
        json!({ "type": "http", "url": format!("{}/{label}", server.url()), "timeout": 10,
            "headers": {
                "X-Project": "$CLAUDE_PROJECT_DIR",
                "X-Tower-Project": "${TOWER_AGENT_PROJECT_DIR}",
                "X-Plugin-Root": "${CLAUDE_PLUGIN_ROOT}",
                "X-Plugin-Data": "$CLAUDE_PLUGIN_DATA",
            },
            "allowedEnvVars": ["CLAUDE_PROJECT_DIR", "TOWER_AGENT_PROJECT_DIR",
                "CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA"] })
    };
    let plugin = dirs.plugins.join("http-plugin");
    std::fs::create_dir_all(plugin.join("hooks")).unwrap();
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [handler("plugin")] }]}})
            .to_string(),
    )
    .unwrap();
    let settings = json!({ "hooks": { "PreToolUse": [{ "matcher": "bash",
        "hooks": [handler("settings")] }]}});
    let hooks = CommandHooks::builder()
        .settings_json(settings, "settings.json")
        .plugin_dir(&plugin)
        .plugin_data_dir(&dirs.data)
        .project_dir(&dirs.project)
        .transcripts_dir(dirs.transcripts())
        .build()
        .unwrap();
    run(&dirs, hooks).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let project = dirs.project.to_string_lossy();
    let plugin_data = dirs.data.join("http-plugin");
    let inherited = |name: &str| std::env::var(name).unwrap_or_default();
    for (label, root, data) in [
        (
            "settings",
            inherited("CLAUDE_PLUGIN_ROOT"),
            inherited("CLAUDE_PLUGIN_DATA"),
        ),
        (
            "plugin",
            plugin.to_string_lossy().into_owned(),
            plugin_data.to_string_lossy().into_owned(),
        ),
    ] {
        let req = requests
            .iter()
            .find(|r| r.path == format!("/{label}"))
            .unwrap_or_else(|| panic!("no request of {label}: {requests:?}"));
        assert_eq!(req.header("x-project"), Some(&*project), "{label}");
        assert_eq!(req.header("x-tower-project"), Some(&*project), "{label}");
        assert_eq!(req.header("x-plugin-root"), Some(&*root), "{label}");
        assert_eq!(req.header("x-plugin-data"), Some(&*data), "{label}");
        assert_eq!(req.body["cwd"], text(&dirs.cwd), "{label}");
        assert_eq!(
            req.body["transcript_path"],
            text(&dirs.transcripts().join("dirs.jsonl")),
            "{label}"
        );
    }
}

// hooks.md § "Reference scripts by path": a project's `.claude/settings.json` names its guard
// `$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh` so that it is found wherever the session's
// current directory is. The agent works elsewhere: the guard still runs, and denies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_guard_named_by_claude_project_dir_denies_from_another_cwd() {
    let dirs = Dirs::new();
    let claude = dirs.project.join(".claude");
    std::fs::create_dir_all(claude.join("hooks")).unwrap();
    executable(
        &claude.join("hooks/guard.sh"),
        "#!/bin/sh\nif grep -q 'rm -rf'; then echo 'guard: rm -rf is not allowed' >&2; exit 2; fi\n",
    );
    std::fs::write(
        claude.join("settings.json"),
        json!({ "hooks": { "PreToolUse": [{ "matcher": "bash", "hooks": [
            { "type": "command", "command": "$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh" }
        ]}]}})
        .to_string(),
    )
    .unwrap();
    let hooks = CommandHooks::builder()
        .settings_file(claude.join("settings.json"))
        .project_dir(&dirs.project)
        .transcripts_dir(dirs.transcripts())
        .build()
        .unwrap();
    // The agent's directory has no `.claude` of its own.
    assert!(!dirs.cwd.join(".claude").exists());
    let seen = Arc::default();
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({ "command": "rm -rf /" }))
                .tool_call("bash", json!({ "command": "ls" }))
                .text("done"),
        )
        .tool(bash_tool(&seen))
        .hooks(hooks.into_hooks().compile().unwrap())
        .cwd(&dirs.cwd)
        .build();
    let resp = agent.run("clean up, then list").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    assert_eq!(
        tool_texts(&resp),
        [
            "PreToolUse:bash hook error: [$CLAUDE_PROJECT_DIR/.claude/hooks/guard.sh]: guard: rm -rf is not allowed",
            "ran: ls"
        ]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [json!({ "command": "ls" })],
        "only the safe call ran"
    );
}
