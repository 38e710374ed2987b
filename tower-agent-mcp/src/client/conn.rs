//! One server: its connection (stdio child or streamable HTTP), its tool list, and the tool
//! service that calls it.

use std::{
    borrow::Cow,
    collections::HashMap,
    error::Error,
    fmt,
    future::Future,
    process::Stdio,
    sync::{
        Arc, Mutex, RwLock,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use futures_util::future::BoxFuture;
use rmcp::{
    ClientHandler, ServiceExt,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
        ElicitationAction, ErrorData, Implementation, JsonRpcMessage, PaginatedRequestParams,
        ProtocolVersion, ServerNotification,
    },
    service::{
        ClientInitializeError, NotificationContext, Peer, RequestContext, RoleClient,
        RunningService, RxJsonRpcMessage, ServiceError, TxJsonRpcMessage,
    },
    transport::{DynamicTransportError, Transport, streamable_http_client::StreamableHttpError},
};
use serde_json::Value;
use tower::{Service, ServiceExt as _};

use super::{
    HttpServer, MAX_LIST_PAGES, MAX_MESSAGE, MAX_RESTARTS, MAX_TOOLS, ServerConfig, StdioServer,
    TOOL_PREFIX,
    elicit::{Elicitation, ElicitationMode, ElicitationRequest, ElicitationResponse},
    result::{map_result, whole_numbers},
};
use tower_agent_core::{
    error::BoxError,
    message::{ToolOutput, ToolSpec},
    tool::ToolRequest,
};
use tower_agent_os::process::ProcessTree;

/// The most bytes of a stdio server's stderr read (and logged) at a time.
const STDERR_CHUNK: usize = 8192;

/// How long a stdio server that failed to connect is given to exit, so the error can say how
/// it did (its output closed as it exited, so this is short).
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// One tool of a server: the name the model uses, the server's name, the spec.
#[derive(Debug, Clone)]
pub(super) struct ToolEntry {
    pub(super) remote: String,
    pub(super) spec: ToolSpec,
}

/// The tool list of a server, shared with its client handler (which refreshes it on
/// `notifications/tools/list_changed`).
#[derive(Default)]
struct Tools {
    list: RwLock<Arc<Vec<ToolEntry>>>,
    /// A list-changed notification came and the list was not read again since.
    stale: AtomicBool,
}

pub(super) struct Server {
    name: String,
    prefix: String,
    config: ServerConfig,
    connect_timeout: Duration,
    call_timeout: Duration,
    elicitation: Option<Elicitation>,
    tools: Arc<Tools>,
    /// Bumped each time the tool list changed after the first listing.
    pub(super) generation: Arc<AtomicU64>,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    /// A clone of the live connection's peer and pid, for synchronous reads.
    live: Mutex<Option<(Peer<RoleClient>, Option<u32>)>>,
    restarts: AtomicU32,
    ever_connected: AtomicBool,
    /// The run contexts of the tool calls in flight (for elicitation requests).
    inflight: Arc<super::hook::InFlight>,
}

pub(super) struct Conn {
    service: RunningService<RoleClient, Handler>,
    /// The stdio server's processes (killed when the connection is dropped).
    _tree: Option<Mutex<ProcessTree>>,
    pid: Option<u32>,
    /// A call found the transport closed (before the service noticed).
    lost: AtomicBool,
}

impl Conn {
    fn is_closed(&self) -> bool {
        self.lost.load(Ordering::Acquire) || self.service.is_closed()
    }
}

/// Characters a provider accepts in a tool name: others become `_` (as Claude Code does).
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Server {
    pub(super) fn new(
        name: String,
        config: ServerConfig,
        connect_timeout: Duration,
        call_timeout: Duration,
        elicitation: Option<Elicitation>,
    ) -> Self {
        let prefix = format!("{TOOL_PREFIX}{}__", sanitize(&name));
        Server {
            name,
            prefix,
            config,
            connect_timeout,
            call_timeout,
            elicitation,
            tools: Arc::default(),
            generation: Arc::default(),
            conn: tokio::sync::Mutex::new(None),
            live: Mutex::new(None),
            restarts: AtomicU32::new(0),
            ever_connected: AtomicBool::new(false),
            inflight: Arc::default(),
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    pub(super) fn tools(&self) -> Arc<Vec<ToolEntry>> {
        Arc::clone(&self.tools.list.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Option<(Peer<RoleClient>, Option<u32>)>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn is_connected(&self) -> bool {
        self.live()
            .as_ref()
            .is_some_and(|(peer, _)| !peer.is_transport_closed())
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.live().as_ref().and_then(|(_, pid)| *pid)
    }

    pub(super) async fn close(&self) {
        let mut slot = self.conn.lock().await;
        let old = slot.take();
        *self.live() = None;
        // A closed server is connected again on demand, restarts left or not.
        self.ever_connected.store(false, Ordering::Release);
        drop(old);
    }

    /// The live connection: connected if there is none, reconnected (once over the life of
    /// the set, see [`MAX_RESTARTS`]) if it was lost.
    pub(super) async fn ensure(&self) -> Result<Arc<Conn>, String> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = &*slot {
            if !conn.is_closed() {
                return Ok(Arc::clone(conn));
            }
            // Lost: its processes are killed as it is dropped.
            *slot = None;
            *self.live() = None;
            let restarts = self.restarts.fetch_add(1, Ordering::AcqRel);
            if restarts >= MAX_RESTARTS {
                return Err(format!(
                    "the server stopped again after {MAX_RESTARTS} restart(s); it stays down"
                ));
            }
            tracing::warn!(server = %self.name, "MCP server connection lost (crashed or closed); restarting it once");
        } else if self.ever_connected.load(Ordering::Acquire)
            && self.restarts.load(Ordering::Acquire) >= MAX_RESTARTS
        {
            // It was lost, and the restart failed or was lost too.
            return Err(format!(
                "the server stopped again after {MAX_RESTARTS} restart(s); it stays down"
            ));
        }
        let conn = match tokio::time::timeout(self.connect_timeout, self.connect()).await {
            Ok(Ok(conn)) => Arc::new(conn),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(format!(
                    "did not connect within {:?} (connect timeout)",
                    self.connect_timeout
                ));
            }
        };
        *self.live() = Some((conn.service.peer().clone(), conn.pid));
        self.ever_connected.store(true, Ordering::Release);
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    async fn connect(&self) -> Result<Conn, String> {
        let handler = Handler {
            server: self.name.clone().into(),
            prefix: self.prefix.clone().into(),
            elicitation: self.elicitation.clone(),
            tools: Arc::clone(&self.tools),
            generation: Arc::clone(&self.generation),
            timeout: self.call_timeout,
            inflight: Arc::clone(&self.inflight),
        };
        let conn = match &self.config {
            ServerConfig::Stdio(cfg) => connect_stdio(cfg, handler, &self.name).await?,
            ServerConfig::Http(cfg) => connect_http(cfg, handler).await?,
        };
        let list = list_tools(conn.service.peer(), &self.name, &self.prefix)
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let first = !self.ever_connected.load(Ordering::Acquire);
        store_tools(&self.tools, &self.generation, list, first);
        Ok(conn)
    }

    /// Reads the tool list again if a list-changed notification said so (the transport
    /// marks the list stale as the notification is received, so one sent before a call's
    /// result is seen here).
    async fn refresh_if_stale(&self, peer: &Peer<RoleClient>) {
        if !self.tools.stale.load(Ordering::Acquire) {
            return;
        }
        refresh(
            peer,
            &self.tools,
            &self.generation,
            &self.name,
            &self.prefix,
            self.call_timeout,
        )
        .await;
    }

    /// The live connection if there is one, without connecting (`Err`: why there is none).
    pub(super) fn current(&self) -> Result<Arc<Conn>, String> {
        let Ok(slot) = self.conn.try_lock() else {
            return Err("it is connecting".to_owned());
        };
        match &*slot {
            Some(conn) if !conn.is_closed() => Ok(Arc::clone(conn)),
            Some(_) => Err("its connection was lost".to_owned()),
            None => Err("it is not connected".to_owned()),
        }
    }

    /// Calls the server's tool `remote` on `conn` within `timeout` (`None`: the caller
    /// bounds it): the `CallToolResult` as JSON, or why there is none (naming the server).
    /// The tool services and `mcp_tool` hooks both call through here.
    pub(super) async fn call_on(
        &self,
        conn: &Conn,
        remote: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<Value, String> {
        let mut params = CallToolRequestParams::new(remote.to_owned());
        match arguments {
            Value::Object(args) => params = params.with_arguments(args),
            Value::Null => {}
            other => {
                return Err(format!(
                    "the arguments of `{remote}` must be a JSON object, not {other}"
                ));
            }
        }
        let call = conn.service.call_tool(params);
        let result = match timeout {
            Some(t) => match tokio::time::timeout(t, call).await {
                Ok(result) => result,
                Err(_) => {
                    return Err(format!(
                        "the MCP server `{}` did not answer `{remote}` within {t:?}; the call was cancelled",
                        self.name
                    ));
                }
            },
            None => call.await,
        };
        match result {
            Err(e) => {
                if matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    conn.lost.store(true, Ordering::Release);
                }
                let e = describe(&e);
                Err(if conn.is_closed() {
                    let next = if self.restarts.load(Ordering::Acquire) < MAX_RESTARTS {
                        "it is restarted on the next call"
                    } else {
                        "it was restarted once already and stays down"
                    };
                    format!(
                        "the MCP server `{}` stopped during the call ({e}); {next}",
                        self.name
                    )
                } else {
                    format!("the MCP server `{}` failed `{remote}`: {e}", self.name)
                })
            }
            Ok(result) => {
                serde_json::to_value(&result).map_err(|e| format!("unreadable result: {e}"))
            }
        }
    }

    async fn call(&self, req: ToolRequest) -> ToolOutput {
        let id = req.call.id.clone();
        let fail = |why: String| ToolOutput::error(id.clone(), why);
        let name = req.call.name.as_str();
        let remote = match self.tools().iter().find(|t| t.spec.name == name) {
            Some(t) => t.remote.clone(),
            None => {
                return fail(format!(
                    "the MCP server `{}` does not offer `{name}` (any more)",
                    self.name
                ));
            }
        };
        let conn = match self.ensure().await {
            Ok(conn) => conn,
            Err(why) => {
                return fail(format!(
                    "the MCP server `{}` is not available: {why}",
                    self.name
                ));
            }
        };
        // The call's run, for the elicitation requests the server sends during it.
        let _inflight = self.inflight.enter(req.ctx);
        let output = match self
            .call_on(&conn, &remote, req.call.arguments, Some(self.call_timeout))
            .await
        {
            Ok(value) => map_result(id.clone(), &value),
            Err(why) => fail(why),
        };
        if !conn.is_closed() {
            self.refresh_if_stale(conn.service.peer()).await;
        }
        output
    }
}

fn store_tools(tools: &Tools, generation: &AtomicU64, list: Vec<ToolEntry>, first: bool) {
    let mut slot = tools.list.write().unwrap_or_else(|p| p.into_inner());
    let changed = slot.len() != list.len()
        || slot
            .iter()
            .zip(&list)
            .any(|(a, b)| a.remote != b.remote || a.spec != b.spec);
    *slot = Arc::new(list);
    tools.stale.store(false, Ordering::Release);
    if changed && !first {
        generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// A call's error for the model: a lost transport without rmcp's transport type names.
fn describe(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportClosed => "connection closed".to_owned(),
        ServiceError::TransportSend(inner) => format!("connection lost: {}", causes(inner)),
        other => causes(other),
    }
}

/// Why connecting failed, for the model and the caller, without rmcp's transport type names:
/// what could not be done and the underlying cause (say "Connection refused"). Connecting and
/// reconnecting both come here (through [`Server::connect`]), over stdio and HTTP alike.
fn connect_error(e: &ClientInitializeError) -> String {
    fn why(e: &ClientInitializeError) -> String {
        match e {
            ClientInitializeError::TransportError { error, context } => {
                format!("could not {context}: {}", causes(error))
            }
            ClientInitializeError::ConnectionClosed(what) => {
                format!("the connection closed before the {what}")
            }
            ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
                format!("{}; then {}", why(discover), why(fallback))
            }
            other => causes(other),
        }
    }
    format!("MCP initialization failed: {}", why(e))
}

/// An error and its causes, `: `-separated, each once (many errors repeat their cause in
/// their own message), without rmcp's transport type names: a [`DynamicTransportError`]
/// (`Transport [<type name>] error: …`) gives only its cause, a [`TransportFailure`].
///
/// At most [`MAX_ERROR_TEXT`] bytes (then cut, with `…`): the messages may be the server's own
/// (a JSON-RPC error of up to [`MAX_MESSAGE`] bytes), and the text goes to the model.
fn causes(err: &(dyn Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(err);
    while let Some(e) = next {
        next = e.source();
        if e.is::<DynamicTransportError>() {
            continue;
        }
        let line = e.to_string();
        let line = crate::truncate(&line, MAX_ERROR_TEXT);
        if !text.contains(&*line) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&line);
        }
        if text.len() >= MAX_ERROR_TEXT {
            break;
        }
    }
    crate::truncate(&text, MAX_ERROR_TEXT).into_owned()
}

/// The most bytes of an MCP server's error text the model (or a caller) gets: 4 KiB.
const MAX_ERROR_TEXT: usize = 4096;

/// A transport's error: what failed and why (see [`Explain`]), as the model and the caller see
/// it.
#[derive(Debug)]
struct TransportFailure(String);

impl fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for TransportFailure {}

/// A transport's own error as text, every cause included.
trait Explain {
    fn explain(&self) -> String;
}

/// The stdio transport's.
impl Explain for std::io::Error {
    fn explain(&self) -> String {
        causes(self)
    }
}

/// The streamable HTTP transport's: its HTTP client's error (say "error sending request …",
/// caused by "Connection refused") is not given as its source, so it is unwrapped here.
impl<E: Error + Send + Sync + 'static> Explain for StreamableHttpError<E> {
    fn explain(&self) -> String {
        match self {
            StreamableHttpError::Client(inner) => causes(inner),
            other => causes(other),
        }
    }
}

/// Reads the tool list again, within `timeout` (a server that does not answer keeps its
/// old list, with a warning).
async fn refresh(
    peer: &Peer<RoleClient>,
    tools: &Tools,
    generation: &AtomicU64,
    server: &str,
    prefix: &str,
    timeout: Duration,
) {
    let listed = tokio::time::timeout(timeout, list_tools(peer, server, prefix))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")));
    match listed {
        Ok(list) => store_tools(tools, generation, list, false),
        Err(e) => tracing::warn!(
            server,
            "MCP server's tool list could not be read again: {e}"
        ),
    }
}

async fn list_tools(
    peer: &Peer<RoleClient>,
    server: &str,
    prefix: &str,
) -> Result<Vec<ToolEntry>, String> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer.list_tools(params).await.map_err(|e| describe(&e))?;
        for tool in page.tools {
            if out.len() == MAX_TOOLS {
                tracing::warn!(
                    server,
                    "MCP server offers more than {MAX_TOOLS} tools; the rest are left out"
                );
                return Ok(out);
            }
            let value = serde_json::to_value(&tool).map_err(|e| e.to_string())?;
            let remote = tool.name.to_string();
            let description = value
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let parameters = value
                .get("inputSchema")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| serde_json::json!({"type": "object"}));
            out.push(ToolEntry {
                spec: ToolSpec::new(
                    format!("{prefix}{}", sanitize(&remote)),
                    description,
                    parameters,
                ),
                remote,
            });
        }
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => return Ok(out),
        }
    }
    tracing::warn!(
        server,
        "MCP server's tool list has more than {MAX_LIST_PAGES} pages; the rest are left out"
    );
    Ok(out)
}

