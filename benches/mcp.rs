//! One tool call in-process against the same call over MCP (`mcp::server::McpServer`).
//!
//! - `mcp/router`: `add` through the `ToolRouter` (`ready().call(ToolRequest)`), no MCP.
//! - `mcp/server_layered`: the same call through a hook layer (one PreToolUse hook that
//!   continues) on the router, as `McpServer::layered` serves it, still in-process.
//! - `mcp/duplex`: rmcp's client → `McpServer` (the same layered stack) over an in-process
//!   tokio duplex pipe: JSON-RPC encoding and decoding both ways, no process boundary.
//! - `mcp/stdio`: rmcp's client → this bench binary re-run as a stdio MCP server in a child
//!   process (`TOWER_AGENT_BENCH_MCP_STDIO=1`): what a desktop client pays per call.
//! - `mcp/client_stdio`: the crate's own client ([`McpServers`]) → the same child server, the
//!   tool called as an agent calls it: `mcp__bench__add` through the `ToolRouter` the client
//!   registers (result mapped to a `ToolOutput`). Against `mcp/router`: the whole cost an MCP
//!   tool adds to a tool call of an agent.
//!
//! All on one current-thread runtime (the client side; the stdio server has its own).
//! Run with `cargo bench --features mcp --bench mcp`; the derived figures are printed at the end.
//! To swap the client (e.g. the crate's own MCP client), change `mcp_call` only.

mod support;

use std::{
    hint::black_box,
    time::{Duration, Instant, SystemTime},
};

use criterion::Criterion;
use rmcp::{
    RoleClient, ServiceExt as _, model::CallToolRequestParams, service::RunningService,
    transport::TokioChildProcess,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use support::{estimate, output_dir};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_agent::message::ToolOutput;
use tower_agent::{
    BoxError,
    context::RunContext,
    layers::hooks::{Hooks, PreToolUse, state},
    mcp::{
        McpServer,
        client::{McpServers, StdioServer},
    },
    message::ToolCall,
    tool::{ToolRequest, ToolRouter, typed_tool},
};

const STDIO_ENV: &str = "TOWER_AGENT_BENCH_MCP_STDIO";

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

fn router() -> ToolRouter {
    ToolRouter::new().tool(typed_tool(
        "add",
        "Adds",
        |args: AddArgs, _ctx| async move { Ok::<_, BoxError>((args.a + args.b).to_string()) },
    ))
}

fn hooks() -> Hooks<state::Added> {
    Hooks::new().before_tool_use("add", |_call, _ctx| PreToolUse::Continue)
}

fn server() -> McpServer {
    let hooks = hooks().compile().unwrap();
    McpServer::layered(router(), ServiceBuilder::new().layer(hooks.tool_layer()))
}

fn add_params() -> CallToolRequestParams {
    let serde_json::Value::Object(args) = json!({ "a": 2, "b": 40 }) else {
        unreachable!()
    };
    CallToolRequestParams::new("add").with_arguments(args)
}

/// One call over MCP with the client under test.
async fn mcp_call(client: &RunningService<RoleClient, ()>) {
    let result = client.call_tool(add_params()).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    black_box(result);
}

fn benches(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("mcp");
    let ctx = RunContext::new();
    let request = || {
        ToolRequest::new(
            ToolCall::new("c1", "add", json!({ "a": 2, "b": 40 })),
            ctx.clone(),
        )
    };

    let plain = router();
    group.bench_function("router", |b| {
        b.to_async(rt)
            .iter_custom(|iters| timed_calls(plain.clone(), iters, request))
    });

    let layered = hooks().compile().unwrap().tool_layer().layer(router());
    group.bench_function("server_layered", |b| {
        b.to_async(rt)
            .iter_custom(|iters| timed_calls(layered.clone(), iters, request))
    });

    let duplex = rt.block_on(async {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(running) = server().serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        ().serve(client_io).await.unwrap()
    });
    group.bench_function("duplex", |b| b.to_async(rt).iter(|| mcp_call(&duplex)));

    let stdio = rt.block_on(async {
        let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
        command.env(STDIO_ENV, "1");
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        ().serve(transport).await.unwrap()
    });
    group.bench_function("stdio", |b| b.to_async(rt).iter(|| mcp_call(&stdio)));
    let exe = std::env::current_exe().unwrap();
    let (servers, client_router) = rt.block_on(async {
        let servers = McpServers::builder()
            .server(
                "bench",
                StdioServer::new(exe.to_string_lossy()).env(STDIO_ENV, "1"),
            )
            .build();
        let mut router = servers.router().await.unwrap();
        // The figure is of a call that works: check one first.
        let out = router
            .ready()
            .await
            .unwrap()
            .call(ToolRequest::new(
                ToolCall::new("c0", "mcp__bench__add", json!({ "a": 2, "b": 40 })),
                RunContext::new(),
            ))
            .await
            .unwrap();
        assert!(!out.is_error && out.content == "42", "{out:?}");
        (servers, router)
    });
    let client_request = || {
        ToolRequest::new(
            ToolCall::new("c1", "mcp__bench__add", json!({ "a": 2, "b": 40 })),
            ctx.clone(),
        )
    };
    group.bench_function("client_stdio", |b| {
        b.to_async(rt)
            .iter_custom(|iters| timed_calls(client_router.clone(), iters, client_request))
    });
    group.finish();
    rt.block_on(async {
        let _ = duplex.cancel().await;
        let _ = stdio.cancel().await;
        servers.close().await;
    });
}

/// `iters` calls of `svc` (ready, then call), timed. The service is cloned once per batch,
/// not per call.
async fn timed_calls<S>(mut svc: S, iters: u64, request: impl Fn() -> ToolRequest) -> Duration
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: std::fmt::Debug,
{
    let started = Instant::now();
    for _ in 0..iters {
        let out = svc.ready().await.unwrap().call(request()).await.unwrap();
        black_box(out);
    }
    started.elapsed()
}

fn summary(started: SystemTime) {
    let out = output_dir();
    let t = |id: &str| estimate(&out, &format!("mcp/{id}"), started);
    println!();
    for id in [
        "router",
        "server_layered",
        "duplex",
        "stdio",
        "client_stdio",
    ] {
        if let Some(ns) = t(id) {
            println!("mcp/{id:<16} {:9.2} µs per call", ns / 1e3);
        }
    }
    if let (Some(router), Some(duplex), Some(stdio)) =
        (t("server_layered"), t("duplex"), t("stdio"))
    {
        println!(
            "MCP overhead over the in-process layered call: duplex +{:.1} µs, stdio +{:.1} µs",
            (duplex - router) / 1e3,
            (stdio - router) / 1e3
        );
    }
    if let (Some(router), Some(client)) = (t("router"), t("client_stdio")) {
        println!(
            "An MCP tool over stdio through the crate's client: +{:.1} µs per call over the same tool in-process ({:.0}x)",
            (client - router) / 1e3,
            client / router
        );
    }
}

fn main() {
    if std::env::var_os(STDIO_ENV).is_some() {
        // The child: a stdio MCP server of the same tools.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(server().serve_stdio()).unwrap();
        return;
    }
    let started = SystemTime::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut c = Criterion::default()
        .output_directory(&output_dir())
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    benches(&mut c, &rt);
    c.final_summary();
    summary(started);
}
