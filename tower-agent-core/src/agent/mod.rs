//! The agent level: [`Agent`] is a `Service<AgentRequest, Response = AgentResponse>` that runs
//! the loop.
//!
//! ```text
//! Agent::call(AgentRequest)
//!  ├─ load the thread, emit AgentStart
//!  ├─ save the prompt to the thread
//!  ├─ setup stages, once, in order            (may register tools, add context)
//!  └─ per step, up to max_steps (25):
//!      ├─ prepare stages, in order              (edit the outgoing ModelRequest)
//!      ├─ model stack                           (your ServiceBuilder layers → provider)
//!      ├─ no tool calls → Finished
//!      ├─ tool calls → tool stack, concurrently (hook layer → your tool layers →
//!      │    ToolRouter → tool: its check, unless a layer ran it, then its call; each
//!      │    request carries the run's ToolChecks, see [`tool::check`](crate::tool::check))
//!      │    results appended in call order; an Err becomes an error output;
//!      │    an Abort ends the run; calls waiting for a person's decision (the
//!      │    deferring approval policy) end it Interrupted once the others are done
//!      │    (see [`interrupt`])
//!      ├─ reminders queued in the step → one user message after the results
//!      └─ save the thread
//! ```
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use serde_json::json;
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, BoxError, agent::Outcome, model::ScriptedModel, tool::tool_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("add", json!({"a": 1, "b": 2})).text("1 + 2 = 3"))
//!     .tool(tool_fn("add", "Adds", json!({"type": "object"}), |args, _ctx| async move {
//!         Ok((args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string())
//!     }))
//!     .tool_layer(ServiceBuilder::new().timeout(Duration::from_secs(30)))
//!     .system_prompt("You are a calculator.")
//!     .build();
//!
//! let resp = agent.run("What is 1 + 2?").await?;
//! assert_eq!(resp.outcome, Outcome::Finished);
//! assert_eq!(resp.text, "1 + 2 = 3");
//! assert_eq!(resp.steps, 2);
//! # Ok(())
//! # }
//! ```
//!
//! # Composition
//!
//! The agent is a tower service like the model and the tools, so agent-level layers go
//! around it with `ServiceBuilder`: a timeout, a concurrency limit, a layer that answers by
//! itself ([`AgentResponse::new`] and the [`AgentEvent`] variants can be built by users).
//! Inside the run, the loop calls four stacks, each a tower service with its layers: the
//! [`start`] stack (SessionStart, UserPromptSubmit), the model stack, the tool stack and the
//! [`step`] stack (Stop, PostToolBatch). A hook set's layers ([`HookLayers`]) are placed by the
//! builder outermost of each stack; what has no service of its own — the events built-in
//! tools raise inside their call, the run's end — goes through [`LoopHooks`], a trait the
//! loop owns and the hooks registry implements. [`Agent::describe`] prints the stacks in
//! order. Per-request data of the caller travels in
//! [`AgentRequest::extensions`] to
//! [`RunContext::extensions`](crate::context::RunContext::extensions).
//!
//! # Cancel safety
//!
//! Dropping the future of [`Agent::run`] (or of `Agent::call`, or the [`EventStream`]) stops
//! the run where it is: tool calls in flight are dropped, and with them any child process
//! they own. The thread keeps the prompt (saved before the first model call) and every whole
//! step, and the run's event channel ([`AgentRequest::events`]) still gets its last event,
//! [`AgentEvent::AgentStop`] with [`Outcome::Cancelled`], sent by a drop guard of the run (its
//! `text` is empty; `steps` and `usage` count what ran). To end a run and still
//! get its response, cancel its token instead ([`AgentRequest::cancellation`]): the run then
//! ends with [`Outcome::Cancelled`].

mod builder;
pub mod compact;
pub mod describe;
mod event;
pub mod future;
mod hook_list;
pub(crate) mod hooks;
pub mod interrupt;
mod run;
mod run_data;
mod stage;
pub mod start;
pub mod step;
mod subagent;
pub use crate::context::transcript;