fn client_info() -> ClientConfig {
    // Both elicitation modes: the service is given either.
    let caps: ClientCapabilities =
        serde_json::from_value(serde_json::json!({"elicitation": {"form": {}, "url": {}}}))
            .expect("valid capabilities");
    // The handshake protocol (2025-11-25): servers may send requests (elicitation) and
    // notifications (tool list changes) during a session, as deployed servers do.
    ClientConfig::new(
        caps,
        Implementation::new("tower-agent", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

async fn connect_stdio(cfg: &StdioServer, handler: Handler, name: &str) -> Result<Conn, String> {
    let mut std_cmd = std::process::Command::new(&cfg.command);
    std_cmd.args(&cfg.args).envs(&cfg.env);
    if let Some(dir) = &cfg.cwd {
        std_cmd.current_dir(dir);
    }
    let mut tree = ProcessTree::prepare(&mut std_cmd);
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", cfg.command))?;
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let pid = child.id();
    tree.started(pid, &[&stdin, &stdout, &stderr]);
    let label: Arc<str> = name.into();
    // Stderr is read to its end (a reader that stopped would make the server die of SIGPIPE),
    // in reads of at most STDERR_CHUNK bytes, each logged at debug level and dropped: a
    // server's stderr costs no memory however much it writes.
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut stderr = stderr;
        let mut buf = vec![0; STDERR_CHUNK];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            let text = String::from_utf8_lossy(&buf[..n]);
            tracing::debug!(server = %label, "MCP server stderr: {}", text.trim_end());
        }
    });
    let transport =
        rmcp::transport::async_rw::AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin)
            .with_max_line_length(MAX_MESSAGE);
    let transport = Watch {
        inner: transport,
        tools: Arc::clone(&handler.tools),
    };
    let service = match handler.serve(transport).await {
        Ok(service) => service,
        Err(e) => {
            let why = connect_error(&e);
            // A server that quit: say how (it is killed with its tree if it did not).
            return Err(match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                Ok(Ok(status)) => format!("{why}; the server process exited ({status})"),
                _ => why,
            });
        }
    };
    // Reaps the child when it exits (killed with its tree when the connection is dropped).
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(Conn {
        service,
        _tree: Some(Mutex::new(tree)),
        pid,
        lost: AtomicBool::new(false),
    })
}

