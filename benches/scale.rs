//! Many runs at once (issue 16, target 6): N concurrent runs of an agent whose model answers
//! after 50 ms (a [`ScriptedModel`] with a latency, tokio time), each run making 5 tool steps
//! (an echo tool) and a final answer — 6 model calls, 300 ms of model time — on a thread of
//! the in-memory store, SQLite (feature `sqlite`, a file in a temporary directory) or
//! PostgreSQL (feature `postgres`, a real server started as the tests start one:
//! `tests/support/postgres.rs`, on a unix socket, `fsync = off`).
//!
//! ```text
//! cargo bench --features sqlite,postgres --bench scale                  # every case
//! cargo bench --features sqlite,postgres --bench scale -- memory sqlite:10000
//! ```
//!
//! Arguments that do not start with `-` select cases: `store:runs` exactly, or a store name
//! (the cases: `{none,memory,sqlite,postgres}:{10000,100000}`; `none` is a store that keeps
//! nothing — loads find no thread, saves are dropped — so its figures are what the runs in
//! flight cost without the threads a store keeps). Not criterion: one case is one measurement of
//! many runs, and each case runs in a child process of its own (this binary, re-executed with
//! `SCALE_CASE=store:runs`), so its peak RSS (`VmHWM`) is its own and not the high-water mark
//! of an earlier case. The runtime is tokio's multi-thread one with 2 workers (this machine
//! has 2 cores); every run is spawned at once as a task.
//!
//! For each case it prints: the wall time from the first spawn to the last run's end, and the
//! same beyond the model's latency (wall − 300 ms); runs/s; the most runs in flight at once;
//! the peak RSS, the RSS before the runs and after them (what the store keeps), and bytes per
//! in-flight run ((peak − before) / runs); the size of one run's future (`size_of_val`); and
//! the overhead per step beyond the model's latency, p50/p99/max: the time from a model answer
//! to the next model call (the tool step: the tool call, the saves, the loop), and per run the
//! time outside the model's futures / 6. Targets: 100,000 concurrent runs in ≤ 1 GiB of peak
//! RSS; 10,000 runs on SQLite in ≤ 2 s of wall time beyond the model's latency.

#[path = "support/null_store.rs"]
mod null_store;
#[cfg(feature = "postgres")]
#[path = "../tests/support/postgres.rs"]
mod pg;

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use serde_json::json;
use tower::{Service, ServiceExt};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    model::{ModelRequest, ScriptedModel},
    store::{MemoryStore, ThreadStore},
    tool::tool_fn,
};

use null_store::NullStore;

/// The model's latency per call.
const LATENCY: Duration = Duration::from_millis(50);
/// Tool steps per run (then one answer).
const STEPS: usize = 5;
/// Model calls per run.
const MODEL_CALLS: u32 = STEPS as u32 + 1;

/// Whether the process `pid` is alive (for `pg`'s clean-up of servers of dead processes).
#[cfg(feature = "postgres")]
fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `VmRSS` and `VmHWM` of this process, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap()
}

/// What the runs measured, shared by all of them.
struct Probes {
    base: Instant,
    /// A model answer to the next model call of the same run (ns).
    step: Mutex<Histogram<u64>>,
    /// Per run: (wall − time inside the model's futures) / model calls (ns).
    per_run: Mutex<Histogram<u64>>,
    /// Per run: wall time (ns).
    wall: Mutex<Histogram<u64>>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Runs that failed or did not finish.
    failed: AtomicUsize,
}

/// One run's clock, passed to the model in the request's extensions.
#[derive(Clone)]
struct RunClock(Arc<RunClockInner>);

struct RunClockInner {
    /// When the last model answer came (ns since `Probes::base`; 0: none yet).
    answered: AtomicU64,
    /// Time spent inside the model's futures (ns).
    in_model: AtomicU64,
}

