//! Per-call overhead of the guard layers (STYLE §7): one tool call through
//! [`SchemaGuardLayer`] (valid arguments), [`CallLimitsLayer`] and [`LedgerLayer`] against the
//! same call without them.
//!
//! - `guards/bare/{none,schema_guard,schema_guard_denied,call_limits,ledger,all}`: over a bare
//!   echo `service_fn` with a ready future (nothing boxed). `schema_guard` validates
//!   `{"text": "hello"}` against an object schema with one required string property;
//!   `schema_guard_denied` is the denial path (a reference: it builds the error text);
//!   `call_limits` checks and counts against a total and a per-tool limit (never reached);
//!   `ledger` builds the entry and hands it to a no-op sink (the JSONL and SQLite sinks write
//!   off the call path); `all` is the three layers stacked.
//! - `guards/router/{none,schema_guard,call_limits}`: the same over a [`ToolRouter`] holding a
//!   `tool_fn` echo, as in an agent.
//!
//! Run with `cargo bench --bench guards`. At the end it prints two summaries: the criterion
//! medians with overhead = median − median of `none`, and a *paired* measurement made to
//! shrug off a busy machine: 301 rounds, each timing 2,000 calls without the layer and 2,000
//! with it back to back (in alternating order), overhead = the median over rounds of the
//! per-call difference. Futures are polled with `now_or_never` (all are ready at once).

mod support;

use std::{
    fmt::Debug,
    future::{Ready, ready},
    hint::black_box,
    path::Path,
    time::{Duration, Instant, SystemTime},
};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, measurement::WallTime};
use futures_util::FutureExt;
use serde_json::{Value, json};
use support::{estimate, output_dir};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
#[path = "../tests/support/call_limits.rs"]
mod limit;

use limit::CallLimitsLayer;
use tower_agent::{
    BoxError,
    context::RunContext,
    layers::{
        ledger::{LedgerEntry, LedgerLayer},
        schema::SchemaGuardLayer,
    },
    message::{ToolCall, ToolOutput, ToolSpec},
    tool::{ToolRequest, ToolRouter, tool_fn},
};

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": { "text": { "type": "string" } },
        "required": ["text"]
    })
}

fn spec() -> ToolSpec {
    ToolSpec::new("echo", "Echoes its text", schema())
}

fn echo_service() -> impl Service<
    ToolRequest,
    Response = ToolOutput,
    Error = BoxError,
    Future = Ready<Result<ToolOutput, BoxError>>,
> + Clone {
    service_fn(|req: ToolRequest| {
        let text = req.call.arguments["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        ready(Ok(ToolOutput::text(req.call.id, text)))
    })
}

fn router() -> ToolRouter {
    ToolRouter::new().tool(tool_fn(
        "echo",
        "Echoes its text",
        schema(),
        |args: Value, _ctx| async move {
            Ok::<_, BoxError>(args["text"].as_str().unwrap_or_default().to_owned())
        },
    ))
}

fn limits() -> CallLimitsLayer {
    CallLimitsLayer::new()
        .max_tool_calls(u32::MAX)
        .max_calls_of("echo", u32::MAX)
}

fn ledger() -> LedgerLayer {
    LedgerLayer::new(|entry: LedgerEntry| {
        black_box(entry);
    })
}

#[inline]
fn call_now<S>(svc: &mut S, req: ToolRequest) -> ToolOutput
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Debug,
{
    svc.ready()
        .now_or_never()
        .expect("ready at once")
        .expect("ready")
        .call(req)
        .now_or_never()
        .expect("answers at once")
        .expect("answers")
}

fn bench<S>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    over: &str,
    name: &str,
    req: &ToolRequest,
    expect_error: bool,
    mut svc: S,
) where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Debug,
{
    let out = call_now(&mut svc, req.clone());
    assert_eq!(out.is_error, expect_error, "{over}/{name}: {}", out.content);
    if !expect_error {
        assert_eq!(out.content, "hello", "{over}/{name}");
    }
    group.bench_function(BenchmarkId::new(over, name), |b| {
        b.iter(|| call_now(&mut svc, black_box(req).clone()));
    });
}

