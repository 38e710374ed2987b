//! Claude Code–style hook scripts driving an agent: `examples/hooks/settings.json`, unchanged.
//!
//! ```text
//! cargo run --example command_hooks
//! ```
//!
//! The scripts (bash and python3) in `examples/hooks/`:
//!
//! - `block_rm.sh` (PreToolUse, bash): blocks `rm -rf` with exit code 2; the model sees stderr;
//! - `rewrite_input.py` (PreToolUse, bash): turns `git push` into a dry run (`updatedInput`);
//! - `persistent_hook.py` (PreToolUse, all tools, **persistent**): one process audits every
//!   call and numbers it (`additionalContext`);
//! - `after_write.sh` (PostToolUse, write_file): adds context after a write;
//! - `stop_once.py` (Stop): sends the agent back once for a summary, honouring
//!   `stop_hook_active`.
//!
//! A scripted model (offline) tries each of these; the program prints the conversation and
//! checks what the hooks did.
//!
//! A second agent shows the other handler types and filters, configured inline:
//!
//! - an **`http`** PostToolUse hook, POSTed to a policy server on 127.0.0.1 (started here), whose
//!   JSON answer adds context next to the result;
//! - a **`prompt`** Stop hook: a (scripted) model judges whether the agent may stop, and sends it
//!   back once;
//! - an **`if`** filter, `Bash(git push *)`: the blocking script runs only for a `git push`
//!   subcommand (`ls && git push origin main`), not for `ls`;
//! - a **plugin folder**, `examples/hooks/audit-plugin/` (`.claude-plugin/plugin.json`,
//!   `hooks/hooks.json`): its PostToolUse script logs every call into `$CLAUDE_PLUGIN_DATA`.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use axum::{Json, Router, extract::State, routing::post};
use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentResponse, BoxError, agent::Outcome, command::CommandHooks, message::Role,
    model::ScriptedModel, tool::tool_fn,
};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    settings_file_hooks().await?;
    handler_types_filters_and_a_plugin().await
}

/// The scripts of `examples/hooks/settings.json`.
async fn settings_file_hooks() -> Result<(), BoxError> {
    let project = repository();
    let hooks = CommandHooks::builder()
        .settings_file(project.join("examples/hooks/settings.json"))
        .project_dir(project)
        .build()?;
    println!("command hooks: {hooks:?}\n");

    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "rm -rf build/" }))
        .tool_call("bash", json!({ "command": "git push origin main" }))
        .tool_call(
            "write_file",
            json!({ "path": "NOTES.md", "content": "# Notes\n" }),
        )
        .text("All done.")
        .text("Summary: wrote NOTES.md, pushed (dry run), did not delete build/.");
    let transcripts = std::env::temp_dir().join("tower-agent-command-hooks-example");
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn(
            "bash",
            "Runs a shell command",
            json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            |args, _| async move {
                Ok(format!(
                    "(pretend) ran `{}`",
                    args["command"].as_str().unwrap_or("")
                ))
            },
        ))
        .tool(tool_fn(
            "write_file",
            "Writes a file",
            json!({"type": "object"}),
            |args, _| async move {
                Ok(format!(
                    "(pretend) wrote {}",
                    args["path"].as_str().unwrap_or("?")
                ))
            },
        ))
        .hooks(hooks.into_hooks().compile()?)
        .transcripts(&transcripts)
        .build();

    let resp = agent.run("Tidy up the repository and push.").await?;
    print_conversation(&resp);
    println!(
        "transcript: {}",
        transcripts
            .join(format!("{}.jsonl", resp.thread_id))
            .display()
    );

    // What the hooks did.
    let tools = tool_results(&resp);
    assert!(
        tools[0].starts_with(
            r#"PreToolUse:bash hook error: ["$CLAUDE_PROJECT_DIR"/examples/hooks/block_rm.sh]: Blocked: `rm -rf build/`"#
        ),
        "{}",
        tools[0]
    );
    assert!(
        tools[1].starts_with("(pretend) ran `git push --dry-run origin main`"),
        "{}",
        tools[1]
    );
    assert!(
        tools[1].contains("audit: tool call #2 (bash)"),
        "{}",
        tools[1]
    );
    assert!(
        tools[2].contains("audit: tool call #3 (write_file)"),
        "{}",
        tools[2]
    );
    assert!(
        tools[2].contains("You changed NOTES.md: run the formatter"),
        "{}",
        tools[2]
    );
    assert_eq!(resp.outcome, Outcome::Finished);
    assert!(resp.text.starts_with("Summary:"), "{}", resp.text);
    println!("\nall hooks did what they should\n");
    Ok(())
}