use std::{
    fmt,
    path::PathBuf,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower::Service;
use tracing::{Instrument as _, field::Empty};

pub(crate) use self::stage::SessionStartWork;
pub use crate::event::{AgentEvent, ModelDelta, Outcome, PendingCall};

pub use self::{
    builder::{AgentBuilder, DEFAULT_MAX_STEPS, NoModel},
    compact::{CompactRequest, CompactResponse},
    describe::AgentStacks,
    event::EventStream,
    hooks::{
        HookLayers, InstructionsInput, LoopHooks, MessageDisplayInput, PROMPT_CACHE_TTL,
        PostCompactInput, PreCompactInput, ResumedSession, RunHooks, SessionEnv, SessionSource,
        SessionStartInput, StopBlocks, StopFailureInput, StopFeedback, StopInput,
        SubagentStartInput, TaskEvent, TaskInput, ToolBatch, prompt_cache_warm, session_end_reason,
    },
    interrupt::{ApprovalError, Approvals, Approved, CallDecision, Decision, PendingApproval},
    run_data::{RunEffort, RunModel, RunPrompt},
    stage::{IntoStageResult, Prepare, Setup, SetupContext},
    subagent::{SessionSubagent, SubagentCall, SubagentTool},
};
use crate::{
    error::Error,
    message::{Messages, Usage},
    model::{BoxModelService, ModelSettings},
    store::ThreadStore,
    tool::{BoxToolService, ToolRouter},
};

/// Builds the tool stack of a run from its router.
type ToolStackFn = dyn Fn(ToolRouter) -> BoxToolService + Send + Sync;

/// An agent: a tower service that runs the agent loop for each [`AgentRequest`].
///
/// Cloning is one reference count. The agent is always ready (`poll_ready` returns `Ready`):
/// each run drives the readiness of its own clones of the model and tool stacks. To bound
/// concurrent runs, wrap it in tower's `ConcurrencyLimit` or `LoadShed`.
///
/// See the [module docs](crate::agent) for the loop and an example.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    model: BoxModelService,
    /// The model stack under the hooks' model layer: what writes the summary of
    /// [`Agent::compact`].
    summarizer: BoxModelService,
    tools: ToolRouter,
    tool_stack: Arc<ToolStackFn>,
    /// Whether each tool request carries the run's [`ToolChecks`](crate::tool::ToolChecks):
    /// when some layer may read them (hooks, tool layers); a bare agent's tools check their
    /// input themselves, and its calls allocate nothing for the handle.
    send_checks: bool,
    setups: Arc<[Arc<dyn Setup>]>,
    prepares: Vec<Arc<dyn Prepare>>,
    system_prompt: Option<String>,
    max_steps: u32,
    max_concurrent_tools: Option<usize>,
    /// [`AgentBuilder::eager_tools`].
    eager_tools: bool,
    settings: ModelSettings,
    store: Arc<dyn ThreadStore>,
    cwd: Option<PathBuf>,
    shutdown: CancellationToken,
    /// The loop hooks of every registration (several: a `HookList`).
    hooks: Option<Arc<dyn LoopHooks>>,
    /// The hook sets whose tool layers wrap each run's tool stack, the first outermost.
    tool_hooks: Vec<Arc<dyn HookLayers>>,
    /// What [`Agent::describe`] shows.
    stacks: AgentStacks,
    /// The step stack (`None` without step layers: nothing to call).
    step: Option<step::BoxStepService>,
    /// The start stack (`None` without start layers: nothing to call).
    start: Option<start::BoxStartService>,
    transcripts: Option<PathBuf>,
    name: Option<Arc<str>>,
}

impl Agent {
    /// A builder; [`model`](AgentBuilder::model) is required.
    pub fn builder() -> AgentBuilder<NoModel> {
        AgentBuilder::new()
    }

    /// The agent's stacks in order, outermost first, and its stages: what each level runs
    /// through, the hook sets' layers where the builder placed them. Print it to see the
    /// onion (see [`describe`] for an example).
    pub fn describe(&self) -> &AgentStacks {
        &self.inner.stacks
    }

