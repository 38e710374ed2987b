//! What hooks need from the servers: calls on already-connected servers (tower-agent's
//! `mcp_tool` hooks), and the run contexts of the tool calls in flight (given to elicitation
//! requests).

use std::{
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use serde_json::Value;

use super::{McpServers, result::map_result};
use tower_agent_core::context::RunContext;

impl McpServers {
    /// Calls the tool `tool` (the server's own name for it, not the `mcp__` name) of the
    /// configured server `server` with `arguments`, outside a model's turn (tower-agent's
    /// `mcp_tool` command hooks call tools this way): the text of its result (as a tool
    /// output's text, see the [module docs](super#result-mapping)), or why there is none.
    ///
    /// The server must already be connected (by a run's setup or [`McpServers::connect`]):
    /// this never connects nor reconnects one. A result with `isError: true` is an `Err` with
    /// its text. No call timeout applies: the caller bounds the time (e.g. with
    /// `tokio::time::timeout`).
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_mcp::client::McpServers;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let servers = McpServers::builder().build();
    /// let err = servers.call_connected("github", "search", json!({})).await.unwrap_err();
    /// assert_eq!(err.to_string(), "no MCP server named `github` is configured");
    /// # }
    /// ```
    pub async fn call_connected(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<String, McpCallError> {
        let Some(s) = self.inner.servers.iter().find(|s| s.name() == server) else {
            return Err(McpCallError::new(format!(
                "no MCP server named `{server}` is configured"
            )));
        };
        let conn = s.current().map_err(|why| {
            McpCallError::new(format!(
                "the MCP server `{server}` is not connected ({why})"
            ))
        })?;
        let value = s
            .call_on(&conn, tool, arguments, None)
            .await
            .map_err(McpCallError::new)?;
        let output = map_result(String::new(), &value);
        if output.is_error {
            Err(McpCallError::new(format!(
                "the MCP tool `{tool}` of `{server}` returned an error: {}",
                output.content
            )))
        } else {
            Ok(output.content)
        }
    }
}

/// Why [`McpServers::call_connected`] has no text: the server is not configured or not
/// connected, the call failed (the connection was lost, the server answered a protocol
/// error), or the tool answered `isError: true`. The message says which, naming the server
/// and the tool (and holding the tool's error text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCallError {
    message: String,
}

impl McpCallError {
    fn new(message: impl Into<String>) -> Self {
        McpCallError {
            message: message.into(),
        }
    }
}

impl fmt::Display for McpCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for McpCallError {}

/// The run contexts of a server's tool calls in flight, in the order they started.
#[derive(Default)]
pub(super) struct InFlight {
    next: AtomicU64,
    calls: Mutex<Vec<(u64, RunContext)>>,
}

impl InFlight {
    /// Records `ctx` until the returned guard is dropped (the call ended or was cancelled).
    pub(super) fn enter(self: &Arc<Self>, ctx: RunContext) -> InFlightGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, ctx));
        InFlightGuard {
            set: Arc::clone(self),
            id,
        }
    }

    /// The context of the call in flight that started last (`None`: no call in flight).
    pub(super) fn latest(&self) -> Option<RunContext> {
        self.lock().last().map(|(_, ctx)| ctx.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, RunContext)>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes its call from the [`InFlight`] set when dropped.
pub(super) struct InFlightGuard {
    set: Arc<InFlight>,
    id: u64,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.set.lock().retain(|(id, _)| *id != self.id);
    }
}
