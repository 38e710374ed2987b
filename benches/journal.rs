//! The tool-call journal (`store::journal`) and the saves of a run on a thread, with the
//! in-memory store against a real PostgreSQL server (started here as the tests start it:
//! `tests/support/postgres.rs`, on a unix socket, `fsync = off`).
//!
//! - `journal/call/{memory,postgres}`: what the journal adds to one tool call: the `started`
//!   record (written before the tool runs) and the `finished` record.
//! - `journal/save_step/{memory,postgres}`: one save of the loop's per-step kind (one message
//!   appended to a thread of 10 messages).
//! - `journal/run/{memory,postgres}`: a whole run on a new thread with one tool call and the
//!   answer (scripted model, echo tool): one load, four saves (prompt, the assistant message
//!   before its call runs, the step, the end), the call's two journal records.
//! - `saves/concurrent/{1000,10000}` (PostgreSQL only): that many saves at once, each of a
//!   distinct thread of its own task, appending 2 messages to it (one iteration: all of them;
//!   throughput in saves/s). Issue 16, target 3: the store's group commit.
//!
//! Run with `cargo bench --features postgres --bench journal`.

mod support;

#[path = "../tests/support/postgres.rs"]
mod pg;

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, SystemTime},
};

use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::json;
use support::{estimate, output_dir};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    message::{Message, ToolCall, ToolOutput},
    model::ScriptedModel,
    store::{MemoryStore, Postgres, Thread, ThreadStore},
    tool::tool_fn,
};

/// Whether the process `pid` is alive (for `pg`'s clean-up of servers of dead processes).
fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn agent(store: impl ThreadStore) -> Agent {
    let echo = tool_fn(
        "echo",
        "echoes",
        json!({"type": "object"}),
        |args, _| async move { Ok::<_, BoxError>(args.to_string()) },
    );
    Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("echo", json!({"x": 1}))
                .text("done")
                .per_run(),
        )
        .tool(echo)
        .store(store)
        .build()
}

fn benches<S: ThreadStore + Clone>(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    name: &str,
    store: S,
) {
    let mut group = c.benchmark_group("journal");
    let n = AtomicU64::new(0);
    let journal_store = store.clone();
    group.bench_function(BenchmarkId::new("call", name), |b| {
        b.to_async(rt).iter(|| async {
            let journal = journal_store.journal().unwrap();
            let i = n.fetch_add(1, Ordering::Relaxed);
            let call = ToolCall {
                id: format!("call_{i}"),
                name: "echo".into(),
                arguments: json!({"x": 1}),
            };
            journal.started("bench", &call).await.unwrap();
            let output = ToolOutput::text(call.id.clone(), "{\"x\":1}");
            journal.finished("bench", &call, &output).await.unwrap();
        });
    });

    // A thread of 10 messages that grows by one per save; restarted every 1,000 saves.
    let mut thread = Thread::new("steps");
    group.bench_function(BenchmarkId::new("save_step", name), |b| {
        b.to_async(rt).iter(|| {
            if thread.messages.len() >= 1010 {
                thread = Thread::new(format!("steps{}", n.fetch_add(1, Ordering::Relaxed)));
            }
            while thread.messages.len() < 10 {
                thread.messages.push(Message::user("hello"));
            }
            thread.messages.push(Message::assistant("a step"));
            // Cheap: the history is shared.
            let (store, thread) = (store.clone(), thread.clone());
            async move { store.save(&thread).await.unwrap() }
        });
    });

    let agent = agent(store.clone());
    group.bench_function(BenchmarkId::new("run", name), |b| {
        b.to_async(rt).iter(|| async {
            let id = format!("run{}", n.fetch_add(1, Ordering::Relaxed));
            let run = agent.run(AgentRequest::new("go").thread(id)).await.unwrap();
            assert!(run.outcome.is_finished());
        });
    });
    group.finish();
}

/// `saves/concurrent/N`: N saves in flight at once, distinct threads, 2 messages appended each.
fn concurrent_saves(c: &mut Criterion, rt: &tokio::runtime::Runtime, store: Postgres) {
    let mut group = c.benchmark_group("saves");
    group.sample_size(10);
    for n in [1_000usize, 10_000] {
        // The threads, saved once with 2 messages; each iteration appends 2 and saves them all.
        let threads: Vec<Thread> = (0..n)
            .map(|i| {
                let mut t = Thread::new(format!("c{n}_{i}"));
                t.messages.push(Message::user("hello"));
                t.messages.push(Message::assistant("hi"));
                t
            })
            .collect();
        let threads = std::sync::Arc::new(std::sync::Mutex::new(threads));
        rt.block_on(save_all(&store, &threads, false));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("concurrent", n), |b| {
            b.to_async(rt).iter_custom(|iters| {
                let (store, threads) = (store.clone(), threads.clone());
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += save_all(&store, &threads, true).await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

/// Saves every thread at once, each from a task of its own (appending 2 messages first if
/// `grow`); the wall time.
async fn save_all(
    store: &Postgres,
    threads: &std::sync::Arc<std::sync::Mutex<Vec<Thread>>>,
    grow: bool,
) -> Duration {
    let batch: Vec<Thread> = threads
        .lock()
        .unwrap()
        .iter_mut()
        .map(|t| {
            if grow {
                t.messages.push(Message::user("another question"));
                t.messages.push(Message::assistant("another answer"));
            }
            t.clone()
        })
        .collect();
    let started = std::time::Instant::now();
    let tasks: Vec<_> = batch
        .into_iter()
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move { store.save(&t).await.unwrap() })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

fn main() {
    let started = SystemTime::now();
    let out = output_dir();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut c = Criterion::default()
        .output_directory(&out)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    benches(&mut c, &rt, "memory", MemoryStore::new());
    let url = rt.block_on(pg::database());
    let postgres = rt.block_on(Postgres::connect(&url)).unwrap();
    benches(&mut c, &rt, "postgres", postgres.clone());
    concurrent_saves(&mut c, &rt, postgres);
    c.final_summary();

    let t = |id: &str| estimate(&out, &format!("journal/{id}"), started);
    for what in ["call", "save_step", "run"] {
        if let (Some(m), Some(p)) = (t(&format!("{what}/memory")), t(&format!("{what}/postgres"))) {
            println!(
                "journal {what:<10} memory {:9.1} µs, postgres {:9.1} µs ({:.0}x)",
                m / 1e3,
                p / 1e3,
                p / m
            );
        }
    }
    for n in [1_000, 10_000] {
        if let Some(t) = t(&format!("saves/concurrent/{n}")) {
            println!(
                "saves concurrent {n:>6}: {:9.1} ms per round, {:8.0} saves/s",
                t / 1e6,
                n as f64 / (t / 1e9)
            );
        }
    }
}
