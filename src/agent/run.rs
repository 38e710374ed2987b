//! The agent loop.

use std::{future::Future, sync::Arc};

use futures_util::{StreamExt, stream::FuturesUnordered};
use tokio::sync::mpsc;
use tower::{Service, ServiceExt};

use super::{AgentEvent, AgentRequest, AgentResponse, Inner, Outcome, SetupContext};
use crate::{
    context::{RunContext, RunState},
    error::{Abort, BoxError, Error, error_chain},
    layers::hooks::{HookSetInner, StopInput},
    message::{Message, Messages, Role, ToolCall, ToolOutput, Usage},
    model::{BoxModelService, ModelRequest},
    store::Thread,
    tool::{BoxToolService, ToolRequest},
};

pub(super) async fn run(
    inner: Arc<Inner>,
    mut req: AgentRequest,
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
}

impl StopGuard {
    /// Sends `AgentStop` with `outcome` (at most once).
    fn stop(&mut self, outcome: Outcome) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(AgentEvent::AgentStop {
                outcome,
                text: String::new(),
                steps: self.steps,
                usage: self.usage,
            });
        }
    }

    /// The run sent its own `AgentStop`.
    fn disarm(&mut self) {
        self.tx = None;
    }
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        self.stop(Outcome::Cancelled);
    }
}

