//! MCP servers' tools as tool services.
//!
//! [`McpServers`] is a set of named MCP servers — child processes over stdio, or servers over
//! streamable HTTP — whose tools become ordinary tool services named
//! `mcp__<server>__<tool>` (Claude Code's naming, so its matchers such as `mcp__github__.*`
//! apply), each described by the server's input schema. Every layer, hook, guard and limit
//! of the agent applies to them unchanged.
//!
//! ```no_run
//! use tower_agent_core::{Agent, model::ScriptedModel};
//! use tower_agent_mcp::client::{McpServers, StdioServer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mcp = McpServers::from_file(".mcp.json")?
//!     .server("fs", StdioServer::new("npx").args(["-y", "@modelcontextprotocol/server-filesystem", "."]))
//!     .build();
//! let agent = Agent::builder().model(ScriptedModel::new()).stage(mcp).build();
//! agent.run("List the files").await?;
//! # Ok(()) }
//! ```
//!
//! # Names
//!
//! A tool is named `mcp__<server>__<tool>`, every character of the server's and the tool's
//! name other than ASCII letters, digits, `_` and `-` replaced by `_` (as Claude Code does);
//! give servers names that stay distinct that way. Names are not shortened: some providers
//! cap tool names (OpenAI at 64 characters), so keep server names short.
//!
//! # Configuration
//!
//! [`McpServers::from_json`] and [`McpServers::from_file`] read Claude Code's `.mcp.json`
//! format unchanged — `{"mcpServers": {name: {"command", "args", "env"}}}` for stdio servers
//! (`"type": "stdio"` optional), `{"type": "http", "url", "headers"}` for HTTP ones — or a
//! settings file's `mcpServers` map, with `${VAR}` and `${VAR:-default}` expanded in
//! `command`, `args`, `env`, `url` and `headers` (an unset variable without a default is an
//! error naming the server, as in Claude Code). Unknown types (also the deprecated `sse`) and
//! malformed entries are [`ConfigError`]s naming the server. The builder adds servers in code.
//!
//! # Lifetime
//!
//! An `McpServers` is cheap to clone (one `Arc`); clones share the connections. Servers are
//! connected lazily, concurrently, by the setup stage of the first run (or by
//! [`McpServers::connect`]), each within the connect timeout
//! ([`DEFAULT_CONNECT_TIMEOUT`], 30 s); later runs reuse the connections (a server that failed
//! to connect is tried again by the next run's setup). A server that fails to connect is a
//! `tracing` warning and the others still register, unless
//! [`McpServersBuilder::require_all`] makes it a setup error. Connections live on the tokio
//! runtime that made them.
//!
//! When the last clone is dropped (with the agent that holds it), every connection is closed
//! and each stdio server is killed **with everything it started**: the child runs in its own
//! process group under this crate's process supervision (the same as `execute` and command
//! hooks, see [`tower_agent_os::process`]: process group plus, on Linux, a subreaper sweep).
//!
//! # Calls and faults
//!
//! - Each call has a timeout ([`DEFAULT_CALL_TIMEOUT`], 120 s, configurable): past it the
//!   call is cancelled and the model gets an error output.
//! - A server that crashed (stdio) or whose connection closed becomes an error output; the
//!   next call (or run setup) reconnects it **once** ([`MAX_RESTARTS`]), with a warning; after
//!   a second loss it stays an error output.
//! - Output that is not MCP (garbage on a stdio server's stdout) is skipped by `rmcp`; a call
//!   it leaves unanswered ends at the call timeout. A message is at most [`MAX_MESSAGE`]
//!   (16 MiB: a stdio line, an SSE event or a JSON response over HTTP); a longer one is
//!   dropped as it is read, never buffered whole (a 256 MiB line costs the client about
//!   16 MiB of memory, measured by `tests/mcp/mcp_client.rs`).
//! - A stdio server's stderr is read as it comes, 8 KiB at a time, into `tracing` at debug
//!   level, and not kept.
//! - An elicitation the [`Elicitation`] service does not answer within the call timeout is
//!   cancelled; re-reading a tool list after a change is bounded by the call timeout too (the
//!   old list stays, with a warning).
//! - At most [`MAX_TOOLS`] (1,000) tools are taken from one server, from at most
//!   [`MAX_LIST_PAGES`] (100) pages of `tools/list`; the rest are ignored with a warning.
//!
//! # Result mapping
//!
//! | MCP content | [`ToolOutput`](tower_agent_core::message::ToolOutput) |
//! |---|---|
//! | text | the text (parts joined by newlines) |
//! | `structuredContent` | metadata `mcp_structured_content`; also the text, as JSON, when the result has no text part |
//! | image | [`ToolOutput::with_image`](tower_agent_core::message::ToolOutput::with_image) with a `data:` URL, and a line `[image: <type>]` |
//! | embedded resource | its text under a `[resource <uri>]` line; a PDF blob as [`ToolOutput::with_document`](tower_agent_core::message::ToolOutput::with_document), an image blob as an image; other blobs are named, not sent |
//! | resource link | a line `[resource link: <uri> (<name>, <type>)]` |
//! | audio | a line `[audio: <type>, not shown]` |
//! | `isError: true` | an error output ([`ToolOutput::error`](tower_agent_core::message::ToolOutput::error)) with the text |
//!
//! # Tool list changes
//!
//! A server's `notifications/tools/list_changed` makes the set list its tools again. The
//! stage is also a [`Prepare`] stage (register it with `Agent::builder().stage(mcp)`): before
//! each model call it replaces the request's tools of these servers with their current lists,
//! so new tools can be called (they are routed by their `mcp__<server>__` prefix) and removed
//! ones are gone (a call to one is an error output). Over stdio (one ordered stream) a
//! notification a server sends during a tool call is applied before that call's output is
//! returned, so the next model call sees the new list. Over HTTP a server may send it on
//! another stream than the call's result: it is applied as soon as it arrives and the list
//! has been read again (from the next model call on, once it has).
//!
//! # Elicitation
//!
//! A server's `elicitation/create` request goes to the [`Elicitation`] service given to
//! [`McpServersBuilder::elicitation`] (the request and response types are public so layers
//! can wrap the service, e.g. to fire hook events); without one it is declined. The request
//! carries the [`RunContext`] of the server's tool call in flight
//! ([`ElicitationRequest::ctx`]): when several calls of that server are in flight, the one
//! that started last (MCP does not say which call an elicitation belongs to); `None` when
//! none is (a request between calls, or during an `mcp_tool` hook's call).
//! tower-agent's `tower_agent::command::CommandHooks::elicitation_layer`
//! fires the `Elicitation` and `ElicitationResult` command hooks around the service.

