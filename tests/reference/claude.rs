//! Plays a scenario through the real Claude Code (installed by `.ci/reference-agents`), against
//! the model server, headless: `--input-format stream-json --output-format stream-json`, one
//! user message per prompt step, the SDK's `set_model` control request per model step, each
//! sent once the previous one is answered.

use std::{path::PathBuf, process::Stdio, sync::OnceLock, time::Duration};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::{
    scenario::{Play, Scenario, Step},
    server::ModelServer,
};

/// The version the vectors are recorded from (`.ci/reference-agents` pins it).
pub(crate) const VERSION: &str = "2.1.328";

/// The `claude` program, installed on first use.
pub(crate) fn program() -> PathBuf {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/reference-agents");
            let out = std::process::Command::new("bash")
                .arg(script)
                .stderr(Stdio::inherit())
                .output()
                .expect("run .ci/reference-agents");
            assert!(out.status.success(), ".ci/reference-agents failed");
            PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        })
        .clone()
}

/// What Claude Code printed: its stream-json lines, of every process the scenario starts (a
/// `resume` step starts the next one, resuming the session).
pub(crate) async fn play(scenario: &Scenario, play: &Play, server: &ModelServer) -> Vec<Value> {
    let mut printed = Vec::new();
    let mut steps: &[Step] = &scenario.steps;
    let mut session: Option<String> = None;
    while !steps.is_empty() {
        let end = steps[1..]
            .iter()
            .position(|s| matches!(s, Step::Resume(_)))
            .map_or(steps.len(), |i| i + 1);
        let lines = process(scenario, play, server, &steps[..end], session.as_deref()).await;
        session = lines
            .iter()
            .find_map(|l| l["session_id"].as_str().map(str::to_owned))
            .or(session);
        printed.extend(lines);
        steps = &steps[end..];
    }
    printed
}

/// One `claude` process playing `steps`, resuming `session` if given.
async fn process(
    scenario: &Scenario,
    play: &Play,
    server: &ModelServer,
    steps: &[Step],
    session: Option<&str>,
) -> Vec<Value> {
    let mut cmd = tokio::process::Command::new(program());
    cmd.args([
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
    ])
    .args(["--verbose", "--model", &scenario.model])
    .arg("--allowedTools")
    .arg(scenario.allowed_tools.join(","));
    if let Some(id) = session {
        cmd.args(["--resume", id]);
    } else if scenario.init {
        cmd.arg("--init");
    }
    let mut child = cmd
        .current_dir(play.cwd(scenario))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", play.home())
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-reference")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start claude");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let session = async {
        for (i, step) in steps.iter().enumerate() {
            let (line, done): (Value, fn(&Value) -> bool) = match step {
                Step::Prompt(text) | Step::Resume(text) => (
                    json!({"type": "user", "message": {"role": "user", "content": text}}),
                    |v| v["type"] == "result",
                ),
                Step::SetModel(model) => (
                    json!({"type": "control_request", "request_id": format!("r{i}"),
                        "request": {"subtype": "set_model", "model": model}}),
                    |v| v["type"] == "control_response",
                ),
            };
            stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            while let Some(l) = lines.next_line().await.unwrap() {
                let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                let end = done(&v);
                printed.push(v);
                if end {
                    break;
                }
            }
        }
        drop(stdin);
        while let Some(l) = lines.next_line().await.unwrap() {
            printed.push(serde_json::from_str(&l).unwrap_or(Value::Null));
        }
        child.wait().await.unwrap()
    };
    let Ok(status) = tokio::time::timeout(Duration::from_secs(120), session).await else {
        let mut events: Vec<_> = play
            .hooks()
            .iter()
            .map(|h| h.input["hook_event_name"].clone())
            .collect();
        let requests = server.requests();
        let shapes: Vec<Vec<String>> = requests
            .iter()
            .take(4)
            .map(|r| {
                let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
                messages
                    .iter()
                    .map(|m| {
                        format!(
                            "{}:{}",
                            m["role"],
                            m["content"]
                                .to_string()
                                .chars()
                                .take(80)
                                .collect::<String>()
                        )
                    })
                    .collect()
            })
            .collect();
        events.truncate(40);
        panic!(
            "Claude Code did not finish the scenario in 120 s; {} model requests, the first: \
             {shapes:#?}; hooks: {events:?}",
            requests.len()
        );
    };
    assert!(status.success(), "claude exited with {status}");
    printed
}
