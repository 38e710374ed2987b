//! The crate's MCP server (`mcp::server`) driven by rmcp's own client: in-process over a tokio
//! duplex pipe, and over streamable HTTP on a real 127.0.0.1 port, mounted in one axum
//! `Router` next to the crate's own routes.

use crate::support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Router, extract::Request, middleware::Next, response::Response};
use rmcp::{
    RoleClient, ServiceExt as _,
    model::{CallToolRequestParams, CallToolResult, JsonObject},
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    layers::hooks::{Hooks, PreToolUse},
    mcp::server::{AgentTool, McpServer, SessionLimit, StreamableHttpServerConfig},
    message::ToolOutput,
    model::ScriptedModel,
    server::AgentRoutes,
    tool::{ToolRouter, tool_fn, typed_tool},
};

type Client = RunningService<RoleClient, ()>;

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

/// The authenticated user, as an auth middleware in front of the MCP service inserts it.
#[derive(Clone, Debug)]
struct Principal(String);

fn tools() -> ToolRouter {
    tools_counting(&Arc::default())
}

/// [`tools`], whose `sleep` counts the calls that entered it in `entered`.
fn tools_counting(entered: &Arc<AtomicUsize>) -> ToolRouter {
    let entered = Arc::clone(entered);
    ToolRouter::new()
        .tool(typed_tool(
            "add",
            "Adds two numbers",
            |args: AddArgs, _ctx| async move { Ok::<_, BoxError>((args.a + args.b).to_string()) },
        ))
        .tool(tool_fn(
            "stats",
            "Statistics as JSON",
            json!({ "type": "object" }),
            |_args, _ctx| async move { Ok::<_, BoxError>(json!({ "count": 3, "mean": 1.5 })) },
        ))
        .tool(tool_fn(
            "fails",
            "Always an error output",
            json!({ "type": "object" }),
            |_args, _ctx| async move {
                Ok::<_, BoxError>(ToolOutput::error("", "disk full: free some space"))
            },
        ))
        .tool(tool_fn(
            "broken",
            "The tool itself fails (an Err)",
            json!({ "type": "object" }),
            |_args, _ctx| async move { Err::<Value, BoxError>("connection refused".into()) },
        ))
        .tool(tool_fn(
            "picture",
            "An image",
            json!({ "type": "object" }),
            |_args, _ctx| async move {
                Ok::<_, BoxError>(
                    ToolOutput::text("", "a red dot").with_image("data:image/png;base64,iVBORw0K"),
                )
            },
        ))
        .tool(tool_fn(
            "rm_all",
            "Deletes everything (denied by a hook)",
            json!({ "type": "object" }),
            |_args, _ctx| async move { Ok::<_, BoxError>("deleted everything".to_owned()) },
        ))
        .tool(tool_fn(
            "whoami",
            "The authenticated caller",
            json!({ "type": "object" }),
            |_args, ctx: tower_agent::context::RunContext| async move {
                let who = ctx
                    .extensions()
                    .get::<Principal>()
                    .map_or("nobody".to_owned(), |p| p.0.clone());
                Ok::<_, BoxError>(format!("{who} in {}", ctx.session_id()))
            },
        ))
        .tool(tool_fn(
            "sleep",
            "Sleeps for `ms` milliseconds",
            json!({ "type": "object" }),
            move |args: Value, _ctx| {
                entered.fetch_add(1, Ordering::SeqCst);
                async move {
                    let ms = args["ms"].as_u64().unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<_, BoxError>("slept".to_owned())
                }
            },
        ))
}

/// The tool set behind a PreToolUse hook: `rm_*` is denied, and `whoami` is denied to
/// `mallory` (the hook reads the principal from the call's context).
fn server() -> McpServer {
    server_counting(&Arc::default())
}