mod config;
mod conn;
mod elicit;
mod hook;
mod result;

use std::{
    collections::HashMap,
    fmt,
    path::Path,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use futures_util::future::BoxFuture;
use serde_json::Value;

use self::conn::Server;
pub use self::{
    config::{ConfigError, HttpServer, MAX_CONFIG_FILE, ServerConfig, StdioServer},
    elicit::{Elicitation, ElicitationMode, ElicitationRequest, ElicitationResponse},
    hook::McpCallError,
};
use tower_agent_core::{
    agent::{Prepare, Setup, SetupContext},
    context::RunContext,
    error::BoxError,
    message::ToolSpec,
    model::ModelRequest,
    tool::ToolRouter,
};

/// The default time a server has to start and answer `initialize` and `tools/list`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time one tool call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times a lost server is reconnected over the life of an [`McpServers`].
pub const MAX_RESTARTS: u32 = 1;
/// The most tools taken from one server.
pub const MAX_TOOLS: usize = 1000;
/// The largest message read from a server: a stdio line, an SSE event or a JSON response
/// over HTTP (16 MiB). A longer one is dropped unbuffered (a call it answered ends at the call
/// timeout).
pub const MAX_MESSAGE: usize = 16 << 20;
/// The most `tools/list` pages read from one server per listing.
pub const MAX_LIST_PAGES: usize = 100;

/// The prefix of every MCP tool name: `mcp__<server>__<tool>`.
pub const TOOL_PREFIX: &str = "mcp__";

/// A set of named MCP servers whose tools are tool services: a [`Setup`] and [`Prepare`]
/// stage (see the [module docs](self)). Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct McpServers {
    inner: Arc<Inner>,
}

struct Inner {
    servers: Vec<Arc<Server>>,
    /// Each server's tool prefix and what hooks see of it (no connection: run data keeps
    /// it, not the servers).
    tool_servers: Arc<[(String, ToolServer)]>,
    require_all: bool,
}

/// The MCP server a tool call goes to, as hooks see it: Claude Code's `mcp_server` of an MCP
/// tool's PreToolUse and PostToolUse inputs ([`McpServers::server_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolServer {
    /// The server's name (`mcp__<name>__…`).
    pub name: String,
    /// Where it was configured, in Claude Code's words: `project` for a server of a
    /// `.mcp.json` file (measured: Claude Code 2.1.328 on a project's `.mcp.json`),
    /// `dynamic` for one given any other way (Claude Code's name for servers given on its
    /// command line; not measured).
    pub source: &'static str,
}

/// The servers of the [`McpServers`] stages that set up a run (run data).
#[derive(Default)]
struct RunServers(Vec<Arc<[(String, ToolServer)]>>);