    /// Runs the agent on `request` (a prompt, or an [`AgentRequest`]).
    ///
    /// # Errors
    ///
    /// Fails only if the run cannot run: a setup stage or the thread store failed. Everything
    /// else — tool failures, a failed model call, an abort, the step limit — is an
    /// [`Outcome`] of the response.
    ///
    /// # Cancel safety
    ///
    /// See the [module docs](crate::agent#cancel-safety).
    ///
    /// # The future
    ///
    /// It owns what it needs — it does not borrow the agent, so it can be spawned as it is —
    /// and holds the request only until the run starts (not an `async fn`, whose future would
    /// keep a copy of the request for the whole run): a run waiting for its model is about
    /// 1.2 KB.
    ///
    /// ```
    /// use tower_agent_core::{Agent, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
    /// let run = tokio::spawn(agent.run("hello"));
    /// drop(agent);
    /// assert_eq!(run.await.unwrap().unwrap().text, "hi");
    /// # }
    /// ```
    pub fn run(
        &self,
        request: impl Into<AgentRequest>,
    ) -> impl std::future::Future<Output = Result<AgentResponse, Error>> + Send + 'static {
        traced_run(Arc::clone(&self.inner), request.into(), None)
    }

    /// Runs the agent on `request`, as a stream of [`AgentEvent`]s ending with
    /// [`AgentEvent::AgentStop`].
    ///
    /// ```
    /// use futures_util::StreamExt;
    /// use tower_agent_core::{Agent, agent::AgentEvent, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
    /// let events: Vec<AgentEvent> = agent.stream("hello").collect().await;
    /// assert!(matches!(events.first(), Some(AgentEvent::AgentStart { .. })));
    /// assert!(matches!(events.last(), Some(AgentEvent::AgentStop { .. })));
    /// # }
    /// ```
    pub fn stream(&self, request: impl Into<AgentRequest>) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let run = traced_run(Arc::clone(&self.inner), request.into(), Some(tx));
        EventStream::new(Box::pin(run), rx)
    }

    /// Compacts a thread now: its history after the system message is replaced by a summary
    /// the agent's model writes, as Claude Code's `/compact [instructions]` does — PreCompact
    /// hooks (trigger `manual`) first, which may block it, then SessionStart hooks of source
    /// `compact`, whose contexts follow the summary, and PostCompact hooks. The thread's next
    /// run goes on from the summary. See [the module docs](crate::agent::compact).
    ///
    /// # Errors
    ///
    /// An [`Error`] that [`is_compact`](Error::is_compact) when the store has no such thread,
    /// when it has nothing to compact (no message but the system prompt), when it waits for
    /// decisions on its calls ([`Outcome::Interrupted`]), or when the model's call failed or
    /// answered nothing; one that [`is_store`](Error::is_store) when the store failed. The
    /// thread is then left as it was.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before the thread is saved leaves the thread as it was (hooks that
    /// already ran did run).
    ///
    /// ```
    /// use tower_agent_core::{Agent, AgentRequest, agent::CompactRequest, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let model = ScriptedModel::new()
    ///     .text("Paris.")
    ///     .text("<summary>The user asked for the capital of France: Paris.</summary>")
    ///     .text("About 2 million.")
    ///     .recording();
    /// // PreCompact hooks (`tower_agent_core::layers::hooks::Hooks::on_pre_compact`) see the
    /// // instructions, and may block the compaction.
    /// let agent = Agent::builder().model(model.clone()).build();
    /// agent.run(AgentRequest::new("The capital of France?").thread("t")).await?;
    ///
    /// let compacted = agent.compact(CompactRequest::new("t").instructions("Keep the city.")).await?;
    /// assert_eq!(compacted.replaced, 2);
    /// assert!(compacted.messages[0].text().contains("capital of France: Paris."));
    ///
    /// agent.run(AgentRequest::new("Its population?").thread("t")).await?;
    /// // The model sees the summary, then the new prompt.
    /// assert_eq!(model.requests()[2].messages.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn compact(
        &self,
        request: CompactRequest,
    ) -> impl std::future::Future<Output = Result<CompactResponse, Error>> + Send + 'static {
        compact::compact(Arc::clone(&self.inner), request)
    }

    /// The tools every run starts with (setup stages may add more).
    pub fn tools(&self) -> &ToolRouter {
        &self.inner.tools
    }

    /// The model its settings name ([`AgentBuilder::settings`]), if they name one: what a
    /// tool that runs it as a subagent can report (Claude Code's `Agent` tool gives it as
    /// `resolvedModel`). Each run keeps it in its data too ([`RunModel`]).
    pub fn model_name(&self) -> Option<&str> {
        self.inner.settings.model.as_deref()
    }

    /// The step limit.
    pub fn max_steps(&self) -> u32 {
        self.inner.max_steps
    }

    /// The thread store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.inner.store
    }

    /// The graceful shutdown signal (see
    /// [`AgentBuilder::shutdown_signal`]): cancel it to end every run after its current step.
    pub fn shutdown_signal(&self) -> &CancellationToken {
        &self.inner.shutdown
    }
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("stacks", &self.inner.stacks)
            .field("tools", &self.inner.tools)
            .field("setups", &self.inner.setups.len())
            .field("prepares", &self.inner.prepares.len())
            .field("system_prompt", &self.inner.system_prompt)
            .field("max_steps", &self.inner.max_steps)
            .field("max_concurrent_tools", &self.inner.max_concurrent_tools)
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Service<AgentRequest> for Agent {
    type Response = AgentResponse;
    type Error = Error;
    /// Boxed: one allocation per run (not per step).
    type Future = future::AgentFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: AgentRequest) -> Self::Future {
        future::AgentFuture::new(traced_run(Arc::clone(&self.inner), request, None))
    }
}

