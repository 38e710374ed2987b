//! MCP client tools against the reference servers this project did not write:
//! `@modelcontextprotocol/server-everything` and `@modelcontextprotocol/server-filesystem`
//! from npm, installed on demand (pinned versions) into `<target dir>/mcp-servers/` by the
//! project's `.ci/mcp-servers` (a file lock keeps concurrent test binaries from racing; a
//! marker file records a finished install). Needs `node` and `npm` (the script installs them
//! with apt-get on Debian/Ubuntu as root), and the npm registry on first use.

use crate::support;

use std::path::Path;

use crate::mcp_servers::servers_dir;

use serde_json::{Value, json};
use support::command::{Scripts, on};
use tower_agent::{
    Agent, agent::Outcome, mcp::client::McpServers, message::Content, model::ScriptedModel,
};

fn bin(dir: &Path, name: &str) -> String {
    dir.join("node_modules/.bin")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_agent_run_over_the_reference_servers() {
    let dir = servers_dir();
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("hello.txt"), "hello from a real file\n").unwrap();

    // The servers, in Claude Code's `.mcp.json` format.
    let mcp = McpServers::from_json(&json!({"mcpServers": {
        "everything": {"command": bin(&dir, "mcp-server-everything"), "args": ["stdio"]},
        "filesystem": {"command": bin(&dir, "mcp-server-filesystem"),
                       "args": [root_path.to_string_lossy()]},
    }}))
    .unwrap()
    .require_all(true)
    .build();

    // A PreToolUse hook on `mcp__everything__.*` that logs every call it sees and denies
    // `get-env`.
    let s = Scripts::new();
    let log = s.path("seen.log");
    let hook = s.bash(
        "gate.sh",
        &format!(
            r#"input=$(cat)
name=$(printf '%s' "$input" | grep -o '"tool_name":"[^"]*"' | head -n 1 | cut -d'"' -f4)
echo "$name" >> {log}
if [ "$name" = mcp__everything__get-env ]; then
  echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no environment dumps"}}}}'
fi"#,
            log = log.display()
        ),
    );
    let hooks = s.hooks(on("PreToolUse", "mcp__everything__.*", &hook, json!({})));

    let file = root_path.join("hello.txt");
    let model = ScriptedModel::new()
        .tool_calls([
            ("mcp__everything__echo", json!({"message": "hello"})),
            ("mcp__everything__get-sum", json!({"a": 2, "b": 3})),
            (
                "mcp__everything__get-structured-content",
                json!({"location": "New York"}),
            ),
            ("mcp__everything__get-tiny-image", json!({})),
            ("mcp__everything__get-env", json!({})),
            ("mcp__everything__get-sum", json!({"a": "two"})),
            (
                "mcp__filesystem__read_text_file",
                json!({"path": file.to_string_lossy()}),
            ),
            (
                "mcp__filesystem__read_text_file",
                json!({"path": "/etc/passwd"}),
            ),
        ])
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let resp = agent.run("use the tools").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);

    // Tool listing: the documented tools of both servers, with their schemas.
    let first = &model.requests()[0];
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    for want in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-structured-content",
        "mcp__everything__get-tiny-image",
        "mcp__filesystem__read_text_file",
        "mcp__filesystem__list_directory",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let sum = first
        .tools
        .iter()
        .find(|t| t.name == "mcp__everything__get-sum")
        .unwrap();
    assert_eq!(sum.parameters["properties"]["a"]["type"], "number");

    let r = support::tool_messages(&resp.messages);
    assert_eq!(r.len(), 8);
    // A call with arguments.
    assert_eq!(r[0].text(), "Echo: hello");
    assert!(r[1].text().contains('5'), "{}", r[1].text());
    assert!(!r[1].is_error);
    // A structured result.
    let weather: Value = serde_json::from_str(&r[2].text()).unwrap();
    assert!(weather.get("temperature").is_some(), "{weather}");
    // An image.
    assert!(
        r[3].content.iter().any(
            |c| matches!(c, Content::Image { url } if url.starts_with("data:image/png;base64,"))
        ),
        "{:?}",
        r[3].content
    );
    // The hook denied `get-env`: the server never ran it.
    assert!(r[4].is_error);
    assert!(
        r[4].text().contains("no environment dumps"),
        "{}",
        r[4].text()
    );
    // An error from the server (bad arguments), as an error output.
    assert!(r[5].is_error);
    assert!(r[5].text().contains("expected number"), "{}", r[5].text());
    // The filesystem server read a real file, and refused one outside its root.
    assert_eq!(r[6].text(), "hello from a real file\n");
    assert!(r[7].is_error);
    assert!(r[7].text().contains("Access denied"), "{}", r[7].text());

    // The hook matched every `mcp__everything__` call and no filesystem call (the calls of
    // one step run concurrently: compared sorted).
    let seen = s.read("seen.log");
    let mut seen: Vec<&str> = seen.lines().collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [
            "mcp__everything__echo",
            "mcp__everything__get-env",
            "mcp__everything__get-structured-content",
            "mcp__everything__get-sum",
            "mcp__everything__get-sum",
            "mcp__everything__get-tiny-image",
        ]
    );

    // No server process is left once the agent (and every clone of the set) is dropped.
    let pids: Vec<u32> = ["everything", "filesystem"]
        .iter()
        .map(|n| mcp.pid(n).expect("connected stdio server"))
        .collect();
    assert!(pids.iter().all(|p| support::alive(*p)));
    drop(resp);
    drop(agent);
    drop(mcp);
    for pid in pids {
        assert!(
            support::wait_dead(pid).await,
            "server process {pid} is still alive"
        );
    }
}