/// Builds an [`McpServers`].
#[must_use]
pub struct McpServersBuilder {
    servers: Vec<(String, ServerConfig)>,
    /// The servers read from a `.mcp.json` file.
    project: std::collections::BTreeSet<String>,
    connect_timeout: Duration,
    call_timeout: Duration,
    require_all: bool,
    elicitation: Option<Elicitation>,
}

impl fmt::Debug for McpServersBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServersBuilder")
            .field("servers", &self.servers)
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("require_all", &self.require_all)
            .field("elicitation", &self.elicitation.is_some())
            .finish()
    }
}

impl Default for McpServersBuilder {
    fn default() -> Self {
        McpServersBuilder {
            servers: Vec::new(),
            project: std::collections::BTreeSet::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            require_all: false,
            elicitation: None,
        }
    }
}

impl McpServersBuilder {
    /// Adds a server (replacing one of the same name).
    pub fn server(mut self, name: impl Into<String>, config: impl Into<ServerConfig>) -> Self {
        let name = name.into();
        let config = config.into();
        match self.servers.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = config,
            None => self.servers.push((name, config)),
        }
        self
    }

    /// Adds the servers of a `.mcp.json` document or a settings `mcpServers` value (see
    /// [`McpServers::from_json`]).
    pub fn json(mut self, value: &Value) -> Result<Self, ConfigError> {
        for (name, config) in config::parse_env(value)? {
            self = self.server(name, config);
        }
        Ok(self)
    }

    /// Adds the servers of a `.mcp.json` file (see [`McpServers::from_file`]).
    pub fn file(mut self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let project = path.file_name().is_some_and(|n| n == ".mcp.json");
        for (name, config) in config::read_file(path)? {
            if project {
                self.project.insert(name.clone());
            }
            self = self.server(name, config);
        }
        Ok(self)
    }

    /// The time each server has to connect (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The time each tool call may take (default [`DEFAULT_CALL_TIMEOUT`]).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Makes a server that fails to connect a setup error (the run fails) instead of a
    /// warning.
    pub fn require_all(mut self, yes: bool) -> Self {
        self.require_all = yes;
        self
    }

    /// The service that answers servers' elicitation requests (without one they are
    /// declined).
    pub fn elicitation(mut self, service: Elicitation) -> Self {
        self.elicitation = Some(service);
        self
    }

    /// The set (nothing is connected yet).
    pub fn build(self) -> McpServers {
        let project = self.project;
        let servers: Vec<Arc<Server>> = self
            .servers
            .into_iter()
            .map(|(name, config)| {
                Arc::new(Server::new(
                    name,
                    config,
                    self.connect_timeout,
                    self.call_timeout,
                    self.elicitation.clone(),
                ))
            })
            .collect();
        let tool_servers = (servers.iter())
            .map(|s| {
                let source = match project.contains(s.name()) {
                    true => "project",
                    false => "dynamic",
                };
                let name = s.name().to_owned();
                (s.prefix().to_owned(), ToolServer { name, source })
            })
            .collect();
        McpServers {
            inner: Arc::new(Inner {
                servers,
                tool_servers,
                require_all: self.require_all,
            }),
        }
    }
}

/// What went wrong connecting servers ([`McpServers::connect`]).
#[derive(Debug, Clone)]
pub struct ConnectError {
    failures: Vec<(String, String)>,
}

impl ConnectError {
    /// The servers that failed, with why.
    pub fn failures(&self) -> &[(String, String)] {
        &self.failures
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, why)) in self.failures.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "MCP server `{name}`: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConnectError {}

impl McpServers {
    /// A builder with no servers.
    pub fn builder() -> McpServersBuilder {
        McpServersBuilder::default()
    }

    /// A builder with the servers of a `.mcp.json` document (`{"mcpServers": {…}}`) or of a
    /// settings file's `mcpServers` value (the map itself), `${VAR}` expanded from this
    /// process's environment.
    pub fn from_json(value: &Value) -> Result<McpServersBuilder, ConfigError> {
        Self::builder().json(value)
    }

    /// A builder with the servers of a `.mcp.json` file (at most [`MAX_CONFIG_FILE`], 4 MiB).
    pub fn from_file(path: impl AsRef<Path>) -> Result<McpServersBuilder, ConfigError> {
        Self::builder().file(path)
    }

