//! MCP client tools against in-process `rmcp` servers: over streamable HTTP on 127.0.0.1
//! (with a bearer token the server checks) and over stdio (this test binary re-run as an MCP
//! server, see `stdio_server_child`). Every result mapping and fault: text, structured,
//! image, resource link, `isError`, a hang (call timeout), a crash (restarted once), garbage
//! on stdout, tool list changes, elicitation (accept, decline, none), no process left after
//! the agent is dropped, connect and reconnect failures (errors naming the server and the
//! cause, no internal type names).

use crate::support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::{RequestContext, RoleServer},
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tower::{ServiceExt as _, service_fn};
use tower_agent::{
    Agent, BoxError,
    agent::Outcome,
    context::RunContext,
    mcp::client::{
        ElicitationMode, ElicitationRequest, ElicitationResponse, HttpServer, McpServers,
        StdioServer,
    },
    message::{Content, ToolCall, ToolOutput},
    model::ScriptedModel,
    tool::ToolRequest,
};

const TOKEN: &str = "t0k3n";
const CHILD_ENV: &str = "TOWER_AGENT_MCP_TEST_CHILD";
/// The size of the `flood` tool's line.
const FLOOD_MIB: usize = 256;

// ===== the test server =====

#[derive(Clone, Default)]
struct TestServer {
    /// `grow` was called: `late` is offered and `shrinking` is not.
    grown: Arc<AtomicBool>,
}

fn tool(name: &str, props: Value) -> Value {
    json!({"name": name, "description": format!("the {name} tool"),
           "inputSchema": {"type": "object", "properties": props}})
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = vec![tool("echo", json!({"text": {"type": "string"}}))];
        for name in [
            "structured",
            "image",
            "link",
            "fail",
            "hang",
            "grow",
            "ask",
            "pid",
            "crash",
            "garbage",
            "flood",
            "errflood",
            "ask_url",
            "spawn",
        ] {
            tools.push(tool(name, json!({})));
        }
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool("late", json!({})));
        } else {
            tools.push(tool("shrinking", json!({})));
        }
        Ok(serde_json::from_value(json!({ "tools": tools })).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        let result = match request.name.as_ref() {
            "echo" => text(format!("echo: {}", args["text"].as_str().unwrap_or(""))),
            "structured" => {
                json!({"content": [], "structuredContent": {"temp": 21.5, "unit": "C"}})
            }
            "image" => json!({"content": [
                {"type": "text", "text": "a pixel"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}),
            "link" => json!({"content": [{"type": "resource_link", "uri": "file:///srv/report.txt",
                "name": "report.txt", "mimeType": "text/plain"}]}),
            "fail" => json!({"content": [{"type": "text", "text": "disk full"}], "isError": true}),
            "hang" => std::future::pending().await,
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                context.peer.notify_tool_list_changed().await.unwrap();
                text("grown".into())
            }
            "late" => text("late tool ran".into()),
            "shrinking" => text("still here".into()),
            "ask" => {
                let params: ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "form", "message": "Your name?",
                    "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}, "required": ["name"]}
                }))
                .unwrap();
                match context.peer.create_elicitation(params).await {
                    Ok(r) => text(format!(
                        "{}:{}",
                        serde_json::to_value(r.action).unwrap().as_str().unwrap(),
                        r.content.map(|c| c.to_string()).unwrap_or_default()
                    )),
                    Err(e) => text(format!("elicitation failed: {e}")),
                }
            }
            "pid" => text(std::process::id().to_string()),
            "ask_url" => {
                let params: ElicitRequestParams = serde_json::from_value(json!({
                    "mode": "url", "message": "Log in, please",
                    "url": "https://auth.example/login?s=1", "elicitationId": "e-1"
                }))
                .unwrap();
                match context.peer.create_elicitation(params).await {
                    Ok(r) => text(serde_json::to_value(r.action).unwrap().to_string()),
                    Err(e) => text(format!("elicitation failed: {e}")),
                }
            }
            "errflood" => {
                // FLOOD_MIB MiB on stderr without a newline.
                use std::io::Write;
                let mut err = std::io::stderr().lock();
                let chunk = vec![b'e'; 1 << 20];
                for _ in 0..FLOOD_MIB {
                    err.write_all(&chunk).unwrap();
                }
                err.flush().unwrap();
                text("survived".into())
            }
            "flood" => {
                // FLOOD_MIB MiB without a newline (one "message" far over rmcp's 16 MiB cap),
                // then the answer.
                use std::io::Write;
                {
                    let mut out = std::io::stdout().lock();
                    let chunk = vec![b'x'; 1 << 20];
                    for _ in 0..FLOOD_MIB {
                        out.write_all(&chunk).unwrap();
                    }
                    out.write_all(b"\n").unwrap();
                    out.flush().unwrap();
                }
                text("survived".into())
            }
            "crash" => std::process::exit(3),
            "garbage" => {
                {
                    use std::io::Write;
                    let mut out = std::io::stdout().lock();
                    out.write_all(b"this is not json\n{\"jsonrpc\": 7}\n\x00\xff garbage\n[1,2\n")
                        .unwrap();
                    out.flush().unwrap();
                }
                std::future::pending().await
            }
            "spawn" => {
                // A process that leaves the server's process group and is orphaned at once.
                let out = std::process::Command::new("sh")
                    .args([
                        "-c",
                        "setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $!",
                    ])
                    .output()
                    .unwrap();
                text(String::from_utf8_lossy(&out.stdout).trim().to_owned())
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        let result: CallToolResult = serde_json::from_value(result).unwrap();
        Ok(result.into())
    }
}