/// The run, polled inside its `invoke_agent` span (see `layers::trace`),
/// which gets the run's outcome, usage and error when it ends.
fn traced_run(
    inner: Arc<Inner>,
    req: AgentRequest,
    events: Option<mpsc::UnboundedSender<AgentEvent>>,
) -> impl std::future::Future<Output = Result<AgentResponse, Error>> + Send + 'static {
    // NOTE: the target is the module's public path (`tower_agent::agent`, re-exported by the
    // facade), as it was before the core split: subscribers and tests filter on it.
    let span = tracing::info_span!(
        target: "tower_agent::agent",
        "invoke_agent",
        otel.name = Empty,
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = inner.name.as_deref(),
        gen_ai.provider.name = Empty,
        gen_ai.request.model = inner.settings.model.as_deref(),
        gen_ai.conversation.id = req.thread_id.as_deref(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        tower_agent.run.id = Empty,
        tower_agent.outcome = Empty,
    );
    let ephemeral = req.thread_id.is_none();
    if let (false, Some(name)) = (span.is_disabled(), &inner.name) {
        span.record("otel.name", format!("invoke_agent {name}").as_str());
    }
    // Not boxed: a run's state is over a kilobyte, and an allocation that large costs more
    // than the few copies of it the wrappers below make (measured in `benches/overhead.rs`).
    // The request is: every `async fn` that takes it keeps a slot for it in its future for
    // as long as it runs (the whole run), where a box is a pointer, freed when the run starts.
    let run = run::run(inner, Box::new(req), events);
    Recorded {
        run,
        record: span.clone(),
        ephemeral,
    }
    .instrument(span)
}

pin_project_lite::pin_project! {
    /// A run's future that records how the run ended on its span when it completes.
    ///
    /// A combinator rather than an `async` block: a block that awaits the future it captured
    /// holds it twice (the captured value and the awaited one are not overlapped), which
    /// doubled the memory of every run in flight (5,736 bytes instead of about 2,900; see
    /// `BENCHMARKS.md`, "Issue 16, target 6").
    struct Recorded<F> {
        #[pin]
        run: F,
        record: tracing::Span,
        ephemeral: bool,
    }
}

impl<F> std::future::Future for Recorded<F>
where
    F: std::future::Future<Output = Result<AgentResponse, Error>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.run.poll(cx));
        if !this.record.is_disabled() {
            record_run(this.record, &result, *this.ephemeral);
        }
        Poll::Ready(result)
    }
}

