//! The agent loop.

use std::{future::Future, path::PathBuf, pin::Pin, sync::Arc, task::Poll};

use futures_util::{StreamExt, stream::FuturesUnordered};
use smallvec::SmallVec;
use tokio::sync::mpsc;
use tokio_util::sync::WaitForCancellationFuture;
use tower::{Service, ServiceExt};

use super::{
    AgentEvent, AgentRequest, AgentResponse, Inner, Outcome, PendingCall, SetupContext,
    hooks::{LoopHooks, ParentHooks, SessionSource, StepCalls, StopFailureInput},
    interrupt,
    start::RunStart,
    step::{StepControl, StepEnd},
};
use crate::{
    context::{RunContext, RunContextBuilder, transcript},
    error::{Abort, BoxError, Error, error_chain},
    message::{Message, Messages, Role, StopReason, ToolCall, ToolOutput, Usage},
    model::{BoxModelService, ModelRequest},
    store::Thread,
    tool::{BoxToolService, ToolRequest},
};

mod recover;

pub(super) async fn run(
    inner: Arc<Inner>,
    mut req: Box<AgentRequest>,
    events: Option<mpsc::UnboundedSender<AgentEvent>>,
) -> Result<AgentResponse, Error> {
    // The stream's channel wins over the request's.
    if events.is_some() {
        req.events = events;
    }
    // Dropped with the run's future: a run cut off (a timeout around the agent, a client gone)
    // still ends its event stream with `AgentStop`.
    let mut guard = StopGuard {
        tx: req.events.clone(),
        steps: 0,
        usage: Usage::default(),
        hooks: None,
    };
    let result = run_inner(inner, req, &mut guard).await;
    if let Err(err) = &result {
        guard.stop(Outcome::Aborted {
            error: err.to_string(),
        });
    }
    result
}

/// Sends the run's last event, [`AgentEvent::AgentStop`], unless the run sent it already: with
/// [`Outcome::Cancelled`] if the run's future is dropped before it ends.
struct StopGuard {
    /// `None` once the stop event was sent (or if nobody listens).
    tx: Option<mpsc::UnboundedSender<AgentEvent>>,
    /// Steps started so far.
    steps: u32,
    /// Tokens used so far.
    usage: Usage,
    /// The run's hooks and context once it started: SessionEnd still fires (once) for a run
    /// that ends without reaching its `finish` (an error, a dropped future).
    hooks: Option<(Arc<dyn LoopHooks>, RunContext)>,
}

impl StopGuard {
    /// Runs SessionEnd hooks (if the run has some), then sends `AgentStop` with `outcome`
    /// (each at most once).
    fn stop(&mut self, outcome: Outcome) {
        if let Some((hooks, ctx)) = self.hooks.take() {
            let response = AgentResponse {
                thread_id: ctx.session_id().to_owned(),
                run_id: ctx.run_id().to_owned(),
                outcome: outcome.clone(),
                text: String::new(),
                messages: Messages::new(),
                steps: self.steps,
                usage: self.usage,
                error: None,
            };
            hooks.session_end(&response, &ctx);
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(AgentEvent::AgentStop {
                outcome,
                text: String::new(),
                steps: self.steps,
                usage: self.usage,
            });
        }
    }

    /// The run ran its SessionEnd hooks and sent its own `AgentStop`.
    fn disarm(&mut self) {
        self.tx = None;
        self.hooks = None;
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.stop(Outcome::Cancelled);
    }
}

async fn run_inner(
    inner: Arc<Inner>,
    req: Box<AgentRequest>,
    guard: &mut StopGuard,
) -> Result<AgentResponse, Error> {
    // `start`, `finish` and the rare phases (approved calls, recovery) are boxed: each runs
    // once at most, and unboxed their state, the largest of the run, would be part of the
    // run's future for all its steps (a run waiting on its model would carry it).
    let (mut run, ended) = match Box::pin(Run::start(&inner, req, guard)).await? {
        Started::Running(run) => (run, None),
        Started::Ended(run, outcome) => (run, Some(outcome)),
    };
    let outcome = match ended {
        Some(outcome) => outcome,
        None => run.steps().await?,
    };
    Box::pin(run.finish(outcome)).await
}

/// What the start phase left: a run to go on with, or one that ended before it started
/// (shutting down, or blocked by a SessionStart or UserPromptSubmit hook; nothing is saved).
enum Started<'a> {
    Running(Run<'a>),
    Ended(Run<'a>, Outcome),
}

/// What the setup phase made for the steps.
struct Stacks {
    tools: BoxToolService,
    specs: Arc<Vec<crate::message::ToolSpec>>,
    /// Context of SessionStart hooks and setup stages, for the system prompt of every step.
    system_context: Option<String>,
}

struct Run<'a> {
    inner: &'a Inner,
    guard: &'a mut StopGuard,
    ctx: RunContext,
    history: Messages,
    usage: Usage,
    steps: u32,
    persist: bool,
    /// Messages of the history already in the transcript.
    transcribed: usize,
    /// Contexts of SessionStart hooks, then of setup stages.
    start_context: Vec<String>,
    /// An [`AgentRequest::recover`] run: no prompt; the step in flight is finished first.
    recovering: bool,
    /// Calls waiting for a decision, saved with the thread.
    pending: Vec<PendingCall>,
    /// Approved calls to run before the first step (each with a placeholder output in the
    /// history), saved with the thread ([`Thread::approved`]) until their outputs are.
    approved: Vec<PendingCall>,
    /// The thread id of the run's saves (empty for a run that is not saved).
    thread_id: String,
    /// The error that ended the run, typed ([`AgentResponse::error`]).
    error: Option<RunError>,
}