async fn connect_http(cfg: &HttpServer, handler: Handler) -> Result<Conn, String> {
    use rmcp::transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    };
    let mut headers = HashMap::new();
    for (k, v) in &cfg.headers {
        let name =
            http::HeaderName::try_from(k.as_str()).map_err(|e| format!("header `{k}`: {e}"))?;
        let value =
            http::HeaderValue::try_from(v.as_str()).map_err(|e| format!("header `{k}`: {e}"))?;
        headers.insert(name, value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(cfg.url.as_str())
        .custom_headers(headers)
        .max_sse_event_size(MAX_MESSAGE)
        .max_json_response_size(MAX_MESSAGE);
    let transport = Watch {
        inner: StreamableHttpClientTransport::from_config(config),
        tools: Arc::clone(&handler.tools),
    };
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| connect_error(&e))?;
    Ok(Conn {
        service,
        _tree: None,
        pid: None,
        lost: AtomicBool::new(false),
    })
}

/// A transport that marks the tool list stale the moment a `notifications/tools/list_changed`
/// is received: in order with the responses, before the result of the call during which the
/// server sent it is handed out (rmcp handles notifications in tasks of their own).
struct Watch<T> {
    inner: T,
    tools: Arc<Tools>,
}

impl<T> Transport<RoleClient> for Watch<T>
where
    T: Transport<RoleClient>,
    T::Error: Explain,
{
    /// The inner transport's error, explained (rmcp's error messages name the transport's type,
    /// and its HTTP client error hides its cause).
    type Error = TransportFailure;

    fn name() -> Cow<'static, str> {
        "MCP".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = self.inner.send(item);
        async move { sent.await.map_err(|e| TransportFailure(e.explain())) }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let msg = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(n)) = &msg
            && matches!(
                n.notification,
                ServerNotification::ToolListChangedNotification(_)
            )
        {
            self.tools.stale.store(true, Ordering::Release);
        }
        msg
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner
            .close()
            .await
            .map_err(|e| TransportFailure(e.explain()))
    }
}