/// Not a test on its own: run by the stdio tests as the MCP server (this binary re-run with
/// the environment variable set), speaking MCP over its stdin and stdout.
#[tokio::test]
#[ignore = "the MCP server of the stdio tests, run by them"]
async fn stdio_server_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // The test harness has written `test mcp_client::stdio_server_child ... ` (no newline) to stdout:
    // end that line, which the client skips as not MCP.
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
    let running = TestServer::default()
        .serve(rmcp::transport::stdio())
        .await
        .unwrap();
    let _ = running.waiting().await;
    std::process::exit(0);
}

fn stdio_config() -> StdioServer {
    StdioServer::new(std::env::current_exe().unwrap().to_string_lossy())
        .args([
            "--exact",
            "--include-ignored",
            support::test_name!("stdio_server_child").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
}

/// A streamable HTTP MCP server on 127.0.0.1 that requires `Authorization: Bearer TOKEN`.
async fn http_server() -> (String, TestServer) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (url, server, _task) = http_server_on(listener);
    (url, server)
}

/// The server of [`http_server`] on `listener`; aborting the task (and cancelling the
/// sessions) stops it.
fn http_server_on(
    listener: tokio::net::TcpListener,
) -> (
    String,
    TestServer,
    (
        tokio::task::JoinHandle<()>,
        tokio_util::sync::CancellationToken,
    ),
) {
    let server = TestServer::default();
    let cancel = tokio_util::sync::CancellationToken::new();
    let factory = server.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone()),
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let ok = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    == Some(&format!("Bearer {TOKEN}"));
                if ok {
                    next.run(req).await
                } else {
                    axum::response::IntoResponse::into_response(
                        axum::http::StatusCode::UNAUTHORIZED,
                    )
                }
            },
        ));
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/mcp"), server, (task, cancel))
}

async fn call(router: &tower_agent::tool::ToolRouter, name: &str, args: Value) -> ToolOutput {
    router
        .clone()
        .oneshot(ToolRequest::new(
            ToolCall::new("c1", name, args),
            RunContext::new(),
        ))
        .await
        .unwrap()
}

