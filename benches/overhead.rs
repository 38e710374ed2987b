//! Overhead micro-benchmarks (DESIGN §8, STYLE §7).
//!
//! - `tool_call/layers/{0,1,5,10}`: one tool call through N hand-written no-op layers over a
//!   bare echo service (unboxed all the way down). Per-layer cost = (t10 − t0) / 10; target
//!   ≤ 20 ns.
//! - `tool_call_router/layers/{0,1,5,10}`: the same, over a [`ToolRouter`] holding a
//!   [`tool_fn`] echo (the router boxes the tool's service and its future).
//! - `tool_call_boxed/layers/{0,1,5,10}`: reference only, each layer boxes its future — what a
//!   layer written with `async move` and `BoxFuture` costs.
//! - `agent_step/history/{10,1000,10000}`: one agent step (a model call answering one tool call, the
//!   tool call, the results appended, the thread saved) with a scripted model, an echo tool and
//!   no tool layers, on a thread holding 10 / 1,000 messages. Measured as
//!   (run of 11 tool steps − run of 1 tool step) / 10 so the per-run cost cancels out. Targets:
//!   ≤ 2 µs per step, ratio 1,000 / 10 ≤ 1.5×. `history/10000` shows the cost stays flat.
//! - `agent_step/ephemeral`: the same step in a run without a thread id (nothing loaded or
//!   saved; history is only the run's own messages).
//! - `agent_step/full_stack/10`: the step of `history/10` through every seed built-in: trace
//!   (no subscriber) and summarize (under its threshold) on the model path; trace, reminders
//!   and evict on the tool path; todo, filesystem, skills and memory stages. Target ≤ 5 µs.
//! - `agent_step/full_stack/{1000,10000}`: the full-stack step on the histories of
//!   `history/{1000,10000}` (issue 16). Target: 10,000 / 10 ≤ 1.5×.
//! - `agent_step/full_stack_no_system/{10,10000}`: the full-stack step on the same histories
//!   without a system message (and no system prompt): the Skills and Memory stages then insert
//!   one in front of every request, which must not cost a recount of the history (issue 16).
//!   Target: 10,000 / 10 ≤ 1.5×.
//! - `agent_step/full_stack_realistic/100k_tokens`: the full-stack step on a history of
//!   realistic sizes (tool outputs of 2–20 KB, `read_file` calls) filled to about 100,000
//!   estimated tokens, just under the summarization threshold (108,800 of the default
//!   128,000-token window), so the layer counts near its worst case but does not compact.
//! - `agent_step/hooks10/10`: the step of `history/10` with ten registered closure hooks
//!   (see [`ten_hooks`]). Target ≤ 1 µs over the bare step.
//! - `agent_run/history/{10,1000}`: a whole run (1 tool step + the final answer), for the
//!   per-run cost.
//!
//! Run with `cargo bench --bench overhead`; derived figures are printed at the end. Tool calls
//! are polled with `now_or_never` (every future here is ready at once), agent runs on a
//! current-thread tokio runtime.

#[path = "../tests/support/step_history.rs"]
mod step_history;
mod support;

use std::{
    fmt::Debug,
    future::{Ready, ready},
    hint::black_box,
    path::{Path, PathBuf},
    task::{Context, Poll},
    time::{Duration, Instant, SystemTime},
};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, measurement::WallTime};
use futures_util::{FutureExt, future::BoxFuture};
use serde_json::{Value, json};
use step_history::{THREAD_ID, echo_args, history};
use support::{estimate, output_dir, verdict};
use tower::{Layer, Service, ServiceBuilder, ServiceExt, service_fn};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    builtins::{filesystem::Filesystem, memory::Memory, skills::Skills, todo::TodoList},
    context::RunContext,
    layers::{
        evict::EvictLayer,
        hooks::{BeforeModel, HookSet, Hooks, PostToolUse, PreToolUse},
        reminders::RemindersLayer,
        summarize::SummarizeLayer,
        trace::TraceLayer,
    },
    message::{Message, ToolCall, ToolOutput},
    model::ScriptedModel,
    store::{MemoryStore, Thread, ThreadStore},
    tool::{Tool, ToolRequest, ToolRouter, tool_fn},
};

// ===== layers =====

/// A layer that does nothing: `poll_ready` and `call` forward, the future is the inner one.
#[derive(Debug, Clone, Copy)]
struct Noop;

impl<S> Layer<S> for Noop {
    type Service = NoopService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        NoopService { inner }
    }
}