/// Records how a run ended on its `invoke_agent` span.
fn record_run(span: &tracing::Span, result: &Result<AgentResponse, Error>, ephemeral: bool) {
    let failed = |error_type: &str, description: &dyn fmt::Display| {
        span.record("error.type", error_type);
        span.record("otel.status_code", "error");
        span.record(
            "otel.status_description",
            tracing::field::display(description),
        );
    };
    match result {
        Ok(resp) => {
            if ephemeral {
                span.record("gen_ai.conversation.id", resp.thread_id.as_str());
            }
            span.record("tower_agent.run.id", resp.run_id.as_str());
            // As i64: `tracing-opentelemetry` exports u64 fields as text.
            let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            span.record("gen_ai.usage.input_tokens", int(resp.usage.input_tokens));
            span.record("gen_ai.usage.output_tokens", int(resp.usage.output_tokens));
            let outcome = match &resp.outcome {
                Outcome::Finished => "finished",
                Outcome::MaxSteps => "max_steps",
                Outcome::Blocked { .. } => "blocked",
                Outcome::Aborted { .. } => "aborted",
                Outcome::Cancelled => "cancelled",
                Outcome::Refused { .. } => "refused",
                Outcome::Deferred { .. } => "deferred",
                Outcome::Interrupted { .. } => "interrupted",
            };
            span.record("tower_agent.outcome", outcome);
            if let Outcome::Aborted { error } = &resp.outcome {
                failed("aborted", error);
            }
        }
        Err(err) => {
            let error_type = if err.is_setup() {
                "setup"
            } else if err.is_store() {
                "store"
            } else {
                "_OTHER"
            };
            failed(error_type, err);
        }
    }
}

/// One run of an agent: a prompt, and optionally the thread it continues.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct AgentRequest {
    /// The user's prompt.
    pub prompt: String,
    /// The thread to continue (loaded before and saved after every step); `None` runs an
    /// ephemeral thread that is not saved.
    pub thread_id: Option<String>,
    /// A token that ends the run with [`Outcome::Cancelled`] when cancelled.
    pub cancellation: Option<CancellationToken>,
    /// The working directory of the run (defaults to the agent's, then the process's).
    pub cwd: Option<PathBuf>,
    /// Where the run's [`AgentEvent`]s go, when the agent is called as a tower service
    /// ([`Agent::stream`] sets its own).
    pub events: Option<mpsc::UnboundedSender<AgentEvent>>,
    /// Per-request data from the caller (the authenticated principal, a tenant, …): read-only
    /// in the run, as [`RunContext::extensions`](crate::context::RunContext::extensions), for
    /// tools, hooks and stages (subagents see their parent run's).
    pub extensions: http::Extensions,
    /// Context for the run's system prompt (appended to it at every step, before the context
    /// of SessionStart hooks and setup stages): what a layer around the agent adds.
    pub system_context: Vec<String>,
    /// Context to add after the prompt, as one [hook
    /// context](crate::message::Message::hook_context) (before the contexts of the
    /// SessionStart and UserPromptSubmit hooks of the start stack).
    pub prompt_context: Vec<String>,
    /// Where the run's transcript goes, when its caller chose (a subagent's).
    pub(crate) transcript: Option<transcript::Target>,
    /// A crash recovery: see [`AgentRequest::recover`].
    pub(crate) recover: bool,
    /// Decisions on the thread's pending calls: the request answers an
    /// [`Outcome::Interrupted`] run instead of sending a prompt (see [`Self::approvals`]).
    pub approvals: Option<Approvals>,
    /// The setup the run is asked to do ([`Self::setup`]).
    pub setup: Option<start::SetupTrigger>,
    /// Directories the run may work in besides its working directory ([`Self::add_dir`]).
    pub directories: Vec<PathBuf>,
}

impl AgentRequest {
    /// A request with a prompt.
    pub fn new(prompt: impl Into<String>) -> Self {
        AgentRequest {
            prompt: prompt.into(),
            ..Self::default()
        }
    }

