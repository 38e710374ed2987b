//! The agent loop.

use std::{path::PathBuf, sync::Arc};

use tokio::sync::mpsc;
use tower::ServiceExt;

use super::{
    AgentEvent, AgentRequest, AgentResponse, Inner, Outcome, PendingCall, SessionStartWork,
    SetupContext,
    hooks::{LoopHooks, RunHooks, SessionSource},
    interrupt,
    start::{RunStart, SetupTrigger},
};
use crate::{
    context::{RunContext, RunContextBuilder, transcript},
    error::{Abort, BoxError, Error},
    message::{Message, Messages, Role, Usage},
    store::Thread,
    tool::BoxToolService,
};

mod eager;
mod recover;
mod step;
mod tools;

use tools::or_cancel;

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
        last_usage: Usage::default(),
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
    /// Tokens of the last model answer that reported them.
    last_usage: Usage,
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
                last_usage: self.last_usage,
                error: None,
                warnings: ctx.warnings(),
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
    /// The run's own clone of the agent's step stack, made at its first use (one clone per
    /// run, not per step).
    step_stack: Option<super::step::BoxStepService>,
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
/// directory, and the agent's reasoning effort in its data (for command hooks' `effort`). The transcript file exists when this returns, before any hook can be given its
/// path.
pub(super) fn context(
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
    if let Some(effort) = &inner.settings.reasoning_effort {
        ctx.with_data(|d| d.insert(super::RunEffort::new(effort.clone())));
    }
    if let Some(model) = &inner.settings.model {
        ctx.with_data(|d| d.insert(super::RunModel::new(Arc::clone(model))));
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
            setup,
            directories,
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
            .directories(directories)
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
            step_stack: None,
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
        let started = run.start_stack(source, setup, prompt, prompt_context, &history);
        let (prompt, prompt_context) = match started.await {
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
        }
        if !prompt_context.is_empty() {
            history.push(Message::hook_context(&prompt_context));
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

    /// The start stack (SessionStart, UserPromptSubmit hooks) of a run on `history` (the thread
    /// as loaded, for a resumed SessionStart's `context_tokens`): the prompt and contexts it
    /// decided (its system contexts are kept for the system message); `Err(outcome)` if it
    /// refused the run (`Blocked`) or failed (`Aborted`).
    async fn start_stack(
        &mut self,
        source: SessionSource,
        setup: Option<SetupTrigger>,
        prompt: Option<String>,
        contexts: Vec<String>,
        history: &Messages,
    ) -> Result<(Option<String>, Vec<String>), Outcome> {
        if let Some(hooks) = &self.inner.hooks {
            // Subagents and built-in tools of this run find its hooks here.
            self.ctx
                .with_data(|data| data.insert(RunHooks::new(Arc::clone(hooks))));
        }
        if !self.inner.setups.is_empty() {
            // The setup stages' work at the session's start: the hook start layer runs it
            // after SessionStart, else `setup` does.
            let stages = SessionStartWork(Arc::clone(&self.inner.setups));
            self.ctx.with_data(|data| data.insert(stages));
        }
        if let Some(prompt) = &prompt {
            let prompt = super::RunPrompt::new(prompt.as_str());
            self.ctx.with_data(|data| data.insert(prompt));
        }
        let Some(stack) = self.inner.start.clone() else {
            return Ok((prompt, contexts));
        };
        let mut start = RunStart::new(self.ctx.clone(), source, prompt);
        start.model = self.model_name();
        start.setup = setup;
        start.system_context = std::mem::take(&mut self.start_context);
        start.prompt_context = contexts;
        start.history = (source == SessionSource::Resume).then(|| history.clone());
        start.tools = std::sync::Arc::clone(self.inner.tools.specs());
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
                super::stage::session_start_work(&self.ctx).await;
                for stage in inner.setups.iter() {
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
        let checks = router.checks();
        // The journal wraps each tool, innermost: a call is "started" only if it reaches it.
        let router = match self.journal() {
            Some(_) => recover::journaled(&router, &inner.store),
            None => router,
        };
        let mut tools = (inner.tool_stack)(router);
        // The first hook set registered is the outermost.
        for set in inner.tool_hooks.iter().rev() {
            tools = set.wrap_tools(tools);
        }
        // Outermost: every layer finds the checks in the request (see `tool::check`).
        if inner.send_checks && !checks.is_empty() {
            tools = BoxToolService::new(tower::Layer::layer(&checks, tools));
        }
        Ok(Some(Stacks {
            tools,
            specs,
            system_context: (!context.is_empty()).then(|| context.join("\n\n")),
        }))
    }

    async fn save(&mut self) -> Result<(), Error> {
        self.transcribe();
        if !self.persist {
            return Ok(());
        }
        let mut thread = self.thread_of(self.history.clone());
        let saved = self.inner.store.save(&thread).await.map_err(Error::store);
        self.thread_id = std::mem::take(&mut thread.id);
        saved
    }

    /// Saves the thread with `extra` after its history (an answer not whole yet, whose calls
    /// start: see `eager`), in the store only (the transcript gets the whole answer).
    async fn save_with(&mut self, extra: Message) -> Result<(), Error> {
        if !self.persist {
            return Ok(());
        }
        let mut history = self.history.clone();
        history.push(extra);
        let mut thread = self.thread_of(history);
        let saved = self.inner.store.save(&thread).await.map_err(Error::store);
        self.thread_id = std::mem::take(&mut thread.id);
        saved
    }

    /// The thread to save with `history`. The thread id is the run's own copy, lent to the
    /// save (an empty id allocates nothing), not a new copy per save: give it back after.
    fn thread_of(&mut self, history: Messages) -> Thread {
        let mut thread = self.ctx.with_data(|data| Thread::of_run("", history, data));
        thread.id = std::mem::take(&mut self.thread_id);
        thread.pending.clone_from(&self.pending);
        thread.approved.clone_from(&self.approved);
        thread
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
            last_usage: self.guard.last_usage,
            error: self.error,
            warnings: self.ctx.warnings(),
        };
        if let Some(hooks) = &self.inner.hooks {
            hooks.run_end(&response, &self.ctx).await;
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