/// The client side of one connection: answers elicitation, follows tool list changes.
#[derive(Clone)]
struct Handler {
    server: Arc<str>,
    prefix: Arc<str>,
    elicitation: Option<Elicitation>,
    tools: Arc<Tools>,
    generation: Arc<AtomicU64>,
    /// Bounds an elicitation and a tool list refresh (the call timeout).
    timeout: Duration,
    inflight: Arc<super::hook::InFlight>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        client_info()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(service) = self.elicitation.clone() else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let (message, mode) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (
                message,
                ElicitationMode::Form {
                    requested_schema: whole_numbers(
                        serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
                    ),
                },
            ),
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => (
                message,
                ElicitationMode::Url {
                    url,
                    elicitation_id,
                },
            ),
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        let mut req = ElicitationRequest::new(self.server.to_string(), message, mode);
        req.ctx = self.inflight.latest();
        let answer = tokio::time::timeout(self.timeout, service.oneshot(req))
            .await
            .unwrap_or_else(|_| {
                tracing::warn!(server = %self.server, "elicitation not answered within {:?}: cancelled", self.timeout);
                Ok(ElicitationResponse::Cancel)
            });
        match answer {
            Ok(ElicitationResponse::Accept(content)) => {
                let mut result = ElicitResult::new(ElicitationAction::Accept);
                result.content = content;
                Ok(result)
            }
            Ok(ElicitationResponse::Decline) => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Ok(ElicitationResponse::Cancel) => Ok(ElicitResult::new(ElicitationAction::Cancel)),
            Err(e) => {
                tracing::warn!(server = %self.server, "elicitation service failed: {e}");
                Err(ErrorData::internal_error(
                    format!("the client could not ask the user: {e}"),
                    None,
                ))
            }
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.tools.stale.store(true, Ordering::Release);
        refresh(
            &context.peer,
            &self.tools,
            &self.generation,
            &self.server,
            &self.prefix,
            self.timeout,
        )
        .await;
    }
}