/// An error that ended a run, shared ([`AgentResponse::error`]).
pub(crate) type RunError = Arc<dyn std::error::Error + Send + Sync>;

/// The reason of the [`Abort`] in `err`'s chain (its text if there is none).
fn abort_reason(err: &RunError) -> String {
    match Abort::find(&**err) {
        Some(abort) => abort.reason().to_owned(),
        None => err.to_string(),
    }
}

/// The saved thread `thread_id` names, if any (`None` for a run that is not saved).
async fn load(inner: &Inner, thread_id: Option<&str>) -> Result<Option<Thread>, Error> {
    let Some(id) = thread_id else {
        return Ok(None);
    };
    inner.store.load(id).await.map_err(Error::store)
}

/// The decisions of an approvals run on the thread's pending calls, checked; `None` for a run
/// without approvals. An error for approvals of a thread that was not resumed.
fn decisions(
    source: SessionSource,
    pending: &[PendingCall],
    approvals: Option<&interrupt::Approvals>,
) -> Result<Option<Vec<(PendingCall, interrupt::Decision)>>, Error> {
    let Some(approvals) = approvals else {
        return Ok(None);
    };
    if source != SessionSource::Resume {
        return Err(Error::approvals(interrupt::ApprovalError::NoThread));
    }
    interrupt::check(pending, approvals)
        .map(Some)
        .map_err(Error::approvals)
}

/// The run's context from `builder` and the request's parts: the agent's working directory
/// when the request has none, the request's transcript file or one in the agent's transcript
/// directory. The transcript file exists when this returns, before any hook can be given its
/// path.
fn context(
    inner: &Inner,
    mut builder: RunContextBuilder,
    thread_id: Option<String>,
    cwd: Option<PathBuf>,
    events: Option<mpsc::UnboundedSender<AgentEvent>>,
    transcript: Option<transcript::Target>,
) -> RunContext {
    if let Some(id) = thread_id {
        builder = builder.session_id(id);
    }
    if let Some(cwd) = cwd.or_else(|| inner.cwd.clone()) {
        builder = builder.cwd(cwd);
    }
    if let Some(tx) = events {
        builder = builder.events(tx);
    }
    if let Some(target) = transcript {
        builder = builder
            .transcript_path(target.path)
            .transcript_agent_id(target.agent_id);
    } else if let Some(dir) = &inner.transcripts {
        builder = builder.transcript_dir(dir);
    }
    let ctx = builder.build();
    if let Some(transcript) = ctx.transcript() {
        transcript.touch();
    }
    ctx
}

