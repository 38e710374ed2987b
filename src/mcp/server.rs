//! Tool routers and agents served over MCP.
