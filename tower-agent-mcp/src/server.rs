//! Tool routers and agents served over MCP: [`McpServer`].
//!
//! An [`McpServer`] is an [`rmcp`] [`ServerHandler`] over a tool service: `tools/list` answers
//! with the tools' specs (name, description, input schema), and `tools/call` becomes a
//! [`ToolRequest`] sent through the tool service — *with its tool layer stack applied*, so
//! PreToolUse hooks, command hooks, guards, ledgers and limits run for remote callers exactly
//! as they do for the agent's own model. Callback hooks go in the stack as tower-agent's
//! `tower_agent::layers::hooks::HookSet::tool_layer`; Claude Code command
//! hooks as `CommandHooks::into_hooks().compile()?.tool_layer()` (a PreToolUse script that
//! exits 2 blocks a remote call as it blocks the model's). An [`Agent`] is served as one tool
//! with [`AgentTool`] (or [`McpServer::agent`]).
//!
//! # Mapping
//!
//! | MCP | tower-agent |
//! |---|---|
//! | `tools/list` | the specs: `name`, `description`, `parameters` as `inputSchema` |
//! | `tools/call` `{name, arguments}` | a [`ToolRequest`]: a [`ToolCall`] (id `mcp-<request id>`, `arguments` or `{}`) and a [`RunContext`] for the caller |
//! | unknown tool name | a JSON-RPC error (`-32602`, invalid params) naming the tools there are |
//! | [`ToolOutput::content`] | a `text` content block (none when it is empty and there are other parts) |
//! | content that parses as a JSON **object** (and is not an error) | also `structuredContent` (the same JSON; arrays and scalars stay text only, as MCP's `structuredContent` is an object) |
//! | an image part, `data:<type>;base64,<data>` URL | an `image` content block |
//! | an image part by other URL, a document part by URL | a `resource_link` |
//! | a document part as a `data:` URL | an embedded `resource` with the base64 `blob` |
//! | [`ToolOutput::is_error`] | `isError: true` |
//! | the tool service's `Err` | `isError: true` with the error's text (never a protocol error) |
//!
//! Arguments that do not fit the tool are the tool's business, as for a model's call: typed
//! tools ([`typed_tool`](tower_agent_core::tool::typed_tool)) answer with an `isError` result naming the
//! problem, and tower-agent's `tower_agent::layers::schema::SchemaGuard` in the layer stack checks any tool
//! against its schema.
//!
//! # The caller's context
//!
//! Each call gets a fresh [`RunContext`]:
//!
//! - [`RunContext::extensions`] are the HTTP request's extensions when the call came over
//!   streamable HTTP: what an authentication layer in front of the MCP service inserted (the
//!   authenticated user) is there for tools and hooks, as with the crate's own HTTP routes.
//! - the session id is the `Mcp-Session-Id` of the HTTP session (or `mcp-<fresh id>` when
//!   there is none, e.g. over stdio); the run id is `mcp-<request id>`.
//! - the cancellation token is cancelled when the client cancels the request
//!   (`notifications/cancelled`: at once) or the connection ends (after rmcp's drain of
//!   in-flight responses, 5 s); the call's future is dropped then too, which kills the
//!   process groups of child processes a tool started.
//! - the working directory is [`McpServer::cwd`], or the process's.
//!
//! # Caps
//!
//! Everything an MCP client sends is bounded:
//!
//! | What | Default | Set with |
//! |---|---|---|
//! | one tool call's duration | 120 s ([`DEFAULT_CALL_TIMEOUT`]); then an `isError` result, and the call's future is dropped | [`McpServer::call_timeout`] |
//! | tool calls running at once, over all sessions of one server | 64 ([`DEFAULT_MAX_CONCURRENT_CALLS`]); more wait (within their timeout) | [`McpServer::max_concurrent_calls`] |
//! | tool calls waiting for a slot | 4 × the running limit (256 by default); one more is an `isError` result at once ("the server is busy") | [`McpServer::max_concurrent_calls`] |
//! | streamable HTTP: live sessions | 1,024 ([`DEFAULT_MAX_SESSIONS`]); a new session beyond it is refused (HTTP 500 naming the limit), existing ones go on | [`SessionLimit::new`] |
//! | streamable HTTP: idle session | closed after 5 minutes without a request (rmcp's `SessionConfig::keep_alive`) | [`SessionLimit::session_config`] |
//! | streamable HTTP: request body | 4 MiB (rmcp's `max_request_body_bytes`); larger is `413` | [`StreamableHttpServerConfig::with_max_request_body_bytes`] |
//! | streamable HTTP: `Host` header | loopback names only (rmcp's DNS-rebinding guard) | [`StreamableHttpServerConfig::with_allowed_hosts`] |
//! | stdio: one JSON-RPC line | 16 MiB (rmcp's `DEFAULT_MAX_LINE_LENGTH`); a longer line is dropped with an error | rmcp's `AsyncRwTransport` |
//!
//! # Example: over HTTP, next to the crate's own routes
//!
//! The MCP service is an ordinary tower service: `nest_service` it (axum's
//! `Router::nest_service`) into an axum `Router` next to the agent's routes
//! (`tower_agent::server::AgentRoutes`, tower-agent's feature `axum`) and put your
//! authentication layer in front of both.
//!
//! ```
//! use std::time::Duration;
//!
//! use axum::Router;
//! use serde_json::json;
//! use tower::ServiceBuilder;
//! use tower_agent_core::tool::{ToolRouter, tool_fn};
//! use tower_agent_mcp::server::McpServer;
//!
//! let tools = ToolRouter::new().tool(tool_fn(
//!     "echo",
//!     "Echoes its input",
//!     json!({ "type": "object" }),
//!     |args, _ctx| async move { Ok(args) },
//! ));
//! // The same layer stack an agent would use (`AgentBuilder::tool_layer`): hooks
//! // (`tower_agent::layers::hooks::HookSet::tool_layer`), guards, ledgers, limits.
//! let stack = ServiceBuilder::new().timeout(Duration::from_secs(30));
//! let server = McpServer::layered(tools, stack).server_info("my-tools", "1.0.0");
//! let app: Router = Router::new()
//!     .nest_service("/mcp", server.http_service());
//!     // .merge(AgentRoutes::for_agent(&agent).routes())  (tower-agent's feature `axum`)
//! # let _ = app;
//! ```
//!
//! # Example: over stdio
//!
//! ```no_run
//! # use tower_agent_core::tool::ToolRouter;
//! # use tower_agent_mcp::server::McpServer;
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! # let tools = ToolRouter::new();
//! McpServer::new(tools).serve_stdio().await?;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/mcp_server.rs` is a complete stdio server a desktop client can launch.

