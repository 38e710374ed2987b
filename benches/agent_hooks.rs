//! The AGENT-HOOKS host (issue 38): what interceptors at the eight interception points add to
//! an agent run.
//!
//! ```text
//! cargo bench --all-features --bench agent_hooks -- --warm-up-time 1 --measurement-time 4
//! ```
//!
//! One iteration is one whole run, timed alone: the run of `agent_step/history/10` in
//! `benches/overhead.rs` (scripted model, `tool_fn` echo, no tool layers, a `MemoryStore`
//! thread of 10 messages put back before each run, untimed) with [`TOOL_STEPS`] = 10 tool
//! steps, one echo call each, then the final answer. Criterion cases:
//!
//! - `agent_hooks/none/10`: the agent without a hook set.
//! - `agent_hooks/allow/10`: the same agent with an [`AgentHooks`] set of one interceptor that
//!   allows everything, configured in code with its defaults (`enforce`,
//!   `sequential/first_deny`, the `jcs-sha256` identity provider, the 5 s interceptor
//!   timeout); its records go to a sink that drops them.
//! - `agent_hooks/allow3_run_all/10`: three such interceptors composed `sequential/run_all`
//!   (every interceptor is called at every emission, each verdict is summarized in the record).
//! - `agent_hooks/null_identity/10`: one interceptor, [`IdentityProvider::Null`]: no context is
//!   hashed.
//!
//! A run makes [`EMISSIONS`] = 46 emissions: `agent_startup`, `input`, `pre_model_call` and
//! `post_model_call` at each of the 11 model calls, `pre_tool_call` and `post_tool_call` at each
//! of the 10 tool calls, `output`, `agent_shutdown` (each case first checks the count in the
//! records). The summary derives from criterion's medians: an interceptor's round trip per
//! emission = (allow − none) / 46 (the host's layers, the context built, the emitter's
//! composition, the identities and the record); each further interceptor =
//! (allow3_run_all − allow) / (2 × 46); the `jcs-sha256` identities of an emission =
//! (allow − null_identity) / 46.
//!
//! Then, for differences smaller than criterion's run-to-run spread, [`PAIRS`] rounds of the
//! four runs back to back (in the order above, each from its reset thread): the summary gives
//! the median over the rounds of each difference between two runs of one round, so a slow
//! drift of the machine cancels.

#[path = "../tests/support/step_history.rs"]
mod step_history;
mod support;

use std::{
    hint::black_box,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use criterion::{BenchmarkId, Criterion};
use futures_util::FutureExt;
use serde_json::{Value, json};
use step_history::{THREAD_ID, echo_args, history};
use support::{estimate, output_dir};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    agent_hooks::{
        AgentHooks, async_trait,
        sdk::{
            AgentContext, CompositionConfig, CompositionProfile, Decision, IdentityProvider,
            InterceptionRecord, Interceptor, Verdict,
        },
    },
    model::ScriptedModel,
    store::{MemoryStore, Thread, ThreadStore},
    tool::{Tool, tool_fn},
};

/// Tool steps per run (one echo call each), then the final answer.
const TOOL_STEPS: u32 = 10;

/// Emissions per run: startup, input, pre/post model per model call (the tool steps and the
/// answer), pre/post tool per tool call, output, shutdown.
const EMISSIONS: usize = 2 + 2 * (TOOL_STEPS as usize + 1) + 2 * TOOL_STEPS as usize + 2;

/// Messages of the thread each run starts from (as `agent_step/history/10`).
const HISTORY: usize = 10;

/// Rounds of the four runs back to back, for the paired differences.
const PAIRS: usize = 400;

/// An interceptor that allows everything.
struct AllowAll;

#[async_trait]
impl Interceptor for AllowAll {
    async fn intercept(&self, _ctx: &AgentContext) -> Verdict {
        Verdict::allow()
    }
}

/// The hook set of a case.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    /// No hook set.
    None,
    /// One allowing interceptor, the builder's defaults.
    Allow,
    /// Three allowing interceptors, `sequential/run_all`.
    Allow3RunAll,
    /// One allowing interceptor, no identities.
    NullIdentity,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::None,
        Case::Allow,
        Case::Allow3RunAll,
        Case::NullIdentity,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::None => "none",
            Case::Allow => "allow",
            Case::Allow3RunAll => "allow3_run_all",
            Case::NullIdentity => "null_identity",
        }
    }

    /// Interceptors called at each emission.
    fn interceptors(self) -> usize {
        match self {
            Case::None => 0,
            Case::Allow | Case::NullIdentity => 1,
            Case::Allow3RunAll => 3,
        }
    }

    /// The case's hook set, its records given to `sink`.
    fn hooks(
        self,
        sink: impl Fn(&InterceptionRecord) + Send + Sync + 'static,
    ) -> Option<AgentHooks> {
        let builder = AgentHooks::builder();
        let builder = match self {
            Case::None => return None,
            Case::Allow => builder.interceptor(AllowAll),
            Case::Allow3RunAll => builder
                .interceptor(AllowAll)
                .interceptor(AllowAll)
                .interceptor(AllowAll)
                .composition(CompositionConfig {
                    profile: CompositionProfile::SequentialRunAll,
                    ..Default::default()
                }),
            Case::NullIdentity => builder
                .interceptor(AllowAll)
                .identity_provider(IdentityProvider::Null),
        };
        Some(builder.build().on_record(sink))
    }
}