impl<'a> Run<'a> {
    /// Phase "start": load the thread, emit `AgentStart`, run SessionStart and
    /// UserPromptSubmit hooks, add the prompt to the history and save it.
    async fn start(
        inner: &'a Inner,
        req: Box<AgentRequest>,
        guard: &'a mut StopGuard,
    ) -> Result<Started<'a>, Error> {
        let AgentRequest {
            prompt,
            thread_id,
            cancellation,
            cwd,
            events,
            extensions,
            system_context,
            prompt_context,
            transcript,
            recover,
            approvals,
        } = *req;
        let persist = thread_id.is_some();
        let loaded = load(inner, thread_id.as_deref()).await?;
        let source = if loaded.is_some() {
            SessionSource::Resume
        } else {
            SessionSource::Startup
        };
        let (mut history, state, pending, approved) = loaded.map_or_else(Default::default, |t| {
            let state = Thread::restore(t.data);
            (t.messages, state, t.pending, t.approved)
        });
        // Refused before anything runs or is saved.
        let decided = decisions(source, &pending, approvals.as_ref())?;
        let builder = RunContext::builder()
            .data(state)
            .extensions(extensions)
            .cancellation(cancellation.unwrap_or_default());
        let ctx = context(inner, builder, thread_id, cwd, events, transcript);
        ctx.emit_with(|| AgentEvent::AgentStart {
            thread_id: ctx.session_id().to_owned(),
            run_id: ctx.run_id().to_owned(),
        });
        if let Some(hooks) = &inner.hooks {
            guard.hooks = Some((Arc::clone(hooks), ctx.clone()));
        }
        // What the thread held already is in the transcript from its earlier runs.
        let transcribed = history.len();
        let thread_id = if persist {
            ctx.session_id().to_owned()
        } else {
            String::new()
        };
        let mut run = Run {
            inner,
            guard,
            ctx,
            history: Messages::new(),
            usage: Usage::default(),
            steps: 0,
            persist: false,
            transcribed: usize::MAX,
            start_context: system_context,
            recovering: recover,
            pending,
            approved,
            thread_id,
            error: None,
        };
        if inner.shutdown.is_cancelled() {
            // Shutting down: the run never starts, the thread is left as it was.
            run.history = history;
            return Ok(Started::Ended(run, Outcome::Cancelled));
        }
        if recover {
            return run.recovered_start(history, persist, transcribed).await;
        }
        let prompt = decided.is_none().then_some(prompt);
        let (prompt, prompt_context) = match run.start_stack(source, prompt, prompt_context).await {
            Ok(started) => started,
            Err(outcome) => {
                run.history = history;
                return Ok(Started::Ended(run, outcome));
            }
        };
        // A thread whose last run stopped mid-step (saved before its calls ran), or before it
        // finished the calls a person approved.
        run.close_unanswered(&mut history).await?;
        run.close_approved(&mut history).await?;
        if let (true, Some(system)) = (history.is_empty(), &inner.system_prompt) {
            history.push(Message::system(system.clone()));
        }
        let mut transcribed = transcribed;
        if let Some(decided) = decided {
            transcribed += run.apply_decisions(&mut history, &decided);
        } else {
            transcribed += run.supersede_pending(&mut history);
            history.push(Message::user(prompt.unwrap_or_default()));
            if !prompt_context.is_empty() {
                history.push(Message::hook_context(&prompt_context));
            }
        }
        (run.history, run.persist, run.transcribed) = (history, persist, transcribed);
        // The prompt is saved before anything can cut the run off: a run dropped at any
        // point keeps it, and every whole step.
        run.save().await?;
        Ok(Started::Running(run))
    }

    /// Answers the thread's pending calls as an approvals run decided them, in this save,
    /// before any approved call runs (see `interrupt`): denials as outputs, approved calls
    /// with placeholder outputs, to run first. Returns how many outputs went into `history`
    /// (the transcript gets the denials now and the approved calls' outputs when they end,
    /// not their placeholders).
    fn apply_decisions(
        &mut self,
        history: &mut Messages,
        decided: &[(PendingCall, interrupt::Decision)],
    ) -> usize {
        self.pending.clear();
        let (outputs, approved) = interrupt::prepare(decided);
        let n = outputs.len();
        let at = interrupt::insert_outputs(history, outputs);
        if let Some(transcript) = self.ctx.transcript() {
            let denials = decided.iter().zip(history.iter().skip(at));
            transcript.append(denials.filter_map(|((_, d), m)| {
                matches!(d, interrupt::Decision::Deny { .. }).then_some(m)
            }));
        }
        self.approved = approved;
        n
    }

    /// Denies the thread's pending calls as superseded by a new prompt (outputs in `history`
    /// and the transcript); returns how many.
    fn supersede_pending(&mut self, history: &mut Messages) -> usize {
        if self.pending.is_empty() {
            return 0;
        }
        let outputs = std::mem::take(&mut self.pending)
            .iter()
            .map(|p| interrupt::denied(&p.id, interrupt::SUPERSEDED))
            .collect::<Vec<_>>();
        let n = outputs.len();
        let at = interrupt::insert_outputs(history, outputs);
        if let Some(transcript) = self.ctx.transcript() {
            transcript.append(history.iter().skip(at).take(n));
        }
        n
    }

    /// The start stack (SessionStart, UserPromptSubmit hooks): the prompt and contexts it
    /// decided (its system contexts are kept for the system message); `Err(outcome)` if it
    /// refused the run (`Blocked`) or failed (`Aborted`).
    async fn start_stack(
        &mut self,
        source: SessionSource,
        prompt: Option<String>,
        contexts: Vec<String>,
    ) -> Result<(Option<String>, Vec<String>), Outcome> {
        if let Some(hooks) = &self.inner.hooks {
            // Subagents and built-in tools of this run find its hooks here.
            self.ctx
                .with_data(|data| data.insert(ParentHooks(Arc::clone(hooks))));
        }
        let Some(stack) = self.inner.start.clone() else {
            return Ok((prompt, contexts));
        };
        let mut start = RunStart::new(self.ctx.clone(), source, prompt);
        start.model = self.model_name();
        start.system_context = std::mem::take(&mut self.start_context);
        start.prompt_context = contexts;
        match stack.oneshot(start).await {
            Ok(start) => {
                self.start_context = start.system_context;
                match start.blocked {
                    Some(reason) => Err(Outcome::Blocked { reason }),
                    None => Ok((start.prompt, start.prompt_context)),
                }
            }
            Err(err) => {
                let err = RunError::from(err);
                let error = abort_reason(&err);
                self.error = Some(err);
                Err(Outcome::Aborted { error })
            }
        }
    }

    /// The run after its start: setup, the approved calls of an answer to an interrupted run,
    /// the step a crashed run left, then the steps; the outcome the run ends with.
    async fn steps(&mut self) -> Result<Outcome, Error> {
        let inner = self.inner;
        let Some(stacks) = self.setup().await? else {
            return Ok(Outcome::Cancelled);
        };
        // An answer to an interrupted run: its approved calls first.
        if !self.approved.is_empty()
            && let Some(outcome) = Box::pin(self.approved_calls(&stacks)).await?
        {
            return Ok(outcome);
        }
        let mut model = inner.model.clone();
        // A recovered run first finishes the step its crashed run left (step 0).
        let mut first = 0;
        if self.recovering {
            match Box::pin(self.recover(&stacks)).await? {
                recover::Recovered::Ended(outcome) => return Ok(outcome),
                recover::Recovered::Stepped => first = 1,
                recover::Recovered::Nothing => {}
            }
        }
        for step in first..inner.max_steps {
            if let Some(outcome) = self.step(step, &stacks, &mut model).await? {
                return Ok(outcome);
            }
        }
        Ok(Outcome::MaxSteps)
    }

    /// Phase "setup": setup stages, once, in order; then the tool stack of the run. `None`
    /// if the run was cancelled meanwhile.
    async fn setup(&mut self) -> Result<Option<Stacks>, Error> {
        let inner = self.inner;
        let mut context = std::mem::take(&mut self.start_context);
        let router = if inner.setups.is_empty() {
            inner.tools.clone()
        } else {
            let prompt = self
                .history
                .iter()
                .rev()
                .find(|m| m.role == Role::User && !m.text().starts_with("<system-hook>"))
                .map(|m| m.text())
                .unwrap_or_default();
            let cx = SetupContext::new(self.ctx.clone(), &prompt, inner.tools.clone());
            let setups = async {
                for stage in &inner.setups {
                    stage.setup(cx.clone()).await?;
                }
                Ok::<_, BoxError>(())
            };
            match or_cancel(&self.ctx, setups).await {
                None => return Ok(None),
                Some(result) => result.map_err(Error::setup)?,
            }
            let (router, _added, added_context) = cx.finish();
            context.extend(added_context);
            router
        };
        let specs = Arc::clone(router.specs());
        // The journal wraps each tool, innermost: a call is "started" only if it reaches it.
        let router = match self.journal() {
            Some(_) => recover::journaled(&router, &inner.store),
            None => router,
        };
        let mut tools = (inner.tool_stack)(router);
        if let Some(hooks) = &inner.hooks {
            tools = hooks.wrap_tools(tools);
        }
        Ok(Some(Stacks {
            tools,
            specs,
            system_context: (!context.is_empty()).then(|| context.join("\n\n")),
        }))
    }

    /// The model's answer to the step's request, or the outcome the run ends with (cancelled,
    /// a prepare stage or the model failed). The request is made once the model is ready and
    /// moved into its call at once: a run waiting for its model holds only the model's future.
    async fn answer(
        &mut self,
        ctx: &RunContext,
        stacks: &Stacks,
        model: &mut BoxModelService,
    ) -> Result<crate::model::ModelResponse, Outcome> {
        let model = match or_cancel(ctx, model.ready()).await {
            None => return Err(Outcome::Cancelled),
            Some(Ok(model)) => model,
            Some(Err(err)) => return Err(self.model_failed(err, ctx)),
        };
        let request = self.model_request(ctx, stacks)?;
        match or_cancel(ctx, model.call(request)).await {
            None => Err(Outcome::Cancelled),
            Some(Ok(response)) => Ok(response),
            Some(Err(err)) => Err(self.model_failed(err, ctx)),
        }
    }

    /// The outcome of a failed model call: the reason of an [`Abort`] in its chain, else the
    /// failure (after StopFailure hooks).
    fn model_failed(&mut self, err: BoxError, ctx: &RunContext) -> Outcome {
        let err = RunError::from(err);
        let error = match Abort::find(&*err) {
            Some(abort) => abort.reason().to_owned(),
            None => {
                let details = error_chain(&*err);
                if let Some(hooks) = &self.inner.hooks {
                    let input = StopFailureInput::from_error(details.clone());
                    hooks.stop_failure(&input, ctx);
                }
                format!("model call failed: {details}")
            }
        };
        self.error = Some(err);
        Outcome::Aborted { error }
    }

    /// The step's model request: the history, the tools, the settings, the context of setup,
    /// then the prepare stages; `Err` (the run aborts) if a stage fails.
    fn model_request(&self, ctx: &RunContext, stacks: &Stacks) -> Result<ModelRequest, Outcome> {
        let inner = self.inner;
        let mut request = ModelRequest {
            messages: self.history.clone(),
            tools: Arc::clone(&stacks.specs),
            settings: inner.settings.clone(),
            ctx: ctx.clone(),
        };
        if let Some(text) = &stacks.system_context {
            request.append_system(text);
        }
        for stage in &inner.prepares {
            if let Err(err) = stage.prepare(&mut request) {
                let error = format!("prepare stage failed: {}", error_chain(&*err));
                return Err(Outcome::Aborted { error });
            }
        }
        Ok(request)
    }

    /// Phase "step": prepare stages, the model call, then the stop phase (no tool calls) or
    /// the tools phase. `Some(outcome)` ends the run.
    async fn step(
        &mut self,
        step: u32,
        stacks: &Stacks,
        model: &mut BoxModelService,
    ) -> Result<Option<Outcome>, Error> {
        let inner = self.inner;
        if self.ctx.is_cancelled() || inner.shutdown.is_cancelled() {
            return Ok(Some(Outcome::Cancelled));
        }
        let ctx = self.ctx.with_step(step);
        self.steps = step + 1;
        self.guard.steps = self.steps;
        ctx.emit_with(|| AgentEvent::StepStart { step });
        let response = match self.answer(&ctx, stacks, model).await {
            Ok(response) => response,
            Err(outcome) => return Ok(Some(outcome)),
        };
        // Taken apart (and the rest dropped) at once: only what is used after the awaits
        // below stays in this future.
        let (mut message, usage, ending, mut extensions) = message_and_usage(response);
        if let Some(usage) = usage {
            self.usage += usage;
            self.guard.usage = self.usage;
        }
        if let Some(compaction) = extensions.remove::<crate::context::Compaction>() {
            self.compacted(compaction, &ctx);
        }
        message.role = Role::Assistant;
        // Ids are unique within the thread: the history only grows.
        let position = self.history.len();
        for (i, call) in message.tool_calls.iter_mut().enumerate() {
            if call.id.is_empty() {
                call.id = format!("call_{position}_{i}");
            }
        }
        ctx.emit_with(|| AgentEvent::ModelResponse {
            step,
            message: message.clone(),
            usage,
        });
        // The text a model layer (MessageDisplay hooks) decided to display for it.
        if let Some(crate::model::Display(text)) = extensions.remove() {
            ctx.emit_with(|| AgentEvent::MessageDisplay { step, text });
        }
        if message.tool_calls.is_empty() {
            self.history.push(message);
            // In the transcript before Stop hooks read it.
            self.transcribe();
            match ending {
                // Anthropic's documented continuation: the paused answer goes back as it is
                // and the model is called again (a new step, so `max_steps` bounds it).
                Some(Ending::Pause) => {
                    self.save().await?;
                    Ok(None)
                }
                Some(Ending::Refusal(refusal)) => Ok(Some(Outcome::Refused { refusal })),
                None => self.stop(&ctx).await,
            }
        } else {
            // Boxed: the calls' futures are the largest state of a step, and a run spends its
            // time waiting for its model, whose state is small.
            Box::pin(self.tools(&ctx, message, &stacks.tools)).await
        }
    }

    /// Phase "stop": the model answered without tool calls; the step stack (Stop hooks)
    /// decides whether the run is finished or goes on with feedback.
    async fn stop(&mut self, ctx: &RunContext) -> Result<Option<Outcome>, Error> {
        if self.inner.step.is_none() {
            return Ok(Some(Outcome::Finished));
        }
        let message = self.history.last_shared().expect("the final answer");
        let end = StepEnd::new(ctx.clone(), message, Arc::default());
        match self.step_control(end, ctx).await {
            Ok(StepControl::Resume { feedback }) => {
                self.history.push(Message::user(feedback));
                self.save().await?;
                Ok(None)
            }
            Ok(StepControl::End { reason }) => Ok(Some(Outcome::Blocked { reason })),
            Ok(_) => Ok(Some(Outcome::Finished)),
            Err(outcome) => Ok(Some(outcome)),
        }
    }

    /// Phase "tools": the step's tool calls, concurrently, results in call order; then the
    /// step's reminders, PostToolBatch and step hooks, and the save of the whole step.
    async fn tools(
        &mut self,
        ctx: &RunContext,
        message: Message,
        tools: &BoxToolService,
    ) -> Result<Option<Outcome>, Error> {
        self.history.push(message);
        // The calls are read from the history's message (shared, not copied).
        let message = self.history.last_shared().expect("just pushed");
        // In the store before any call runs (a crashed run is resumed from it, see
        // `store::journal`); in the transcript before PreToolUse hooks read it.
        self.save().await?;
        let limit = self.inner.max_concurrent_tools;
        let calls = &message.tool_calls;
        if self.inner.hooks.is_some() {
            ctx.with_data(|d| d.insert(StepCalls(calls.len())));
        }
        let journal = self.journal();
        let (done, cancelled) = call_tools(tools, calls, ctx, limit, journal).await;
        drop(message);
        self.after_tools(ctx, done, cancelled).await
    }

    /// The store's journal, for a run that is saved.
    fn journal(&self) -> Option<&'a dyn crate::store::ToolJournal> {
        let inner: &'a Inner = self.inner;
        if self.persist {
            inner.store.journal()
        } else {
            None
        }
    }

    /// The end of phase "tools", once the calls are done: their results into the history,
    /// then reminders, PostToolBatch and step hooks, and the save of the whole step.
    async fn after_tools(
        &mut self,
        ctx: &RunContext,
        done: CallResults,
        cancelled: bool,
    ) -> Result<Option<Outcome>, Error> {
        let batch = match self.settle_batch(ctx, done, cancelled) {
            Ok(batch) => batch,
            Err(outcome) => return Ok(Some(outcome)),
        };
        // The step stack: after the whole batch resolved, before the next model call. Boxed:
        // not part of every step's future.
        if let Some((message, batch)) = batch
            && let Some(outcome) = Box::pin(self.end_step(message, batch, ctx)).await
        {
            return Ok(Some(outcome));
        }
        self.save().await?;
        Ok(None)
    }

    /// The results of the step's calls into the history, in call order, with the step's
    /// reminders; `Err` if the step ends the run (cancelled, aborted, deferred), else the batch
    /// for PostToolBatch hooks if any would run.
    fn settle_batch(
        &mut self,
        ctx: &RunContext,
        done: CallResults,
        cancelled: bool,
    ) -> Result<Option<(Arc<Message>, super::ToolBatch)>, Outcome> {
        // Shared, not copied: the history grows below while the calls are read.
        let message = self.history.last_shared().expect("assistant message");
        let calls = &message.tool_calls;
        let mut abort = None;
        let mut deferred = None;
        let mut pending = Vec::new();
        let outputs = done.into_iter().zip(calls).filter_map(|(done, call)| {
            let settled = match done {
                Some(Done::Settled(settled)) => settled,
                Some(Done::Raw(result)) => settle(call, result),
                // Cancelled before it finished: the model must still see an answer to
                // every call it made.
                None => Settled {
                    output: ToolOutput::error(
                        call.id.clone(),
                        "tool call cancelled: the run was cancelled",
                    ),
                    abort: None,
                    deferred: None,
                    pending: None,
                },
            };
            if abort.is_none() {
                abort = settled.abort;
            }
            deferred = deferred.take().or(settled.deferred);
            // A call waiting for a decision has no output yet.
            if let Some(p) = settled.pending {
                pending.push(*p);
                return None;
            }
            Some(settled.output)
        });
        // Into the history as they are settled, without a list of their own unless the step
        // stack is to see them.
        let batch = if self.inner.step.is_some() {
            let outputs: Vec<ToolOutput> = outputs.collect();
            self.history
                .extend(outputs.iter().cloned().map(Message::from));
            let batch = super::ToolBatch {
                calls: calls.clone(),
                outputs,
            };
            Some((Arc::clone(&message), batch))
        } else {
            self.history.extend(outputs.map(Message::from));
            None
        };
        drop(message);
        // Saved with the thread however the step ends: answered later, or denied by the
        // next prompt.
        let interrupted = !pending.is_empty();
        self.pending.extend(pending);
        if cancelled {
            return Err(Outcome::Cancelled);
        }
        let reminders = self.ctx.take_reminders();
        if !reminders.is_empty() {
            self.history.push(Message::hook_context(&reminders));
            let step = ctx.step();
            ctx.emit_with(|| AgentEvent::Reminders { step, reminders });
        }
        if let Some(err) = abort {
            let error = abort_reason(&err);
            self.error = Some(err);
            return Err(Outcome::Aborted { error });
        }
        if interrupted {
            let pending = self.pending.clone();
            return Err(Outcome::Interrupted { pending });
        }
        if let Some(ToolCall {
            id,
            name,
            arguments,
        }) = deferred
        {
            let input = arguments;
            return Err(Outcome::Deferred { id, name, input });
        }
        Ok(batch)
    }

    /// The step stack at the end of a step with tool calls: its contexts join the history;
    /// `Some` if it ends the run.
    async fn end_step(
        &mut self,
        message: Arc<Message>,
        batch: super::ToolBatch,
        ctx: &RunContext,
    ) -> Option<Outcome> {
        let end = StepEnd::new(ctx.clone(), message, Arc::new(batch));
        let context = match self.step_control(end, ctx).await {
            Ok(StepControl::Proceed { context }) => context,
            Ok(StepControl::Resume { feedback }) => vec![feedback],
            Ok(StepControl::End { reason }) => {
                self.history.push(Message::hook_context([&reason]));
                return Some(Outcome::Blocked { reason });
            }
            Err(outcome) => return Some(outcome),
        };
        if !context.is_empty() {
            self.history.push(Message::hook_context(&context));
        }
        None
    }

    /// Calls the step stack (there is one) with `end`; `Err` with the run's outcome if it
    /// failed or the run was cancelled.
    async fn step_control(
        &mut self,
        end: StepEnd,
        ctx: &RunContext,
    ) -> Result<StepControl, Outcome> {
        let stack = self.inner.step.clone().expect("called with a step stack");
        match or_cancel(ctx, stack.oneshot(end)).await {
            None => Err(Outcome::Cancelled),
            Some(Ok(control)) => Ok(control),
            Some(Err(err)) => {
                let err = RunError::from(err);
                let error = abort_reason(&err);
                self.error = Some(err);
                Err(Outcome::Aborted { error })
            }
        }
    }

    /// Applies a compaction a model layer reported (the hooks on it ran in the model stack).
    fn compacted(&mut self, c: crate::context::Compaction, ctx: &RunContext) {
        self.apply_compaction(c, ctx.step());
    }

    /// The model named by the agent's settings.
    fn model_name(&self) -> Option<String> {
        self.inner.settings.model.as_deref().map(str::to_owned)
    }

    /// Whether the compaction was applied.
    fn apply_compaction(&mut self, c: crate::context::Compaction, step: u32) -> bool {
        let range = c.range.clone();
        if range.start > range.end || !self.history.shares_range(&c.source, range.clone()) {
            tracing::warn!(
                ?range,
                "compaction skipped: the history changed since it was computed"
            );
            return false;
        }
        let (replaced, replacement) = (range.len(), c.replacement.len());
        if self.transcribed >= range.end {
            self.transcribed = self.transcribed - range.len() + replacement;
        }
        self.history.splice(range, c.replacement);
        self.ctx.emit_with(|| AgentEvent::Compacted {
            step,
            replaced,
            replacement,
        });
        true
    }

    /// Phase "approved calls" of an answer to an interrupted run: the calls a person approved
    /// (or edited) run, concurrently, through the tool stack, their asks settled; each output
    /// replaces its placeholder; the thread is saved. A recovered run finishes them by the
    /// journal's rules (a call recorded finished is replayed, one in doubt is run again only if
    /// idempotent). `Some(outcome)` ends the run.
    async fn approved_calls(&mut self, stacks: &Stacks) -> Result<Option<Outcome>, Error> {
        if self.approved.is_empty() {
            return Ok(None);
        }
        let calls: Vec<ToolCall> = self.approved.iter().map(PendingCall::call).collect();
        let ctx = self.ctx.with_step(0);
        let ids = calls.iter().map(|c| c.id.clone()).collect();
        ctx.with_data(|d| {
            d.insert(interrupt::ApprovedCalls(ids));
            d.insert(StepCalls(calls.len()));
        });
        let (done, cancelled) = self.finish_calls(&ctx, &calls, stacks).await?;
        ctx.with_data(|d| d.remove::<interrupt::ApprovedCalls>());
        let mut abort = None;
        let mut outputs = Vec::with_capacity(calls.len());
        for (call, done) in calls.iter().zip(done) {
            let settled = match done {
                Some(Done::Settled(settled)) => settled,
                Some(Done::Raw(result)) => settle(call, result),
                None => settle(
                    call,
                    Err("tool call cancelled: the run was cancelled".into()),
                ),
            };
            abort = abort.or(settled.abort);
            let message = Message::from(settled.output);
            outputs.push(message.clone());
            interrupt::replace_placeholder(&mut self.history, message);
        }
        self.approved.clear();
        if let Some(transcript) = self.ctx.transcript() {
            transcript.append(outputs.iter());
        }
        self.save().await?;
        if cancelled {
            return Ok(Some(Outcome::Cancelled));
        }
        Ok(abort.map(|err| {
            let error = abort_reason(&err);
            self.error = Some(err);
            Outcome::Aborted { error }
        }))
    }

    async fn save(&mut self) -> Result<(), Error> {
        self.transcribe();
        if !self.persist {
            return Ok(());
        }
        // The thread id is the run's own copy, lent to every save (an empty id allocates
        // nothing), not a new copy per save.
        let mut thread = self
            .ctx
            .with_data(|data| Thread::of_run("", self.history.clone(), data));
        thread.id = std::mem::take(&mut self.thread_id);
        thread.pending.clone_from(&self.pending);
        thread.approved.clone_from(&self.approved);
        let saved = self.inner.store.save(&thread).await.map_err(Error::store);
        self.thread_id = thread.id;
        saved
    }

    /// Appends the messages added since the last call to the session's JSONL transcript
    /// (synchronously, whole lines: see [`Transcript`](super::Transcript)).
    fn transcribe(&mut self) {
        let Some(transcript) = self.ctx.transcript() else {
            return;
        };
        if self.transcribed >= self.history.len() {
            return;
        }
        transcript.append(self.history.iter().skip(self.transcribed));
        self.transcribed = self.history.len();
    }

    async fn finish(mut self, outcome: Outcome) -> Result<AgentResponse, Error> {
        self.save().await?;
        let text = self
            .history
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| m.text().into_owned())
            .unwrap_or_default();
        let response = AgentResponse {
            thread_id: self.ctx.session_id().to_owned(),
            run_id: self.ctx.run_id().to_owned(),
            outcome,
            text,
            messages: self.history,
            steps: self.steps,
            usage: self.usage,
            error: self.error,
        };
        if let Some(hooks) = &self.inner.hooks {
            hooks.session_end(&response, &self.ctx);
        }
        self.ctx.emit_with(|| AgentEvent::AgentStop {
            outcome: response.outcome.clone(),
            text: response.text.clone(),
            steps: response.steps,
            usage: response.usage,
        });
        self.guard.disarm();
        Ok(response)
    }
}