async fn run_inner(
    inner: Arc<Inner>,
    req: AgentRequest,
    guard: &mut StopGuard,
) -> Result<AgentResponse, Error> {
    let AgentRequest {
        prompt,
        thread_id,
        cancellation,
        cwd,
        events,
        extensions,
    } = req;

    // 1. Load or create the thread.
    let persist = thread_id.is_some();
    let (mut history, state) = match &thread_id {
        Some(id) => match inner.store.load(id).await.map_err(Error::store)? {
            Some(t) => (t.messages, RunState::new(t.todos, t.files)),
            None => (Messages::new(), RunState::default()),
        },
        None => (Messages::new(), RunState::default()),
    };
    let mut builder = RunContext::builder()
        .state(state)
        .extensions(extensions)
        .cancellation(cancellation.unwrap_or_default());
    if let Some(id) = thread_id {
        builder = builder.session_id(id);
    }
    if let Some(cwd) = cwd.or_else(|| inner.cwd.clone()) {
        builder = builder.cwd(cwd);
    }
    if let Some(tx) = events {
        builder = builder.events(tx);
    }
    let ctx = builder.build();
    let ctx = match &inner.transcripts {
        Some(dir) => ctx.with_transcript(dir),
        None => ctx,
    };
    ctx.emit_with(|| AgentEvent::AgentStart {
        thread_id: ctx.session_id().to_owned(),
        run_id: ctx.run_id().to_owned(),
    });

    if inner.shutdown.is_cancelled() {
        // Shutting down: the run never starts, the thread is left as it was.
        return Run::unsaved(&inner, ctx, history, guard)
            .finish(Outcome::Cancelled)
            .await;
    }
    let hooks = inner.hooks.as_deref();
    let mut start_context = Vec::new();
    let mut prompt_context = Vec::new();
    let mut prompt = prompt;
    if let Some(hooks) = hooks {
        // Subagents run by this run's tools find the SubagentStop hooks here.
        let set = Arc::clone(inner.hooks.as_ref().expect("hooks"));
        if !set.notification.is_empty() {
            let observers = Arc::clone(&set);
            ctx.set_notify(Arc::new(move |message, ctx| {
                observers.notification.iter().for_each(|f| f(message, ctx));
            }));
        }
        ctx.state().extensions.insert(ParentHooks(set));
        let started = match hooks.session_start(&ctx).await {
            Ok(contexts) => {
                start_context = contexts;
                hooks.user_prompt(prompt, &ctx).await
            }
            Err(reason) => Err(reason),
        };
        match started {
            Ok((rewritten, contexts)) => {
                prompt = rewritten;
                prompt_context = contexts;
            }
            Err(reason) => {
                // Blocked (SessionStart or UserPromptSubmit): the prompt never enters the
                // thread, nothing is saved.
                return Run::unsaved(&inner, ctx, history, guard)
                    .finish(Outcome::Blocked { reason })
                    .await;
            }
        }
    }

    // What the thread held already is in the transcript from its earlier runs.
    let transcribed = history.len();
    if let (true, Some(system)) = (history.is_empty(), &inner.system_prompt) {
        history.push(Message::system(system.clone()));
    }
    history.push(Message::user(prompt));
    if !prompt_context.is_empty() {
        history.push(Message::user(reminder_message(&prompt_context)));
    }

    let mut run = Run {
        inner: &inner,
        guard,
        ctx,
        history,
        usage: Usage::default(),
        steps: 0,
        persist,
        transcribed,
    };
    // The prompt is saved before anything can cut the run off: a run dropped at any point
    // keeps it, and every whole step.
    run.save().await?;
    let mut stop_continues = 0u32;

    // 2. Setup stages, once, in order.
    let (router, setup_context) = if inner.setups.is_empty() {
        (inner.tools.clone(), start_context)
    } else {
        let prompt = run
            .history
            .iter()
            .rev()
            .find(|m| m.role == Role::User && !m.text().starts_with("<system-hook>"))
            .map(|m| m.text())
            .unwrap_or_default();
        let cx = SetupContext::new(run.ctx.clone(), &prompt, inner.tools.clone());
        let setups = async {
            for stage in &inner.setups {
                stage.setup(cx.clone()).await?;
            }
            Ok::<_, BoxError>(())
        };
        match or_cancel(&run.ctx, setups).await {
            None => return run.finish(Outcome::Cancelled).await,
            Some(result) => result.map_err(Error::setup)?,
        }
        let (router, _added, context) = cx.finish();
        start_context.extend(context);
        (router, start_context)
    };
    let setup_context = (!setup_context.is_empty()).then(|| setup_context.join("\n\n"));
    let specs = Arc::clone(router.specs());
    let tools = (inner.tool_stack)(router);
    let mut model = inner.model.clone();

    // 3. The steps.
    for step in 0..inner.max_steps {
        if run.ctx.is_cancelled() || inner.shutdown.is_cancelled() {
            return run.finish(Outcome::Cancelled).await;
        }
        let ctx = run.ctx.with_step(step);
        run.steps = step + 1;
        run.guard.steps = run.steps;
        ctx.emit_with(|| AgentEvent::StepStart { step });
        if let Some(hooks) = hooks {
            hooks.before_step.iter().for_each(|f| f(step, &ctx));
        }

        // a. prepare stages
        let mut request = ModelRequest {
            messages: run.history.clone(),
            tools: Arc::clone(&specs),
            settings: inner.settings.clone(),
            ctx: ctx.clone(),
        };
        if let Some(text) = &setup_context {
            request.append_system(text);
        }
        for stage in &inner.prepares {
            if let Err(err) = stage.prepare(&mut request) {
                let error = format!("prepare stage failed: {}", error_chain(&*err));
                return run.finish(Outcome::Aborted { error }).await;
            }
        }

        // b. the model stack
        let response = match or_cancel(&ctx, call_model(&mut model, request)).await {
            None => return run.finish(Outcome::Cancelled).await,
            Some(Ok(response)) => response,
            Some(Err(err)) => {
                let error = match Abort::find(&*err) {
                    Some(abort) => abort.reason().to_owned(),
                    None => format!("model call failed: {}", error_chain(&*err)),
                };
                return run.finish(Outcome::Aborted { error }).await;
            }
        };
        if let Some(usage) = response.usage {
            run.usage += usage;
            run.guard.usage = run.usage;
        }
        if let Some(compaction) = ctx.take_compaction() {
            run.apply_compaction(compaction, step);
        }
        let mut message = response.message;
        message.role = Role::Assistant;
        // Ids are unique within the thread: the history only grows.
        let position = run.history.len();
        for (i, call) in message.tool_calls.iter_mut().enumerate() {
            if call.id.is_empty() {
                call.id = format!("call_{position}_{i}");
            }
        }
        ctx.emit_with(|| AgentEvent::ModelResponse {
            step,
            message: message.clone(),
            usage: response.usage,
        });

        // c. no tool calls: stop hooks decide whether the run is finished
        if message.tool_calls.is_empty() {
            run.history.push(message);
            if let Some(hooks) = hooks {
                hooks.after_step.iter().for_each(|f| f(step, &ctx));
            }
            let Some(hooks) = hooks.filter(|h| !h.stop.is_empty()) else {
                return run.finish(Outcome::Finished).await;
            };
            let last = run.history.last().map(|m| m.text().into_owned());
            let input = StopInput {
                last_assistant_message: last.unwrap_or_default(),
                stop_hook_active: stop_continues > 0,
                agent_name: None,
            };
            let Some(feedback) = hooks.stop(None, input, &ctx).await else {
                return run.finish(Outcome::Finished).await;
            };
            if stop_continues >= hooks.stop_cap {
                let message = format!(
                    "stop hooks asked to continue {} times in a row; finishing",
                    stop_continues + 1
                );
                ctx.warn(message);
                return run.finish(Outcome::Finished).await;
            }
            stop_continues += 1;
            run.history.push(Message::user(feedback));
            run.save().await?;
            continue;
        }

        // d. tool calls, concurrently, results in call order
        let calls = message.tool_calls.clone();
        run.history.push(message);
        let (done, cancelled) = call_tools(&tools, calls, &ctx, inner.max_concurrent_tools).await;
        let calls = &run.history.last().expect("assistant message").tool_calls;
        let mut abort = None;
        let outputs: Vec<ToolOutput> = done
            .into_iter()
            .zip(calls)
            .map(|(done, call)| {
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
                    },
                };
                if abort.is_none() {
                    abort = settled.abort;
                }
                settled.output
            })
            .collect();
        run.history.extend(outputs.into_iter().map(Message::from));
        if cancelled {
            return run.finish(Outcome::Cancelled).await;
        }

        let reminders = run.ctx.take_reminders();
        if !reminders.is_empty() {
            run.history
                .push(Message::user(reminder_message(&reminders)));
            ctx.emit_with(|| AgentEvent::Reminders { step, reminders });
        }

        if let Some(error) = abort {
            return run.finish(Outcome::Aborted { error }).await;
        }
        if let Some(hooks) = hooks {
            hooks.after_step.iter().for_each(|f| f(step, &ctx));
            if !hooks.should_continue.iter().all(|f| f(step, &ctx)) {
                let reason = "a should_continue hook ended the run".to_owned();
                return run.finish(Outcome::Blocked { reason }).await;
            }
        }
        // e. persist the step
        run.save().await?;
    }
    run.finish(Outcome::MaxSteps).await
}