/// An `http` hook, a `prompt` hook, an `if` filter and a plugin folder.
async fn handler_types_filters_and_a_plugin() -> Result<(), BoxError> {
    let project = repository();
    let scratch = std::env::temp_dir().join(format!("tower-agent-hooks-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;

    // The policy server of the `http` hook: it records what it is sent and adds context.
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let app = Router::new()
        .route(
            "/hooks/post-tool-use",
            post(
                |State(seen): State<Arc<Mutex<Vec<Value>>>>, Json(input): Json<Value>| async move {
                    let tool = input["tool_name"].as_str().unwrap_or("?").to_owned();
                    seen.lock().unwrap().push(input);
                    Json(json!({ "hookSpecificOutput": {
                        "hookEventName": "PostToolUse",
                        "additionalContext": format!("policy server: {tool} call reviewed"),
                    }}))
                },
            ),
        )
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hooks/post-tool-use", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // The model of the `prompt` hook: the first time the agent wants to stop it says no.
    let judge = ScriptedModel::new()
        .text(r#"{"ok": false, "reason": "Say where the calls are logged before you stop."}"#)
        .text(r#"{"ok": true}"#);
    let block_push = r#"echo "no pushes from this agent" >&2; exit 2"#;
    let hooks = CommandHooks::builder()
        .settings_json(
            json!({ "hooks": {
                "PreToolUse": [{ "matcher": "bash", "hooks": [
                    { "type": "command", "if": "Bash(git push *)", "command": block_push }
                ]}],
                "PostToolUse": [{ "matcher": "bash", "hooks": [
                    { "type": "http", "url": url, "timeout": 10 }
                ]}],
                "Stop": [{ "hooks": [
                    { "type": "prompt", "prompt": "May the agent stop now? Its last answer: $ARGUMENTS" }
                ]}],
            }}),
            "inline settings",
        )
        .plugin_dir(project.join("examples/hooks/audit-plugin"))
        .plugin_data_dir(scratch.join("plugin-data"))
        .model(judge)
        .transcripts_dir(scratch.join("transcripts"))
        .project_dir(project)
        .build()?;
    assert!(hooks.warnings().is_empty(), "{:?}", hooks.warnings());

    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls" }))
        .tool_call("bash", json!({ "command": "ls && git push origin main" }))
        .text("Done.")
        .text("Done. Every call is logged by the audit-log plugin.");
    let agent = Agent::builder()
        .model(model)
        .tool(tool_fn(
            "bash",
            "Runs a shell command",
            json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            |args, _| async move {
                Ok(format!(
                    "(pretend) ran `{}`",
                    args["command"].as_str().unwrap_or("")
                ))
            },
        ))
        .hooks(hooks.into_hooks().compile()?)
        .build();
    let resp = agent.run("List the files, then push.").await?;
    print_conversation(&resp);

    let tools = tool_results(&resp);
    // `if`: the filtered hook ran for the `git push` subcommand only.
    assert!(tools[0].starts_with("(pretend) ran `ls`"), "{}", tools[0]);
    // Exit 2, in Claude Code's words: the hook's command in brackets, then its stderr.
    assert_eq!(
        tools[1],
        format!("PreToolUse:bash hook error: [{block_push}]: no pushes from this agent")
    );
    // `http`: the policy server saw the allowed call and its context follows the result.
    assert!(
        tools[0].contains("policy server: bash call reviewed"),
        "{}",
        tools[0]
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(seen.lock().unwrap()[0]["tool_input"]["command"], "ls");
    // `prompt`: the judge sent the agent back once.
    assert!(resp.text.contains("logged"), "{}", resp.text);
    // The plugin logged the call that ran (PostToolUse does not fire for a denied call).
    let log = std::fs::read_to_string(scratch.join("plugin-data/audit-log/calls.log"))?;
    assert_eq!(log, "bash\n");
    assert_eq!(resp.outcome, Outcome::Finished);
    std::fs::remove_dir_all(&scratch)?;
    println!("\nhttp, prompt, if and plugin hooks did what they should");
    Ok(())
}

fn print_conversation(resp: &AgentResponse) {
    for m in resp.messages.iter() {
        let calls: Vec<String> = m
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let text = m.text();
        let text = if calls.is_empty() {
            text.into_owned()
        } else {
            calls.join(", ")
        };
        println!("[{}] {}", m.role, text.replace('\n', "\n      "));
    }
    println!("\noutcome: {:?}", resp.outcome);
}

/// What the model sees of each call: its result, then the hooks' context of its step.
fn tool_results(resp: &AgentResponse) -> Vec<String> {
    let messages: Vec<_> = resp.messages.iter().collect();
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Tool)
        .map(|(i, m)| {
            // The hooks' context for the step follows its results (each step here makes one
            // call), as Claude Code places it.
            let mut text = m.text().into_owned();
            if let Some(next) = messages.get(i + 1).filter(|n| n.role == Role::System) {
                text.push_str("\n\n");
                text.push_str(&next.text());
            }
            text
        })
        .collect()
}

/// The repository's root, the hooks' project directory (the examples' package is
/// `examples/` in it).
fn repository() -> &'static Path {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR"));
    examples.parent().unwrap_or(examples)
}