    /// A request that resumes the thread `id` whose last run stopped in the middle (its
    /// process died): no prompt is added; the step in flight is finished with the store's
    /// [tool-call journal](crate::store::journal) — for each call of the thread's last
    /// assistant message without a result, a recorded output is replayed (the tool is not
    /// run), a call started but not finished (*in doubt*) is run again only if its tool is
    /// [idempotent](crate::message::ToolSpec::idempotent) (else the model gets an error output
    /// saying the call may or may not have happened), and a call never started is run. Then
    /// the loop goes on (the model is called). A thread whose last message is an answer
    /// without tool calls has nothing to resume: the run ends at once, [`Outcome::Finished`],
    /// with no step. A thread the store does not have is a store error.
    ///
    /// Not the answer to an approval: a thread whose calls wait for a decision
    /// ([`Outcome::Interrupted`]) is left as it is (the recovery ends `Interrupted` with the
    /// same pending calls, nothing runs); answer it with [`AgentRequest::approvals`]. The calls
    /// a recovery runs go through the whole tool stack, so hooks and guards decide again.
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::{Agent, AgentRequest, BoxError, model::ScriptedModel, store::MemoryStore, tool::tool_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::Error> {
    /// let store = MemoryStore::new();
    /// let ping = tool_fn("ping", "Pings", json!({"type": "object"}), |_, _| async {
    ///     Ok("pong")
    /// });
    /// let agent = Agent::builder()
    ///     .model(ScriptedModel::new().tool_call("ping", json!({})).text("done"))
    ///     .tool(ping)
    ///     .store(store.clone())
    ///     .build();
    /// agent.run(AgentRequest::new("ping").thread("t1")).await?;
    /// // Nothing was left in flight: nothing to do.
    /// let resumed = agent.run(AgentRequest::recover("t1")).await?;
    /// assert_eq!(resumed.steps, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn recover(id: impl Into<String>) -> Self {
        AgentRequest {
            thread_id: Some(id.into()),
            recover: true,
            ..Self::default()
        }
    }

    /// Whether this is a [`recover`](Self::recover) request.
    pub fn is_recover(&self) -> bool {
        self.recover
    }

    /// This request on the thread `id`.
    #[must_use]
    pub fn thread(mut self, id: impl Into<String>) -> Self {
        self.thread_id = Some(id.into());
        self
    }

    /// This request with a cancellation token.
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }

