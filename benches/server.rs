//! The HTTP server and the SQLite store, against calling the agent directly.
//!
//! - `server_{current_thread,multi_thread}/sequential/{direct,http,http_stream}`: one run at a
//!   time (1 tool step + the answer, scripted model, echo tool, a store that keeps nothing):
//!   `Agent` called as a tower service, against `POST /threads/{id}/runs` and
//!   `POST /threads/{id}/runs/stream` over loopback with a keep-alive reqwest client, with
//!   client and server on one current-thread runtime (the CPU cost of the HTTP stack) and on a
//!   2-worker runtime (adds the wake-ups between threads). Runs per second = 1 / time.
//! - `server_*/sequential/http_raw_client`: `POST /threads/{id}/runs` from a minimal
//!   HTTP/1.1 client written here (one keep-alive connection, a prebuilt request, the response
//!   read by its length): the server and the kernel without reqwest.
//! - `server_current_thread/sequential/router`: the same request through the axum router
//!   driven with `oneshot` (routing, JSON in and out, no socket, no client).
//! - `server_*/sequential/{direct,http}_sqlite`: the same with the SQLite store (a fresh
//!   thread per run: one load, six writes; see `concurrent16/store_only`).
//! - `server_multi_thread/concurrent16/{direct,http,http_sqlite}`: 16 runs in flight (spawned
//!   tasks); one iteration is the 16 runs, so runs per second = 16 / time. `http_sqlite` is
//!   `http` with the SQLite store (a fresh thread per run: its lease, one load, and six writes
//!   in turn, each answered once committed: four saves and the call's two journal records).
//! - `server_multi_thread/concurrent16/store_only`: those store operations of 16 runs alone,
//!   with no agent and no HTTP (the store's share of `http_sqlite`).
//! - `sqlite/save_step/{10,1000}`: one save of the loop's per-step kind (2 messages appended to
//!   a thread of about 10 / 1,000 messages), file-backed, WAL.
//! - `sqlite/save_rewrite/1000`: a save after the history of 1,000 messages was compacted at
//!   its start (the rewrite path).
//! - `sqlite/save_step_miss/1000`: `save_step/1000` where the saving store's cache does not
//!   hold the thread's last save: two stores on one file save the thread in turns (each save
//!   finds the other's revision), as a store does for a thread its cache evicted.
//! - `sqlite_in_flight/saves/10000`: 10,000 threads (about 10 messages each) each saved once
//!   with a step appended, all 10,000 saves in flight at once (spawned tasks on the 2-worker
//!   runtime); one iteration is the 10,000 saves, so saves per second = 10,000 / time.
//!
//! Run with `cargo bench --features axum,sqlite --bench server`; the derived figures (runs per
//! second, ratios) are printed at the end. Client and server share the runtime and the
//! machine's cores.

#[path = "support/null_store.rs"]
mod null_store;
mod support;

use std::{
    hint::black_box,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant, SystemTime},
};

use criterion::{BenchmarkId, Criterion, Throughput};
use futures_util::future::join_all;
use null_store::NullStore;
use serde_json::json;
use support::{estimate, output_dir};
use tower::ServiceExt;
use tower_agent::{
    Agent, AgentRequest, BoxError,
    message::{Message, ToolCall},
    model::ScriptedModel,
    server,
    store::{Sqlite, Thread, ThreadStore},
    tool::tool_fn,
};

fn agent<S: ThreadStore>(store: S) -> Agent {
    Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("echo", json!({"text": "hi"}))
                .text("done")
                .per_run(),
        )
        .tool(tool_fn(
            "echo",
            "echoes",
            json!({"type": "object"}),
            |args, _| async move { Ok::<_, BoxError>(args["text"].to_string()) },
        ))
        .store(store)
        .build()
}

/// Serves `agent` on 127.0.0.1:0 (on the current runtime); returns its base URL.
async fn start(agent: Agent) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server::serve(listener, agent, std::future::pending()).into_future());
    url
}

