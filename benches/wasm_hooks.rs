//! WebAssembly hooks (issue 28): the PreToolUse round trip through the hook set's tool layer
//! around an echo tool, for hand-written guests (WAT), against the persistent hook process
//! measured in the same run; the cold start of a hook; memory per live instance with 1,000
//! agent runs in flight, each calling a wasm hook.
//!
//! ```text
//! cargo bench --features wasm --bench wasm_hooks     # about 40 s
//! ```
//!
//! Criterion cases (`wasm_hook/…`): `no_hook` (the stack without a hook), `stateless` (a
//! guest that allows every call, one instance reused), `fresh` (the same guest, a fresh
//! instance per call), `guard` (a stateless guest that scans the event for `rm -rf`),
//! `python` and `javascript` (the guard of `tests/wasm/guests_src/guard.py` and `guard.js`,
//! built by `.ci/wasm-guests` with componentize-py and jco), `persistent` (the python persistent hook process
//! of `benches/command_hooks.rs`). Then the
//! distribution of sequential round trips (p50/p99 from an `hdrhistogram`) of `stateless`,
//! `fresh`, `python`, `javascript` and `persistent` in one run; targets: p50 ≤ 5 µs and
//! p99 ≤ 50 µs for a compiled guest, p50 ≤ 50 µs for the Python and JavaScript guests. Cold start: the build of a hook whose compiled code is not cached (compiled, then
//! written to the cache: reported), the build once it is cached, and its first call; target
//! ≤ 10 ms for the cached build and first call.

#[path = "../tests/wasm/guests.rs"]
#[allow(dead_code)]
mod guests;
mod support;

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    sync::Arc,
    time::{Duration, Instant, SystemTime},
};

use criterion::Criterion;
use hdrhistogram::Histogram;
use serde_json::json;
use support::{PERSISTENT_ALLOW, estimate, output_dir, verdict};
use tower::{ServiceBuilder, ServiceExt, service_fn};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    command::CommandHooks,
    context::RunContext,
    message::{ToolCall, ToolOutput},
    model::ScriptedModel,
    tool::{BoxToolService, ToolRequest, tool_fn},
    wasm::WasmHook,
};

/// The decision every allowing hook answers.
const ALLOW: &str =
    r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}"#;

/// Sequential round trips per distribution.
const SAMPLES: usize = 20_000;

/// Calls in flight in the memory case.
const IN_FLIGHT: usize = 1_000;

