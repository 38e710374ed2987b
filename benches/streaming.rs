//! Streaming through the onion (issue 29).
//!
//! 1. **Per piece**: a run whose model streams its answer in 1 or in 1,000 pieces, through a
//!    full model stack (the hook layer with an AfterModel hook, the trace layer, a stream
//!    timeout), with and without a listener for the run's events; the cost of a piece is the
//!    difference over 999. Allocations per piece are counted too (the piece's own text is one:
//!    the scripted model makes it).
//! 2. **Eager dispatch**: Anthropic and OpenAI streams replayed from a server on 127.0.0.1 at
//!    their timing — three tool calls whose arguments end at 1.0, 2.0 and 3.0 s, the first tool
//!    taking 2.5 s, the others 0.1 s —, each run with and without eager dispatch: when the
//!    step's calls are done (the second model call arrives), printed.
//!
//! Run with `cargo bench --all-features --bench streaming`.

mod support;

use std::{
    alloc::System,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use criterion::{BenchmarkId, Criterion};
use futures_util::StreamExt;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};
use tower::ServiceBuilder;
use tower_agent::{
    Agent, BoxError,
    layers::{hooks::Hooks, stream_timeout::StreamTimeoutLayer, trace::TraceLayer},
    model::{
        ModelResponse, ModelSettings, ScriptedModel, anthropic::Anthropic, openai::OpenAiChat,
    },
    tool::tool_fn,
};

use support::{estimate, output_dir, verdict};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// An agent whose model answers `pieces` pieces of 4 characters through the full stack.
fn agent(pieces: usize) -> Agent {
    let model = ServiceBuilder::new()
        .layer(TraceLayer::new())
        .layer(
            StreamTimeoutLayer::new()
                .first_delta(Duration::from_secs(60))
                .whole(Duration::from_secs(600)),
        )
        .service(
            ScriptedModel::new()
                .otherwise(move |_| Ok(ModelResponse::text("abcd".repeat(pieces))))
                .streaming(4),
        );
    let hooks = Hooks::new()
        .after_model(|resp: ModelResponse, _| resp)
        .compile()
        .unwrap();
    Agent::builder().model(model).hooks(hooks).build()
}

async fn run(agent: &Agent, listen: bool) {
    if listen {
        let mut stream = agent.stream("go");
        while stream.next().await.is_some() {}
        stream.take_response().unwrap().unwrap();
    } else {
        agent.run("go").await.unwrap();
    }
}

fn per_piece(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("stream");
    for listen in [false, true] {
        for pieces in [1usize, 1000] {
            let agent = agent(pieces);
            let name = if listen { "listening" } else { "quiet" };
            group.bench_with_input(BenchmarkId::new(name, pieces), &pieces, |b, _| {
                b.to_async(rt).iter(|| run(&agent, listen));
            });
        }
    }
    group.finish();
}

/// Allocations of a run of 1,000 pieces minus one of 1 piece, per piece (fewest of 5).
fn allocations(rt: &tokio::runtime::Runtime) {
    for listen in [false, true] {
        let count = |pieces: usize| {
            let agent = agent(pieces);
            rt.block_on(run(&agent, listen));
            (0..5)
                .map(|_| {
                    let region = Region::new(GLOBAL);
                    rt.block_on(run(&agent, listen));
                    let s = region.change();
                    s.allocations + s.reallocations
                })
                .min()
                .unwrap()
        };
        let (one, many) = (count(1), count(1000));
        println!(
            "allocations per piece ({}): {:.2} (a run of 1 piece: {one}, of 1,000: {many})",
            if listen { "listening" } else { "quiet" },
            (many.saturating_sub(one)) as f64 / 999.0
        );
    }
}

// ===== eager dispatch on replayed streams =====

/// One server event: after `at` seconds since the answer started, these bytes.
type Script = Vec<(f64, String)>;

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// Anthropic's events for three `work` calls whose `content_block_stop` come at 1, 2, 3 s.
fn anthropic_script() -> Script {
    let mut s = vec![(
        0.0,
        sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
        ),
    )];
    for (i, ms) in [2500, 100, 100].into_iter().enumerate() {
        let t = i as f64;
        s.push((t + 0.5, sse(Some("content_block_start"), &json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": "work", "input": {}}}))));
        s.push((t + 0.6, sse(Some("content_block_delta"), &json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "{\"ms\": "}}))));
        s.push((t + 0.9, sse(Some("content_block_delta"), &json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": format!("{ms}}}")}}))));
        s.push((
            t + 1.0,
            sse(
                Some("content_block_stop"),
                &json!({"type": "content_block_stop", "index": i}),
            ),
        ));
    }
    s.push((3.0, sse(Some("message_delta"), &json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 60}}))));
    s.push((
        3.0,
        sse(Some("message_stop"), &json!({"type": "message_stop"})),
    ));
    s
}