use std::{
    collections::HashMap,
    fmt,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures_util::Stream;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt as _,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage,
        ContentBlock, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
        ResourceContents, ServerCapabilities, ServerConfig, ServerJsonRpcMessage, Tool,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        SessionId, SessionManager, StreamableHttpService,
        session::{
            EventStore, ServerSseMessage,
            local::{LocalSessionManager, LocalSessionManagerError, SessionConfig},
        },
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Semaphore;
use tower::{Layer, Service, ServiceExt};

pub use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;

use tower_agent_core::{
    agent::{Agent, AgentRequest},
    context::RunContext,
    error::BoxError,
    message::{Content, ToolCall, ToolOutput, ToolSpec},
    tool::{BoxToolService, ToolRequest, ToolRouter},
};

/// The default per-call timeout: 120 seconds.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The default number of tool calls one server runs at once: 64.
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 64;

/// The default number of live streamable HTTP sessions: 1,024.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;

/// The streamable HTTP service of an [`McpServer`]: rmcp's [`StreamableHttpService`] with a
/// [`SessionLimit`]. Mount it with axum's `Router::nest_service`.
pub type McpHttpService = StreamableHttpService<McpServer, SessionLimit>;

// ===== McpServer =====

/// A tool service (with its layers) served over MCP. See the [module docs](self).
///
/// # Clone
///
/// Cloning shares the tools, the specs and the concurrency limit (one per server, over all
/// its sessions and transports).
#[derive(Clone)]
pub struct McpServer {
    tools: BoxToolService,
    listed: Arc<[Tool]>,
    index: Arc<HashMap<String, usize>>,
    info: Implementation,
    instructions: Option<String>,
    call_timeout: Duration,
    calls: Arc<Semaphore>,
    admitted: Arc<Semaphore>,
    max_calls: usize,
    cwd: Option<PathBuf>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field(
                "tools",
                &self.listed.iter().map(|t| &*t.name).collect::<Vec<_>>(),
            )
            .field("info", &self.info)
            .field("call_timeout", &self.call_timeout)
            .field("max_concurrent_calls", &self.max_calls)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// The tools of `router`, served as they are (no layers).
    pub fn new(router: ToolRouter) -> Self {
        let specs = router.specs().to_vec();
        Self::from_service(specs, router)
    }

    /// The tools of `router` with a tool layer stack on top: `layer` is what
    /// [`AgentBuilder::tool_layer`](tower_agent_core::agent::AgentBuilder::tool_layer) takes (a
    /// [`ServiceBuilder`](tower::ServiceBuilder) is a layer), so the hooks, guards, ledgers
    /// and limits an agent's tools run under run for remote callers too.
    ///
    /// The stack is applied once, here: a stateful layer (`ConcurrencyLimit`) is shared by
    /// every session.
    pub fn layered<L>(router: ToolRouter, layer: L) -> Self
    where
        L: Layer<ToolRouter>,
        L::Service: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        <L::Service as Service<ToolRequest>>::Error: Into<BoxError>,
        <L::Service as Service<ToolRequest>>::Future: Send + 'static,
    {
        let specs = router.specs().to_vec();
        Self::from_service(specs, layer.layer(router))
    }

    /// Any tool service (e.g. `ServiceBuilder::new().layer(hooks).layer(guard).service(router)`),
    /// described by `specs`: `tools/list` lists them, and `tools/call` is refused for a name
    /// not among them (the service never sees it). A later spec of the same name replaces an
    /// earlier one.
    pub fn from_service<S>(specs: impl IntoIterator<Item = ToolSpec>, service: S) -> Self
    where
        S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let mut listed: Vec<Tool> = Vec::new();
        let mut index = HashMap::new();
        for spec in specs {
            let tool = to_mcp_tool(spec);
            match index.get(&*tool.name) {
                Some(&i) => listed[i] = tool,
                None => {
                    index.insert(tool.name.to_string(), listed.len());
                    listed.push(tool);
                }
            }
        }
        McpServer {
            tools: BoxToolService::new(service.map_err(Into::into)),
            listed: listed.into(),
            index: Arc::new(index),
            info: Implementation::new("tower-agent", env!("CARGO_PKG_VERSION")),
            instructions: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            calls: Arc::new(Semaphore::new(DEFAULT_MAX_CONCURRENT_CALLS)),
            admitted: Arc::new(Semaphore::new(admitted(DEFAULT_MAX_CONCURRENT_CALLS))),
            max_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            cwd: None,
        }
    }

    /// An agent served as one tool, `name`: see [`AgentTool`].
    pub fn agent(agent: Agent, name: impl Into<String>, description: impl Into<String>) -> Self {
        Self::new(ToolRouter::new().tool(AgentTool::new(agent, name, description)))
    }

    /// The name and version the server gives in `initialize` (`serverInfo`); default
    /// `tower-agent` and this crate's version.
    #[must_use]
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.info = Implementation::new(name, version);
        self
    }

    /// Instructions for the client's model (`initialize`'s `instructions`).
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// How long one tool call may take (default [`DEFAULT_CALL_TIMEOUT`], 120 s): then the
    /// call's future is dropped (cancelling the tool) and the caller gets an `isError` result
    /// saying so. An agent served as a tool usually needs more.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How many tool calls run at once over all sessions (default
    /// [`DEFAULT_MAX_CONCURRENT_CALLS`], 64); more wait for a slot, within their timeout, up
    /// to 4 × `n` waiting: a call beyond that is an `isError` result at once (the server is
    /// busy), so a client that floods the server holds a bounded number of calls.
    ///
    /// # Panics
    ///
    /// Panics if `n` is 0.
    #[must_use]
    pub fn max_concurrent_calls(mut self, n: usize) -> Self {
        assert!(n > 0, "max_concurrent_calls must be at least 1");
        self.calls = Arc::new(Semaphore::new(n));
        self.admitted = Arc::new(Semaphore::new(admitted(n)));
        self.max_calls = n;
        self
    }

    /// The working directory of the calls' [`RunContext`]s; default: the process's.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The tools as MCP lists them.
    pub fn tools(&self) -> &[Tool] {
        &self.listed
    }

    /// Serves this server over stdin and stdout (what a desktop client launches) until the
    /// client closes stdin.
    ///
    /// # Errors
    ///
    /// The MCP handshake failed, or the transport failed.
    pub async fn serve_stdio(self) -> Result<(), BoxError> {
        let running = self.serve(rmcp::transport::stdio()).await?;
        running.waiting().await?;
        Ok(())
    }

    /// This server as a streamable HTTP service with the default settings: rmcp's
    /// [`StreamableHttpServerConfig::default`] (sessions, 4 MiB bodies, loopback `Host`
    /// names only) and at most [`DEFAULT_MAX_SESSIONS`] sessions.
    ///
    /// A server reachable by other hosts needs
    /// [`with_allowed_hosts`](StreamableHttpServerConfig::with_allowed_hosts): use
    /// [`http_service_with`](Self::http_service_with).
    pub fn http_service(self) -> McpHttpService {
        self.http_service_with(
            StreamableHttpServerConfig::default(),
            SessionLimit::new(DEFAULT_MAX_SESSIONS),
        )
    }

    /// This server as a streamable HTTP service with rmcp's `config` and a session limit.
    pub fn http_service_with(
        self,
        config: StreamableHttpServerConfig,
        sessions: SessionLimit,
    ) -> McpHttpService {
        StreamableHttpService::new(move || Ok(self.clone()), Arc::new(sessions), config)
    }

    fn context(&self, context: &RequestContext<RoleServer>) -> RunContext {
        let parts = context.extensions.get::<http::request::Parts>();
        // The HTTP session's id, or a fresh, recognisable one (stdio, stateless HTTP).
        let session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| format!("mcp-{}", next_id()), str::to_owned);
        let mut builder = RunContext::builder()
            .session_id(session)
            .run_id(format!("mcp-{}", request_id(context)))
            .cancellation(context.ct.child_token());
        if let Some(parts) = parts {
            builder = builder.extensions(parts.extensions.clone());
        }
        if let Some(cwd) = &self.cwd {
            builder = builder.cwd(cwd);
        }
        builder.build()
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if !self.index.contains_key(&*params.name) {
            let names: Vec<&str> = self.listed.iter().map(|t| &*t.name).collect();
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`; the tools are: {}",
                    super::truncate(&params.name, 200),
                    names.join(", ")
                ),
                None,
            ));
        }
        let ctx = self.context(&context);
        let call_id = ctx.run_id().to_owned();
        let arguments = Value::Object(params.arguments.unwrap_or_default());
        let call = ToolCall::new(call_id.clone(), params.name.into_owned(), arguments);
        let request = ToolRequest::new(call, ctx.clone());
        let Ok(_admitted) = self.admitted.try_acquire() else {
            return Ok(to_call_result(ToolOutput::error(
                call_id,
                format!(
                    "the server is busy ({} calls running or waiting); try again later",
                    admitted(self.max_calls)
                ),
            )));
        };
        let timeout = self.call_timeout;
        let work = async {
            let _permit = self
                .calls
                .acquire()
                .await
                .map_err(|_| BoxError::from("the server is shutting down"))?;
            self.tools.clone().oneshot(request).await
        };
        let output = tokio::select! {
            result = tokio::time::timeout(timeout, work) => match result {
                Ok(Ok(output)) => output,
                Ok(Err(err)) => ToolOutput::error(call_id, format!("the tool failed: {err}")),
                Err(_) => ToolOutput::error(
                    call_id,
                    format!("the tool call timed out after {} s", timeout.as_secs_f64()),
                ),
            },
            () = context.ct.cancelled() => {
                ctx.cancellation().cancel();
                ToolOutput::error(call_id, "the tool call was cancelled")
            }
        };
        Ok(to_call_result(output))
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.info.clone());
        match &self.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.index.get(name).map(|&i| self.listed[i].clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context).await.map(Into::into)
    }
}

/// Calls admitted (running or waiting) for a running limit of `n`.
fn admitted(n: usize) -> usize {
    n.saturating_mul(5).min(Semaphore::MAX_PERMITS)
}

fn request_id(context: &RequestContext<RoleServer>) -> String {
    match serde_json::to_value(&context.id) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => next_id().to_string(),
    }
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A [`ToolSpec`] as MCP lists it. A `parameters` schema that is not a JSON object (which MCP
/// requires) is listed as `{"type": "object"}`.
fn to_mcp_tool(spec: ToolSpec) -> Tool {
    let schema: JsonObject = match spec.parameters {
        Value::Object(map) => map,
        _ => {
            let mut map = JsonObject::new();
            map.insert("type".into(), Value::String("object".into()));
            map
        }
    };
    Tool::new(spec.name, spec.description, Arc::new(schema))
}

/// A [`ToolOutput`] as an MCP `tools/call` result (see the module docs' table).
pub fn to_call_result(output: ToolOutput) -> CallToolResult {
    let mut content = Vec::with_capacity(1 + output.parts.len());
    let structured = if output.is_error {
        None
    } else {
        structured(&output.content)
    };
    if !output.content.is_empty() || output.parts.is_empty() {
        content.push(ContentBlock::text(output.content));
    }
    for part in output.parts {
        match part {
            Content::Text { text } => content.push(ContentBlock::text(text)),
            Content::Image { url } => content.push(match data_url(&url) {
                Some((mime, data)) => ContentBlock::image(data, mime),
                None => ContentBlock::resource_link(rmcp::model::Resource::new(url, "image")),
            }),
            Content::Document { url, name } => {
                let name = name.unwrap_or_else(|| "document".to_owned());
                content.push(match data_url(&url) {
                    Some((mime, data)) => ContentBlock::resource(
                        ResourceContents::blob(data, format!("attachment:{name}"))
                            .with_mime_type(mime),
                    ),
                    None => ContentBlock::resource_link(rmcp::model::Resource::new(url, name)),
                });
            }
            // A model's reasoning and provider-specific items are not a tool's output.
            Content::Reasoning(_) | Content::Provider(_) => {}
        }
    }
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = structured;
    result
}

/// The JSON object `text` holds, if it is one.
fn structured(text: &str) -> Option<Value> {
    if !text.trim_start().starts_with('{') {
        return None;
    }
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object)
}

/// `(media type, base64 data)` of a `data:<type>;base64,<data>` URL.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let mime = head.strip_suffix(";base64")?;
    Some((mime, data))
}

// ===== AgentTool =====

/// The arguments of an [`AgentTool`].
#[derive(Debug, Deserialize, JsonSchema)]
struct AgentArgs {
    /// The task for the agent, with everything it needs to know.
    prompt: String,
    /// A thread to continue (the same id continues the same conversation); a fresh one if
    /// absent.
    #[serde(default)]
    thread_id: Option<String>,
}

/// An [`Agent`] as one tool: `{prompt: string}` runs the agent on the prompt and answers with
/// the run's final text; a run that does not finish (step limit, a hook's block, an abort, a
/// refusal, cancellation) or fails is an error output naming its outcome.
///
/// With [`threads`](Self::threads), the tool also takes `thread_id`: runs with the same id
/// continue one conversation (kept in the agent's store). Whoever can call the tool can then
/// continue any thread whose id they know: keep it off for callers you do not trust, or put a
/// check on the id (a PreToolUse hook that reads the principal) in the layer stack.
///
/// The caller's per-request data ([`RunContext::extensions`], e.g. the authenticated user)
/// is the run's ([`AgentRequest::extensions`]), and cancelling the call cancels the run.
#[derive(Clone)]
pub struct AgentTool {
    agent: Agent,
    spec: ToolSpec,
    threads: bool,
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.spec.name)
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

impl AgentTool {
    /// The agent as a tool `name` (no `thread_id` argument).
    pub fn new(agent: Agent, name: impl Into<String>, description: impl Into<String>) -> Self {
        AgentTool {
            agent,
            spec: ToolSpec::new(name, description, Self::schema(false)),
            threads: false,
        }
    }

    /// Whether the tool takes a `thread_id` to continue a conversation (default: no).
    #[must_use]
    pub fn threads(mut self, enabled: bool) -> Self {
        self.threads = enabled;
        self.spec.parameters = Self::schema(enabled);
        self
    }

    fn schema(threads: bool) -> Value {
        let mut schema = schemars::schema_for!(AgentArgs).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
            map.remove("title");
            if !threads && let Some(Value::Object(props)) = map.get_mut("properties") {
                props.remove("thread_id");
            }
        }
        schema
    }
}

impl tower_agent_core::tool::Tool for AgentTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, req: ToolRequest) -> Result<ToolOutput, BoxError> {
        let id = req.call.id;
        let name = &self.spec.name;
        let args: AgentArgs = match serde_json::from_value(req.call.arguments) {
            Ok(args) => args,
            Err(err) => {
                return Ok(ToolOutput::error(
                    id,
                    format!("invalid arguments for tool `{name}`: {err}"),
                ));
            }
        };
        let mut request =
            AgentRequest::new(args.prompt).cancellation(req.ctx.cancellation().child_token());
        request.extensions = req.ctx.extensions().clone();
        match (args.thread_id, self.threads) {
            (Some(_), false) => {
                return Ok(ToolOutput::error(
                    id,
                    format!("tool `{name}` takes no `thread_id`; call it with a `prompt` only"),
                ));
            }
            (Some(thread), true) => request = request.thread(thread),
            (None, _) => {}
        }
        match self.agent.run(request).await {
            Ok(resp) if resp.outcome.is_finished() => Ok(ToolOutput::text(id, resp.text)),
            Ok(resp) => Ok(ToolOutput::error(
                id,
                format!(
                    "the agent did not finish ({:?}); its last answer: {}",
                    resp.outcome, resp.text
                ),
            )),
            Err(err) => Ok(ToolOutput::error(
                id,
                format!("the agent's run failed: {err}"),
            )),
        }
    }
}

// ===== SessionLimit =====

/// rmcp's in-memory [`LocalSessionManager`] with a cap on live sessions: an `initialize` that
/// would open one more than `max` is refused (HTTP 500, "the server has reached its limit of
/// N MCP sessions"); sessions close when the client deletes them, or after the idle timeout
/// of the [`SessionConfig`] (rmcp's default: 5 minutes).
#[derive(Debug)]
pub struct SessionLimit {
    inner: LocalSessionManager,
    max: usize,
    create: tokio::sync::Mutex<()>,
}

impl SessionLimit {
    /// At most `max` live sessions, with rmcp's default [`SessionConfig`].
    pub fn new(max: usize) -> Self {
        SessionLimit {
            inner: LocalSessionManager::default(),
            max,
            create: tokio::sync::Mutex::new(()),
        }
    }

    /// rmcp's per-session settings (idle timeout, channel capacity …).
    #[must_use]
    pub fn session_config(mut self, config: SessionConfig) -> Self {
        self.inner.session_config = config;
        self
    }

    /// How many sessions are live.
    pub async fn len(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// Whether no session is live.
    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }
}

/// The error of a [`SessionLimit`].
#[derive(Debug)]
#[non_exhaustive]
pub enum SessionLimitError {
    /// A new session would exceed the limit.
    Full {
        /// The limit.
        max: usize,
    },
    /// rmcp's session manager failed.
    Session(LocalSessionManagerError),
}

impl fmt::Display for SessionLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionLimitError::Full { max } => {
                write!(f, "the server has reached its limit of {max} MCP sessions")
            }
            SessionLimitError::Session(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for SessionLimitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SessionLimitError::Full { .. } => None,
            SessionLimitError::Session(err) => Some(err),
        }
    }
}

impl From<LocalSessionManagerError> for SessionLimitError {
    fn from(err: LocalSessionManagerError) -> Self {
        SessionLimitError::Session(err)
    }
}

impl SessionManager for SessionLimit {
    type Error = SessionLimitError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // NOTE: one creation at a time, so the count checked is the count created against.
        let _one = self.create.lock().await;
        if self.inner.sessions.read().await.len() >= self.max {
            return Err(SessionLimitError::Full { max: self.max });
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls() {
        assert_eq!(
            data_url("data:image/png;base64,AAAA"),
            Some(("image/png", "AAAA"))
        );
        assert_eq!(data_url("https://x/y.png"), None);
        assert_eq!(data_url("data:image/png,AAAA"), None);
    }

    #[test]
    fn structured_only_for_objects() {
        assert!(structured(r#"{"a":1}"#).is_some());
        assert!(structured("[1,2]").is_none());
        assert!(structured("{not json").is_none());
        assert!(structured("plain").is_none());
    }

    #[test]
    fn traits() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<McpServer>();
        check::<AgentTool>();
    }
}