/// The tool service of one server: calls the tool the request names.
#[derive(Clone)]
pub(super) struct McpTool {
    server: Arc<Server>,
}

impl McpTool {
    pub(super) fn new(server: Arc<Server>) -> Self {
        McpTool { server }
    }
}

impl Service<ToolRequest> for McpTool {
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<ToolOutput, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let server = Arc::clone(&self.server);
        Box::pin(async move { Ok(server.call(req).await) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_error_text_is_cut() {
        #[derive(Debug)]
        struct Chain(String, Option<Box<Chain>>);
        impl fmt::Display for Chain {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl Error for Chain {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                self.1.as_deref().map(|e| e as &(dyn Error + 'static))
            }
        }
        let huge = "é".repeat(MAX_MESSAGE / 2);
        let err = Chain("initialize".into(), Some(Box::new(Chain(huge, None))));
        let text = causes(&err);
        assert!(
            text.len() <= MAX_ERROR_TEXT + '…'.len_utf8(),
            "{}",
            text.len()
        );
        assert!(text.starts_with("initialize: éé") && text.ends_with('…'));
        let small = Chain("refused".into(), None);
        assert_eq!(causes(&small), "refused");
    }

    #[test]
    fn sanitized_names() {
        assert_eq!(sanitize("get-sum"), "get-sum");
        assert_eq!(sanitize("a.b c/d"), "a_b_c_d");
    }
}