/// OpenAI's chunks for the same calls: a call ends when the next starts, the last at
/// `finish_reason`.
fn openai_script() -> Script {
    let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let mut s = Vec::new();
    for (i, ms) in [2500, 100, 100].into_iter().enumerate() {
        let t = i as f64;
        let start = if i == 0 { 0.5 } else { t };
        s.push((start, sse(None, &chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": "work", "arguments": ""}}]}), Value::Null))));
        s.push((
            t + 0.6,
            sse(
                None,
                &chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": "{\"ms\": "}}]}),
                    Value::Null,
                ),
            ),
        ));
        s.push((t + 0.9, sse(None, &chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": format!("{ms}}}")}}]}), Value::Null))));
    }
    s.push((3.0, sse(None, &chunk(json!({}), json!("tool_calls")))));
    s.push((3.0, "data: [DONE]\n\n".to_owned()));
    s
}

/// A server on 127.0.0.1 that answers the first request with `script` (as it was timed) and
/// later ones with `last` (JSON); it records when each request arrived.
async fn replay(script: Script, last: Value) -> (String, Arc<Mutex<Vec<Instant>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let arrived: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let log = Arc::clone(&arrived);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let (script, last, log) = (script.clone(), last.clone(), Arc::clone(&log));
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // The request: headers, then the body of its Content-Length.
                loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let first = {
                    let mut log = log.lock().unwrap();
                    log.push(Instant::now());
                    log.len() == 1
                };
                if !first {
                    let body = last.to_string();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
                    return;
                }
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n").await;
                let start = tokio::time::Instant::now();
                for (at, bytes) in script {
                    tokio::time::sleep_until(start + Duration::from_secs_f64(at)).await;
                    if socket.write_all(bytes.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, arrived)
}

/// Seconds from the run's start until the step's calls were done (the second model call
/// arrived), for `provider` with or without eager dispatch.
async fn eager_run(provider: &str, eager: bool) -> f64 {
    let (script, last) = match provider {
        "anthropic" => (
            anthropic_script(),
            json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": {"input_tokens": 80, "output_tokens": 2}}),
        ),
        _ => (
            openai_script(),
            json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "gpt-4.1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}),
        ),
    };
    let (url, arrived) = replay(script, last).await;
    let work = tool_fn(
        "work",
        "Works",
        json!({"type": "object"}),
        |args: Value, _| async move {
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
            Ok::<_, BoxError>("worked".to_owned())
        },
    );
    let builder = match provider {
        "anthropic" => Agent::builder().model(
            Anthropic::builder()
                .base_url(&url)
                .api_key("sk-ant-bench")
                .build(),
        ),
        _ => Agent::builder().model(
            OpenAiChat::builder()
                .base_url(format!("{url}/v1"))
                .api_key("sk-bench")
                .build(),
        ),
    };
    let mut builder = builder
        .tool(work)
        .settings(ModelSettings::default().stream(true));
    if eager {
        builder = builder.eager_tools();
    }
    let agent = builder.build();
    let t0 = Instant::now();
    let resp = agent.run("go").await.unwrap();
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    let arrived = arrived.lock().unwrap();
    (arrived[1] - t0).as_secs_f64()
}

fn eager_dispatch(rt: &tokio::runtime::Runtime) {
    println!(
        "\n===== eager dispatch: streams replayed at their timing (calls end 1/2/3 s; tools 2.5/0.1/0.1 s) ====="
    );
    for provider in ["anthropic", "openai"] {
        let without = rt.block_on(eager_run(provider, false));
        let with = rt.block_on(eager_run(provider, true));
        println!(
            "{provider}: the step's calls are done at {without:.2} s without eager dispatch, {with:.2} s with: {:.2} s sooner (target >= 1.5 s: {})",
            without - with,
            verdict(without - with >= 1.5)
        );
    }
}

fn summary(dir: &Path, since: SystemTime) {
    println!("\n===== streaming summary (medians) =====");
    for name in ["quiet", "listening"] {
        let e = |n: usize| estimate(dir, &format!("stream/{name}/{n}"), since);
        if let (Some(one), Some(many)) = (e(1), e(1000)) {
            let per = (many - one) / 999.0;
            println!(
                "per piece through the full model stack ({name}): {per:.0} ns (run of 1 piece {:.2} µs, of 1,000 {:.2} µs; target <= 200 ns: {})",
                one / 1000.0,
                many / 1000.0,
                verdict(per <= 200.0)
            );
        }
    }
}

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let since = SystemTime::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut c = Criterion::default().configure_from_args();
    per_piece(&mut c, &rt);
    c.final_summary();
    if filter.is_empty() || "streaming eager allocations".contains(filter.as_str()) {
        allocations(&rt);
        eager_dispatch(&rt);
    }
    summary(&output_dir(), since);
}