#[derive(Debug, Clone)]
struct NoopService<S> {
    inner: S,
}

impl<S: Service<R>, R> Service<R> for NoopService<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, req: R) -> Self::Future {
        self.inner.call(req)
    }
}

/// A no-op layer that boxes its future (reference point for `tool_call_boxed`).
#[derive(Debug, Clone, Copy)]
struct BoxingNoop;

impl<S> Layer<S> for BoxingNoop {
    type Service = BoxingNoopService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BoxingNoopService { inner }
    }
}

#[derive(Debug, Clone)]
struct BoxingNoopService<S> {
    inner: S,
}

impl<S, R> Service<R> for BoxingNoopService<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        // `black_box` keeps the compiler from seeing through (and eliding) the allocation.
        black_box(Box::pin(self.inner.call(req)))
    }
}

// ===== tools =====

fn echo_text(args: &Value) -> &str {
    args["text"].as_str().unwrap_or_default()
}

/// The bare echo tool: a `service_fn` with a ready future, no boxing.
fn echo_service() -> impl Service<
    ToolRequest,
    Response = ToolOutput,
    Error = BoxError,
    Future = Ready<Result<ToolOutput, BoxError>>,
> + Clone {
    service_fn(|req: ToolRequest| {
        let text = echo_text(&req.call.arguments).to_owned();
        ready(Ok(ToolOutput::text(req.call.id, text)))
    })
}

/// The same echo as a `tool_fn`, for the router and the agent.
fn echo_tool() -> impl Tool {
    tool_fn(
        "echo",
        "Echoes its text",
        json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
        |args: Value, _ctx| async move { Ok::<_, BoxError>(echo_text(&args).to_owned()) },
    )
}

// ===== tool call benches =====

/// `ServiceBuilder::new().layer(l1)...layer(ln).service(svc)`.
macro_rules! with_layers {
    ($svc:expr $(, $layer:expr)*) => {
        ServiceBuilder::new()$(.layer($layer))*.service($svc)
    };
}

/// Benches `layers/{0,1,5,10}` of `$layer` over `$svc` in `$group`.
macro_rules! bench_layers {
    ($group:expr, $req:expr, $svc:expr, $l:expr) => {
        bench_tool_call($group, 0, $req, with_layers!($svc));
        bench_tool_call($group, 1, $req, with_layers!($svc, $l));
        bench_tool_call($group, 5, $req, with_layers!($svc, $l, $l, $l, $l, $l));
        bench_tool_call(
            $group,
            10,
            $req,
            with_layers!($svc, $l, $l, $l, $l, $l, $l, $l, $l, $l, $l),
        );
    };
}

