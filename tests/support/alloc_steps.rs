//! Allocations of the bare agent step, counted by a counting global allocator
//! ([`stats_alloc`]). Shared by `tests/allocations.rs` (which asserts the bound) and
//! `benches/allocations.rs` (which prints the figures); each declares the allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;
//! ```
//!
//! The bare step is the one of `benches/overhead.rs` (`agent_step/history/10`): a
//! [`ScriptedModel::per_run`] model calling a `tool_fn` echo tool, no layers, no hooks, a
//! thread of 10 messages in a [`MemoryStore`], a current-thread runtime. A step's count is
//! (run of 11 tool steps − run of 1 tool step) / 10, so the per-run cost cancels out; a tool
//! call's is the step with three concurrent calls minus the step with two (both run them
//! through the same `FuturesUnordered`; a step of one call polls it directly); a model call's
//! is a step of one call minus that call (the request, the model call, the answer into the
//! history, the step's bookkeeping and the thread's two saves).
//!
//! What the store itself allocates inside its methods (`save`, the journal's `started` and
//! `finished`: the store's own copies of the thread and the call) is counted apart, by a
//! wrapper around the [`MemoryStore`] ([`Counted`]): it is the store's cost, not the loop's,
//! and is reported as `store` (within each figure, not on top of it).

use std::{
    alloc::System,
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

#[path = "step_history.rs"]
mod step_history;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use stats_alloc::{Region, StatsAlloc};
use step_history::{THREAD_ID, echo_args, history};
use tower_agent::{
    Agent, AgentRequest, BoxError,
    message::{ToolCall, ToolOutput},
    model::ScriptedModel,
    store::{
        Lease, MemoryStore, Thread, ThreadStore,
        journal::{JournalEntry, ToolJournal},
    },
    tool::tool_fn,
};

const LONG: u32 = 11;

/// Allocations and reallocations, bytes allocated, and how many of the allocations the store
/// made inside its own methods.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Allocs {
    /// Calls to `alloc` (and `alloc_zeroed`).
    pub(crate) allocs: f64,
    /// Calls to `realloc`.
    pub(crate) reallocs: f64,
    /// Bytes asked for by `alloc` and the growth of `realloc`.
    pub(crate) bytes: f64,
    /// Of `allocs + reallocs`, those made inside the store's methods.
    pub(crate) store: f64,
}

impl Allocs {
    /// Allocator calls that may hit `malloc`: allocations and reallocations.
    pub(crate) fn calls(&self) -> f64 {
        self.allocs + self.reallocs
    }

    /// Allocator calls of the loop and the model: [`calls`](Self::calls) less the store's.
    pub(crate) fn loop_calls(&self) -> f64 {
        self.calls() - self.store
    }

    fn minus(self, other: Allocs) -> Allocs {
        Allocs {
            allocs: self.allocs - other.allocs,
            reallocs: self.reallocs - other.reallocs,
            bytes: self.bytes - other.bytes,
            store: self.store - other.store,
        }
    }

    fn div(self, n: f64) -> Allocs {
        Allocs {
            allocs: self.allocs / n,
            reallocs: self.reallocs / n,
            bytes: self.bytes / n,
            store: self.store / n,
        }
    }
}

/// Per step, per tool call, per model call of the bare step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepAllocs {
    /// A whole step: a model call answering one tool call, the call, the thread saved.
    pub(crate) step: Allocs,
    /// One more concurrent tool call in a step (the third).
    pub(crate) tool_call: Allocs,
    /// A step of one tool call less that call.
    pub(crate) model_call: Allocs,
    /// A whole run of one tool step and the answer.
    pub(crate) run: Allocs,
}

/// The bare agent: `tool_steps` steps each calling the echo tool `calls_per_step` times.
fn agent(store: &Counted, tool_steps: u32, calls_per_step: usize) -> Agent {
    let mut model = ScriptedModel::new().per_run();
    for _ in 0..tool_steps {
        model = model.tool_calls((0..calls_per_step).map(|_| ("echo", echo_args())));
    }
    let model = model.text("done");
    Agent::builder()
        .tool(tool_fn(
            "echo",
            "Echoes its text",
            json!({ "type": "object", "properties": { "text": { "type": "string" } } }),
            |args: Value, _ctx| async move {
                Ok::<_, BoxError>(args["text"].as_str().unwrap_or_default().to_owned())
            },
        ))
        .store(store.clone())
        .max_steps(tool_steps + 1)
        .model(model)
        .build()
}