/// A response's message and usage; the rest (its metadata) is dropped here.
fn message_and_usage(
    response: crate::model::ModelResponse,
) -> (Message, Option<Usage>, Option<Ending>, ::http::Extensions) {
    let ending = match response.stop_reason {
        StopReason::PauseTurn => Some(Ending::Pause),
        StopReason::Refusal => Some(Ending::Refusal(
            response
                .meta
                .refusal
                .unwrap_or_else(|| response.message.text().into_owned()),
        )),
        _ => None,
    };
    (
        response.message,
        response.usage,
        ending,
        response.extensions,
    )
}

/// A stop reason the loop acts on.
enum Ending {
    /// `pause_turn`: call the model again with the paused answer.
    Pause,
    /// The model refused, saying this.
    Refusal(String),
}

/// Runs `fut` unless the run is cancelled first.
///
/// The work is polled before the cancellation, so a finished result wins a tie (the next
/// step's check catches the cancellation), and a run that is never cancelled does not pay for
/// a cancellation waiter when the work is ready at once: the waiter is made (boxed, so it does
/// not add to the size of every phase's future) only when the work is pending. A named future
/// rather than an `async fn`, which would hold `fut` twice (its argument and its pinned copy).
fn or_cancel<F: Future>(ctx: &RunContext, fut: F) -> OrCancel<'_, F> {
    OrCancel {
        fut,
        ctx,
        cancelled: None,
        started: false,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`or_cancel`].
    struct OrCancel<'a, F> {
        #[pin]
        fut: F,
        ctx: &'a RunContext,
        cancelled: Option<Pin<Box<WaitForCancellationFuture<'a>>>>,
        started: bool,
    }
}

