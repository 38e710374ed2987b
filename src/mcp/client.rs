//! MCP servers' tools as tool services.