static THREAD: AtomicU64 = AtomicU64::new(0);

fn next_thread() -> String {
    format!("t{}", THREAD.fetch_add(1, Ordering::Relaxed))
}

async fn direct(agent: &Agent) {
    let resp = agent
        .clone()
        .oneshot(AgentRequest::new("hi").thread(next_thread()))
        .await
        .unwrap();
    assert!(resp.outcome.is_finished());
}

async fn http(client: &reqwest::Client, url: &str) {
    let resp = client
        .post(format!("{url}/threads/{}/runs", next_thread()))
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let body = resp.bytes().await.unwrap();
    assert!(body.ends_with(b"}"));
}

/// A minimal HTTP/1.1 client on one keep-alive connection: writes a prebuilt request, reads
/// the response by its `content-length`. Shows what the server and the kernel cost without
/// reqwest's client machinery.
struct RawClient {
    stream: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    async fn connect(url: &str) -> Self {
        let addr = url.trim_start_matches("http://");
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        RawClient {
            stream,
            buf: Vec::with_capacity(4096),
        }
    }

    async fn run(&mut self) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = r#"{"prompt":"hi"}"#;
        let request = format!(
            "POST /threads/{}/runs HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            next_thread(),
            body.len()
        );
        self.stream.write_all(request.as_bytes()).await.unwrap();
        self.buf.clear();
        loop {
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = std::str::from_utf8(&self.buf[..end]).unwrap();
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .expect("content-length")
                .parse()
                .unwrap();
            if self.buf.len() >= end + 4 + length {
                assert!(self.buf.ends_with(b"}"));
                return;
            }
        }
    }
}

async fn oneshot_router(app: &axum::Router) {
    let request = axum::http::Request::post(format!("/threads/{}/runs", next_thread()))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(r#"{"prompt":"hi"}"#))
        .unwrap();
    let resp = app.clone().oneshot(request).await.unwrap();
    assert!(resp.status().is_success());
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    assert!(body.ends_with(b"}"));
}

async fn http_stream(client: &reqwest::Client, url: &str) {
    let resp = client
        .post(format!("{url}/threads/{}/runs/stream", next_thread()))
        .json(&json!({"prompt": "hi"}))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let body = resp.bytes().await.unwrap();
    assert!(body.windows(16).any(|w| w == b"event: agent_sto"));
}

/// Sequential runs: on `rt`, labelled `label` (`current_thread` or `multi_thread`).
fn sequential(c: &mut Criterion, rt: &tokio::runtime::Runtime, label: &str, dir: &Path) {
    let null_agent = agent(NullStore);
    let sqlite_agent = agent(Sqlite::open(dir.join(format!("runs_{label}.db"))).unwrap());
    let (url, sqlite_url) = rt.block_on(async {
        (
            start(null_agent.clone()).await,
            start(sqlite_agent.clone()).await,
        )
    });
    let client = reqwest::Client::new();
    // Check the set-up once before timing.
    rt.block_on(async {
        direct(&null_agent).await;
        http(&client, &url).await;
        http_stream(&client, &url).await;
        http(&client, &sqlite_url).await;
    });

    let mut group = c.benchmark_group(format!("server_{label}"));
    group.throughput(Throughput::Elements(1));
    let id = |name: &str| BenchmarkId::new("sequential", name);
    group.bench_function(id("direct"), |b| {
        b.to_async(rt).iter(|| direct(&null_agent))
    });
    group.bench_function(id("http"), |b| b.to_async(rt).iter(|| http(&client, &url)));
    let raw = tokio::sync::Mutex::new(rt.block_on(RawClient::connect(&url)));
    group.bench_function(id("http_raw_client"), |b| {
        b.to_async(rt)
            .iter(|| async { raw.lock().await.run().await })
    });
    group.bench_function(id("http_stream"), |b| {
        b.to_async(rt).iter(|| http_stream(&client, &url))
    });
    if label == "current_thread" {
        // The axum router alone, driven as a tower service: no socket, no client.
        let app = server::router(null_agent.clone());
        group.bench_function(id("router"), |b| {
            b.to_async(rt).iter(|| oneshot_router(&app))
        });
    }
    group.bench_function(id("direct_sqlite"), |b| {
        b.to_async(rt).iter(|| direct(&sqlite_agent))
    });
    group.bench_function(id("http_sqlite"), |b| {
        b.to_async(rt).iter(|| http(&client, &sqlite_url))
    });
    group.finish();
}

/// 16 runs in flight at a time, as spawned tasks, on the multi-thread runtime.
fn concurrent(c: &mut Criterion, rt: &tokio::runtime::Runtime, dir: &Path) {
    let null_agent = agent(NullStore);
    let sqlite_agent = agent(Sqlite::open(dir.join("runs_concurrent.db")).unwrap());
    let (url, sqlite_url) = rt.block_on(async {
        (
            start(null_agent.clone()).await,
            start(sqlite_agent.clone()).await,
        )
    });
    let client = reqwest::Client::new();
    rt.block_on(http(&client, &url));
    rt.block_on(http(&client, &sqlite_url));

    let mut group = c.benchmark_group("server_multi_thread");
    group.throughput(Throughput::Elements(16));
    let id = |name: &str| BenchmarkId::new("concurrent16", name);
    group.bench_function(id("direct"), |b| {
        b.to_async(rt).iter(|| {
            join_all((0..16).map(|_| {
                let agent = null_agent.clone();
                tokio::spawn(async move { direct(&agent).await })
            }))
        })
    });
    group.bench_function(id("http"), |b| {
        b.to_async(rt).iter(|| {
            join_all((0..16).map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move { http(&client, &url).await })
            }))
        })
    });
    group.bench_function(id("http_sqlite"), |b| {
        b.to_async(rt).iter(|| {
            join_all((0..16).map(|_| {
                let (client, url) = (client.clone(), sqlite_url.clone());
                tokio::spawn(async move { http(&client, &url).await })
            }))
        })
    });
    // The store's part of an `http_sqlite` run alone, with no agent and no HTTP.
    let store = Sqlite::open(dir.join("store_only.db")).unwrap();
    group.bench_function(id("store_only"), |b| {
        b.to_async(rt).iter(|| {
            join_all((0..16).map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store_ops_of_a_run(&store).await })
            }))
        })
    });
    group.finish();
}