/// [`server`] over [`tools_counting`].
fn server_counting(entered: &Arc<AtomicUsize>) -> McpServer {
    let hooks = Hooks::new()
        .before_tool_use("rm_*", |_call, _ctx| {
            PreToolUse::Deny("deleting is not allowed over MCP".into())
        })
        .before_tool_use(
            "whoami",
            |_call, ctx: tower_agent::context::RunContext| match ctx.extensions().get::<Principal>()
            {
                Some(p) if p.0 == "mallory" => PreToolUse::Deny("mallory may not ask".into()),
                _ => PreToolUse::Continue,
            },
        )
        .compile()
        .unwrap();
    McpServer::layered(
        tools_counting(entered),
        ServiceBuilder::new().layer(hooks.tool_layer()),
    )
    .server_info("test-tools", "0.1.0")
    .call_timeout(Duration::from_millis(500))
}

/// An rmcp client connected to `server` over an in-process duplex pipe.
async fn in_process(server: McpServer) -> Client {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("client connects")
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(client: &Client, name: &'static str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("calling {name}: {e}"))
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[tokio::test]
async fn lists_the_tools_with_their_schemas() {
    let client = in_process(server()).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().unwrap().name, "test-tools");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
    for name in [
        "add", "stats", "fails", "broken", "picture", "rm_all", "whoami",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let add = tools.iter().find(|t| t.name == "add").unwrap();
    assert_eq!(add.description.as_deref(), Some("Adds two numbers"));
    let props = add.input_schema["properties"].as_object().unwrap();
    assert_eq!(props["a"]["type"], "integer");
    assert_eq!(props["b"]["description"], "The second number.");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn calls_map_outputs_to_mcp_results() {
    let client = in_process(server()).await;

    // Arguments reach the tool; text comes back.
    let result = call(&client, "add", json!({ "a": 2, "b": 40 })).await;
    assert!(!is_error(&result));
    assert_eq!(text(&result), "42");
    assert_eq!(result.structured_content, None, "a number is text only");

    // A JSON object is also structured content.
    let result = call(&client, "stats", json!({})).await;
    assert_eq!(
        result.structured_content,
        Some(json!({ "count": 3, "mean": 1.5 }))
    );
    assert_eq!(
        serde_json::from_str::<Value>(&text(&result)).unwrap(),
        json!({ "count": 3, "mean": 1.5 })
    );

    // An error output is isError with its text.
    let result = call(&client, "fails", json!({})).await;
    assert!(is_error(&result));
    assert_eq!(text(&result), "disk full: free some space");
    assert_eq!(result.structured_content, None);

    // The tool's own Err is an isError result too, not a protocol error.
    let result = call(&client, "broken", json!({})).await;
    assert!(is_error(&result));
    assert!(text(&result).contains("connection refused"), "{result:?}");

    // An image part is an image content block.
    let result = call(&client, "picture", json!({})).await;
    assert_eq!(text(&result), "a red dot");
    let image = result
        .content
        .iter()
        .find_map(|c| c.as_image().cloned())
        .unwrap_or_else(|| panic!("no image in {result:?}"));
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, "iVBORw0K");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_hook_denial_reaches_the_remote_caller_as_is_error() {
    let client = in_process(server()).await;
    let result = call(&client, "rm_all", json!({})).await;
    assert!(is_error(&result), "{result:?}");
    assert!(
        text(&result).contains("deleting is not allowed over MCP"),
        "{result:?}"
    );
    assert!(!text(&result).contains("deleted everything"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_requests_are_clear_errors_and_the_server_goes_on() {
    let client = in_process(server()).await;

    // Unknown tool: a protocol error naming the tools there are.
    let err = client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .expect_err("unknown tool");
    let message = err.to_string();
    assert!(
        message.contains("unknown tool `nope`") && message.contains("add"),
        "{message}"
    );

    // Arguments that do not match the schema: an isError result naming the problem.
    let result = call(&client, "add", json!({ "a": "two", "b": 1 })).await;
    assert!(is_error(&result));
    assert!(text(&result).contains("invalid arguments"), "{result:?}");

    // No arguments at all: `{}`, and the typed tool says what is missing.
    let result = client
        .call_tool(CallToolRequestParams::new("add"))
        .await
        .unwrap();
    assert!(is_error(&result));
    assert!(text(&result).contains("missing field"), "{result:?}");

    // A huge unknown name does not come back whole.
    let long: String = "x".repeat(100_000);
    let err = client
        .call_tool(CallToolRequestParams::new(long))
        .await
        .expect_err("unknown tool");
    assert!(err.to_string().len() < 2_000, "{}", err.to_string().len());

    // The server still answers.
    let result = call(&client, "add", json!({ "a": 1, "b": 1 })).await;
    assert_eq!(text(&result), "2");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_call_past_its_timeout_is_an_error_result() {
    let client = in_process(server()).await;
    // A call that ran to its end would take ten minutes.
    let result = support::within("the timed-out call", async {
        call(&client, "sleep", json!({ "ms": 600_000 })).await
    })
    .await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("timed out after 0.5 s"),
        "{result:?}"
    );
    // Within the timeout it answers.
    let result = call(&client, "sleep", json!({ "ms": 10 })).await;
    assert_eq!(text(&result), "slept");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn concurrent_calls_are_capped() {
    let entered = Arc::default();
    let server = server_counting(&entered)
        .max_concurrent_calls(1)
        .call_timeout(Duration::from_millis(1500));
    let client = Arc::new(in_process(server).await);
    // The first call holds the only slot for 1 s; the second waits for it, then runs past
    // its own 1.5 s timeout (uncapped, both would finish in 1 s).
    let first = {
        let client = client.clone();
        tokio::spawn(async move { call(&client, "sleep", json!({ "ms": 1000 })).await })
    };
    support::eventually("the first call holding the slot", || {
        (entered.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let second = call(&client, "sleep", json!({ "ms": 1000 })).await;
    let first = first.await.unwrap();
    assert_eq!(text(&first), "slept");
    assert!(is_error(&second), "{second:?}");
    assert!(text(&second).contains("timed out"), "{second:?}");
}

#[tokio::test]
async fn an_agent_is_served_as_one_tool() {
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .text("Tower is a library of modular services.")
                .per_run(),
        )
        .build();
    let client = in_process(McpServer::agent(agent, "ask", "Asks the agent")).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "ask");
    let props = tools[0].input_schema["properties"].as_object().unwrap();
    assert!(props.contains_key("prompt") && !props.contains_key("thread_id"));

    let result = call(&client, "ask", json!({ "prompt": "What is tower?" })).await;
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(text(&result), "Tower is a library of modular services.");

    // No thread ids unless enabled.
    let result = call(&client, "ask", json!({ "prompt": "hi", "thread_id": "t1" })).await;
    assert!(is_error(&result) && text(&result).contains("thread_id"));
    // No prompt.
    let result = call(&client, "ask", json!({})).await;
    assert!(is_error(&result) && text(&result).contains("prompt"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_agent_run_that_does_not_finish_is_an_error() {
    // The model asks for a tool at every step; one step is allowed.
    let agent = Agent::builder()
        .model(ScriptedModel::new().otherwise(|_| {
            Ok(tower_agent::model::ModelResponse::new(
                tower_agent::message::Message::assistant("").with_tool_calls(vec![
                    tower_agent::message::ToolCall::new("c1", "missing", json!({})),
                ]),
            ))
        }))
        .max_steps(1)
        .build();
    let failing = Agent::builder()
        .model(ScriptedModel::new().fail("the provider is down"))
        .build();
    let router = ToolRouter::new()
        .tool(AgentTool::new(agent, "loops", "Never finishes"))
        .tool(AgentTool::new(failing, "down", "Its model fails"));
    let client = in_process(McpServer::new(router)).await;
    let result = call(&client, "loops", json!({ "prompt": "go" })).await;
    assert!(is_error(&result), "{result:?}");
    assert!(text(&result).contains("MaxSteps"), "{result:?}");
    let result = call(&client, "down", json!({ "prompt": "go" })).await;
    assert!(is_error(&result), "{result:?}");
    assert!(text(&result).contains("the provider is down"), "{result:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_agent_tool_with_threads_continues_a_conversation() {
    let model = ScriptedModel::new()
        .text("first answer")
        .text("second answer")
        .recording();
    let agent = Agent::builder().model(model.clone()).build();
    let tool = AgentTool::new(agent, "ask", "Asks the agent").threads(true);
    let client = in_process(McpServer::new(ToolRouter::new().tool(tool))).await;
    let r1 = call(
        &client,
        "ask",
        json!({ "prompt": "one", "thread_id": "t-1" }),
    )
    .await;
    assert_eq!(text(&r1), "first answer");
    let r2 = call(
        &client,
        "ask",
        json!({ "prompt": "two", "thread_id": "t-1" }),
    )
    .await;
    assert_eq!(text(&r2), "second answer");
    // The second run saw the first exchange.
    let seen: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert!(
        seen.contains(&"one".to_owned()) && seen.contains(&"first answer".to_owned()),
        "{seen:?}"
    );
    client.cancel().await.unwrap();
}

// ===== Streamable HTTP on 127.0.0.1 =====

/// A stand-in for an authentication layer: `Authorization: Bearer <name>` becomes the
/// request's [`Principal`]; no header is a 401.
async fn auth(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    match user {
        Some(user) => {
            request.extensions_mut().insert(Principal(user));
            next.run(request).await
        }
        None => Response::builder()
            .status(401)
            .body(axum::body::Body::from("who are you?"))
            .unwrap(),
    }
}

struct Http {
    addr: std::net::SocketAddr,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for Http {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The MCP service and the crate's own agent routes on one `Router`, behind `auth`, on a
/// real port.
async fn http(mcp: tower_agent::mcp::server::McpHttpService) -> Http {
    let agent = Agent::builder()
        .model(ScriptedModel::new().text("hello over HTTP").per_run())
        .build();
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .merge(AgentRoutes::for_agent(&agent).routes())
        .layer(axum::middleware::from_fn(auth));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await;
    });
    Http { addr, stop }
}

async fn http_client(addr: std::net::SocketAddr, user: &str) -> Result<Client, BoxError> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
            .auth_header(user.to_owned()),
    );
    Ok(().serve(transport).await?)
}

#[tokio::test]
async fn over_http_tools_see_the_authenticated_principal() {
    let server = http(server().http_service()).await;
    let alice = http_client(server.addr, "alice").await.unwrap();

    let tools = alice.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "whoami"));
    let result = call(&alice, "add", json!({ "a": 20, "b": 22 })).await;
    assert_eq!(text(&result), "42");

    let result = call(&alice, "whoami", json!({})).await;
    assert!(!is_error(&result), "{result:?}");
    let answer = text(&result);
    assert!(answer.starts_with("alice in "), "{answer}");
    // The run context's session is the MCP session.
    assert!(!answer.ends_with(" in mcp-1"), "{answer}");

    // A hook reads the principal too, and its denial reaches the caller.
    let mallory = http_client(server.addr, "mallory").await.unwrap();
    let result = call(&mallory, "whoami", json!({})).await;
    assert!(is_error(&result), "{result:?}");
    assert!(text(&result).contains("mallory may not ask"), "{result:?}");
    let result = call(&alice, "rm_all", json!({})).await;
    assert!(is_error(&result) && text(&result).contains("not allowed over MCP"));

    // The crate's own routes answer on the same Router, behind the same auth layer.
    let http = reqwest::Client::new();
    let resp = http
        .post(format!("http://{}/threads/t1/runs", server.addr))
        .bearer_auth("alice")
        .json(&json!({ "prompt": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["text"], "hello over HTTP", "{body}");
    let resp = http
        .post(format!("http://{}/mcp", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    alice.cancel().await.unwrap();
    mallory.cancel().await.unwrap();
}

#[tokio::test]
async fn over_http_sessions_are_capped() {
    let mcp =
        server().http_service_with(StreamableHttpServerConfig::default(), SessionLimit::new(2));
    let server = http(mcp).await;
    let a = http_client(server.addr, "a").await.unwrap();
    let b = http_client(server.addr, "b").await.unwrap();
    let err = http_client(server.addr, "c")
        .await
        .expect_err("a third session is refused");
    assert!(!err.to_string().is_empty());
    // The sessions there are go on.
    assert_eq!(text(&call(&a, "add", json!({ "a": 1, "b": 2 })).await), "3");
    assert_eq!(text(&call(&b, "add", json!({ "a": 2, "b": 2 })).await), "4");
    // Closing one makes room.
    a.cancel().await.unwrap();
    let deadline = std::time::Instant::now() + support::PATIENCE;
    let c = loop {
        if let Ok(client) = http_client(server.addr, "c").await {
            break client;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session is free again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(text(&call(&c, "add", json!({ "a": 3, "b": 3 })).await), "6");
}

#[tokio::test]
async fn over_http_refusals_are_http_errors_not_panics() {
    let server = http(server().http_service()).await;
    let http = reqwest::Client::new();
    let url = format!("http://{}/mcp", server.addr);
    let post = |body: Vec<u8>| {
        http.post(&url)
            .bearer_auth("alice")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    // A body over rmcp's 4 MiB limit.
    let resp = post(vec![b' '; 5 * 1024 * 1024]).await.unwrap();
    assert_eq!(resp.status(), 413);
    // Not JSON.
    let resp = post(b"{not json".to_vec()).await.unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    // A tools/call with no session.
    let resp = post(
        serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "add", "arguments": { "a": 1, "b": 2 } }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    assert!(resp.status().is_client_error(), "{}", resp.status());
    // Still serving.
    let alice = http_client(server.addr, "alice").await.unwrap();
    assert_eq!(
        text(&call(&alice, "add", json!({ "a": 1, "b": 2 })).await),
        "3"
    );
    alice.cancel().await.unwrap();
}

#[tokio::test]
async fn a_flood_of_calls_is_refused_at_once_beyond_the_queue() {
    // One call runs, four wait (4 × 1), the sixth is refused at once: before the call that
    // runs ends (it holds its slot for 2 s), so no slot is free before the refusal.
    let entered = Arc::default();
    let server = server_counting(&entered)
        .max_concurrent_calls(1)
        .call_timeout(Duration::from_secs(60));
    let client = Arc::new(in_process(server).await);
    let held: Vec<_> = (0..5)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { call(&client, "sleep", json!({ "ms": 2000 })).await })
        })
        .collect();
    support::eventually("a call holding the slot", || {
        (entered.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    // The other four were sent with it; give them a moment to reach the queue.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let refused = call(&client, "add", json!({ "a": 1, "b": 1 })).await;
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert!(is_error(&refused), "{refused:?}");
    assert!(text(&refused).contains("the server is busy"), "{refused:?}");
    for call in held {
        assert_eq!(text(&call.await.unwrap()), "slept");
    }
    // Served again once the queue drained.
    assert_eq!(
        text(&call(&client, "add", json!({ "a": 1, "b": 1 })).await),
        "2"
    );
}

// ===== Memory: what a client sends is capped =====

/// Selects the memory case a re-executed test binary runs.
const MEMORY_CASE: &str = "TOWER_AGENT_MCP_SERVER_MEMORY_CASE";

/// In a child process: after a warm-up call, a client sends `case` — `http`: a 256 MiB POST
/// body streamed in 64 KiB chunks (rmcp's cap is 4 MiB); `stdio`: a 128 MiB JSON-RPC line
/// (rmcp's cap is 16 MiB) followed by a good request, which must still be answered. Prints
/// the peak RSS growth.
fn memory_case(case: &str) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        match case {
            "http" => {
                let server = http(server().http_service()).await;
                let alice = http_client(server.addr, "alice").await.unwrap();
                assert_eq!(
                    text(&call(&alice, "add", json!({ "a": 1, "b": 2 })).await),
                    "3"
                );
                let before = support::peak_rss_kib();
                let chunks = futures_util::stream::iter(
                    (0..4096).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024])),
                );
                let sent = reqwest::Client::new()
                    .post(format!("http://{}/mcp", server.addr))
                    .bearer_auth("alice")
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .body(reqwest::Body::wrap_stream(chunks))
                    .send()
                    .await;
                // The server answers 413 (or closes the connection before the client is
                // done sending): either way it does not read the rest.
                if let Ok(resp) = sent {
                    assert_eq!(resp.status(), 413);
                }
                assert_eq!(
                    text(&call(&alice, "add", json!({ "a": 2, "b": 2 })).await),
                    "4"
                );
                println!("PEAK_GROWTH_KIB={}", support::peak_rss_kib() - before);
            }
            "stdio" => {
                let (client_io, server_io) = tokio::io::duplex(64 * 1024);
                tokio::spawn(async move {
                    if let Ok(running) = server().serve(server_io).await {
                        let _ = running.waiting().await;
                    }
                });
                let (read, mut write) = tokio::io::split(client_io);
                let mut lines = BufReader::new(read).lines();
                let init = json!({
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": { "name": "raw", "version": "0" }
                    }
                });
                write
                    .write_all(format!("{init}\n").as_bytes())
                    .await
                    .unwrap();
                let answer = lines.next_line().await.unwrap().unwrap();
                assert!(answer.contains("test-tools"), "{answer}");
                let initialized =
                    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
                write
                    .write_all(format!("{initialized}\n").as_bytes())
                    .await
                    .unwrap();
                let before = support::peak_rss_kib();
                let garbage = vec![b'x'; 1024 * 1024];
                for _ in 0..128 {
                    write.write_all(&garbage).await.unwrap();
                }
                let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
                write
                    .write_all(format!("\n{list}\n").as_bytes())
                    .await
                    .unwrap();
                let answer = tokio::time::timeout(support::PATIENCE, async {
                    loop {
                        let line = lines.next_line().await.unwrap().unwrap();
                        if line.contains("\"id\":2") {
                            return line;
                        }
                    }
                })
                .await
                .expect("the server answers after the long line");
                assert!(answer.contains("\"add\""), "{answer}");
                println!("PEAK_GROWTH_KIB={}", support::peak_rss_kib() - before);
            }
            other => panic!("unknown case {other}"),
        }
    });
}

/// In the parent, runs `test` again in a child for `case` and bounds the child's peak RSS
/// growth; in that child, [`memory_case`].
fn costs_little_memory(test: &str, case: &str) {
    if let Ok(case) = std::env::var(MEMORY_CASE) {
        memory_case(&case);
        return;
    }
    let out = support::rerun(&support::test_name!(test))
        .env(MEMORY_CASE, case)
        .output()
        .unwrap();
    support::passed(&out, test);
    let mib = support::reported_number(&out, "PEAK_GROWTH_KIB") / 1024;
    assert!(mib < 48, "peak RSS grew by {mib} MiB ({case})");
}

#[test]
fn a_256_mib_http_body_costs_little_memory() {
    costs_little_memory("a_256_mib_http_body_costs_little_memory", "http");
}

#[test]
fn a_128_mib_stdio_line_costs_little_memory_and_the_server_goes_on() {
    costs_little_memory(
        "a_128_mib_stdio_line_costs_little_memory_and_the_server_goes_on",
        "stdio",
    );
}

/// A Claude Code command hook (a real script, exit 2 = block) denies a call made over MCP,
/// and sees the call's name and arguments on its stdin.
#[cfg(unix)]
#[tokio::test]
async fn a_command_hook_blocks_a_remote_call() {
    use support::command::{Scripts, on};
    let s = Scripts::new();
    let log = s.path("input.json");
    let hook = s.bash(
        "deny.sh",
        &format!(
            "cat > '{}'\necho 'blocked by the policy script' >&2\nexit 2",
            log.display()
        ),
    );
    let hooks = s
        .hooks(on("PreToolUse", "rm_.*", &hook, json!({})))
        .into_hooks()
        .compile()
        .unwrap();
    let server = McpServer::layered(tools(), ServiceBuilder::new().layer(hooks.tool_layer()));
    let client = in_process(server).await;
    let result = call(&client, "rm_all", json!({ "path": "/" })).await;
    assert!(is_error(&result), "{result:?}");
    assert!(
        text(&result).contains("blocked by the policy script"),
        "{result:?}"
    );
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(input["tool_name"], "rm_all");
    assert_eq!(input["tool_input"], json!({ "path": "/" }));
    assert_eq!(input["hook_event_name"], "PreToolUse");
    // Other tools are not matched.
    assert_eq!(
        text(&call(&client, "add", json!({ "a": 1, "b": 1 })).await),
        "2"
    );
    client.cancel().await.unwrap();
}

/// A guard in the layer stack (the schema guard) refuses a remote call whose arguments do not
/// match the tool's schema; the tool does not run.
#[tokio::test]
async fn a_guard_refuses_a_remote_call_with_bad_arguments() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower_agent::layers::schema::SchemaGuardLayer;
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let router = ToolRouter::new().tool(tool_fn(
        "search",
        "Searches",
        json!({
            "type": "object",
            "properties": { "query": { "type": "string" } },
            "required": ["query"]
        }),
        move |args: Value, _ctx| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, BoxError>(format!("results for {}", args["query"]))
            }
        },
    ));
    let guard = SchemaGuardLayer::new(router.specs().iter().cloned());
    let client = in_process(McpServer::layered(router, guard)).await;
    let result = call(&client, "search", json!({ "q": 1 })).await;
    assert!(is_error(&result), "{result:?}");
    assert!(
        text(&result).contains("\"query\" is a required property"),
        "{result:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the tool must not run");
    let result = call(&client, "search", json!({ "query": "tower" })).await;
    assert_eq!(text(&result), "results for \"tower\"");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    client.cancel().await.unwrap();
}

/// A tool that waits for its call's cancellation; `entered` is set when it is called,
/// `dropped` when its future is dropped, `cancelled` when it saw the cancellation.
fn hold_tool(
    entered: &Arc<std::sync::atomic::AtomicBool>,
    dropped: &Arc<std::sync::atomic::AtomicBool>,
    cancelled: &Arc<std::sync::atomic::AtomicBool>,
) -> ToolRouter {
    let (e, d, c) = (entered.clone(), dropped.clone(), cancelled.clone());
    ToolRouter::new().tool(tool_fn(
        "hold",
        "Waits for cancellation",
        json!({ "type": "object" }),
        move |_args: Value, ctx: tower_agent::context::RunContext| {
            e.store(true, std::sync::atomic::Ordering::SeqCst);
            let guard = support::DropGuard(d.clone());
            let cancelled = c.clone();
            async move {
                let _guard = guard;
                ctx.cancellation().cancelled().await;
                cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, BoxError>("cancelled".to_owned())
            }
        },
    ))
}

/// Waits (at most [`support::PATIENCE`]) until `flag` is set; `what` is what it means.
async fn wait_for(flag: &std::sync::atomic::AtomicBool, what: &str) {
    support::eventually(what, || {
        flag.load(std::sync::atomic::Ordering::SeqCst).then_some(())
    })
    .await;
}

/// `notifications/cancelled` for a call in flight cancels its context at once, and its
/// future is dropped (a tool's child processes are killed with it).
#[tokio::test]
async fn a_cancelled_request_cancels_its_call() {
    use rmcp::{
        model::{CallToolRequest, ClientRequest},
        service::PeerRequestOptions,
    };
    use std::sync::atomic::{AtomicBool, Ordering};
    let entered = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let cancelled = Arc::new(AtomicBool::new(false));
    let server = McpServer::new(hold_tool(&entered, &dropped, &cancelled))
        .call_timeout(Duration::from_secs(600));
    let client = in_process(server).await;
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new(
                "hold",
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    wait_for(&entered, "the call started").await;
    assert!(!dropped.load(Ordering::SeqCst));
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    wait_for(&dropped, "the call ended after its cancellation").await;
    // The server goes on.
    assert!(client.list_all_tools().await.is_ok());
    client.cancel().await.unwrap();
}

/// A client that goes away mid-call: once rmcp's drain of in-flight responses (5 s) is over,
/// the call's context is cancelled and its future dropped, not left running.
#[tokio::test]
async fn a_call_in_flight_ends_when_the_client_goes_away() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let entered = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let cancelled = Arc::new(AtomicBool::new(false));
    let server = McpServer::new(hold_tool(&entered, &dropped, &cancelled))
        .call_timeout(Duration::from_secs(600));
    let client = in_process(server).await;
    let peer = client.peer().clone();
    let pending =
        tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("hold")).await });
    wait_for(&entered, "the call started").await;
    assert!(!dropped.load(Ordering::SeqCst));
    client.cancel().await.unwrap();
    wait_for(&dropped, "the call ended after its client left").await;
    assert!(pending.await.unwrap().is_err(), "the client got no answer");
}
