//! A guard, an audit log, result metadata and step timing written as callback hooks: no
//! `Service` impl in sight.
//!
//! ```text
//! cargo run --example hooks
//! ```
//!
//! - block `rm -rf` for `bash`, at priority 100 (outermost: runs first);
//! - log every tool call, at priority -100 (innermost: runs last, closest to the tool);
//! - add metadata to every tool result;
//! - time every step.
//!
//! A scripted model (offline) tries a harmless command, then a dangerous one, then answers.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use futures_util::StreamExt;
use serde_json::json;
use tower_agent::{
    Agent, BoxError,
    agent::AgentEvent,
    layers::hooks::{Hooks, PostToolUse, PreToolUse},
    model::ScriptedModel,
    tool::tool_fn,
};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let step_started: Arc<Mutex<HashMap<u32, Instant>>> = Arc::default();
    let (started, finished) = (Arc::clone(&step_started), Arc::clone(&step_started));

    let hooks = Hooks::new()
        // Block dangerous bash commands.
        .before_tool_use("bash", |call, _ctx| {
            let command = call.arguments["command"].as_str().unwrap_or_default();
            if command.contains("rm -rf") {
                PreToolUse::Deny(format!("`{command}` is blocked by the security hook"))
            } else {
                PreToolUse::Continue
            }
        })
        .priority(100)
        .name("security")
        // Log all tool calls (an async hook, to show both kinds).
        .before_tool_use("*", |call, ctx| async move {
            println!(
                "  [log] step {} tool call: {}({})",
                ctx.step(),
                call.name,
                call.arguments
            );
            PreToolUse::Continue
        })
        .priority(-100)
        .name("logging")
        // Add metadata to every result.
        .after_tool_use("*", |_call, output, _ctx| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default();
            PostToolUse::Replace((*output).clone().with_metadata("logged_at", json!(now)))
        })
        // Step-level hooks: time every step.
        .before_step(move |step, _ctx| {
            started.lock().unwrap().insert(step, Instant::now());
        })
        .after_step(move |step, _ctx| {
            if let Some(t) = finished.lock().unwrap().remove(&step) {
                println!("  [metrics] step {step} took {:?}", t.elapsed());
            }
        })
        .compile()?;
    println!("hook order: {}", hooks.order().join(", "));

    let model = ScriptedModel::new()
        .tool_call("bash", json!({ "command": "ls -la" }))
        .tool_call("bash", json!({ "command": "rm -rf /" }))
        .text("I listed the files; I won't delete everything.")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool_fn(
            "bash",
            "Runs a shell command (simulated)",
            json!({ "type": "object", "properties": { "command": { "type": "string" } } }),
            |args, _ctx| async move { Ok(format!("(simulated) ran {}", args["command"])) },
        ))
        .hooks(hooks)
        .build();

    let mut events = agent.stream("Tidy up the project directory.");
    while let Some(event) = events.next().await {
        if let AgentEvent::ToolCallEnd { name, output, .. } = event {
            println!("  [event] {name} ended; metadata: {:?}", output.metadata);
        }
    }
    let resp = events.take_response().expect("the stream ended")?;
    println!("\ntranscript:");
    for m in resp.messages.iter() {
        if let Some(id) = &m.tool_call_id {
            println!("  [tool {id}] {}", m.text());
            continue;
        }
        let calls: Vec<String> = m
            .tool_calls
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let text = if calls.is_empty() {
            m.text().into_owned()
        } else {
            calls.join(", ")
        };
        println!("  [{}] {text}", m.role);
    }

    let denied = resp.messages.iter().any(|m| {
        m.text()
            .starts_with("PreToolUse:bash hook error: `rm -rf /` is blocked")
    });
    if !resp.outcome.is_finished() || !denied {
        return Err("the security hook did not block rm -rf".into());
    }
    Ok(())
}
