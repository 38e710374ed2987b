//! What command hooks need from the servers: `mcp_tool` hook calls on already-connected
//! servers, and the run contexts of the tool calls in flight (given to elicitation requests).

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use serde_json::Value;

use super::{McpServers, result::map_result};
use crate::context::RunContext;

impl McpServers {
    /// Calls the tool `tool` (the server's own name for it, not the `mcp__` name) of the
    /// configured server `server` with `arguments`, for an `mcp_tool` hook: the text of its
    /// result (as a tool output's text, see the module's result table), or why there is none.
    /// The server must already be connected: this never connects (nor reconnects) one. A
    /// result with `isError: true` is an `Err` with its text. The caller bounds the time.
    pub(crate) async fn call_for_hook(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<String, String> {
        let Some(s) = self.inner.servers.iter().find(|s| s.name() == server) else {
            return Err(format!("no MCP server named `{server}` is configured"));
        };
        let conn = s
            .current()
            .map_err(|why| format!("the MCP server `{server}` is not connected ({why})"))?;
        let value = s.call_on(&conn, tool, arguments, None).await?;
        let output = map_result(String::new(), &value);
        if output.is_error {
            Err(format!(
                "the MCP tool `{tool}` of `{server}` returned an error: {}",
                output.content
            ))
        } else {
            Ok(output.content)
        }
    }
}

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
