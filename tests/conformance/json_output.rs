//! hooks.md § "JSON output" and § "Common input fields".

use serde_json::json;
use tower_agent::{agent::Outcome, command::CommandHooks};

use crate::{
    exit_codes::{calls_bash, dumped, dumping},
    support::command::{Scripts, agent, on, tool_text, warnings},
};

// hooks.md § "JSON output": `continue: false` "Takes precedence over any event-specific
// decision fields"; `stopReason` is the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_false_takes_precedence_over_the_decision() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"continue": false, "stopReason": "build failed", "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'"#,
    );
    let model = calls_bash("ls");
    let (builder, seen) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    let resp = builder.build().run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(
        resp.outcome,
        Outcome::Aborted {
            error: "build failed".into()
        }
    );
}

// hooks.md § "JSON output": `systemMessage` is a "Warning message shown to the user";
// `suppressOutput` "Has no effect".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_message_reaches_the_user_and_suppress_output_changes_nothing() {
    let s = Scripts::new();
    let hook = s.bash(
        "h.sh",
        r#"cat >/dev/null; echo '{"systemMessage": "heads up", "suppressOutput": true}'"#,
    );
    let model = calls_bash("ls");
    let (hooks, warned) = warnings(
        s.hooks(on("PostToolUse", "bash", &hook, json!({})))
            .into_hooks(),
    );
    let (builder, _) = agent(&model, hooks);
    let resp = builder.build().run("go").await.unwrap();
    assert_eq!(tool_text(&resp), "ran: ls");
    let warned = warned.lock().unwrap().join("\n");
    assert!(warned.contains("heads up"), "{warned}");
}

// hooks.md § "Common input fields": `cwd` is the "Current working directory when the hook is
// invoked": the directory the hook runs in, which follows the agent's working directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_is_where_the_hook_runs_and_follows_the_agent() {
    let s = Scripts::new();
    let pwd = s.path("pwd");
    let hook = dumping(&s, "pre", &format!("pwd -P > '{}'", pwd.display()));
    let moved = tempfile::tempdir().unwrap();
    let moved_path = moved.path().canonicalize().unwrap();
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    builder.cwd(&moved_path).build().run("go").await.unwrap();
    let input = &dumped(&s, "pre")[0];
    assert_eq!(input["cwd"], json!(moved_path.to_string_lossy()));
    assert_eq!(s.read("pwd").trim(), moved_path.to_string_lossy());

    // Without a working directory of its own, the agent's hooks run in the project directory.
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, s.pre_tool_use(&hook, json!({})).into_hooks());
    builder.build().run("go").await.unwrap();
    let project = s.dir.path().canonicalize().unwrap();
    assert_eq!(s.read("pwd").trim(), project.to_string_lossy());
    assert_eq!(
        std::path::Path::new(dumped(&s, "pre")[1]["cwd"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        project
    );
}

// hooks.md § "Common input fields": `permission_mode` is one of the documented modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_mode_is_reported_and_checked() {
    let s = Scripts::new();
    let hook = dumping(&s, "pre", "");
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": on("PreToolUse", "bash", &hook, json!({})) }),
            "inline",
        )
        .project_dir(s.dir.path())
        .transcripts_dir(s.path("transcripts"))
        .permission_mode("plan")
        .build()
        .unwrap();
    let model = calls_bash("ls");
    let (builder, _) = agent(&model, hooks.into_hooks());
    builder.build().run("go").await.unwrap();
    assert_eq!(dumped(&s, "pre")[0]["permission_mode"], "plan");

    let err = CommandHooks::builder()
        .permission_mode("yolo")
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown permission mode `yolo`"),
        "{err}"
    );
}