/// What the SQLite store does for one run of [`agent`] on a fresh thread (1 tool step and the
/// answer): its lease, the load, and six writes in turn, each answered once committed — the
/// prompt, the step's calls, the call started, the call finished, the step's result, the
/// answer.
async fn store_ops_of_a_run(store: &Sqlite) {
    let id = next_thread();
    let _lease = store.lease(&id).await.unwrap();
    assert!(store.load(&id).await.unwrap().is_none());
    let mut thread = Thread::new(id.clone());
    thread.messages.push(Message::user("hi"));
    store.save(&thread).await.unwrap();
    let call = ToolCall::new("call_0", "echo", json!({"text": "hi"}));
    thread
        .messages
        .push(Message::assistant("").with_tool_calls(vec![call.clone()]));
    store.save(&thread).await.unwrap();
    let journal = store.journal().unwrap();
    journal.started(&id, &call).await.unwrap();
    let output = tower_agent::message::ToolOutput::text("call_0", "\"hi\"");
    journal.finished(&id, &call, &output).await.unwrap();
    thread.messages.push(Message::tool_result(&output));
    store.save(&thread).await.unwrap();
    thread.messages.push(Message::assistant("done"));
    store.save(&thread).await.unwrap();
}

fn sqlite_benches(c: &mut Criterion, rt: &tokio::runtime::Runtime, dir: &Path) {
    let store = Sqlite::open(dir.join("saves.db")).unwrap();
    let step = |n: usize| {
        let call = ToolCall::new(format!("call_{n}"), "echo", json!({"text": "hi"}));
        [
            Message::assistant("").with_tool_calls(vec![call]),
            Message::tool_result(&tower_agent::message::ToolOutput::text(
                format!("call_{n}"),
                "a tool result of a typical length, a line or two of text",
            )),
        ]
    };
    let seeded = |history: usize| {
        let mut thread = Thread::new(next_thread());
        thread.messages.push(Message::user("start"));
        for i in 0..history / 2 {
            thread.messages.extend(step(i));
        }
        thread
    };

    let mut group = c.benchmark_group("sqlite");
    group.throughput(Throughput::Elements(1));
    for history in [10, 1000] {
        group.bench_function(BenchmarkId::new("save_step", history), |b| {
            b.to_async(rt).iter_custom(|iters| {
                let store = store.clone();
                async move {
                    let mut total = Duration::ZERO;
                    let mut thread = seeded(history);
                    store.save(&thread).await.unwrap();
                    for i in 0..iters {
                        // Keep the history near its size: a fresh thread every 100 steps
                        // (seeded untimed).
                        if i % 100 == 99 {
                            thread = seeded(history);
                            store.save(&thread).await.unwrap();
                        }
                        thread.messages.extend(step(i as usize));
                        let started = Instant::now();
                        store.save(black_box(&thread)).await.unwrap();
                        total += started.elapsed();
                    }
                    total
                }
            })
        });
    }
    group.bench_function(BenchmarkId::new("save_rewrite", 1000), |b| {
        b.to_async(rt).iter_custom(|iters| {
            let store = store.clone();
            async move {
                let mut total = Duration::ZERO;
                let mut thread = seeded(1000);
                store.save(&thread).await.unwrap();
                for i in 0..iters {
                    // A compaction at the start: every row from the first on is rewritten.
                    thread
                        .messages
                        .splice(0..1, [Message::user(format!("summary {i}"))]);
                    let started = Instant::now();
                    store.save(black_box(&thread)).await.unwrap();
                    total += started.elapsed();
                }
                total
            }
        })
    });
    // Two stores on one file saving one thread in turns: each save finds a revision its cache
    // does not know (the other store wrote last), the case of a thread evicted from the cache.
    let other = Sqlite::open(dir.join("saves.db")).unwrap();
    group.bench_function(BenchmarkId::new("save_step_miss", 1000), |b| {
        b.to_async(rt).iter_custom(|iters| {
            let stores = [store.clone(), other.clone()];
            async move {
                let mut total = Duration::ZERO;
                let mut thread = seeded(1000);
                stores[1].save(&thread).await.unwrap();
                for i in 0..iters {
                    if i % 100 == 99 {
                        thread = seeded(1000);
                        stores[1].save(&thread).await.unwrap();
                    }
                    thread.messages.extend(step(i as usize));
                    let store = &stores[(i % 2) as usize];
                    let started = Instant::now();
                    store.save(black_box(&thread)).await.unwrap();
                    total += started.elapsed();
                }
                total
            }
        })
    });
    group.finish();

    // 10,000 saves in flight: one step appended to each of 10,000 threads, all at once.
    const IN_FLIGHT: usize = 10_000;
    let mut group = c.benchmark_group("sqlite_in_flight");
    group.throughput(Throughput::Elements(IN_FLIGHT as u64));
    group.sample_size(10);
    let threads: Vec<Thread> = (0..IN_FLIGHT).map(|_| seeded(10)).collect();
    rt.block_on(join_all(threads.iter().map(|t| store.save(t))))
        .into_iter()
        .for_each(|r| r.unwrap());
    let threads = &std::sync::Mutex::new(threads);
    group.bench_function(BenchmarkId::new("saves", IN_FLIGHT), |b| {
        b.to_async(rt).iter_custom(|iters| {
            let store = store.clone();
            // Each call continues the threads where the last one left them (all stored).
            let mut mine = std::mem::take(&mut *threads.lock().unwrap());
            async move {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    for t in &mut mine {
                        if t.messages.len() > 60 {
                            *t = seeded(10);
                        }
                        t.messages.extend(step(i as usize));
                    }
                    let started = Instant::now();
                    let saves = mine.iter().map(|t| {
                        let (store, t) = (store.clone(), t.clone());
                        tokio::spawn(async move { store.save(&t).await })
                    });
                    for r in join_all(saves).await {
                        r.unwrap().unwrap();
                    }
                    total += started.elapsed();
                }
                *threads.lock().unwrap() = mine;
                total
            }
        })
    });
    group.finish();
}

