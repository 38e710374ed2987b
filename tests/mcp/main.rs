//! Model Context Protocol: the client's tools against in-process `rmcp` servers and the
//! reference servers (`.ci/mcp-servers`), MCP with command hooks, and the crate's own MCP
//! server. One test binary, a module per area (a file of its own before). Run this group alone
//! with `cargo test --all-features --test mcp`, one module of it with
//! `cargo test --all-features --test mcp -- mcp_reference::`.

#[path = "../support/mcp_servers.rs"]
mod mcp_servers;
#[path = "../support/mod.rs"]
mod support;

#[cfg(all(feature = "mcp", unix))]
mod mcp_client;
#[cfg(all(feature = "mcp", unix))]
mod mcp_hooks;
#[cfg(all(feature = "mcp", unix))]
mod mcp_reference;
#[cfg(all(feature = "mcp", feature = "axum"))]
mod mcp_server;
