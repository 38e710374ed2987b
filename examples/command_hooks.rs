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

use std::path::Path;

use serde_json::json;
use tower_agent::{
    Agent, BoxError, agent::Outcome, layers::command::CommandHooks, message::Role,
    model::ScriptedModel, tool::tool_fn,
};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let project = Path::new(env!("CARGO_MANIFEST_DIR"));
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
                Ok::<_, BoxError>(format!(
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
                Ok::<_, BoxError>(format!(
                    "(pretend) wrote {}",
                    args["path"].as_str().unwrap_or("?")
                ))
            },
        ))
        .hooks(hooks.into_hooks().compile()?)
        .transcripts(&transcripts)
        .build();

    let resp = agent.run("Tidy up the repository and push.").await?;
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
    println!(
        "transcript: {}",
        transcripts
            .join(format!("{}.jsonl", resp.thread_id))
            .display()
    );

    // What the hooks did.
    let tools: Vec<String> = resp
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect();
    assert!(
        tools[0].starts_with("denied: Blocked: `rm -rf build/`"),
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
    println!("\nall hooks did what they should");
    Ok(())
}