    /// The server of the MCP tool `tool` (`mcp__<server>__<tool>`) among those of the
    /// `McpServers` stages that set up the run of `ctx`; `None` for another tool.
    ///
    /// ```
    /// use tower_agent_core::context::RunContext;
    /// use tower_agent_mcp::client::McpServers;
    ///
    /// // Outside a run set up by an McpServers stage, no tool has a server.
    /// assert!(McpServers::server_of(&RunContext::new(), "mcp__github__search").is_none());
    /// ```
    pub fn server_of(ctx: &RunContext, tool: &str) -> Option<ToolServer> {
        if !tool.starts_with(TOOL_PREFIX) {
            return None;
        }
        ctx.with_data(|data| {
            let sets = &data.get::<RunServers>()?.0;
            (sets.iter().flat_map(|set| set.iter()))
                .find(|(prefix, _)| tool.starts_with(prefix.as_str()))
                .map(|(_, server)| server.clone())
        })
    }

    /// The configured server names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.inner.servers.iter().map(|s| s.name())
    }

    /// Connects every server that is not connected, concurrently (each within the connect
    /// timeout). `Err` lists the servers that failed; the others are connected.
    pub async fn connect(&self) -> Result<(), ConnectError> {
        let results = futures_util::future::join_all(
            self.inner
                .servers
                .iter()
                .map(|s| async move { (s, s.ensure().await) }),
        )
        .await;
        let failures: Vec<(String, String)> = results
            .into_iter()
            .filter_map(|(s, r)| r.err().map(|e| (s.name().to_owned(), e)))
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ConnectError { failures })
        }
    }

    /// The tool specs of the connected servers, as the model sees them.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.inner
            .servers
            .iter()
            .flat_map(|s| s.tools().iter().map(|t| t.spec.clone()).collect::<Vec<_>>())
            .collect()
    }

    /// The process id of a connected stdio server (`None`: not connected, or HTTP).
    pub fn pid(&self, server: &str) -> Option<u32> {
        self.inner
            .servers
            .iter()
            .find(|s| s.name() == server)
            .and_then(|s| s.pid())
    }

    /// Closes every connection (killing stdio servers and what they started). A later run
    /// connects again (this does not count as a restart).
    pub async fn close(&self) {
        for server in &self.inner.servers {
            server.close().await;
        }
    }
}

impl fmt::Debug for McpServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.names().collect::<Vec<_>>())
            .field("require_all", &self.inner.require_all)
            .finish()
    }
}

impl McpServers {
    /// Connects the servers (see [`connect`](Self::connect); failures are warnings unless
    /// [`require_all`](McpServersBuilder::require_all)) and returns a router with the tools
    /// of the connected ones: each `mcp__<server>__<tool>` by name, plus a route by the
    /// `mcp__<server>__` prefix for tools a server adds later. This is what the setup stage
    /// registers; use it directly to call MCP tools without an agent.
    pub async fn router(&self) -> Result<ToolRouter, ConnectError> {
        if let Err(err) = self.connect().await {
            if self.inner.require_all {
                return Err(err);
            }
            for (name, why) in err.failures() {
                tracing::warn!(server = %name, "MCP server not connected, its tools are left out: {why}");
            }
        }
        let mut router = ToolRouter::new();
        for server in &self.inner.servers {
            if !server.is_connected() {
                continue;
            }
            for tool in server.tools().iter() {
                router.add_service(tool.spec.clone(), conn::McpTool::new(Arc::clone(server)));
            }
            router.add_prefix_service(server.prefix(), conn::McpTool::new(Arc::clone(server)));
        }
        Ok(router)
    }
}

impl Setup for McpServers {
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            let router = self.router().await?;
            cx.add_router(&router);
            // Hooks can tell which server a call goes to.
            cx.ctx().with_data(|data| {
                let sets = &mut data.get_or_default::<RunServers>().0;
                let servers = &self.inner.tool_servers;
                if !sets.iter().any(|s| Arc::ptr_eq(s, servers)) {
                    sets.push(Arc::clone(servers));
                }
            });
            Ok(())
        })
    }
}

impl Prepare for McpServers {
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError> {
        // Nothing changed since the lists were read at connect time: the specs are current.
        if self
            .inner
            .servers
            .iter()
            .all(|s| s.generation.load(Ordering::Acquire) == 0)
        {
            return Ok(());
        }
        let prefixes: Vec<&str> = self.inner.servers.iter().map(|s| s.prefix()).collect();
        let mut specs: Vec<ToolSpec> = req
            .tools
            .iter()
            .filter(|t| !prefixes.iter().any(|p| t.name.starts_with(p)))
            .cloned()
            .collect();
        let mut seen: HashMap<&str, ()> = HashMap::new();
        let lists: Vec<_> = self.inner.servers.iter().map(|s| s.tools()).collect();
        for list in &lists {
            for tool in list.iter() {
                if seen.insert(tool.spec.name.as_str(), ()).is_none() {
                    specs.push(tool.spec.clone());
                }
            }
        }
        req.tools = Arc::new(specs);
        Ok(())
    }
}