// ===== summary =====

fn summary(dir: &Path, since: SystemTime) {
    println!("\n===== server summary (medians) =====");
    let t = |id: &str| estimate(dir, id, since);
    let per_sec = |ns: f64, runs: f64| runs * 1e9 / ns;
    for label in ["current_thread", "multi_thread"] {
        let seq = |n: &str| t(&format!("server_{label}/sequential/{n}"));
        let Some(d) = seq("direct") else { continue };
        println!(
            "{label:<15} direct          {:7.1} µs/run {:8.0} runs/s",
            d / 1e3,
            per_sec(d, 1.0)
        );
        for name in ["router", "http_raw_client", "http", "http_stream"] {
            if let Some(h) = seq(name) {
                println!(
                    "{label:<15} {name:<15} {:7.1} µs/run {:8.0} runs/s  ratio to direct \
                     {:5.1}x  HTTP cost {:6.1} µs",
                    h / 1e3,
                    per_sec(h, 1.0),
                    h / d,
                    (h - d) / 1e3
                );
            }
        }
        if let (Some(ds), Some(hs)) = (seq("direct_sqlite"), seq("http_sqlite")) {
            println!(
                "{label:<15} direct_sqlite   {:7.1} µs/run {:8.0} runs/s",
                ds / 1e3,
                per_sec(ds, 1.0)
            );
            println!(
                "{label:<15} http_sqlite     {:7.1} µs/run {:8.0} runs/s  ratio to direct_sqlite \
                 {:5.1}x  HTTP cost {:6.1} µs",
                hs / 1e3,
                per_sec(hs, 1.0),
                hs / ds,
                (hs - ds) / 1e3
            );
        }
    }
    let con = |n: &str| t(&format!("server_multi_thread/concurrent16/{n}"));
    if let (Some(d), Some(h)) = (con("direct"), con("http")) {
        println!(
            "multi_thread    16 in flight   direct {:8.0} runs/s, http {:8.0} runs/s, ratio {:.1}x",
            per_sec(d, 16.0),
            per_sec(h, 16.0),
            h / d
        );
    }
    if let (Some(h), Some(hs)) = (con("http"), con("http_sqlite")) {
        println!(
            "multi_thread    16 in flight   http_sqlite {:8.0} runs/s, {:.0}% of http",
            per_sec(hs, 16.0),
            100.0 * h / hs
        );
    }
    if let Some(so) = con("store_only") {
        println!(
            "multi_thread    16 in flight   store_only  {:8.0} runs/s (the store's operations of a run, alone)",
            per_sec(so, 16.0),
        );
    }
    for id in [
        "save_step/10",
        "save_step/1000",
        "save_step_miss/1000",
        "save_rewrite/1000",
    ] {
        if let Some(s) = t(&format!("sqlite/{id}")) {
            println!("sqlite          {id:<18} {:7.1} µs per save", s / 1e3);
        }
    }
    if let Some(s) = t("sqlite_in_flight/saves/10000") {
        println!(
            "sqlite          10,000 in flight   {:8.0} saves/s",
            per_sec(s, 10_000.0)
        );
    }
}

fn main() {
    let started = SystemTime::now();
    let out = output_dir();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut c = Criterion::default()
        .output_directory(&out)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    sequential(&mut c, &current, "current_thread", data.path());
    sequential(&mut c, &multi, "multi_thread", data.path());
    concurrent(&mut c, &multi, data.path());
    sqlite_benches(&mut c, &multi, data.path());
    c.final_summary();
    summary(&out, started);
}
