//! A small tool set served over MCP (stdio and streamable HTTP), offline.
//!
//! ```text
//! cargo run --features mcp --example mcp_server              # the demo below, then exit 0
//! cargo run --features mcp --example mcp_server -- --stdio   # an MCP server on stdin/stdout
//! ```
//!
//! With `--stdio` the process is an MCP server speaking JSON-RPC on stdin and stdout (what a
//! desktop client launches); logs go to stderr. The tools (`add`, `word_count`, `stats`,
//! `rm_all`) sit behind a PreToolUse hook that denies `rm_*`, so the hook runs for remote
//! callers as it would for an agent's model.
//!
//! Claude Desktop (`claude_desktop_config.json`) or Claude Code (`.mcp.json` in a project)
//! launches it with (build it first: `cargo build --features mcp --example mcp_server`):
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "tower-tools": {
//!       "command": "/path/to/target/debug/examples/mcp_server",
//!       "args": ["--stdio"]
//!     }
//!   }
//! }
//! ```
//!
//! With no arguments (as CI runs it) the example is its own client: it launches itself with
//! `--stdio` as a child process, connects with rmcp's client, lists the tools and calls two
//! of them; then it serves the same tools over streamable HTTP on `127.0.0.1:<free port>`
//! (mounted at `/mcp` in an axum `Router`, next to a `/healthz` route of its own), calls a
//! tool there once, prints what it got and exits 0.

use std::time::Duration;

use axum::{Router, routing::get};
use rmcp::{
    ServiceExt as _,
    model::{CallToolRequestParams, CallToolResult},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tower::ServiceBuilder;
use tower_agent::{
    BoxError,
    layers::hooks::{Hooks, PreToolUse},
    mcp::McpServer,
    tool::{ToolRouter, tool_fn, typed_tool},
};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    /// The text to count the words of.
    text: String,
}

/// The tools, behind a PreToolUse hook that denies `rm_*`.
fn server() -> Result<McpServer, BoxError> {
    let tools =
        ToolRouter::new()
            .tool(typed_tool(
                "add",
                "Adds two integers",
                |args: AddArgs, _ctx| async move {
                    args.a
                        .checked_add(args.b)
                        .map(|sum| sum.to_string())
                        .ok_or_else(|| BoxError::from("the sum overflows"))
                },
            ))
            .tool(typed_tool(
                "word_count",
                "Counts the words of a text",
                |args: TextArgs, _ctx| async move {
                    Ok(args.text.split_whitespace().count().to_string())
                },
            ))
            .tool(tool_fn(
                "stats",
                "Statistics of a list of numbers (JSON)",
                json!({
                    "type": "object",
                    "properties": { "numbers": { "type": "array", "items": { "type": "number" } } },
                    "required": ["numbers"]
                }),
                |args: serde_json::Value, _ctx| async move {
                    let numbers: Vec<f64> = args["numbers"]
                        .as_array()
                        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
                        .unwrap_or_default();
                    let count = numbers.len();
                    let mean = numbers.iter().sum::<f64>() / count.max(1) as f64;
                    Ok(json!({ "count": count, "mean": mean }))
                },
            ))
            .tool(tool_fn(
                "rm_all",
                "Deletes everything (a hook denies it)",
                json!({ "type": "object" }),
                |_args, _ctx| async move { Ok("deleted".to_owned()) },
            ));
    let hooks = Hooks::new()
        .before_tool_use("rm_*", |_call, _ctx| {
            PreToolUse::Deny("deleting is not allowed over MCP".into())
        })
        .compile()?;
    Ok(
        McpServer::layered(tools, ServiceBuilder::new().layer(hooks.tool_layer()))
            .server_info("tower-agent-example", env!("CARGO_PKG_VERSION"))
            .instructions("Small arithmetic and text tools.")
            .call_timeout(Duration::from_secs(30)),
    )
}

fn show(name: &str, result: &CallToolResult) {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let error = if result.is_error == Some(true) {
        " (isError)"
    } else {
        ""
    };
    println!("  {name}{error}: {}", text.join(" "));
    if let Some(structured) = &result.structured_content {
        println!("    structuredContent: {structured}");
    }
}

fn call(name: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    let serde_json::Value::Object(args) = args else {
        unreachable!("arguments are objects")
    };
    CallToolRequestParams::new(name).with_arguments(args)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // stdout is the protocol under --stdio: logs go to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();

    if std::env::args().any(|a| a == "--stdio") {
        return server()?.serve_stdio().await;
    }

    // 1. Over stdio: this program, launched as a child process, as a desktop client would.
    println!(
        "stdio: launching `{} --stdio`",
        std::env::current_exe()?.display()
    );
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command.arg("--stdio");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    let client = tokio::time::timeout(Duration::from_secs(30), ().serve(transport)).await??;
    if let Some(info) = client.peer_info() {
        println!(
            "  server: {} {}",
            info.server_info.as_ref().map_or("?", |i| i.name.as_str()),
            info.server_info
                .as_ref()
                .map_or("?", |i| i.version.as_str())
        );
    }
    let tools = client.list_all_tools().await?;
    for tool in &tools {
        println!(
            "  tool {}: {}",
            tool.name,
            tool.description.as_deref().unwrap_or("")
        );
    }
    show(
        "add(2, 40)",
        &client
            .call_tool(call("add", json!({ "a": 2, "b": 40 })))
            .await?,
    );
    show(
        "stats([1, 2, 6])",
        &client
            .call_tool(call("stats", json!({ "numbers": [1, 2, 6] })))
            .await?,
    );
    show(
        "rm_all",
        &client.call_tool(call("rm_all", json!({}))).await?,
    );
    client.cancel().await?;

    // 2. Over streamable HTTP, mounted in an axum Router next to a route of the app's own.
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .nest_service("/mcp", server()?.http_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let stop = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn({
        let stop = stop.clone();
        async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
        }
    });
    println!("http: http://{addr}/mcp");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
    );
    let client = tokio::time::timeout(Duration::from_secs(30), ().serve(transport)).await??;
    show(
        "word_count",
        &client
            .call_tool(call(
                "word_count",
                json!({ "text": "tools served over MCP" }),
            ))
            .await?,
    );
    client.cancel().await?;
    stop.cancel();
    serving.await??;
    Ok(())
}