    /// This request with an event channel: the run sends its [`AgentEvent`]s there, so a
    /// caller that goes through tower middleware (`ServiceBuilder::new().timeout(..)
    /// .service(agent)`) still sees them as they happen.
    ///
    /// ```
    /// use tower::{ServiceBuilder, ServiceExt};
    /// use tower_agent_core::{Agent, AgentRequest, agent::AgentEvent, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::BoxError> {
    /// let agent = Agent::builder().model(ScriptedModel::new().text("hi")).build();
    /// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    /// let svc = ServiceBuilder::new().timeout(std::time::Duration::from_secs(30)).service(agent);
    /// svc.oneshot(AgentRequest::new("hello").events(tx)).await?;
    /// assert!(matches!(rx.recv().await, Some(AgentEvent::AgentStart { .. })));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn events(mut self, tx: mpsc::UnboundedSender<AgentEvent>) -> Self {
        self.events = Some(tx);
        self
    }

    /// This request with `value` in its [`extensions`](Self::extensions) (replacing a value of
    /// the same type).
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::{Agent, AgentRequest, BoxError, model::ScriptedModel, tool::tool_fn};
    ///
    /// #[derive(Clone)]
    /// struct User(String);
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::Error> {
    /// let whoami = tool_fn("whoami", "Who calls", json!({"type": "object"}), |_, ctx| async move {
    ///     let user = ctx.extensions().get::<User>().map(|u| u.0.clone());
    ///     Ok(user.unwrap_or_else(|| "nobody".into()))
    /// });
    /// let model = ScriptedModel::new().tool_call("whoami", json!({})).text("done").recording();
    /// let agent = Agent::builder().model(model.clone()).tool(whoami).build();
    /// agent.run(AgentRequest::new("who am I?").extension(User("ada".into()))).await?;
    /// assert_eq!(model.requests()[1].messages.last().unwrap().text(), "ada");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// The request's per-request data.
    pub fn extensions(&self) -> &http::Extensions {
        &self.extensions
    }

    /// The request's per-request data, mutably (a server or a layer copies the HTTP request's
    /// extensions here).
    pub fn extensions_mut(&mut self) -> &mut http::Extensions {
        &mut self.extensions
    }

    /// This request with `text` added to its [`system_context`](Self::system_context).
    #[must_use]
    pub fn system_context(mut self, text: impl Into<String>) -> Self {
        self.system_context.push(text.into());
        self
    }

    /// This request with `text` added to its [`prompt_context`](Self::prompt_context).
    #[must_use]
    pub fn prompt_context(mut self, text: impl Into<String>) -> Self {
        self.prompt_context.push(text.into());
        self
    }

    /// This request asking the run to set the project up (`init`) or to maintain it
    /// (`maintenance`), as Claude Code's `--init` and `--maintenance` do: the Setup hooks
    /// matching the trigger fire at the start of the run, before CwdChanged and SessionStart,
    /// and their contexts join the run's system prompt. A request without one fires no Setup
    /// hook.
    ///
    /// ```
    /// use tower_agent_core::{Agent, AgentRequest, agent::start::SetupTrigger, model::ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // The Setup hooks (`tower_agent_core::layers::hooks::Hooks::on_setup`, or a start layer
    /// // reading `RunStart::setup`) see the trigger; this agent has none.
    /// let agent = Agent::builder().model(ScriptedModel::new().text("ok")).build();
    /// let resp = agent.run(AgentRequest::new("go").setup(SetupTrigger::Init)).await?;
    /// assert!(resp.outcome.is_finished());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn setup(mut self, trigger: start::SetupTrigger) -> Self {
        self.setup = Some(trigger);
        self
    }

    /// This request with another directory the run may work in (relative to the run's working
    /// directory), as Claude Code's `/add-dir` gives one to a session: tools and hooks read
    /// the run's directories from [`RunContext::directories`](crate::context::RunContext::directories),
    /// and the DirectoryAdded hooks fire (source `slash_command`) for each directory the
    /// thread did not have yet.
    #[must_use]
    pub fn add_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.directories.push(dir.into());
        self
    }

    /// A request that answers the pending calls of the thread `thread_id` (a run that ended
    /// [`Outcome::Interrupted`]) with `approvals`, and goes on with the run: the approved and
    /// edited calls run (once), the denied ones get their denial as output, then the model is
    /// called. There is no prompt (UserPromptSubmit hooks do not run). See
    /// [`interrupt`].
    ///
    /// # Errors
    ///
    /// The run fails (nothing changed) with an [`Error`] that
    /// [`is_approvals`](Error::is_approvals), whose source is an [`ApprovalError`], when the
    /// decisions do not cover exactly the thread's pending calls.
    pub fn approvals(thread_id: impl Into<String>, approvals: Approvals) -> Self {
        AgentRequest {
            thread_id: Some(thread_id.into()),
            approvals: Some(approvals),
            ..Self::default()
        }
    }

    /// This request with a working directory.
    #[must_use]
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

impl From<&str> for AgentRequest {
    fn from(prompt: &str) -> Self {
        Self::new(prompt)
    }
}

