//! One step of a run: the model's answer, the step stack's decision, a compaction.

use super::super::{
    AgentEvent, Outcome,
    hooks::StopFailureInput,
    step::{StepControl, StepEnd, StepResults},
};
use super::{
    Run, RunError, Stacks, abort_reason,
    eager::Eager,
    tools::{cancelled_waiter, or_cancel},
};
use crate::{
    context::RunContext,
    error::{Abort, BoxError, Error},
    message::{Message, Role, StopReason, Usage},
    model::{BoxModelService, ModelChunk, ModelRequest, ModelResponse, body::StreamEnded},
};
use futures_util::StreamExt;
use std::{future::Future, sync::Arc, task::Poll};
use tower::{Service, ServiceExt};

/// The model's answer, with the calls eager dispatch started; or how the run ends.
type Answer<'a> = Result<(ModelResponse, Option<Box<Eager<'a>>>), Ended>;

/// How a run ends before its step's answer is whole: an outcome, or a store that cannot save.
pub(super) enum Ended {
    Outcome(Outcome),
    Store(Error),
}

impl From<Outcome> for Ended {
    fn from(outcome: Outcome) -> Self {
        Ended::Outcome(outcome)
    }
}

/// Cancels the calls eager dispatch started for an answer whose whole has no tool call.
async fn cancel_unused(mut eager: Eager<'_>, ctx: &RunContext) {
    let why = "the model's whole answer has no tool call (a layer changed it)";
    if eager.cancel(why).await.1 > 0 {
        ctx.warn(format!(
            "calls started before the answer was whole were cancelled: {why}"
        ));
    }
}

/// Why a stream with eager dispatch ended before its whole answer.
enum Failed {
    Cancelled,
    Stream(BoxError),
    Save(Error),
}

