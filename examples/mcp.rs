//! MCP both ways, offline (a scripted model stands in for the LLM):
//!
//! 1. **An agent uses an MCP server's tools.** The reference server
//!    `@modelcontextprotocol/server-everything` (from npm; installed on first use into
//!    `target/mcp-servers` by the project's `.ci/mcp-servers`, which needs node and npm) runs
//!    as a child process over stdio. Its tools become ordinary tool services named
//!    `mcp__everything__<tool>`, so a PreToolUse hook written for them (here: deny `get-env`)
//!    applies as to any tool. Dropping the agent and the server set stops the server.
//! 2. **An agent's own tools served over MCP.** A tool and a whole agent (as one tool) are
//!    served over streamable HTTP, mounted at `/mcp` in an axum `Router` on 127.0.0.1, next to
//!    a route of the application's own; the crate's MCP client then calls both, as any MCP
//!    client (Claude Code, Claude Desktop, another agent) would.
//!
//! ```text
//! cargo run --features mcp --example mcp
//! ```
//!
//! Without node and npm, part 1 says what it needs and is skipped (the example still exits 0).
//! `examples/mcp_server.rs` shows the stdio server a desktop client launches.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use axum::{Router, routing::get};
use serde_json::json;
use tower::{Service, ServiceExt};
use tower_agent::{
    Agent, BoxError,
    context::RunContext,
    layers::hooks::{Hooks, PreToolUse},
    mcp::{
        McpServer, McpServers,
        client::{HttpServer, StdioServer},
        server::AgentTool,
    },
    message::{Role, ToolCall},
    model::ScriptedModel,
    tool::{ToolRequest, ToolRouter, tool_fn},
};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    use_an_mcp_server().await?;
    serve_over_mcp().await?;
    Ok(())
}

/// `target/mcp-servers` with the reference servers installed, or `None` (said why) when they
/// cannot be installed here.
fn reference_servers() -> Option<PathBuf> {
    // This example is `target/<profile>/examples/mcp`.
    let exe = std::env::current_exe().ok()?;
    let dir = exe.ancestors().nth(3)?.join("mcp-servers");
    // The examples' package is `examples/` in the repository.
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let script = repository.join(".ci/mcp-servers");
    let status = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .stdout(Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => Some(dir),
        _ => {
            println!(
                "part 1 needs node and npm to install @modelcontextprotocol/server-everything \
                 ({} failed); skipped",
                script.display()
            );
            None
        }
    }
}

async fn use_an_mcp_server() -> Result<(), BoxError> {
    println!("== 1. an agent using server-everything's tools over stdio");
    let Some(dir) = reference_servers() else {
        return Ok(());
    };
    let command = dir.join("node_modules/.bin/mcp-server-everything");
    // The same server in Claude Code's `.mcp.json` format would be
    // {"mcpServers": {"everything": {"command": "…/mcp-server-everything", "args": ["stdio"]}}}
    // (`McpServers::from_file(".mcp.json")`).
    let mcp = McpServers::builder()
        .server(
            "everything",
            StdioServer::new(command.to_string_lossy()).arg("stdio"),
        )
        .build();
    let hooks = Hooks::new()
        .before_tool_use("mcp__everything__get-env", |_call, _ctx| {
            PreToolUse::Deny("no environment dumps".into())
        })
        .compile()?;
    let model = ScriptedModel::new()
        .tool_calls([
            (
                "mcp__everything__echo",
                json!({"message": "hello over MCP"}),
            ),
            ("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
            ("mcp__everything__get-env", json!({})),
        ])
        .text("The echo and the sum worked; the environment dump was denied.")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .hooks(hooks)
        .build();
    let resp = agent.run("Try the MCP tools.").await?;

    let tools = &model.requests()[0].tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).take(5).collect();
    println!(
        "the model saw {} MCP tools, e.g. {}",
        tools.len(),
        names.join(", ")
    );
    for message in resp.messages.iter().filter(|m| m.role == Role::Tool) {
        let flag = if message.is_error { " (error)" } else { "" };
        println!("tool result{flag}: {}", message.text());
    }
    println!("answer: {} ({:?})", resp.text, resp.outcome);
    println!("server pid while connected: {:?}", mcp.pid("everything"));
    drop(agent);
    mcp.close().await;
    Ok(())
}

async fn serve_over_mcp() -> Result<(), BoxError> {
    println!("\n== 2. a tool and an agent served over MCP (streamable HTTP)");
    let assistant = Agent::builder()
        .model(ScriptedModel::new().text("Hello from the agent behind MCP."))
        .build();
    let tools = ToolRouter::new()
        .tool(tool_fn(
            "word_count",
            "Counts the words of a text",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            }),
            |args, _ctx| async move {
                let text = args["text"].as_str().unwrap_or_default();
                Ok(text.split_whitespace().count().to_string())
            },
        ))
        .tool(AgentTool::new(
            assistant,
            "ask_assistant",
            "Asks the assistant agent; it answers in one run",
        ));
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .nest_service("/mcp", McpServer::new(tools).http_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    println!("serving MCP at http://{addr}/mcp");

    // Any MCP client can call them now; here, the crate's own.
    let client = McpServers::builder()
        .server("local", HttpServer::new(format!("http://{addr}/mcp")))
        .require_all(true)
        .build();
    let mut router = client.router().await?;
    let specs: Vec<&str> = router.specs().iter().map(|s| s.name.as_str()).collect();
    println!("tools over MCP: {}", specs.join(", "));
    for (name, args) in [
        (
            "mcp__local__word_count",
            json!({"text": "tower services all the way"}),
        ),
        ("mcp__local__ask_assistant", json!({"prompt": "Say hello."})),
    ] {
        let out = router
            .ready()
            .await?
            .call(ToolRequest::new(
                ToolCall::new("call-1", name, args),
                RunContext::new(),
            ))
            .await?;
        println!("{name} -> {}", out.content);
    }
    client.close().await;
    server.abort();
    Ok(())
}