// ===== mappings, over HTTP with bearer auth =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tools_map_every_content_kind() {
    let (url, _server) = http_server().await;
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(&url).bearer(TOKEN))
        .build();
    let model = ScriptedModel::new()
        .tool_calls([
            ("mcp__t__echo", json!({"text": "hi"})),
            ("mcp__t__structured", json!({})),
            ("mcp__t__image", json!({})),
            ("mcp__t__link", json!({})),
            ("mcp__t__fail", json!({})),
        ])
        .text("done")
        .recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .build();
    let resp = agent.run("go").await.unwrap();
    assert_eq!(resp.outcome, Outcome::Finished);
    // The model saw the server's tools with their schemas.
    let first = &model.requests()[0];
    let echo = first
        .tools
        .iter()
        .find(|t| t.name == "mcp__t__echo")
        .unwrap();
    assert_eq!(echo.description, "the echo tool");
    assert_eq!(echo.parameters["properties"]["text"]["type"], "string");
    assert!(first.tools.iter().any(|t| t.name == "mcp__t__shrinking"));

    let results = support::tool_messages(&resp.messages);
    assert_eq!(results.len(), 5);
    assert_eq!(results[0].text(), "echo: hi");
    assert!(!results[0].is_error);
    assert_eq!(
        serde_json::from_str::<Value>(&results[1].text()).unwrap(),
        json!({"temp": 21.5, "unit": "C"})
    );
    assert_eq!(results[2].text(), "a pixel\n[image: image/png]");
    assert!(
        results[2].content.iter().any(
            |c| matches!(c, Content::Image { url } if url == "data:image/png;base64,iVBORw0KGgo=")
        ),
        "{:?}",
        results[2].content
    );
    assert_eq!(
        results[3].text(),
        "[resource link: file:///srv/report.txt (report.txt, text/plain)]"
    );
    assert!(results[4].is_error);
    assert_eq!(results[4].text(), "disk full");

    // Structured content is also metadata for layers.
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__t__structured", json!({})).await;
    assert_eq!(
        out.metadata["mcp_structured_content"],
        json!({"temp": 21.5, "unit": "C"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_a_setup_stage_alone_the_connection_is_reused_across_runs() {
    let mcp = McpServers::builder().server("s", stdio_config()).build();
    let model = ScriptedModel::new()
        .tool_call("mcp__s__pid", json!({}))
        .text("one")
        .tool_call("mcp__s__pid", json!({}))
        .text("two");
    let agent = Agent::builder().model(model).setup(mcp.clone()).build();
    let first = agent.run("go").await.unwrap();
    let second = agent.run("again").await.unwrap();
    assert_eq!((first.text.as_str(), second.text.as_str()), ("one", "two"));
    let pid =
        |r: &tower_agent::AgentResponse| support::tool_messages(&r.messages)[0].text().into_owned();
    // One server process served both runs.
    assert_eq!(pid(&first), pid(&second));
    assert_eq!(mcp.pid("s").map(|p| p.to_string()), Some(pid(&first)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_bearer_token_is_a_warning_or_a_setup_error() {
    let (url, _server) = http_server().await;
    let bad = || HttpServer::new(&url).bearer("wrong");
    // Default: the run goes on without the server's tools; the good server still registers.
    let mcp = McpServers::builder()
        .server("bad", bad())
        .server("good", HttpServer::new(&url).bearer(TOKEN))
        .connect_timeout(Duration::from_secs(5))
        .build();
    let model = ScriptedModel::new().text("ok").recording();
    let agent = Agent::builder()
        .model(model.clone())
        .stage(mcp.clone())
        .build();
    assert_eq!(agent.run("go").await.unwrap().text, "ok");
    let names: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.iter().any(|n| n == "mcp__good__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__bad__")),
        "{names:?}"
    );
    let err = mcp.connect().await.unwrap_err();
    assert_eq!(err.failures().len(), 1);
    assert_eq!(err.failures()[0].0, "bad");
    // Required: the run fails at setup, naming the server.
    let mcp = McpServers::builder()
        .server("bad", bad())
        .require_all(true)
        .build();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok"))
        .stage(mcp)
        .build();
    let err = agent.run("go").await.unwrap_err();
    assert!(err.is_setup(), "{err}");
    let text = format!("{err:#}");
    assert!(
        text.contains("`bad`") || format!("{err:?}").contains("`bad`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_times_out_and_the_server_stays_usable() {
    let (url, _server) = http_server().await;
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(&url).bearer(TOKEN))
        .call_timeout(Duration::from_millis(400))
        .build();
    let router = mcp.router().await.unwrap();
    // `hang` never answers: the call ends at its timeout or not at all.
    let out = support::within("the hanging call", call(&router, "mcp__t__hang", json!({}))).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("did not answer `hang` within"),
        "{}",
        out.content
    );
    assert_eq!(
        call(&router, "mcp__t__echo", json!({"text": "x"}))
            .await
            .content,
        "echo: x"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_list_changes_reach_the_next_model_call() {
    // Over stdio, one ordered stream: the notification the server sends during `grow` is
    // applied before `grow`'s result is returned.
    let mcp = McpServers::builder().server("t", stdio_config()).build();
    let model = ScriptedModel::new()
        .tool_call("mcp__t__grow", json!({}))
        .tool_call("mcp__t__late", json!({}))
        .tool_call("mcp__t__shrinking", json!({}))
        .text("done")
        .recording();
    let agent = Agent::builder().model(model.clone()).stage(mcp).build();
    let resp = agent.run("go").await.unwrap();
    let reqs = model.requests();
    let names =
        |i: usize| -> Vec<String> { reqs[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert!(names(0).contains(&"mcp__t__shrinking".to_owned()));
    assert!(!names(0).contains(&"mcp__t__late".to_owned()));
    // After `grow`, the next model call sees the new list.
    assert!(
        names(1).contains(&"mcp__t__late".to_owned()),
        "{:?}",
        names(1)
    );
    assert!(
        !names(1).contains(&"mcp__t__shrinking".to_owned()),
        "{:?}",
        names(1)
    );
    let results = support::tool_messages(&resp.messages);
    assert_eq!(results[0].text(), "grown");
    // The new tool is callable, the removed one is an error.
    assert_eq!(results[1].text(), "late tool ran");
    assert!(results[2].is_error);
    assert!(
        results[2].text().contains("does not offer"),
        "{}",
        results[2].text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tool_list_changes_are_followed() {
    // Over HTTP the notification may come on another stream than the call's result: the
    // list is read again when it arrives.
    let (url, _server) = http_server().await;
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(&url).bearer(TOKEN))
        .build();
    let router = mcp.router().await.unwrap();
    let late = |mcp: &McpServers| mcp.tool_specs().iter().any(|t| t.name == "mcp__t__late");
    assert!(!late(&mcp));
    assert_eq!(
        call(&router, "mcp__t__grow", json!({})).await.content,
        "grown"
    );
    support::eventually("the new tool listed", || late(&mcp).then_some(())).await;
    // Registered before the change, the router still routes the new tool by its prefix.
    assert_eq!(
        call(&router, "mcp__t__late", json!({})).await.content,
        "late tool ran"
    );
    let out = call(&router, "mcp__t__shrinking", json!({})).await;
    assert!(out.is_error, "{}", out.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_went_away_is_an_error_then_reconnected_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (url, _server, (task, cancel)) = http_server_on(listener);
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(&url).bearer(TOKEN))
        .call_timeout(Duration::from_secs(5))
        .build();
    let router = mcp.router().await.unwrap();
    assert_eq!(
        call(&router, "mcp__t__echo", json!({"text": "1"}))
            .await
            .content,
        "echo: 1"
    );
    // The server stops: sessions cancelled, listener closed.
    cancel.cancel();
    task.abort();
    let _ = task.await;
    let out = call(&router, "mcp__t__echo", json!({"text": "2"})).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("the MCP server `t` stopped during the call (connection lost: "),
        "{}",
        out.content
    );
    assert!(
        !out.content.contains("tower_agent::"),
        "no type names: {}",
        out.content
    );
    // It comes back on the same address: the next call reconnects.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let (_url, _server, _task) = http_server_on(listener);
    let out = call(&router, "mcp__t__echo", json!({"text": "3"})).await;
    assert_eq!(out.content, "echo: 3");
}

// ===== elicitation =====

async fn ask(mcp: McpServers) -> String {
    let router = mcp.router().await.unwrap();
    call(&router, "mcp__t__ask", json!({})).await.content
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_goes_to_the_service_or_is_declined() {
    let (url, _server) = http_server().await;
    let config = || HttpServer::new(&url).bearer(TOKEN);
    // Without a service: declined.
    let none = McpServers::builder().server("t", config()).build();
    assert_eq!(ask(none).await, "decline:");
    // A service that accepts, seeing the request.
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let accept = service_fn(move |req: ElicitationRequest| {
        *seen2.lock().unwrap() = Some(req);
        async { Ok::<_, BoxError>(ElicitationResponse::Accept(Some(json!({"name": "Ada"})))) }
    });
    let mcp = McpServers::builder()
        .server("t", config())
        .elicitation(tower::util::BoxCloneSyncService::new(accept))
        .build();
    assert_eq!(ask(mcp).await, "accept:{\"name\":\"Ada\"}");
    let req = seen.lock().unwrap().clone().unwrap();
    assert_eq!(req.server, "t");
    assert_eq!(req.message, "Your name?");
    match req.mode {
        ElicitationMode::Form { requested_schema } => {
            assert_eq!(requested_schema["properties"]["name"]["type"], "string")
        }
        other => panic!("{other:?}"),
    }
    // URL mode.
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen2 = Arc::clone(&seen);
    let visit = service_fn(move |req: ElicitationRequest| {
        *seen2.lock().unwrap() = Some(req);
        async { Ok::<_, BoxError>(ElicitationResponse::Accept(None)) }
    });
    let mcp = McpServers::builder()
        .server("t", config())
        .elicitation(tower::util::BoxCloneSyncService::new(visit))
        .build();
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__t__ask_url", json!({})).await;
    assert_eq!(out.content, "\"accept\"");
    let req = seen.lock().unwrap().clone().unwrap();
    assert_eq!(req.message, "Log in, please");
    assert_eq!(
        req.mode,
        ElicitationMode::Url {
            url: "https://auth.example/login?s=1".into(),
            elicitation_id: "e-1".into()
        }
    );
    // A service that declines / cancels.
    for (answer, want) in [
        (ElicitationResponse::Decline, "decline:"),
        (ElicitationResponse::Cancel, "cancel:"),
    ] {
        let svc = service_fn(move |_: ElicitationRequest| {
            let answer = answer.clone();
            async move { Ok::<_, BoxError>(answer) }
        });
        let mcp = McpServers::builder()
            .server("t", config())
            .elicitation(tower::util::BoxCloneSyncService::new(svc))
            .build();
        assert_eq!(ask(mcp).await, want);
    }
}

// ===== stdio: crash, garbage, processes =====

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_stdio_server_is_restarted_once() {
    let mcp = McpServers::builder().server("s", stdio_config()).build();
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__s__pid", json!({})).await;
    let pid1: u32 = out.content.parse().expect(&out.content);
    assert_eq!(mcp.pid("s"), Some(pid1));
    let out = call(&router, "mcp__s__crash", json!({})).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("stopped during the call"),
        "{}",
        out.content
    );
    assert!(support::wait_dead(pid1).await);
    // Restarted on the next call.
    let out = call(&router, "mcp__s__pid", json!({})).await;
    assert!(!out.is_error, "{}", out.content);
    let pid2: u32 = out.content.parse().unwrap();
    assert_ne!(pid1, pid2);
    // A second crash stays an error.
    let out = call(&router, "mcp__s__crash", json!({})).await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("restarted once already and stays down"),
        "{}",
        out.content
    );
    let out = call(&router, "mcp__s__pid", json!({})).await;
    assert!(out.is_error);
    assert!(out.content.contains("stays down"), "{}", out.content);
    assert!(support::wait_dead(pid2).await);
    // Closing the set explicitly allows a fresh start.
    mcp.close().await;
    let out = call(&router, "mcp__s__pid", json!({})).await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_an_error_output_not_a_hang() {
    let mcp = McpServers::builder()
        .server("s", stdio_config())
        .call_timeout(Duration::from_secs(1))
        .build();
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__s__garbage", json!({})).await;
    assert!(out.is_error);
    assert!(out.content.contains("did not answer"), "{}", out.content);
    // The connection survived the garbage.
    assert_eq!(
        call(&router, "mcp__s__echo", json!({"text": "x"}))
            .await
            .content,
        "echo: x"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_agent_kills_the_server_and_what_it_started() {
    let mcp = McpServers::builder().server("s", stdio_config()).build();
    let model = ScriptedModel::new()
        .tool_calls([("mcp__s__pid", json!({})), ("mcp__s__spawn", json!({}))])
        .text("done");
    let agent = Agent::builder().model(model).stage(mcp).build();
    let resp = agent.run("go").await.unwrap();
    let results = support::tool_messages(&resp.messages);
    let server: u32 = results[0].text().parse().unwrap();
    let grandchild: u32 = results[1].text().parse().unwrap();
    assert!(support::alive(server) && support::alive(grandchild));
    drop(resp);
    drop(agent);
    assert!(
        support::wait_dead(server).await,
        "server {server} still alive"
    );
    assert!(
        support::wait_dead(grandchild).await,
        "grandchild {grandchild} still alive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_from_a_mcp_json_file_with_variables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".mcp.json");
    let exe = std::env::current_exe().unwrap();
    // `${VAR:-default}` with variables that are not set: the defaults are used.
    let command = format!("${{TOWER_AGENT_TEST_EXE_UNSET:-{}}}", exe.to_string_lossy());
    let doc = json!({"mcpServers": {
        "s": {"command": command,
              "args": ["--exact", "--include-ignored", support::test_name!("stdio_server_child"), "--nocapture"],
              "env": {"TOWER_AGENT_MCP_TEST_CHILD": "${TOWER_AGENT_TEST_CHILD_VALUE_UNSET:-1}"}},
        "broken": {"command": "/nonexistent/mcp-server"},
        "notmcp": {"command": "sh", "args": ["-c", "echo hello; sleep 30"]},
        "notmcp2": {"command": "sh", "args": ["-c", "echo hello; sleep 30"]},
    }});
    std::fs::write(&path, doc.to_string()).unwrap();
    let mcp = McpServers::from_file(&path)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .build();
    let started = std::time::Instant::now();
    let err = mcp.connect().await.unwrap_err();
    // The servers connect concurrently: two 5 s timeouts take about 5 s, not 10 (the margin
    // is wide: a machine busy compiling is slow).
    let took = started.elapsed();
    assert!(took < Duration::from_secs(9), "{took:?}");
    let mut failed: Vec<&str> = err.failures().iter().map(|(n, _)| n.as_str()).collect();
    failed.sort();
    assert_eq!(failed, ["broken", "notmcp", "notmcp2"], "{err}");
    let text = err.to_string();
    assert!(
        text.contains("MCP server `broken`: cannot start `/nonexistent/mcp-server`"),
        "{text}"
    );
    assert!(
        text.contains("MCP server `notmcp`: did not connect within"),
        "{text}"
    );
    let router = mcp.router().await.unwrap();
    assert_eq!(
        call(&router, "mcp__s__echo", json!({"text": "y"}))
            .await
            .content,
        "echo: y"
    );
    // The process that does not speak MCP was killed when its connect timed out.
    let _ = mcp.close().await;
}

// ===== memory =====

/// The client's side of the memory test, in a child process of its own (its peak RSS is
/// its own): connects, then calls `flood`, whose server writes a 256 MiB line on stdout,
/// and `errflood`, 256 MiB without a newline on stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by an_oversized_message_is_dropped_in_bounded_memory"]
async fn flood_child() {
    if std::env::var_os("TOWER_AGENT_MCP_FLOOD").is_none() {
        return;
    }
    let mcp = McpServers::builder()
        .server("s", stdio_config())
        .call_timeout(Duration::from_secs(60))
        .build();
    let router = mcp.router().await.unwrap();
    assert_eq!(
        call(&router, "mcp__s__echo", json!({"text": "x"}))
            .await
            .content,
        "echo: x"
    );
    println!("BASE_KIB={}", support::peak_rss_kib());
    let out = call(&router, "mcp__s__flood", json!({})).await;
    println!("PEAK_KIB={}", support::peak_rss_kib());
    // The oversized line was dropped; the answer after it still came through.
    assert_eq!(out.content, "survived", "{out:?}");
    let out = call(&router, "mcp__s__errflood", json!({})).await;
    assert_eq!(out.content, "survived", "{out:?}");
    println!("ERR_PEAK_KIB={}", support::peak_rss_kib());
}

#[test]
fn an_oversized_message_is_dropped_in_bounded_memory() {
    let out = support::rerun(&support::test_name!("flood_child"))
        .env("TOWER_AGENT_MCP_FLOOD", "1")
        .output()
        .unwrap();
    let stdout = support::passed(&out, "flood child");
    let kib = |key| -> u64 {
        support::reported(&stdout, key)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (base, peak, err_peak) = (kib("BASE_KIB"), kib("PEAK_KIB"), kib("ERR_PEAK_KIB"));
    let grown_mib = (peak - base) / 1024;
    // rmcp caps a line at 16 MiB (dropped, not buffered): the client grows by far less than
    // the 256 MiB the server sent.
    assert!(
        grown_mib < 64,
        "peak RSS grew by {grown_mib} MiB while a {FLOOD_MIB} MiB line came in"
    );
    // Stderr is logged in chunks and dropped: a line of 256 MiB there costs nothing.
    let err_grown_mib = (err_peak - base) / 1024;
    assert!(
        err_grown_mib < 64,
        "peak RSS grew by {err_grown_mib} MiB while {FLOOD_MIB} MiB came on stderr"
    );
}

// ===== connect and reconnect errors =====

/// Asserts `text` (what the model or the caller gets) names `server` and carries no internal
/// type names: no `tower_agent::`, no `rmcp::`, no generic brackets.
#[track_caller]
fn assert_clean(text: &str, server: &str) {
    assert!(
        text.contains(&format!("`{server}`")),
        "names the server: {text}"
    );
    for internal in ["tower_agent::", "rmcp::", "<", ">"] {
        assert!(!text.contains(internal), "`{internal}` in: {text}");
    }
}

/// A 127.0.0.1 address where nothing listens (bound, then closed).
fn nothing_listens() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_name_the_server_and_the_cause() {
    let mcp = McpServers::builder()
        .server(
            "missing",
            StdioServer::new("/nonexistent/tower-agent-mcp-server"),
        )
        .server("quits", StdioServer::new("sh").args(["-c", "exit 3"]))
        .server(
            "refused",
            HttpServer::new(format!("http://{}/mcp", nothing_listens())),
        )
        .connect_timeout(Duration::from_secs(20))
        .build();
    let err = mcp.connect().await.unwrap_err();
    let mut failed: Vec<&str> = err.failures().iter().map(|(n, _)| n.as_str()).collect();
    failed.sort_unstable();
    assert_eq!(failed, ["missing", "quits", "refused"], "{err}");
    // What the caller gets (a warning, or the run's setup error): each server named.
    let text = err.to_string();
    for (name, why) in err.failures() {
        let line = format!("MCP server `{name}`: {why}");
        assert!(text.contains(&line), "{text}");
        assert_clean(&line, name);
    }
    let why = |name: &str| {
        let (_, why) = err.failures().iter().find(|(n, _)| n == name).unwrap();
        why.to_lowercase()
    };
    assert!(why("missing").contains("no such file"), "{err}");
    assert!(why("quits").contains("exit status: 3"), "{err}");
    assert!(why("refused").contains("connection refused"), "{err}");

    // Required: the run's setup error says the same, server named.
    let mcp = McpServers::builder()
        .server(
            "refused",
            HttpServer::new(format!("http://{}/mcp", nothing_listens())),
        )
        .require_all(true)
        .build();
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("ok"))
        .stage(mcp)
        .build();
    let err = agent.run("go").await.unwrap_err();
    assert!(err.is_setup(), "{err}");
    let text = format!("{err:#}");
    assert_clean(&text, "refused");
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_http_reconnect_is_a_clean_error_for_the_model() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (url, _server, (task, cancel)) = http_server_on(listener);
    let mcp = McpServers::builder()
        .server("t", HttpServer::new(&url).bearer(TOKEN))
        .call_timeout(Duration::from_secs(5))
        .build();
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__t__echo", json!({"text": "1"})).await;
    assert_eq!(out.content, "echo: 1");
    // The server is killed: sessions cancelled, listener closed.
    cancel.cancel();
    task.abort();
    let _ = task.await;
    let out = call(&router, "mcp__t__echo", json!({"text": "2"})).await;
    assert!(
        out.is_error && out.content.contains("stopped during the call"),
        "{}",
        out.content
    );
    // The reconnect finds nothing listening.
    let out = call(&router, "mcp__t__echo", json!({"text": "3"})).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("the MCP server `t` is not available: "),
        "{}",
        out.content
    );
    assert_clean(&out.content, "t");
    assert!(
        out.content.to_lowercase().contains("connection refused"),
        "{}",
        out.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_stdio_restart_is_a_clean_error_for_the_model() {
    // The server runs the first time; restarted, it exits at once (status 3).
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let exe = std::env::current_exe().unwrap();
    let script =
        r#"if [ -e "$1" ]; then echo "no more" >&2; exit 3; fi; : > "$1"; shift; exec "$@""#;
    let mcp = McpServers::builder()
        .server(
            "s",
            StdioServer::new("sh")
                .args(["-c", script, "sh"])
                .args([
                    marker.to_string_lossy().as_ref(),
                    exe.to_string_lossy().as_ref(),
                ])
                .args([
                    "--exact",
                    "--include-ignored",
                    support::test_name!("stdio_server_child").as_str(),
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, "1"),
        )
        .build();
    let router = mcp.router().await.unwrap();
    let out = call(&router, "mcp__s__crash", json!({})).await;
    assert!(
        out.is_error && out.content.contains("stopped during the call"),
        "{}",
        out.content
    );
    let out = call(&router, "mcp__s__echo", json!({"text": "x"})).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("the MCP server `s` is not available: "),
        "{}",
        out.content
    );
    assert_clean(&out.content, "s");
    assert!(out.content.contains("exit status: 3"), "{}", out.content);
}