/// One iteration: clone the prepared request, `ready()`, `call()`, each polled once with
/// `now_or_never` (all futures here complete on their first poll).
fn bench_tool_call<S>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    layers: usize,
    req: &ToolRequest,
    mut svc: S,
) where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Debug,
{
    // The service answers what it should.
    let out = call_now(&mut svc, req.clone());
    assert_eq!(
        (out.call_id.as_str(), out.content.as_str()),
        ("call_1", "hello")
    );

    group.bench_function(BenchmarkId::new("layers", layers), |b| {
        b.iter(|| call_now(&mut svc, black_box(req).clone()));
    });
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

fn tool_calls(c: &mut Criterion) {
    let req = ToolRequest::new(
        ToolCall::new("call_1", "echo", echo_args()),
        RunContext::new(),
    );
    let router = ToolRouter::new().tool(echo_tool());

    let mut group = c.benchmark_group("tool_call");
    bench_layers!(&mut group, &req, echo_service(), Noop);
    group.finish();

    let mut group = c.benchmark_group("tool_call_router");
    bench_layers!(&mut group, &req, router.clone(), Noop);
    group.finish();

    let mut group = c.benchmark_group("tool_call_boxed");
    bench_layers!(&mut group, &req, echo_service(), BoxingNoop);
    group.finish();
}

// ===== agent step benches =====

/// Tool steps of the long run; the short run has one, so a step = (long − short) / (N − 1).
const LONG_RUN_STEPS: u32 = 11;

/// [`history`] without its system message: a user greeting in its place (`n` messages).
fn history_without_system(n: usize) -> Thread {
    let mut thread = history(n);
    thread.messages.remove(0);
    thread.messages.insert(0, Message::user("Hello."));
    thread
}

/// A thread of realistic sizes: turns of a user question, an assistant `read_file` call and a
/// tool output of 2–20 KB (sizes from a fixed pseudo-random sequence), until the estimate
/// (bytes / 4) reaches `tokens`.
fn realistic_history(tokens: usize) -> Thread {
    let mut thread = Thread::new(THREAD_ID);
    thread.messages.push(Message::system(
        "You are a helpful assistant. Use the tools.",
    ));
    let mut bytes = 0;
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut i = 0;
    while bytes / 4 < tokens {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let size = 2_048 + (seed % (18 * 1024)) as usize;
        let id = format!("call_r{i}");
        let question = format!("Step {i}: read the next module and tell me what it does.");
        let path = format!("src/module_{i}.rs");
        let line = "    let value = compute(&input, options).map_err(Error::from)?;\n";
        let output = line.repeat(size / line.len() + 1);
        let output = &output[..size];
        bytes += question.len() + output.len() + path.len() + 16;
        thread.messages.push(Message::user(question));
        thread
            .messages
            .push(Message::assistant("").with_tool_calls(vec![ToolCall::new(
                &id,
                "read_file",
                json!({ "path": path }),
            )]));
        thread
            .messages
            .push(Message::from(ToolOutput::text(&id, output)));
        i += 1;
    }
    thread
}

/// An agent whose scripted model calls the echo tool at steps `0..tool_steps`, then answers;
/// with `full_stack`, through every seed built-in (see the module docs).
/// What an agent of the step benchmark is made of.
#[derive(Clone, Copy)]
enum Stack {
    /// Scripted model, echo tool, nothing else.
    Bare,
    /// Every seed built-in (see the module docs).
    Full,
    /// Ten closure hooks (synchronous, deciding nothing): three PreToolUse, two PostToolUse,
    /// before and after model, before and after step, should_continue.
    Hooks,
}

fn ten_hooks() -> HookSet {
    Hooks::new()
        .before_tool_use("*", |_, _| PreToolUse::Continue)
        .before_tool_use("echo", |_, _| PreToolUse::Allow)
        .before_tool_use("bash|write_file", |_, _| PreToolUse::Continue)
        .after_tool_use("*", |_, _, _| PostToolUse::Keep)
        .after_tool_use("echo", |_, _, _| PostToolUse::Keep)
        .before_model(BeforeModel::Continue)
        .after_model(|resp, _| resp)
        .before_step(|step, _| {
            black_box(step);
        })
        .after_step(|step, _| {
            black_box(step);
        })
        .should_continue(|_, _| true)
        .compile()
        .expect("no order constraints")
}

fn agent(store: &MemoryStore, tool_steps: u32, stack: Stack) -> Agent {
    let mut model = ScriptedModel::new().per_run();
    for _ in 0..tool_steps {
        model = model.tool_call("echo", echo_args());
    }
    let model = model.text("done");
    let builder = Agent::builder()
        .tool(echo_tool())
        .store(store.clone())
        .max_steps(tool_steps + 1);
    let root = match stack {
        Stack::Bare => return builder.model(model).build(),
        Stack::Hooks => return builder.model(model).hooks(ten_hooks()).build(),
        Stack::Full => workspace(),
    };
    builder
        .model(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(SummarizeLayer::new(ScriptedModel::new().text("summary")))
                .service(model),
        )
        .tool_layer(
            ServiceBuilder::new()
                .layer(TraceLayer::new())
                .layer(RemindersLayer::with_defaults())
                .layer(EvictLayer::new()),
        )
        .stage(TodoList::new())
        .setup(Filesystem::local(&root))
        .stage(Skills::new([root.join("skills")]))
        .stage(Memory::new([root.join("AGENTS.md")]))
        .build()
}

/// A directory with one skill and an AGENTS.md, for the full stack.
fn workspace() -> PathBuf {
    let root = std::env::temp_dir().join(format!("tower-agent-bench-{}", std::process::id()));
    std::fs::create_dir_all(root.join("skills/notes")).expect("bench workspace");
    std::fs::write(
        root.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Take notes\n---\nWrite short notes.\n",
    )
    .expect("skill");
    std::fs::write(root.join("AGENTS.md"), "- Be brief.\n").expect("memory");
    root
}

/// The two agents of a step measurement, and the thread each run starts from.
struct StepBench {
    store: MemoryStore,
    short: Agent,
    long: Agent,
    thread: Option<Thread>,
}

impl StepBench {
    fn new(history_len: Option<usize>, stack: Stack) -> Self {
        Self::with_thread(history_len.map(history), stack)
    }

    fn with_thread(thread: Option<Thread>, stack: Stack) -> Self {
        let store = MemoryStore::new();
        StepBench {
            short: agent(&store, 1, stack),
            long: agent(&store, LONG_RUN_STEPS, stack),
            thread,
            store,
        }
    }

    fn request(&self) -> AgentRequest {
        let req = AgentRequest::new("What does the echo tool say?");
        match self.thread {
            Some(_) => req.thread(THREAD_ID),
            None => req,
        }
    }

    /// Puts the prepared thread back (not timed).
    fn reset(&self) {
        if let Some(thread) = &self.thread {
            self.store
                .save(thread)
                .now_or_never()
                .expect("the memory store saves at once")
                .expect("save");
        }
    }

    /// Runs `agent` from the prepared thread; returns the run's duration.
    async fn timed_run(&self, agent: &Agent, tool_steps: u32) -> Duration {
        self.reset();
        let req = self.request();
        let start = Instant::now();
        let resp = agent.run(req).await;
        let elapsed = start.elapsed();
        let resp = black_box(resp).expect("run");
        debug_assert_eq!(resp.steps, tool_steps + 1);
        elapsed
    }

    /// Checks the runs do what is measured: N tool steps and an answer, on the whole history.
    async fn check(&self) {
        let prior = self.thread.as_ref().map_or(0, |t| t.messages.len());
        for (agent, steps) in [(&self.short, 1), (&self.long, LONG_RUN_STEPS)] {
            self.reset();
            let resp = agent.run(self.request()).await.expect("run");
            assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
            assert_eq!(resp.steps, steps + 1);
            assert_eq!(resp.text, "done");
            // prior + user + (assistant, tool) per tool step + the answer
            assert_eq!(resp.messages.len(), prior + 1 + 2 * steps as usize + 1);
            let tool_msg = &resp.messages[prior + 2];
            assert_eq!(
                (tool_msg.text(), tool_msg.is_error),
                ("hello".into(), false)
            );
        }
    }
}

fn agent_steps(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let mut group = c.benchmark_group("agent_step");
    group.measurement_time(Duration::from_secs(4));
    /// The thread a step bench starts from.
    enum Hist {
        /// No thread (nothing loaded or saved).
        None,
        /// [`history`] of `n` messages.
        Turns(usize),
        /// [`history_without_system`] of `n` messages.
        NoSystem(usize),
        /// [`realistic_history`] of 100k tokens.
        Realistic,
    }
    let cases = [
        (
            BenchmarkId::new("history", 10),
            Hist::Turns(10),
            Stack::Bare,
        ),
        (
            BenchmarkId::new("history", 1000),
            Hist::Turns(1000),
            Stack::Bare,
        ),
        (
            BenchmarkId::new("history", 10_000),
            Hist::Turns(10_000),
            Stack::Bare,
        ),
        (
            BenchmarkId::from_parameter("ephemeral"),
            Hist::None,
            Stack::Bare,
        ),
        (
            BenchmarkId::new("full_stack", 10),
            Hist::Turns(10),
            Stack::Full,
        ),
        (
            BenchmarkId::new("full_stack", 1000),
            Hist::Turns(1000),
            Stack::Full,
        ),
        (
            BenchmarkId::new("full_stack", 10_000),
            Hist::Turns(10_000),
            Stack::Full,
        ),
        (
            BenchmarkId::new("full_stack_no_system", 10),
            Hist::NoSystem(10),
            Stack::Full,
        ),
        (
            BenchmarkId::new("full_stack_no_system", 10_000),
            Hist::NoSystem(10_000),
            Stack::Full,
        ),
        (
            BenchmarkId::new("full_stack_realistic", "100k_tokens"),
            Hist::Realistic,
            Stack::Full,
        ),
        (
            BenchmarkId::new("hooks10", 10),
            Hist::Turns(10),
            Stack::Hooks,
        ),
    ];
    for (id, hist, stack) in cases {
        let thread = match hist {
            Hist::None => None,
            Hist::Turns(n) => Some(history(n)),
            Hist::NoSystem(n) => Some(history_without_system(n)),
            Hist::Realistic => Some(realistic_history(100_000)),
        };
        let bench = StepBench::with_thread(thread, stack);
        rt.block_on(bench.check());
        group.bench_function(id, |b| {
            // One iteration = one step: per iteration, a short and a long run from the same
            // thread; only the runs are timed, and their difference is N − 1 steps.
            b.to_async(&rt).iter_custom(|iters| {
                let bench = &bench;
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let short = bench.timed_run(&bench.short, 1).await;
                        let long = bench.timed_run(&bench.long, LONG_RUN_STEPS).await;
                        total += long.saturating_sub(short) / (LONG_RUN_STEPS - 1);
                    }
                    total
                }
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("agent_run");
    for n in [10, 1000] {
        let bench = StepBench::new(Some(n), Stack::Bare);
        group.bench_function(BenchmarkId::new("history", n), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let bench = &bench;
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += bench.timed_run(&bench.short, 1).await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

// ===== summary =====

fn summary(dir: &Path, since: SystemTime) {
    println!("\n===== overhead summary (medians) =====");
    for group in ["tool_call", "tool_call_router", "tool_call_boxed"] {
        let t = |n: u32| estimate(dir, &format!("{group}/layers/{n}"), since);
        if let (Some(t0), Some(t1), Some(t5), Some(t10)) = (t(0), t(1), t(5), t(10)) {
            let per_layer = (t10 - t0) / 10.0;
            let target = if group == "tool_call_boxed" {
                "(reference, no target)".to_owned()
            } else {
                format!("target <= 20 ns: {}", verdict(per_layer <= 20.0))
            };
            println!(
                "{group:<17} t0 {t0:7.1} ns  t1 {t1:7.1}  t5 {t5:7.1}  t10 {t10:7.1}  \
                 per layer (t10-t0)/10 = {per_layer:6.2} ns  {target}"
            );
        }
    }
    let step = |n: &str| estimate(dir, &format!("agent_step/{n}"), since);
    if let (Some(s10), Some(s1000)) = (step("history/10"), step("history/1000")) {
        let ratio = s1000 / s10;
        println!(
            "agent_step        history 10: {s10:.0} ns (target <= 2000 ns: {}), \
             history 1000: {s1000:.0} ns (target <= 2000 ns: {}), \
             ratio 1000/10 = {ratio:.2}x (target <= 1.5x: {})",
            verdict(s10 <= 2000.0),
            verdict(s1000 <= 2000.0),
            verdict(ratio <= 1.5),
        );
    }
    if let (Some(s10), Some(s10k)) = (step("history/10"), step("history/10000")) {
        println!(
            "agent_step        history 10000: {s10k:.0} ns, ratio 10000/10 = {:.2}x",
            s10k / s10
        );
    }
    if let Some(e) = step("ephemeral") {
        println!("agent_step        ephemeral (no thread store): {e:.0} ns");
    }
    if let (Some(s10), Some(hooks)) = (step("history/10"), step("hooks10/10")) {
        println!(
            "agent_step        ten closure hooks, history 10: {hooks:.0} ns, {:.0} ns over the \
             bare step (target <= 1000 ns: {})",
            hooks - s10,
            verdict(hooks - s10 <= 1000.0)
        );
    }
    if let (Some(s10), Some(full)) = (step("history/10"), step("full_stack/10")) {
        println!(
            "agent_step        full built-in stack, history 10: {full:.0} ns \
             (target <= 5000 ns: {}), {:.0} ns over the bare step",
            verdict(full <= 5000.0),
            full - s10
        );
    }
    if let Some(full) = step("full_stack/10") {
        for n in [1000, 10_000] {
            if let Some(big) = step(&format!("full_stack/{n}")) {
                println!(
                    "agent_step        full built-in stack, history {n}: {big:.0} ns, \
                     ratio {n}/10 = {:.2}x (target <= 1.5x: {})",
                    big / full,
                    verdict(big / full <= 1.5)
                );
            }
        }
        if let (Some(s10), Some(s10k)) = (
            step("full_stack_no_system/10"),
            step("full_stack_no_system/10000"),
        ) {
            println!(
                "agent_step        full built-in stack, no system prompt: history 10: \
                 {s10:.0} ns, history 10000: {s10k:.0} ns, ratio 10000/10 = {:.2}x \
                 (target <= 1.5x: {})",
                s10k / s10,
                verdict(s10k / s10 <= 1.5)
            );
        }
        if let Some(real) = step("full_stack_realistic/100k_tokens") {
            println!(
                "agent_step        full built-in stack, realistic history of 100k tokens: \
                 {real:.0} ns, ratio to history 10 = {:.2}x",
                real / full
            );
        }
    }
    for n in [10, 1000] {
        if let Some(r) = estimate(dir, &format!("agent_run/history/{n}"), since) {
            println!("agent_run         history {n}: {r:.0} ns per run (1 tool step + answer)");
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
    tool_calls(&mut c);
    agent_steps(&mut c);
    c.final_summary();
    summary(&dir, started);
}