/// Allocations of one run of `agent` from the prepared thread (the fewest of `tries`: the
/// counts are process-wide, a stray allocation elsewhere only adds).
fn run_allocs(
    rt: &tokio::runtime::Runtime,
    global: &'static StatsAlloc<System>,
    store: &Counted,
    thread: &Thread,
    agent: &Agent,
    steps: u32,
    tries: usize,
) -> Allocs {
    let mut best: Option<Allocs> = None;
    for _ in 0..tries {
        store
            .save(thread)
            .now_or_never_ready()
            .expect("the memory store saves");
        let req = AgentRequest::new("What does the echo tool say?").thread(THREAD_ID);
        let in_store = store.taken();
        let region = Region::new(global);
        let resp = rt.block_on(agent.run(req));
        let stats = region.change();
        let in_store = store.taken() - in_store;
        let resp = resp.expect("run");
        assert!(resp.outcome.is_finished(), "{:?}", resp.outcome);
        assert_eq!(resp.steps, steps + 1);
        drop(resp);
        let a = Allocs {
            allocs: stats.allocations as f64,
            reallocs: stats.reallocations as f64,
            bytes: (stats.bytes_allocated + stats.bytes_reallocated.max(0) as usize) as f64,
            store: in_store as f64,
        };
        best = Some(match best {
            Some(b) if b.calls() <= a.calls() => b,
            _ => a,
        });
    }
    best.expect("tries > 0")
}

/// Measures the bare step (see the module docs), each run `tries` times.
pub(crate) fn measure(global: &'static StatsAlloc<System>, tries: usize) -> StepAllocs {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = Counted::new(global);
    let thread = history(10);
    let run = |steps, calls| {
        let agent = agent(&store, steps, calls);
        // A first run outside the count: lazily made statics (tracing's callsites, ...).
        run_allocs(&rt, global, &store, &thread, &agent, steps, 1);
        run_allocs(&rt, global, &store, &thread, &agent, steps, tries)
    };
    let step_of = |calls| {
        let (short, long) = (run(1, calls), run(LONG, calls));
        (long.minus(short).div(f64::from(LONG - 1)), short)
    };
    let (step, short) = step_of(1);
    let (step2, _) = step_of(2);
    let (step3, _) = step_of(3);
    let tool_call = step3.minus(step2);
    StepAllocs {
        step,
        tool_call,
        model_call: step.minus(tool_call),
        run: short,
    }
}

/// A future that must be ready at once (the memory store's).
trait NowOrNever: std::future::Future + Sized {
    fn now_or_never_ready(self) -> Self::Output {
        futures_util::FutureExt::now_or_never(self).expect("ready at once")
    }
}

impl<F: std::future::Future> NowOrNever for F {}

/// A [`MemoryStore`] that counts the allocations made inside its methods (all of its work is
/// done before it returns its future, which is ready at once).
#[derive(Clone)]
struct Counted {
    inner: MemoryStore,
    global: &'static StatsAlloc<System>,
    allocs: Arc<AtomicUsize>,
}

impl Counted {
    fn new(global: &'static StatsAlloc<System>) -> Self {
        Counted {
            inner: MemoryStore::new(),
            global,
            allocs: Arc::default(),
        }
    }

    /// Allocations counted so far.
    fn taken(&self) -> usize {
        self.allocs.load(Ordering::Relaxed)
    }

    fn count<T>(&self, f: impl FnOnce() -> T) -> T {
        let region = Region::new(self.global);
        let out = f();
        let stats = region.change();
        self.allocs
            .fetch_add(stats.allocations + stats.reallocations, Ordering::Relaxed);
        out
    }
}

impl ThreadStore for Counted {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Thread>, BoxError>> {
        self.count(|| self.inner.load(id))
    }

    fn save<'a>(&'a self, thread: &'a Thread) -> BoxFuture<'a, Result<(), BoxError>> {
        self.count(|| self.inner.save(thread))
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), BoxError>> {
        self.count(|| self.inner.delete(id))
    }

    fn lease<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Lease, BoxError>> {
        self.count(|| self.inner.lease(id))
    }

    fn journal(&self) -> Option<&dyn ToolJournal> {
        Some(self)
    }
}

impl ToolJournal for Counted {
    fn started<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.count(|| self.inner.started(thread, call))
    }

    fn finished<'a>(
        &'a self,
        thread: &'a str,
        call: &'a ToolCall,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<(), BoxError>> {
        self.count(|| self.inner.finished(thread, call, output))
    }

    fn entries<'a>(
        &'a self,
        thread: &'a str,
        call_ids: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, JournalEntry>, BoxError>> {
        self.count(|| self.inner.entries(thread, call_ids))
    }
}
