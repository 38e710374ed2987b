//! A "deep agent", offline: every built-in hook in its usual registration order, on a
//! temporary directory, with a scripted model.
//!
//! ```text
//! cargo run --example deep_agent
//! ```
//!
//! Registration order (first = outermost):
//!
//! ```text
//! tracing (model + tools) → todo → filesystem → skills → memory → summarization (innermost)
//! ```
//!
//! The agent plans with `write_todos`, writes a file, edits it, greps it, completes its plan
//! (which triggers the documentation-update reminder), and answers. Trace spans are printed by
//! a `tracing_subscriber::fmt` subscriber as they close.

use std::{path::Path, time::Duration};

use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    builtins::{filesystem::Filesystem, memory::Memory, skills::Skills, todo::TodoList},
    layers::{
        evict::EvictLayer, reminders::RemindersLayer, summarize::SummarizeLayer, trace::TraceLayer,
    },
    message::Role,
    model::{ModelResponse, ScriptedModel},
};
use tracing_subscriber::fmt::format::FmtSpan;

fn prepare_workspace(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join("skills/release-notes"))?;
    std::fs::write(
        root.join("skills/release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Write release notes from a change list\n---\n\n# Release notes\n\nGroup changes by kind; one line each.\n",
    )?;
    std::fs::write(
        root.join("AGENTS.md"),
        "# Project memory\n\n- Notes live in notes.md.\n- Keep lines short.\n",
    )?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .with_ansi(false)
        .with_writer(std::io::stdout)
        .init();

    let root = std::env::temp_dir().join(format!("tower-agent-deep-agent-{}", std::process::id()));
    prepare_workspace(&root)?;

    let model = ScriptedModel::new()
        .tool_call(
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "Write notes.md", "status": "in_progress" },
                { "id": "2", "title": "Fix the typo", "status": "pending" },
            ]}),
        )
        .tool_call(
            "write_file",
            json!({ "path": "notes.md", "content": "# Notes\n\nThe agnet loop is made of services.\n" }),
        )
        .tool_call(
            "edit_file",
            json!({ "path": "notes.md", "old_text": "agnet", "new_text": "agent" }),
        )
        .tool_call("grep", json!({ "pattern": "agent loop" }))
        .tool_call(
            "write_todos",
            json!({ "todos": [
                { "id": "1", "title": "Write notes.md", "status": "done" },
                { "id": "2", "title": "Fix the typo", "status": "done" },
            ]}),
        )
        .decide(|req| {
            // The last turn reads the reminder the plan completion triggered.
            let reminded = req
                .messages
                .iter()
                .skip(1)
                .any(|m| m.role == Role::System);
            let skills = req
                .system()
                .is_some_and(|s| s.text().contains("[release-notes]"));
            let memory = req
                .system()
                .is_some_and(|s| s.text().contains("<agent_memory>"));
            Ok(ModelResponse::text(format!(
                "Done: notes.md is written and fixed. (reminder seen: {reminded}, skills catalog: {skills}, memory: {memory})"
            )))
        });
    let summarizer = ScriptedModel::new().otherwise(|_| Ok(ModelResponse::text("summary")));

    let agent = Agent::builder()
        // Model path: tracing outermost, summarization innermost.
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(SummarizeLayer::new(summarizer))
                .service(model),
        )
        // Tool path: tracing outermost, then reminders, then eviction of huge outputs.
        .tool_layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(RemindersLayer::with_defaults())
                .layer(EvictLayer::new())
                .timeout(Duration::from_secs(60)),
        )
        // Before-agent and modify-request stages, in order.
        .stage(TodoList::new())
        .setup(Filesystem::local(&root))
        .stage(Skills::new([root.join("skills")]))
        .stage(Memory::new([root.join("AGENTS.md")]))
        .system_prompt("You are a careful assistant working in a project directory.")
        .cwd(&root)
        .build();

    let resp = agent
        .run(
            AgentRequest::new("Write notes about the agent loop, then fix any typo.")
                .thread("deep"),
        )
        .await?;

    println!("\n--- transcript ---");
    for m in resp.messages.iter().skip(1) {
        let text = m.text();
        let calls: Vec<String> = m
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let line = if calls.is_empty() {
            text.into_owned()
        } else {
            calls.join(", ")
        };
        println!("[{}] {}", m.role, line.replace('\n', "\n    "));
    }
    println!(
        "\n--- outcome: {:?} after {} steps ---",
        resp.outcome, resp.steps
    );
    let notes = std::fs::read_to_string(root.join("notes.md"))?;
    print!("notes.md:\n{notes}");
    std::fs::remove_dir_all(&root)?;

    if !resp.outcome.is_finished()
        || !resp.text.contains("reminder seen: true")
        || !notes.contains("agent loop")
    {
        return Err("the deep agent did not finish as scripted".into());
    }
    Ok(())
}