impl<'a> Run<'a> {
    /// The model's answer to the step's request, with the calls eager dispatch started, or
    /// the outcome the run ends with (cancelled, a prepare stage or the model failed). The
    /// request is made once the model is ready and moved into its call at once: a run waiting
    /// for its model holds only the model's future.
    pub(super) async fn answer(
        &mut self,
        ctx: &RunContext,
        stacks: &Stacks,
        model: &mut BoxModelService,
    ) -> Answer<'a> {
        let model = match or_cancel(ctx, model.ready()).await {
            None => return Err(Outcome::Cancelled.into()),
            Some(Ok(model)) => model,
            Some(Err(err)) => return Err(self.model_failed(err, ctx).into()),
        };
        let request = self.model_request(ctx, stacks)?;
        let response = match or_cancel(ctx, model.call(request)).await {
            None => return Err(Outcome::Cancelled.into()),
            Some(Ok(response)) => response,
            Some(Err(err)) => return Err(self.model_failed(err, ctx).into()),
        };
        if !response.is_streaming() {
            return Ok((response, None));
        }
        // Boxed: a step whose answer does not stream keeps a small future.
        if self.inner.eager_tools {
            return Box::pin(self.drain_eager(ctx, response, stacks)).await;
        }
        Box::pin(self.drain(ctx, response)).await
    }

    /// [`answer`](Self::answer)'s stream: the pieces that come out of the model stack go to
    /// the run's events; the whole answer is the stream's last item.
    async fn drain(&mut self, ctx: &RunContext, response: ModelResponse) -> Answer<'a> {
        let step = ctx.step();
        let emit = |delta| ctx.emit_with(|| AgentEvent::ModelDelta { step, delta });
        match or_cancel(ctx, response.collect_with(emit)).await {
            None => Err(Outcome::Cancelled.into()),
            Some(Ok(response)) => Ok((response, None)),
            Some(Err(err)) => Err(self.model_failed(err, ctx).into()),
        }
    }

    /// [`answer`](Self::answer)'s stream with eager dispatch: each call starts as its
    /// arguments complete (the thread saved with it first, for a run on a thread), polled with
    /// the stream. If the stream fails or the run is cancelled, the calls started are
    /// cancelled and the history gets the answer as far as it came (see `eager`).
    async fn drain_eager(
        &mut self,
        ctx: &RunContext,
        mut head: ModelResponse,
        stacks: &Stacks,
    ) -> Answer<'a> {
        let mut body = std::mem::take(&mut head.body);
        let mut eager = Eager::new(stacks.tools.clone(), ctx.clone(), self.journal());
        let mut cancelled = None;
        let step = ctx.step();
        let failed = loop {
            let next = std::future::poll_fn(|cx| {
                eager.poll(cx);
                if let Poll::Ready(item) = body.poll_next_unpin(cx) {
                    return Poll::Ready(Some(item));
                }
                cancelled_waiter(&mut cancelled, ctx)
                    .poll(cx)
                    .map(|()| None)
            })
            .await;
            let item = match next {
                None => break Failed::Cancelled,
                Some(None) => break Failed::Stream(StreamEnded.into()),
                Some(Some(Err(err))) => break Failed::Stream(err),
                Some(Some(Ok(item))) => item,
            };
            match item {
                ModelChunk::Delta(delta) => {
                    let start = eager.observe(&delta);
                    ctx.emit_with(|| AgentEvent::ModelDelta { step, delta });
                    if let Some(call) = start {
                        // In the store before it runs, as every call (`store::journal`).
                        let mut partial = eager.partial_message();
                        partial.tool_calls.push(call.clone());
                        if let Err(err) = self.save_with(partial).await {
                            break Failed::Save(err);
                        }
                        eager.start(call);
                    }
                }
                ModelChunk::Done(done) => {
                    let mut done = *done;
                    done.extensions.extend(std::mem::take(&mut head.extensions));
                    return Ok((done, Some(Box::new(eager))));
                }
            }
        };
        drop(body);
        let (why, outcome) = match failed {
            Failed::Cancelled => ("the run was cancelled".to_owned(), Outcome::Cancelled),
            Failed::Stream(err) => {
                let why = format!("the model's answer failed: {}", crate::error::chain(&*err));
                (why, self.model_failed(err, ctx))
            }
            Failed::Save(err) => {
                // As any save that fails: the run fails with the store's error (the calls
                // started are cancelled first).
                eager
                    .cancel(&format!("the thread could not be saved: {err}"))
                    .await;
                return Err(Ended::Store(err));
            }
        };
        let (outputs, _) = eager.cancel(&why).await;
        if !outputs.is_empty() {
            let partial = eager.partial_message();
            self.history.push(partial);
            self.history.extend(outputs.into_iter().map(Message::from));
        }
        Err(outcome.into())
    }

    /// The outcome of a failed model call: `Blocked` with the reason of a
    /// [`Block`](crate::error::Block) in its chain, else `Aborted` with the reason of an
    /// [`Abort`], else the failure (after StopFailure hooks).
    pub(super) fn model_failed(&mut self, err: BoxError, ctx: &RunContext) -> Outcome {
        if let Some(block) = crate::error::Block::find(&*err) {
            return Outcome::Blocked {
                reason: block.reason().to_owned(),
            };
        }
        let err = RunError::from(err);
        let error = match Abort::find(&*err) {
            Some(abort) => abort.reason().to_owned(),
            None => {
                let details = crate::error::chain(&*err);
                if let Some(hooks) = &self.inner.hooks {
                    let input = StopFailureInput::from_model_error(&*err);
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
    pub(super) fn model_request(
        &self,
        ctx: &RunContext,
        stacks: &Stacks,
    ) -> Result<ModelRequest, Outcome> {
        let inner = self.inner;
        let mut request = ModelRequest {
            messages: self.history.clone(),
            tools: Arc::clone(&stacks.specs),
            settings: inner.settings.clone(),
            ctx: ctx.clone(),
            extensions: http::Extensions::new(),
        };
        if let Some(text) = &stacks.system_context {
            request.append_system(text);
        }
        for stage in &inner.prepares {
            if let Err(err) = stage.prepare(&mut request) {
                let error = format!("prepare stage failed: {}", crate::error::chain(&*err));
                return Err(Outcome::Aborted { error });
            }
        }
        Ok(request)
    }

    /// Phase "step": prepare stages, the model call, then the stop phase (no tool calls) or
    /// the tools phase. `Some(outcome)` ends the run.
    pub(super) async fn step(
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
        let (response, eager) = match self.answer(&ctx, stacks, model).await {
            Ok(answer) => answer,
            Err(Ended::Outcome(outcome)) => return Ok(Some(outcome)),
            Err(Ended::Store(err)) => return Err(err),
        };
        // Taken apart (and the rest dropped) at once: only what is used after the awaits
        // below stays in this future.
        let (mut message, usage, ending, mut extensions) = message_and_usage(response);
        if let Some(usage) = usage {
            self.usage += usage;
            self.guard.usage = self.usage;
            self.guard.last_usage = usage;
        }
        if let Some(compaction) = extensions.remove::<crate::context::Compaction>() {
            self.compacted(compaction, &ctx);
        }
        // The model stack's reminders wait in the run's queue for the step's tool results.
        for text in crate::message::Reminders::take(&mut extensions) {
            self.ctx.remind(text);
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
            if let Some(eager) = eager {
                // Boxed: rare, and not part of every step's future.
                Box::pin(cancel_unused(*eager, &ctx)).await;
            }
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
            Box::pin(self.tools(&ctx, message, &stacks.tools, eager)).await
        }
    }

    /// Phase "stop": the model answered without tool calls; the step stack (Stop hooks)
    /// decides whether the run is finished or goes on with feedback.
    pub(super) async fn stop(&mut self, ctx: &RunContext) -> Result<Option<Outcome>, Error> {
        if self.inner.step.is_none() {
            return Ok(Some(Outcome::Finished));
        }
        let message = self.history.last_shared().expect("the final answer");
        let end = StepEnd::last(ctx.clone(), message);
        match self.step_control(end, ctx).await {
            Ok(StepControl::Resume { feedback, context }) => {
                self.history.push(Message::user(feedback));
                if !context.is_empty() {
                    self.history.push(Message::hook_context(&context));
                }
                self.save().await?;
                Ok(None)
            }
            Ok(StepControl::End { reason }) => Ok(Some(Outcome::Blocked { reason })),
            Ok(_) => Ok(Some(Outcome::Finished)),
            Err(outcome) => Ok(Some(outcome)),
        }
    }

    /// The step stack at the end of a step with tool calls: its contexts join the history;
    /// `Some` if it ends the run.
    pub(super) async fn end_step(
        &mut self,
        message: Arc<Message>,
        results: StepResults,
        ctx: &RunContext,
    ) -> Option<Outcome> {
        let end = StepEnd::of_run(ctx.clone(), message, results);
        match self.step_control(end, ctx).await {
            Ok(StepControl::Proceed { context }) => {
                if !context.is_empty() {
                    self.history.push(Message::hook_context(&context));
                }
                None
            }
            Ok(StepControl::Resume { feedback, context }) => {
                // One block: the feedback, then the contexts.
                let texts: Vec<String> = std::iter::once(feedback).chain(context).collect();
                self.history
                    .push(Message::hook_feedback([texts.join("\n\n")]));
                None
            }
            Ok(StepControl::End { reason }) => {
                self.history.push(Message::hook_feedback([&reason]));
                Some(Outcome::Blocked { reason })
            }
            Err(outcome) => Some(outcome),
        }
    }

    /// Calls the step stack (there is one) with `end`; `Err` with the run's outcome if it
    /// failed or the run was cancelled.
    pub(super) async fn step_control(
        &mut self,
        end: StepEnd,
        ctx: &RunContext,
    ) -> Result<StepControl, Outcome> {
        let inner = self.inner;
        let stack = self
            .step_stack
            .get_or_insert_with(|| inner.step.clone().expect("called with a step stack"));
        match or_cancel(ctx, async { stack.ready().await?.call(end).await }).await {
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
    pub(super) fn compacted(&mut self, c: crate::context::Compaction, ctx: &RunContext) {
        self.apply_compaction(c, ctx.step());
    }

    /// The model named by the agent's settings.
    pub(super) fn model_name(&self) -> Option<String> {
        self.inner.settings.model.as_deref().map(str::to_owned)
    }

    /// Whether the compaction was applied.
    pub(super) fn apply_compaction(&mut self, c: crate::context::Compaction, step: u32) -> bool {
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
}

/// A response's message and usage; the rest (its metadata) is dropped here.
pub(super) fn message_and_usage(
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
pub(super) enum Ending {
    /// `pause_turn`: call the model again with the paused answer.
    Pause,
    /// The model refused, saying this.
    Refusal(String),
}