impl<F: Future> Future for OrCancel<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if !std::mem::replace(this.started, true) && this.ctx.is_cancelled() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        cancelled_waiter(this.cancelled, this.ctx)
            .poll(cx)
            .map(|()| None)
    }
}

/// The run's cancellation waiter, made on first use.
fn cancelled_waiter<'a, 'b>(
    slot: &'a mut Option<Pin<Box<WaitForCancellationFuture<'b>>>>,
    ctx: &'b RunContext,
) -> Pin<&'a mut WaitForCancellationFuture<'b>> {
    slot.get_or_insert_with(|| Box::pin(ctx.cancellation().cancelled()))
        .as_mut()
}

/// A tool call's output as the model sees it, and the error if it aborted the run.
struct Settled {
    output: ToolOutput,
    abort: Option<RunError>,
    /// A PreToolUse hook deferred the call.
    deferred: Option<ToolCall>,
    /// The call waits for a person's decision (the deferring approval policy).
    /// Boxed: rare, and `Settled` is in every call's future.
    pending: Option<Box<PendingCall>>,
}

enum Done {
    /// Settled inside the call's future (when events are listened to).
    Settled(Settled),
    /// Left to settle after the batch, against the assistant message's calls.
    Raw(Result<ToolOutput, BoxError>),
}

