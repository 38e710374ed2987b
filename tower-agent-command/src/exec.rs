//! [`Exec`]: how a handler is started — a process (shell or exec form) or one of the other
//! handler kinds (`http`, `prompt` / `agent`, `mcp_tool`, `wasm`), whose modules it names.

use std::sync::Arc;

#[cfg(feature = "http-hooks")]
use crate::http::HttpHook;
#[cfg(feature = "mcp")]
use crate::mcp::McpHook;
use crate::prompt::ModelHook;

/// How a handler is started.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Exec {
    /// `{shell} -c command`.
    Shell {
        shell: &'static str,
        command: String,
    },
    /// The program with these arguments, no shell.
    Argv { program: String, args: Vec<String> },
    /// POST the input to a URL (`type: "http"`).
    #[cfg(feature = "http-hooks")]
    Http(Arc<HttpHook>),
    /// Ask a model or a subagent (`type: "prompt"` / `"agent"`).
    Model(Arc<ModelHook>),
    /// Call a tool of a connected MCP server (`type: "mcp_tool"`).
    #[cfg(feature = "mcp")]
    Mcp(Arc<McpHook>),
    /// Call a WebAssembly component's `handle` (`type: "wasm"`, a `.wasm` file of a hooks
    /// directory).
    #[cfg(feature = "wasm")]
    Wasm(tower_agent_wasm::WasmHook),
}

impl Exec {
    /// How logs and warnings name the handler.
    pub(crate) fn label(&self) -> String {
        match self {
            Exec::Shell { command, .. } => command.clone(),
            Exec::Argv { program, args } if args.is_empty() => program.clone(),
            Exec::Argv { program, args } => format!("{program} {}", args.join(" ")),
            #[cfg(feature = "http-hooks")]
            Exec::Http(hook) => hook.url.clone(),
            Exec::Model(hook) => hook.label(),
            #[cfg(feature = "mcp")]
            Exec::Mcp(hook) => hook.label(),
            #[cfg(feature = "wasm")]
            Exec::Wasm(hook) => hook.name().to_owned(),
        }
    }
}
