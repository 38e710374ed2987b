//! Model Context Protocol for [tower-agent](https://docs.rs/tower-agent), over the official
//! Rust SDK, [`rmcp`] (tower-agent's feature `mcp`, where this crate is `tower_agent::mcp`).
//!
//! - [`client`]: MCP servers' tools as tool services (`mcp__<server>__<tool>`), over stdio
//!   and streamable HTTP, configured from Claude Code's `.mcp.json` format or a builder.
//! - [`server`]: a [`ToolRouter`](tower_agent_core::tool::ToolRouter) (with its tool layer
//!   stack) or an [`Agent`](tower_agent_core::Agent) served as an MCP server, over streamable
//!   HTTP in an axum `Router` or over stdio.
//!
//! It depends on [tower-agent-core](https://docs.rs/tower-agent-core) through its public API
//! only, as an integration of yours would.
//!
//! ```
//! use serde_json::json;
//! use tower_agent_core::tool::{ToolRouter, tool_fn};
//! use tower_agent_mcp::McpServer;
//!
//! let tools = ToolRouter::new().tool(tool_fn(
//!     "echo",
//!     "Echoes its input",
//!     json!({ "type": "object" }),
//!     |args, _ctx| async move { Ok(args) },
//! ));
//! // Served over streamable HTTP (mount it in an axum `Router`), or `serve_stdio()`.
//! let server = McpServer::new(tools).server_info("my-tools", "1.0.0");
//! let _service = server.http_service();
//! ```
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

pub mod client;
pub mod server;

/// `s` cut to at most `max` bytes (at a character boundary) with `…` appended, if longer.
pub(crate) fn truncate(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &s[..end]))
}

pub use self::client::McpServers;
pub use self::server::{AgentTool, McpServer};