fn settle(call: &ToolCall, result: Result<ToolOutput, BoxError>) -> Settled {
    if let Err(err) = &result
        && let Some(p) = interrupt::PendingApproval::find(&**err)
    {
        return Settled {
            output: ToolOutput::error(call.id.clone(), format!("waits for approval: {}", p.reason)),
            abort: None,
            deferred: None,
            pending: Some(Box::new(PendingCall::new(p.call.clone(), p.reason.clone()))),
        };
    }
    match result {
        Ok(mut output) => {
            if output.call_id != call.id {
                output.call_id.clone_from(&call.id);
            }
            Settled {
                output,
                abort: None,
                deferred: None,
                pending: None,
            }
        }
        Err(err) => match Abort::find(&*err) {
            Some(abort) => Settled {
                output: ToolOutput::error(call.id.clone(), format!("aborted: {}", abort.reason())),
                abort: Some(RunError::from(err)),
                deferred: None,
                pending: None,
            },
            None => match crate::error::Deferred::find(&*err) {
                Some(_) => Settled {
                    output: ToolOutput::error(
                        call.id.clone(),
                        "deferred: the call was not run; it is to be decided later",
                    ),
                    abort: None,
                    // The arguments the model generated, not a hook's rewrite.
                    deferred: Some(call.clone()),
                    pending: None,
                },

                None => Settled {
                    output: ToolOutput::error(
                        call.id.clone(),
                        format!("tool `{}` failed: {}", call.name, error_chain(&*err)),
                    ),
                    abort: None,
                    deferred: None,
                    pending: None,
                },
            },
        },
    }
}