fn echo_tool() -> impl Tool {
    tool_fn(
        "echo",
        "Echoes its text",
        json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
        |args: Value, _ctx| async move {
            Ok::<_, BoxError>(args["text"].as_str().unwrap_or_default().to_owned())
        },
    )
}

/// An agent whose scripted model calls the echo tool [`TOOL_STEPS`] times, then answers.
fn agent(store: &MemoryStore, hooks: Option<AgentHooks>) -> Agent {
    let mut model = ScriptedModel::new().per_run();
    for _ in 0..TOOL_STEPS {
        model = model.tool_call("echo", echo_args());
    }
    let builder = Agent::builder()
        .model(model.text("done"))
        .tool(echo_tool())
        .store(store.clone())
        .max_steps(TOOL_STEPS + 1);
    match hooks {
        Some(hooks) => builder.hooks(hooks).build(),
        None => builder.build(),
    }
}

/// A case's agent and the thread each of its runs starts from.
struct RunBench {
    store: MemoryStore,
    agent: Agent,
    thread: Thread,
}

impl RunBench {
    fn new(case: Case) -> Self {
        let store = MemoryStore::new();
        // The records are dropped as they are made.
        let agent = agent(
            &store,
            case.hooks(|record| {
                black_box(record);
            }),
        );
        RunBench {
            store,
            agent,
            thread: history(HISTORY),
        }
    }

    /// Puts the prepared thread back (not timed).
    fn reset(&self) {
        self.store
            .save(&self.thread)
            .now_or_never()
            .expect("the memory store saves at once")
            .expect("save");
    }

    /// One run from the prepared thread; returns its duration.
    async fn timed_run(&self) -> Duration {
        self.reset();
        let req = AgentRequest::new("What does the echo tool say?").thread(THREAD_ID);
        let start = Instant::now();
        let resp = self.agent.run(req).await;
        let elapsed = start.elapsed();
        let resp = black_box(resp).expect("run");
        debug_assert_eq!(resp.steps, TOOL_STEPS + 1);
        elapsed
    }
}

/// Checks a case does what is measured: the run's steps and messages, and with a hook set one
/// record per emission, each of them allowed by every interceptor, hashed or not.
async fn check(case: Case) {
    let records: Arc<Mutex<Vec<InterceptionRecord>>> = Arc::default();
    let sink = Arc::clone(&records);
    let store = MemoryStore::new();
    let agent = agent(
        &store,
        case.hooks(move |r| sink.lock().unwrap().push(r.clone())),
    );
    store.save(&history(HISTORY)).await.expect("save");
    let resp = agent
        .run(AgentRequest::new("What does the echo tool say?").thread(THREAD_ID))
        .await
        .expect("run");
    assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
    assert_eq!(resp.steps, TOOL_STEPS + 1);
    assert_eq!(resp.text, "done");
    // prior + user + (assistant, tool) per tool step + the answer
    assert_eq!(
        resp.messages.len(),
        HISTORY + 1 + 2 * TOOL_STEPS as usize + 1
    );
    assert_eq!(resp.messages[HISTORY + 2].text(), "hello");

    let records = records.lock().unwrap();
    if case.interceptors() == 0 {
        assert!(records.is_empty());
        return;
    }
    let points: Vec<&str> = records
        .iter()
        .map(|r| r.interception_point.as_str())
        .collect();
    assert_eq!(records.len(), EMISSIONS, "{case:?}: {points:?}");
    let count = |p: &str| points.iter().filter(|&&q| q == p).count();
    let (model_calls, tool_calls) = (TOOL_STEPS as usize + 1, TOOL_STEPS as usize);
    for (point, n) in [
        ("agent_startup", 1),
        ("input", 1),
        ("pre_model_call", model_calls),
        ("post_model_call", model_calls),
        ("pre_tool_call", tool_calls),
        ("post_tool_call", tool_calls),
        ("output", 1),
        ("agent_shutdown", 1),
    ] {
        assert_eq!(count(point), n, "{case:?}: {point} in {points:?}");
    }
    for r in records.iter() {
        assert_eq!(r.verdict.decision, Decision::Allow, "{case:?}: {r:?}");
        match case {
            Case::Allow3RunAll => assert_eq!(r.verdicts.len(), 3, "{r:?}"),
            _ => assert!(r.verdicts.len() <= 1, "{r:?}"),
        }
        let hashed = !matches!(case, Case::NullIdentity);
        assert_eq!(r.input_identity.is_some(), hashed, "{case:?}: {r:?}");
    }
}