fn allow_guest(stateless: bool) -> Vec<u8> {
    guests::answering(
        &format!(r#"{{"events": ["PreToolUse"], "matcher": "bash", "stateless": {stateless}}}"#),
        ALLOW,
    )
}

/// The tool stack: the hooks' tool layer around an echo tool.
fn stack(hooks: CommandHooks) -> BoxToolService {
    let set = hooks.into_hooks().compile().unwrap();
    BoxToolService::new(
        ServiceBuilder::new()
            .layer(set.tool_layer())
            .service(service_fn(|req: ToolRequest| async move {
                Ok::<_, BoxError>(ToolOutput::text(req.call.id, "ok"))
            })),
    )
}

fn wasm_stack(dir: &Path, hook: Option<WasmHook>) -> BoxToolService {
    let mut builder = CommandHooks::builder()
        .project_dir(dir)
        .without_transcripts();
    if let Some(hook) = hook {
        builder = builder.wasm_hook(hook);
    }
    stack(builder.build().unwrap())
}

fn persistent_stack(dir: &Path) -> BoxToolService {
    let path = dir.join("persistent.py");
    std::fs::write(&path, PERSISTENT_ALLOW).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hooks = json!({ "PreToolUse": [{ "matcher": "bash", "hooks": [
        { "type": "command", "command": path.to_string_lossy(), "persistent": true }
    ] }] });
    stack(
        CommandHooks::builder()
            .settings_json(json!({ "hooks": hooks }), "bench")
            .project_dir(dir)
            .without_transcripts()
            .build()
            .unwrap(),
    )
}

fn request(ctx: &RunContext) -> ToolRequest {
    ToolRequest::new(
        ToolCall::new("call_1", "bash", json!({ "command": "cargo test" })),
        ctx.clone(),
    )
}

async fn round_trip(svc: &BoxToolService, ctx: &RunContext) {
    let out = svc.clone().oneshot(request(ctx)).await.unwrap();
    assert_eq!(out.content, "ok", "the hook let the call through");
}

/// `SAMPLES` sequential round trips of `svc` (after a warm-up), in ns.
async fn distribution(svc: &BoxToolService, ctx: &RunContext, samples: usize) -> Histogram<u64> {
    let mut hist = Histogram::<u64>::new(3).unwrap();
    for _ in 0..samples / 10 {
        round_trip(svc, ctx).await;
    }
    for _ in 0..samples {
        let t = Instant::now();
        round_trip(svc, ctx).await;
        hist.record(t.elapsed().as_nanos() as u64).unwrap();
    }
    hist
}

fn benches(c: &mut Criterion, dir: &Path, rt: &tokio::runtime::Runtime, guards: &[WasmHook; 2]) {
    let ctx = RunContext::new();
    let mut group = c.benchmark_group("wasm_hook");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    let guard = WasmHook::builder()
        .bytes("guard", guests::rm_rf_guard())
        .build()
        .unwrap();
    let cases: Vec<(&str, BoxToolService)> = vec![
        ("no_hook", wasm_stack(dir, None)),
        ("stateless", wasm_stack(dir, Some(hook(true)))),
        ("fresh", wasm_stack(dir, Some(hook(false)))),
        ("guard", wasm_stack(dir, Some(guard))),
        ("python", wasm_stack(dir, Some(guards[0].clone()))),
        ("javascript", wasm_stack(dir, Some(guards[1].clone()))),
        ("persistent", persistent_stack(dir)),
    ];
    for (name, svc) in &cases {
        rt.block_on(round_trip(svc, &ctx));
        group.bench_function(*name, |b| {
            b.to_async(rt).iter(|| round_trip(svc, &ctx));
        });
    }
    group.finish();
}

/// The guard of `tests/wasm/guests_src/guard.{py,js}` (it lets `cargo test` through), built by
/// `.ci/wasm-guests` with componentize-py or jco.
fn language_guard(language: &str) -> WasmHook {
    let path = guests::built("guard", language);
    let t = Instant::now();
    let hook = WasmHook::load(&path).unwrap();
    println!(
        "wasm_hook {language} guard: a {:.1} MB component, loaded (compiled, not cached) in {:.2} s",
        std::fs::metadata(&path).unwrap().len() as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    hook
}

fn hook(stateless: bool) -> WasmHook {
    WasmHook::builder()
        .bytes(format!("allow-{stateless}"), allow_guest(stateless))
        .build()
        .unwrap()
}

/// The distributions, one after another in this run.
fn distributions(dir: &Path, rt: &tokio::runtime::Runtime, guards: &[WasmHook; 2]) {
    let ctx = RunContext::new();
    for (name, svc, samples) in [
        ("stateless", wasm_stack(dir, Some(hook(true))), SAMPLES),
        ("fresh", wasm_stack(dir, Some(hook(false))), SAMPLES),
        ("python", wasm_stack(dir, Some(guards[0].clone())), SAMPLES),
        (
            "javascript",
            wasm_stack(dir, Some(guards[1].clone())),
            SAMPLES,
        ),
        ("persistent", persistent_stack(dir), SAMPLES / 4),
    ] {
        let hist = rt.block_on(distribution(&svc, &ctx, samples));
        let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
        let target = match name {
            "persistent" => String::new(),
            "python" | "javascript" => {
                format!(" (target p50 <= 50 µs: {})", verdict(us(0.5) <= 50.0))
            }
            _ => format!(
                " (target p50 <= 5 µs: {}, p99 <= 50 µs: {})",
                verdict(us(0.5) <= 5.0),
                verdict(us(0.99) <= 50.0)
            ),
        };
        println!(
            "wasm_hook round trip, {name}: {} calls, p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs{target}",
            hist.len(),
            us(0.5),
            us(0.9),
            us(0.99),
            hist.max() as f64 / 1000.0,
        );
    }
}

/// The build of a hook not in the cache, the build once it is, and a first call.
fn cold_start(rt: &tokio::runtime::Runtime) {
    // A component no other case built: its compiled code is in no cache yet.
    let bytes = guests::answering(
        &format!(
            r#"{{"events": ["PreToolUse"], "cold": "{}"}}"#,
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ),
        ALLOW,
    );
    let build = || {
        let t = Instant::now();
        let hook = WasmHook::builder()
            .bytes("cold", bytes.clone())
            .build()
            .unwrap();
        (hook, t.elapsed())
    };
    let (_, uncached) = build();
    let (hook, cached) = build();
    let t = Instant::now();
    rt.block_on(hook.call("{}")).unwrap();
    let first = t.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "wasm_hook cold start: build uncached (compile + cache write) {:.2} ms; cached build {:.2} ms + first call {:.2} ms = {:.2} ms (target <= 10 ms: {})",
        ms(uncached),
        ms(cached),
        ms(first),
        ms(cached + first),
        verdict(ms(cached + first) <= 10.0)
    );
}

/// Resident memory now and at its peak (kB), from `/proc/self/status`.
fn memory_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// `IN_FLIGHT` agent runs at once, each calling (through its tool stack) a hook that spins
/// about 5 ms (a fresh instance each; it yields every millisecond, so the calls overlap), three
/// rounds: the resident memory they add, per live instance, and what is left after each round.
fn in_flight(rt: &tokio::runtime::Runtime) {
    let mut g = guests::Guest::new(r#"{"events": ["PreToolUse"]}"#);
    let (allow, len) = g.string(ALLOW);
    let spinning = g
        .handle(&format!(
            "(local.set $len (i32.const 0))
             (loop $spin
               (local.set $len (i32.add (local.get $len) (i32.const 1)))
               (br_if $spin (i32.lt_u (local.get $len) (i32.const 12000000))))
             (call $ok {allow} {len})"
        ))
        .build();
    let hook = WasmHook::builder()
        .bytes("spinning", spinning)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let hooks = guests::command_hooks(hook.clone(), dir.path());
    // Each run: one tool call (the hook on it), then the final answer.
    let agent = Agent::builder()
        .model(
            ScriptedModel::new()
                .tool_call("bash", json!({ "command": "cargo test" }))
                .text("done")
                .per_run(),
        )
        .tool(tool_fn(
            "bash",
            "Runs a command",
            json!({"type": "object"}),
            |_args: serde_json::Value, _| async { Ok::<_, BoxError>("ok") },
        ))
        .hooks(hooks.into_hooks().compile().unwrap())
        .build();
    let (base, _) = memory_kb();
    for round in 1..=3 {
        // The peak from here on (Linux resets VmHWM to the current RSS on "5").
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t = Instant::now();
        rt.block_on(async {
            let sampler = {
                let (hook, peak) = (hook.clone(), Arc::clone(&peak));
                tokio::spawn(async move {
                    loop {
                        peak.fetch_max(hook.instances(), std::sync::atomic::Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                })
            };
            let runs: Vec<_> = (0..IN_FLIGHT)
                .map(|_| {
                    let agent = agent.clone();
                    tokio::spawn(async move { agent.run(AgentRequest::new("go")).await })
                })
                .collect();
            for run in runs {
                let resp = run.await.unwrap().unwrap();
                let tool = resp.messages.iter().find(|m| m.tool_call_id.is_some());
                assert_eq!(tool.map(|m| m.text().into_owned()).as_deref(), Some("ok"));
            }
            sampler.abort();
        });
        let (now, high) = memory_kb();
        let live = peak.load(std::sync::atomic::Ordering::Relaxed).max(1);
        println!(
            "wasm_hook {IN_FLIGHT} runs in flight, round {round}: {:.2} s, at most {live} instances alive at once; peak RSS {} kB over the start ({:.1} kB per live instance, runs included); RSS after the round {} kB over the start; instances left {}",
            t.elapsed().as_secs_f64(),
            high.saturating_sub(base),
            high.saturating_sub(base) as f64 / live as f64,
            now.saturating_sub(base),
            hook.instances(),
        );
    }
}

fn summary(dir: &Path, since: SystemTime) {
    let e = |name: &str| estimate(dir, &format!("wasm_hook/{name}"), since);
    println!("\n===== wasm_hooks summary (medians) =====");
    let none = e("no_hook");
    for name in [
        "stateless",
        "fresh",
        "guard",
        "python",
        "javascript",
        "persistent",
    ] {
        if let (Some(t), Some(none)) = (e(name), none) {
            println!(
                "wasm_hook {name}: {:.2} µs per call, {:.2} µs over no hook",
                t / 1000.0,
                (t - none) / 1000.0
            );
        }
    }
}

fn main() {
    // The compiled-code cache of this bench: a directory of its own, empty at the start.
    let cache = tempfile::tempdir().unwrap();
    tower_agent::wasm::set_cache_dir(Some(cache.path().to_path_buf())).unwrap();
    let since = SystemTime::now();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    cold_start(&rt);
    let guards = [language_guard("py"), language_guard("js")];
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, dir.path(), &rt, &guards);
    c.final_summary();
    distributions(dir.path(), &rt, &guards);
    in_flight(&rt);
    summary(&output_dir(), since);
}