fn since(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

fn agent(store: impl ThreadStore, probes: Arc<Probes>) -> Agent {
    let echo = tool_fn(
        "echo",
        "echoes",
        json!({"type": "object"}),
        |args, _| async move { Ok::<_, BoxError>(args.to_string()) },
    );
    let mut script = ScriptedModel::new();
    for i in 0..STEPS {
        script = script.tool_call("echo", json!({ "step": i, "text": "some tool input" }));
    }
    let script = script.text("done").per_run().latency(LATENCY);
    // The scripted model, timed: the gap since the run's last model answer, and the time
    // inside the model's future.
    let model = tower::service_fn(move |req: ModelRequest| {
        let mut script = script.clone();
        let probes = Arc::clone(&probes);
        async move {
            let clock = req.ctx.extensions().get::<RunClock>().cloned();
            let called = since(probes.base);
            if let Some(clock) = &clock {
                let answered = clock.0.answered.load(Ordering::Relaxed);
                if answered > 0 {
                    let gap = called - answered;
                    probes.step.lock().unwrap().record(gap.max(1)).unwrap();
                }
            }
            let response = script.ready().await?.call(req).await;
            let now = since(probes.base);
            if let Some(clock) = &clock {
                clock.0.answered.store(now, Ordering::Relaxed);
                clock.0.in_model.fetch_add(now - called, Ordering::Relaxed);
            }
            response
        }
    });
    Agent::builder()
        .model(model)
        .tool(echo)
        .store(store)
        .build()
}

/// One case: `runs` concurrent runs on `store`; prints the `RESULT` line the parent reads.
async fn case(name: &str, runs: usize, store: impl ThreadStore) {
    let probes = Arc::new(Probes {
        base: Instant::now(),
        step: Mutex::new(histogram()),
        per_run: Mutex::new(histogram()),
        wall: Mutex::new(histogram()),
        in_flight: AtomicUsize::new(0),
        most_in_flight: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
    });
    let agent = agent(store, Arc::clone(&probes));
    // One run first: the store's schema, the first thread, lazily built state.
    let warm = agent
        .run(AgentRequest::new("go").thread("warm"))
        .await
        .unwrap();
    assert!(warm.outcome.is_finished(), "{:?}", warm.outcome);
    let future_size = std::mem::size_of_val(&agent.run(AgentRequest::new("go").thread("size")));
    let (before, _) = memory();

    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let agent = agent.clone();
            let probes = Arc::clone(&probes);
            tokio::spawn(async move {
                let now = probes.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                probes.most_in_flight.fetch_max(now, Ordering::Relaxed);
                let clock = RunClock(Arc::new(RunClockInner {
                    answered: AtomicU64::new(0),
                    in_model: AtomicU64::new(0),
                }));
                let began = Instant::now();
                let request = AgentRequest::new("go")
                    .thread(format!("run{i}"))
                    .extension(clock.clone());
                let response = agent.run(request).await;
                let wall = began.elapsed().as_nanos() as u64;
                probes.in_flight.fetch_sub(1, Ordering::Relaxed);
                // A run that fails (a store error, as a pool that times out under this load)
                // is counted and reported, not a reason to stop the case.
                match response {
                    Ok(r) if r.outcome.is_finished() && r.steps == MODEL_CALLS => {}
                    Ok(r) => {
                        let n = probes.failed.fetch_add(1, Ordering::Relaxed);
                        if n == 0 {
                            eprintln!("first run that did not finish: {:?}", r.outcome);
                        }
                        return;
                    }
                    Err(e) => {
                        let n = probes.failed.fetch_add(1, Ordering::Relaxed);
                        if n == 0 {
                            eprintln!("first run that failed: {e}");
                        }
                        return;
                    }
                }
                let outside = wall.saturating_sub(clock.0.in_model.load(Ordering::Relaxed));
                probes
                    .per_run
                    .lock()
                    .unwrap()
                    .record((outside / u64::from(MODEL_CALLS)).max(1))
                    .unwrap();
                probes.wall.lock().unwrap().record(wall.max(1)).unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let wall = started.elapsed();
    let (after, peak) = memory();

    let model_time = LATENCY * MODEL_CALLS;
    let us =
        |h: &Mutex<Histogram<u64>>, q: f64| h.lock().unwrap().value_at_quantile(q) as f64 / 1e3;
    let max = |h: &Mutex<Histogram<u64>>| h.lock().unwrap().max() as f64 / 1e3;
    println!(
        "RESULT {name}:{runs} failed={} wall_s={:.3} beyond_model_s={:.3} runs_per_s={:.0} in_flight={} \
         peak_mib={:.1} before_mib={:.1} after_mib={:.1} bytes_per_run={:.0} future_bytes={future_size} \
         step_p50_us={:.1} step_p99_us={:.1} step_max_us={:.1} \
         run_p50_us={:.1} run_p99_us={:.1} run_max_us={:.1} \
         wall_p50_ms={:.1} wall_p99_ms={:.1}",
        probes.failed.load(Ordering::Relaxed),
        wall.as_secs_f64(),
        (wall.saturating_sub(model_time)).as_secs_f64(),
        runs as f64 / wall.as_secs_f64(),
        probes.most_in_flight.load(Ordering::Relaxed),
        peak as f64 / (1 << 20) as f64,
        before as f64 / (1 << 20) as f64,
        after as f64 / (1 << 20) as f64,
        peak.saturating_sub(before) as f64 / runs as f64,
        us(&probes.step, 0.5),
        us(&probes.step, 0.99),
        max(&probes.step),
        us(&probes.per_run, 0.5),
        us(&probes.per_run, 0.99),
        max(&probes.per_run),
        us(&probes.wall, 0.5) / 1e3,
        us(&probes.wall, 0.99) / 1e3,
    );
}

/// Runs the case `spec` (`store:runs`) in this process.
fn child(spec: &str) {
    let (store, runs) = spec.split_once(':').expect("SCALE_CASE is store:runs");
    let runs: usize = runs.parse().expect("runs is a number");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match store {
        "none" => rt.block_on(case(store, runs, NullStore)),
        "memory" => rt.block_on(case(store, runs, MemoryStore::new())),
        #[cfg(feature = "sqlite")]
        "sqlite" => {
            let dir = tempfile::tempdir().unwrap();
            let db = tower_agent::store::Sqlite::open(dir.path().join("threads.db")).unwrap();
            rt.block_on(case(store, runs, db));
        }
        #[cfg(feature = "postgres")]
        "postgres" => {
            let url = std::env::var("SCALE_PG_URL").expect("the parent sets SCALE_PG_URL");
            let db = rt
                .block_on(tower_agent::store::Postgres::connect(&url))
                .unwrap();
            rt.block_on(case(store, runs, db));
        }
        other => panic!("store `{other}` is unknown or its feature is off"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("SCALE_CASE") {
        child(&spec);
        return;
    }
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut stores = vec!["none", "memory"];
    if cfg!(feature = "sqlite") {
        stores.push("sqlite");
    }
    if cfg!(feature = "postgres") {
        stores.push("postgres");
    }
    let cases: Vec<String> = stores
        .iter()
        .flat_map(|s| [10_000, 100_000].map(|n| format!("{s}:{n}")))
        .filter(|c| {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| c == f || c.split(':').next() == Some(f.as_str()))
        })
        .collect();
    #[cfg(feature = "postgres")]
    let pg_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut results = Vec::new();
    for spec in &cases {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.env("SCALE_CASE", spec);
        #[cfg(feature = "postgres")]
        if spec.starts_with("postgres") {
            cmd.env("SCALE_PG_URL", pg_rt.block_on(pg::database()));
        }
        eprintln!("running {spec} …");
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        for note in String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("first run"))
        {
            eprintln!("{spec}: {note}");
        }
        match stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) {
            Some(line) if out.status.success() => results.push(line.to_owned()),
            _ => results.push(format!(
                "{spec} FAILED ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .skip_while(|l| !l.contains("panicked"))
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )),
        }
    }
    summary(&results);
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

fn summary(results: &[String]) {
    println!(
        "\n===== scale summary: {STEPS} tool steps per run, model latency {} ms ({} ms per run) =====",
        LATENCY.as_millis(),
        (LATENCY * MODEL_CALLS).as_millis()
    );
    println!(
        "{:<16} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>7} {:>17} {:>17}",
        "case",
        "failed",
        "wall s",
        "+model s",
        "runs/s",
        "peak MiB",
        "after MiB",
        "B/run",
        "fut B",
        "step p50/p99 µs",
        "run/6 p50/p99 µs"
    );
    for line in results {
        let Some(case) = line
            .split_whitespace()
            .next()
            .filter(|_| line.contains('='))
        else {
            println!("{line}");
            continue;
        };
        let f = |n: &str| field(line, n).unwrap_or("?");
        println!(
            "{case:<16} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>7} {:>17} {:>17}",
            f("failed"),
            f("wall_s"),
            f("beyond_model_s"),
            f("runs_per_s"),
            f("peak_mib"),
            f("after_mib"),
            f("bytes_per_run"),
            f("future_bytes"),
            format!("{}/{}", f("step_p50_us"), f("step_p99_us")),
            format!("{}/{}", f("run_p50_us"), f("run_p99_us")),
        );
    }
    for line in results {
        let Some(case) = line.split_whitespace().next() else {
            continue;
        };
        let peak: Option<f64> = field(line, "peak_mib").and_then(|v| v.parse().ok());
        let beyond: Option<f64> = field(line, "beyond_model_s").and_then(|v| v.parse().ok());
        if case.ends_with(":100000")
            && let Some(peak) = peak
        {
            println!(
                "{case}: peak RSS {peak:.0} MiB (target <= 1024 MiB: {})",
                if peak <= 1024.0 { "met" } else { "NOT met" }
            );
        }
        if case == "sqlite:10000"
            && let Some(beyond) = beyond
        {
            println!(
                "{case}: {beyond:.2} s beyond the model's latency (target <= 2 s: {})",
                if beyond <= 2.0 { "met" } else { "NOT met" }
            );
        }
    }
    println!("(raw lines, for the record:)");
    for line in results {
        println!("  {line}");
    }
}