fn benches(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("agent_hooks");
    for case in Case::ALL {
        rt.block_on(check(case));
        let bench = RunBench::new(case);
        group.bench_function(BenchmarkId::new(case.name(), TOOL_STEPS), |b| {
            b.to_async(rt).iter_custom(|iters| {
                let bench = &bench;
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += bench.timed_run().await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

/// [`PAIRS`] rounds of one run of each case, back to back; the durations in ns per case.
fn paired(rt: &tokio::runtime::Runtime) -> Vec<Vec<f64>> {
    let benches: Vec<RunBench> = Case::ALL.into_iter().map(RunBench::new).collect();
    let mut times = vec![Vec::with_capacity(PAIRS); benches.len()];
    rt.block_on(async {
        for _ in 0..PAIRS {
            for (bench, times) in benches.iter().zip(&mut times) {
                times.push(bench.timed_run().await.as_nanos() as f64);
            }
        }
    });
    times
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// The median over the rounds of `times[a] − times[b]`, in ns.
fn paired_diff(times: &[Vec<f64>], a: Case, b: Case) -> f64 {
    let index = |case: Case| Case::ALL.iter().position(|&c| c == case).unwrap();
    let (a, b) = (&times[index(a)], &times[index(b)]);
    median(a.iter().zip(b).map(|(a, b)| a - b).collect())
}

fn paired_summary(times: &[Vec<f64>]) {
    let emissions = EMISSIONS as f64;
    println!("\n===== agent_hooks paired ({PAIRS} rounds back to back, medians) =====");
    for (case, t) in Case::ALL.into_iter().zip(times) {
        println!(
            "agent_hooks       {:<15} {:8.2} µs per run",
            case.name(),
            median(t.clone()) / 1000.0
        );
    }
    let one = paired_diff(times, Case::Allow, Case::None);
    let further = paired_diff(times, Case::Allow3RunAll, Case::Allow);
    let identities = paired_diff(times, Case::Allow, Case::NullIdentity);
    let null = paired_diff(times, Case::NullIdentity, Case::None);
    println!(
        "agent_hooks       one interceptor: {:.2} µs per run over none, {:.0} ns per emission",
        one / 1000.0,
        one / emissions
    );
    println!(
        "agent_hooks       each further interceptor (run_all): {:.0} ns per emission",
        further / (2.0 * emissions)
    );
    println!(
        "agent_hooks       jcs-sha256 identities: {:.0} ns per emission; null identity: {:.0} ns \
         per emission over none",
        identities / emissions,
        null / emissions
    );
}

fn summary(dir: &Path, since: SystemTime) {
    println!("\n===== agent_hooks summary (medians) =====");
    let run = |case: Case| {
        estimate(
            dir,
            &format!("agent_hooks/{}/{TOOL_STEPS}", case.name()),
            since,
        )
    };
    let emissions = EMISSIONS as f64;
    for case in Case::ALL {
        if let Some(t) = run(case) {
            println!(
                "agent_hooks       {:<15} {:8.2} µs per run ({TOOL_STEPS} tool steps + answer, \
                 {} interceptor(s))",
                case.name(),
                t / 1000.0,
                case.interceptors()
            );
        }
    }
    let Some(none) = run(Case::None) else { return };
    if let Some(allow) = run(Case::Allow) {
        println!(
            "agent_hooks       one interceptor: {:.2} µs per run over none, {:.0} ns per \
             emission ({EMISSIONS} emissions), {:.2} µs per tool step",
            (allow - none) / 1000.0,
            (allow - none) / emissions,
            (allow - none) / 1000.0 / f64::from(TOOL_STEPS),
        );
        if let Some(three) = run(Case::Allow3RunAll) {
            println!(
                "agent_hooks       each further interceptor (run_all): {:.0} ns per emission \
                 ((allow3 - allow) / (2 x {EMISSIONS}))",
                (three - allow) / (2.0 * emissions)
            );
        }
        if let Some(null) = run(Case::NullIdentity) {
            println!(
                "agent_hooks       jcs-sha256 identities: {:.0} ns per emission \
                 ((allow - null_identity) / {EMISSIONS}); null identity: {:.0} ns per emission \
                 over none",
                (allow - null) / emissions,
                (null - none) / emissions
            );
        }
    }
}

fn main() {
    let started = SystemTime::now();
    let dir = output_dir();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut c = Criterion::default()
        .output_directory(&dir)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .sample_size(50)
        .configure_from_args();
    benches(&mut c, &rt);
    c.final_summary();
    summary(&dir, started);
    paired_summary(&paired(&rt));
}