/// The hooks of the run that runs a tool, for subagents' SubagentStop hooks.
pub(crate) struct ParentHooks(pub(crate) Arc<HookSetInner>);

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
}

impl<'a> Run<'a> {
    /// A run that ends before it starts: it saves and transcribes nothing.
    fn unsaved(
        inner: &'a Inner,
        ctx: RunContext,
        history: Messages,
        guard: &'a mut StopGuard,
    ) -> Self {
        Run {
            inner,
            guard,
            ctx,
            history,
            usage: Usage::default(),
            steps: 0,
            persist: false,
            transcribed: usize::MAX,
        }
    }

    fn apply_compaction(&mut self, c: crate::context::Compaction, step: u32) {
        let range = c.range.clone();
        if range.start > range.end || !self.history.shares_range(&c.source, range.clone()) {
            tracing::warn!(
                ?range,
                "compaction skipped: the history changed since it was computed"
            );
            return;
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
    }

    async fn save(&mut self) -> Result<(), Error> {
        self.transcribe().await;
        if !self.persist {
            return Ok(());
        }
        let thread = {
            let state = self.ctx.state();
            Thread {
                id: self.ctx.session_id().to_owned(),
                messages: self.history.clone(),
                todos: state.todos.clone(),
                files: state.files.clone(),
            }
        };
        self.inner.store.save(&thread).await.map_err(Error::store)
    }

    /// Appends the messages added since the last call to the session's JSONL transcript.
    async fn transcribe(&mut self) {
        let Some(path) = self.ctx.transcript_path() else {
            return;
        };
        if self.transcribed >= self.history.len() {
            return;
        }
        let mut lines = String::new();
        for message in self.history.iter().skip(self.transcribed) {
            let line = serde_json::json!({
                "type": message.role,
                "session_id": self.ctx.session_id(),
                "run_id": self.ctx.run_id(),
                "timestamp": crate::context::timestamp(),
                "message": message,
            });
            lines.push_str(&line.to_string());
            lines.push('\n');
        }
        self.transcribed = self.history.len();
        if let Err(err) = append(path, lines.as_bytes()).await {
            tracing::warn!(path = %path.display(), error = %err, "could not write the transcript");
        }
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
        };
        if let Some(hooks) = &self.inner.hooks {
            hooks
                .session_end
                .iter()
                .for_each(|f| f(&response, &self.ctx));
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

async fn append(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// Runs `fut` unless the run is cancelled first.
///
/// The work is polled before the cancellation, so a finished result wins a tie (the next
/// step's check catches the cancellation), and a run that is never cancelled does not pay for
/// registering a cancellation waiter when the work is ready at once.
async fn or_cancel<F: Future>(ctx: &RunContext, fut: F) -> Option<F::Output> {
    if ctx.is_cancelled() {
        return None;
    }
    tokio::select! {
        biased;
        out = fut => Some(out),
        _ = ctx.cancellation().cancelled() => None,
    }
}

async fn call_model(
    model: &mut BoxModelService,
    request: ModelRequest,
) -> Result<crate::model::ModelResponse, BoxError> {
    model.ready().await?.call(request).await
}

/// A tool call's output as the model sees it, and the abort reason if it aborted the run.
struct Settled {
    output: ToolOutput,
    abort: Option<String>,
}

enum Done {
    /// Settled inside the call's future (when events are listened to).
    Settled(Settled),
    /// Left to settle after the batch, against the assistant message's calls.
    Raw(Result<ToolOutput, BoxError>),
}

fn settle(call: &ToolCall, result: Result<ToolOutput, BoxError>) -> Settled {
    match result {
        Ok(mut output) => {
            if output.call_id != call.id {
                output.call_id.clone_from(&call.id);
            }
            Settled {
                output,
                abort: None,
            }
        }
        Err(err) => match Abort::find(&*err) {
            Some(abort) => Settled {
                output: ToolOutput::error(call.id.clone(), format!("aborted: {}", abort.reason())),
                abort: Some(abort.reason().to_owned()),
            },
            None => Settled {
                output: ToolOutput::error(
                    call.id.clone(),
                    format!("tool `{}` failed: {}", call.name, error_chain(&*err)),
                ),
                abort: None,
            },
        },
    }
}

/// Runs the calls concurrently (at most `limit` at a time), until all are done or the run is
/// cancelled. Returns each call's result in call order (`None` for a call cut off by the
/// cancellation) and whether the run was cancelled.
async fn call_tools(
    tools: &BoxToolService,
    calls: Vec<ToolCall>,
    ctx: &RunContext,
    limit: Option<usize>,
) -> (Vec<Option<Done>>, bool) {
    let n = calls.len();
    let mut futures = calls.into_iter().enumerate().map(|(i, call)| {
        let svc = tools.clone();
        let ctx = ctx.clone();
        async move {
            if !ctx.is_listening() {
                return (i, Done::Raw(svc.oneshot(ToolRequest::new(call, ctx)).await));
            }
            let step = ctx.step();
            let started = tokio::time::Instant::now();
            let meta = call.clone();
            ctx.emit(AgentEvent::ToolCallStart {
                step,
                call: call.clone(),
            });
            let result = svc.oneshot(ToolRequest::new(call, ctx.clone())).await;
            let settled = settle(&meta, result);
            ctx.emit(AgentEvent::ToolCallEnd {
                step,
                name: meta.name,
                output: settled.output.clone(),
                duration_ms: started.elapsed().as_secs_f64() * 1e3,
            });
            (i, Done::Settled(settled))
        }
    });
    let mut results: Vec<Option<Done>> = (0..n).map(|_| None).collect();
    let cancelled = ctx.cancellation().cancelled();
    tokio::pin!(cancelled);
    let mut running = FuturesUnordered::new();
    running.extend(futures.by_ref().take(limit.unwrap_or(usize::MAX)));
    loop {
        tokio::select! {
            biased;
            // Finished calls first: a call that finished keeps its result.
            next = running.next() => match next {
                Some((i, done)) => {
                    results[i] = Some(done);
                    running.extend(futures.next());
                }
                None => return (results, false),
            },
            _ = &mut cancelled => return (results, true),
        }
    }
}

/// The reminders of a step as one message: each in a `<system-hook>` block, blank line between.
fn reminder_message(reminders: &[String]) -> String {
    let mut text = String::new();
    for (i, r) in reminders.iter().enumerate() {
        if i > 0 {
            text.push_str("\n\n");
        }
        text.push_str("<system-hook>\n");
        text.push_str(r);
        text.push_str("\n</system-hook>");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reminder_blocks() {
        assert_eq!(
            reminder_message(&["a".into(), "b".into()]),
            "<system-hook>\na\n</system-hook>\n\n<system-hook>\nb\n</system-hook>"
        );
    }
}