fn guards(c: &mut Criterion) {
    let ctx = RunContext::new();
    let req = ToolRequest::new(
        ToolCall::new("call_1", "echo", json!({ "text": "hello" })),
        ctx.clone(),
    );
    let bad = ToolRequest::new(ToolCall::new("call_1", "echo", json!({ "text": 1 })), ctx);
    let guard = SchemaGuardLayer::new([spec()]);

    let mut group = c.benchmark_group("guards");
    bench(&mut group, "bare", "none", &req, false, echo_service());
    bench(
        &mut group,
        "bare",
        "schema_guard",
        &req,
        false,
        guard.layer(echo_service()),
    );
    bench(
        &mut group,
        "bare",
        "schema_guard_denied",
        &bad,
        true,
        guard.layer(echo_service()),
    );
    bench(
        &mut group,
        "bare",
        "call_limits",
        &req,
        false,
        limits().layer(echo_service()),
    );
    bench(
        &mut group,
        "bare",
        "ledger",
        &req,
        false,
        ledger().layer(echo_service()),
    );
    bench(
        &mut group,
        "bare",
        "all",
        &req,
        false,
        ServiceBuilder::new()
            .layer(ledger())
            .layer(limits())
            .layer(guard.clone())
            .service(echo_service()),
    );

    let router = router();
    bench(&mut group, "router", "none", &req, false, router.clone());
    bench(
        &mut group,
        "router",
        "schema_guard",
        &req,
        false,
        SchemaGuardLayer::from_tools().layer(router.clone()),
    );
    bench(
        &mut group,
        "router",
        "call_limits",
        &req,
        false,
        limits().layer(router),
    );
    group.finish();
}

// ===== paired overhead =====

/// Nanoseconds per call of `n` calls.
fn time_calls<S>(svc: &mut S, req: &ToolRequest, n: u32) -> f64
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Debug,
{
    let start = Instant::now();
    for _ in 0..n {
        black_box(call_now(svc, black_box(req).clone()));
    }
    start.elapsed().as_nanos() as f64 / f64::from(n)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Median over rounds of (per-call time with the layer − without), and the median time
/// without.
fn paired<A, B>(mut bare: A, mut layered: B, req: &ToolRequest) -> (f64, f64)
where
    A: Service<ToolRequest, Response = ToolOutput>,
    A::Error: Debug,
    B: Service<ToolRequest, Response = ToolOutput>,
    B::Error: Debug,
{
    const ROUNDS: usize = 301;
    const CALLS: u32 = 2_000;
    time_calls(&mut bare, req, CALLS * 5); // warm up
    time_calls(&mut layered, req, CALLS * 5);
    let (mut diffs, mut bases) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let a = time_calls(&mut bare, req, CALLS);
            (a, time_calls(&mut layered, req, CALLS))
        } else {
            let b = time_calls(&mut layered, req, CALLS);
            (time_calls(&mut bare, req, CALLS), b)
        };
        diffs.push(b - a);
        bases.push(a);
    }
    (median(diffs), median(bases))
}

fn paired_summary() {
    let req = ToolRequest::new(
        ToolCall::new("call_1", "echo", json!({ "text": "hello" })),
        RunContext::new(),
    );
    let guard = SchemaGuardLayer::new([spec()]);
    println!(
        "\n===== guards paired overhead (median over 301 rounds of 2,000 + 2,000 calls) ====="
    );
    let print = |over: &str, name: &str, (diff, base): (f64, f64)| {
        println!("{over:<7} {name:<14} overhead {diff:+7.1} ns per call (without: {base:6.1} ns)");
    };
    print(
        "bare",
        "schema_guard",
        paired(echo_service(), guard.layer(echo_service()), &req),
    );
    print(
        "bare",
        "call_limits",
        paired(echo_service(), limits().layer(echo_service()), &req),
    );
    print(
        "bare",
        "ledger",
        paired(echo_service(), ledger().layer(echo_service()), &req),
    );
    let all = ServiceBuilder::new()
        .layer(ledger())
        .layer(limits())
        .layer(guard.clone())
        .service(echo_service());
    print("bare", "all", paired(echo_service(), all, &req));
    let router = router();
    print(
        "router",
        "schema_guard",
        paired(
            router.clone(),
            SchemaGuardLayer::from_tools().layer(router.clone()),
            &req,
        ),
    );
    print(
        "router",
        "call_limits",
        paired(router.clone(), limits().layer(router), &req),
    );
}

// ===== summary =====

fn summary(dir: &Path, since: SystemTime) {
    println!("\n===== guards summary (medians; overhead = layer - none) =====");
    for (over, names) in [
        (
            "bare",
            &[
                "schema_guard",
                "schema_guard_denied",
                "call_limits",
                "ledger",
                "all",
            ][..],
        ),
        ("router", &["schema_guard", "call_limits"][..]),
    ] {
        let Some(none) = estimate(dir, &format!("guards/{over}/none"), since) else {
            continue;
        };
        println!("{over:<7} none {none:8.1} ns");
        for name in names {
            if let Some(t) = estimate(dir, &format!("guards/{over}/{name}"), since) {
                println!(
                    "{over:<7} {name:<20} {t:8.1} ns  overhead {:+8.1} ns",
                    t - none
                );
            }
        }
    }
}

fn main() {
    let started = SystemTime::now();
    let dir = output_dir();
    let mut c = Criterion::default()
        .output_directory(&dir)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(50)
        .configure_from_args();
    guards(&mut c);
    c.final_summary();
    summary(&dir, started);
    if std::env::args().skip(1).all(|a| a.starts_with('-')) {
        // Not filtered: also the paired measurement.
        paired_summary();
    }
}