/// What [`call_tools`] returns: each call's result in call order (`None` for a call cut off
/// by the cancellation). Inline for one call, the common step: no allocation.
type CallResults = SmallVec<[Option<Done>; 1]>;

/// Runs the calls concurrently (at most `limit` at a time), until all are done or the run is
/// cancelled. Returns each call's result in call order (`None` for a call cut off by the
/// cancellation) and whether the run was cancelled.
///
/// The calls are borrowed (from the history's assistant message): each is copied once, into
/// its [`ToolRequest`]. A single call is polled directly, without a [`FuturesUnordered`] (two
/// allocations and one per call).
async fn call_tools(
    tools: &BoxToolService,
    calls: &[ToolCall],
    ctx: &RunContext,
    limit: Option<usize>,
    journal: Option<&dyn crate::store::ToolJournal>,
) -> (CallResults, bool) {
    let n = calls.len();
    let one = |i: usize| {
        let call = &calls[i];
        let svc = tools.clone();
        let ctx = ctx.clone();
        let request = ToolRequest::new(call.clone(), ctx.clone());
        async move {
            let listening = ctx.is_listening();
            if !listening && journal.is_none() {
                return (i, Done::Raw(svc.oneshot(request).await));
            }
            let step = ctx.step();
            let started = tokio::time::Instant::now();
            if listening {
                ctx.emit(AgentEvent::ToolCallStart {
                    step,
                    call: call.clone(),
                });
            }
            let result = svc.oneshot(request).await;
            let settled = settle(call, result);
            if let Some(journal) = journal {
                recover::record_finished(journal, &ctx, call, &settled).await;
            }
            if !listening {
                return (i, Done::Settled(settled));
            }
            ctx.emit(AgentEvent::ToolCallEnd {
                step,
                name: call.name.clone(),
                output: settled.output.clone(),
                duration_ms: started.elapsed().as_secs_f64() * 1e3,
            });
            (i, Done::Settled(settled))
        }
    };
    // Finished calls first: a call that finished keeps its result. The cancellation waiter is
    // made only if a call is pending (see `or_cancel`).
    let mut cancelled = None;
    if n == 1 {
        let mut fut = std::pin::pin!(one(0));
        let done = std::future::poll_fn(|cx| {
            if let Poll::Ready((_, done)) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(done));
            }
            cancelled_waiter(&mut cancelled, ctx)
                .poll(cx)
                .map(|()| None)
        })
        .await;
        let was_cancelled = done.is_none();
        return (smallvec::smallvec![done], was_cancelled);
    }
    let mut futures = (0..n).map(one);
    let mut results: CallResults = (0..n).map(|_| None).collect();
    let mut running = FuturesUnordered::new();
    running.extend(futures.by_ref().take(limit.unwrap_or(usize::MAX)));
    let was_cancelled = std::future::poll_fn(|cx| {
        loop {
            match running.poll_next_unpin(cx) {
                Poll::Ready(Some((i, done))) => {
                    results[i] = Some(done);
                    running.extend(futures.next());
                }
                Poll::Ready(None) => return Poll::Ready(false),
                Poll::Pending => break,
            }
        }
        cancelled_waiter(&mut cancelled, ctx)
            .poll(cx)
            .map(|()| true)
    })
    .await;
    (results, was_cancelled)
}