impl From<String> for AgentRequest {
    fn from(prompt: String) -> Self {
        Self::new(prompt)
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentResponse {
    /// The thread id (fresh for an ephemeral run).
    pub thread_id: String,
    /// The run id.
    pub run_id: String,
    /// How the run ended.
    pub outcome: Outcome,
    /// The text of the last assistant message.
    pub text: String,
    /// The whole thread after the run.
    pub messages: Messages,
    /// Steps taken (model calls).
    pub steps: u32,
    /// Tokens used, summed over the run's model calls.
    pub usage: Usage,
    /// The tokens of the run's last model answer that reported its usage (zero if none
    /// did): how big the conversation had grown by its end — what Claude Code's `Agent` tool
    /// reports of a subagent (`AgentTool`'s
    /// `usage` and `totalTokens`), where [`usage`](Self::usage) adds up every call.
    pub last_usage: Usage,
    /// The error that ended the run, typed, when it ended
    /// [`Outcome::Aborted`]: the model's error (after whatever retry layer you stacked), or
    /// the error a tool-stack layer returned with an [`Abort`](crate::Abort) in its chain
    /// (an `Abort` made with [`Abort::with_source`](crate::Abort::with_source) carries an
    /// error of yours). Downcast it to find your own type: the outcome's `error` text is
    /// for people, this is for code. `None` for every other outcome.
    ///
    /// ```
    /// # use tower_agent_core::{AgentResponse, Abort, agent::Outcome};
    /// #[derive(Debug)]
    /// struct OverBudget { tokens: u64 }
    /// impl std::fmt::Display for OverBudget {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         write!(f, "over budget by {} tokens", self.tokens)
    ///     }
    /// }
    /// impl std::error::Error for OverBudget {}
    ///
    /// # let resp = AgentResponse::new("t", Outcome::Aborted { error: "budget".into() })
    /// #     .with_error(Abort::with_source("budget", OverBudget { tokens: 12 }));
    /// assert_eq!(resp.error_as::<OverBudget>().map(|o| o.tokens), Some(12));
    /// ```
    pub error: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
    /// The run's warnings, in order: what did not stop the run but is worth knowing (a hook
    /// that could not run, a retried model call, a skipped skill …), each also logged at
    /// `WARN` and sent as an [`AgentEvent::Warning`] (see
    /// [`RunContext::warn`](crate::context::RunContext::warn)). At most 256, then a line
    /// saying how many more there were.
    pub warnings: Vec<String>,
}

impl AgentResponse {
    /// A response of the thread `thread_id` ending with `outcome`: no messages, no text, no
    /// steps, no usage, and a fresh run id. For agent-level layers that answer by themselves (a
    /// cache, a guard, a test double); set the rest with the `with_*` methods.
    ///
    /// ```
    /// use tower_agent_core::{AgentResponse, agent::Outcome, message::{Message, Messages}};
    ///
    /// let resp = AgentResponse::new("thread-1", Outcome::Finished)
    ///     .with_text("cached answer")
    ///     .with_messages(Messages::from(vec![Message::user("q"), Message::assistant("cached answer")]));
    /// assert_eq!(resp.text, "cached answer");
    /// assert_eq!(resp.steps, 0);
    /// ```
    pub fn new(thread_id: impl Into<String>, outcome: Outcome) -> Self {
        AgentResponse {
            thread_id: thread_id.into(),
            run_id: crate::context::new_id("run"),
            outcome,
            text: String::new(),
            messages: Messages::new(),
            steps: 0,
            usage: Usage::default(),
            last_usage: Usage::default(),
            error: None,
            warnings: Vec::new(),
        }
    }

    /// This response with another run id.
    #[must_use]
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// This response with its final text.
    #[must_use]
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// This response with the thread's messages.
    #[must_use]
    pub fn with_messages(mut self, messages: Messages) -> Self {
        self.messages = messages;
        self
    }

    /// This response with a step count.
    #[must_use]
    pub fn with_steps(mut self, steps: u32) -> Self {
        self.steps = steps;
        self
    }

    /// This response with token counts.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// This response with the token counts of its last model answer
    /// ([`last_usage`](Self::last_usage)).
    #[must_use]
    pub fn with_last_usage(mut self, usage: Usage) -> Self {
        self.last_usage = usage;
        self
    }

    /// The first error of type `E` in the chain of the run's [`error`](Self::error): the
    /// typed cause of an `Aborted` run (an error of yours carried by
    /// [`Abort::with_source`](crate::Abort::with_source), or the model's error).
    pub fn error_as<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let error: &(dyn std::error::Error + 'static) = self.error.as_deref()?;
        crate::Abort::find_source(error)
    }

    /// This response with the error that ended the run (see [`error`](Self::error)).
    #[must_use]
    pub fn with_error(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.error = Some(std::sync::Arc::new(error));
        self
    }

    /// The final answer parsed as a `T`: structured output, asked for with
    /// [`ModelSettings::response_format`](crate::model::ModelSettings::response_format)
    /// (e.g. [`ResponseFormat::of::<T>()`](crate::model::ResponseFormat::of)). See
    /// [`model::options`](crate::model::options).
    ///
    /// Fails with an [`OutputError`](crate::model::OutputError) if the run did not finish
    /// (its outcome is in the message) or the answer is not JSON of `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, crate::model::OutputError> {
        if !self.outcome.is_finished() {
            return Err(crate::model::OutputError::not_finished(&self.outcome));
        }
        crate::model::ResponseFormat::parse(&self.text)
    }
}
