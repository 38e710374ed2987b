//! Model Context Protocol (feature `mcp`), over the official Rust SDK, [`rmcp`].
//!
//! - [`client`]: MCP servers' tools as tool services (`mcp__<server>__<tool>`), over stdio
//!   and streamable HTTP, configured from Claude Code's `.mcp.json` format or a builder.
//! - [`server`]: a [`ToolRouter`](crate::tool::ToolRouter) (with its tool layer stack) or an
//!   [`Agent`](crate::Agent) served as an MCP server, over streamable HTTP in an axum
//!   `Router` or over stdio.

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
