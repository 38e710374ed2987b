//! The tool phase of a step: its calls, concurrently, results in call order; approved calls of an interrupted run.

use super::super::{AgentEvent, Inner, Outcome, PendingCall, interrupt};
use super::{Run, RunError, Stacks, abort_reason, eager::Eager, recover};
use crate::agent::step::StepResults;
use crate::{
    context::RunContext,
    error::{Abort, BoxError, Error},
    message::{Message, Reminders, ToolCall, ToolOutput},
    tool::{BoxToolService, ToolRequest},
};
use futures_util::{StreamExt, stream::FuturesUnordered};
use smallvec::SmallVec;
use std::{future::Future, pin::Pin, sync::Arc, task::Poll};
use tokio_util::sync::WaitForCancellationFuture;
use tower::ServiceExt;

/// What [`call_tools`] returns: each call's result in call order (`None` for a call cut off
/// by the cancellation). Inline for one call, the common step: no allocation.
pub(super) type CallResults = SmallVec<[Option<Done>; 1]>;

impl<'a> Run<'a> {
    /// Phase "tools": the step's tool calls, concurrently, results in call order; then the
    /// step's reminders, PostToolBatch and step hooks, and the save of the whole step.
    pub(super) async fn tools(
        &mut self,
        ctx: &RunContext,
        message: Message,
        tools: &BoxToolService,
        eager: Option<Box<Eager<'a>>>,
    ) -> Result<Option<Outcome>, Error> {
        self.history.push(message);
        // The calls are read from the history's message (shared, not copied).
        let message = self.history.last_shared().expect("just pushed");
        // In the store before any call runs (a crashed run is resumed from it, see
        // `store::journal`); in the transcript before PreToolUse hooks read it.
        self.save().await?;
        let limit = self.inner.max_concurrent_tools;
        let calls = &message.tool_calls;
        let journal = self.journal();
        let (done, cancelled) = match eager {
            None => call_tools(tools, calls, ctx, limit, journal, false).await,
            // Boxed: not part of every step's future.
            Some(eager) => {
                Box::pin(call_tools_eager(tools, calls, ctx, limit, journal, *eager)).await
            }
        };
        drop(message);
        self.after_tools(ctx, done, cancelled).await
    }

    /// The store's journal, for a run that is saved.
    pub(super) fn journal(&self) -> Option<&'a dyn crate::store::ToolJournal> {
        let inner: &'a Inner = self.inner;
        if self.persist {
            inner.store.journal()
        } else {
            None
        }
    }

    /// The end of phase "tools", once the calls are done: their results into the history,
    /// then reminders, PostToolBatch and step hooks, and the save of the whole step.
    pub(super) async fn after_tools(
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
    pub(super) fn settle_batch(
        &mut self,
        ctx: &RunContext,
        done: CallResults,
        cancelled: bool,
    ) -> Result<Option<(Arc<Message>, StepResults)>, Outcome> {
        // Shared, not copied: the history grows below while the calls are read.
        let message = self.history.last_shared().expect("assistant message");
        let calls = &message.tool_calls;
        let mut abort = None;
        let mut deferred = None;
        let mut pending = Vec::new();
        // What hooks said of the calls, for the model: after the results, not in them.
        let mut contexts = Vec::new();
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
            let mut output = settled.output;
            contexts.extend(output.take_contexts());
            Some(output)
        });
        // Into the history as they are settled, without a list of their own unless the step
        // stack is to see them.
        let batch = if self.inner.step.is_some() {
            // The outputs move into the history; the step stack's batch is made from it if a
            // layer asks (with what a tool message does not keep).
            let start = self.history.len();
            let mut extra = SmallVec::new();
            self.history.extend(outputs.map(|mut output| {
                extra.push(StepResults::keep(&mut output));
                Message::from(output)
            }));
            let range = start..self.history.len();
            let results = StepResults::new(self.history.clone(), range, extra);
            Some((Arc::clone(&message), results))
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
        if !contexts.is_empty() || !reminders.is_empty() {
            self.history
                .push(Message::hook_context(contexts.iter().chain(&reminders)));
        }
        if !reminders.is_empty() {
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

    /// Phase "approved calls" of an answer to an interrupted run: the calls a person approved
    /// (or edited) run, concurrently, through the tool stack, their asks settled; each output
    /// replaces its placeholder; the thread is saved. A recovered run finishes them by the
    /// journal's rules (a call recorded finished is replayed, one in doubt is run again only if
    /// idempotent). `Some(outcome)` ends the run.
    pub(super) async fn approved_calls(
        &mut self,
        stacks: &Stacks,
    ) -> Result<Option<Outcome>, Error> {
        if self.approved.is_empty() {
            return Ok(None);
        }
        let calls: Vec<ToolCall> = self.approved.iter().map(PendingCall::call).collect();
        let ctx = self.ctx.with_step(0);
        let (done, cancelled) = self.finish_calls(&ctx, &calls, stacks, true).await?;
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
}

/// Runs `fut` unless the run is cancelled first.
///
/// The work is polled before the cancellation, so a finished result wins a tie (the next
/// step's check catches the cancellation), and a run that is never cancelled does not pay for
/// a cancellation waiter when the work is ready at once: the waiter is made (boxed, so it does
/// not add to the size of every phase's future) only when the work is pending. A named future
/// rather than an `async fn`, which would hold `fut` twice (its argument and its pinned copy).
pub(super) fn or_cancel<F: Future>(ctx: &RunContext, fut: F) -> OrCancel<'_, F> {
    OrCancel {
        fut,
        ctx,
        cancelled: None,
        started: false,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`or_cancel`].
    pub(super) struct OrCancel<'a, F> {
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
pub(super) fn cancelled_waiter<'a, 'b>(
    slot: &'a mut Option<Pin<Box<WaitForCancellationFuture<'b>>>>,
    ctx: &'b RunContext,
) -> Pin<&'a mut WaitForCancellationFuture<'b>> {
    slot.get_or_insert_with(|| Box::pin(ctx.cancellation().cancelled()))
        .as_mut()
}

/// A tool call's output as the model sees it, and the error if it aborted the run.
pub(super) struct Settled {
    pub(super) output: ToolOutput,
    pub(super) abort: Option<RunError>,
    /// A PreToolUse hook deferred the call.
    pub(super) deferred: Option<ToolCall>,
    /// The call waits for a person's decision (the deferring approval policy).
    /// Boxed: rare, and `Settled` is in every call's future.
    pub(super) pending: Option<Box<PendingCall>>,
}

pub(super) enum Done {
    /// Settled inside the call's future (when events are listened to).
    Settled(Settled),
    /// Left to settle after the batch, against the assistant message's calls.
    Raw(Result<ToolOutput, BoxError>),
}

pub(super) fn settle(call: &ToolCall, result: Result<ToolOutput, BoxError>) -> Settled {
    if let Err(err) = &result
        && let Some(p) = crate::agent::PendingApproval::find(&**err)
    {
        return Settled {
            output: ToolOutput::error(
                call.id.clone(),
                format!("waits for approval: {}", p.reason()),
            ),
            abort: None,
            deferred: None,
            pending: Some(Box::new(PendingCall::new(
                p.call().clone(),
                p.reason().to_owned(),
            ))),
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
                    output: ToolOutput::failed(call.id.clone(), &call.name, &*err),
                    abort: None,
                    deferred: None,
                    pending: None,
                },
            },
        },
    }
}

/// Runs the calls concurrently (at most `limit` at a time), until all are done or the run is
/// cancelled. Returns each call's result in call order (`None` for a call cut off by the
/// cancellation) and whether the run was cancelled. `approved`: the calls are a person's
/// approved calls (their requests carry the [`Approved`](crate::agent::Approved) mark).
///
/// The calls are borrowed (from the history's assistant message): each is copied once, into
/// its [`ToolRequest`]. A single call is polled directly, without a [`FuturesUnordered`] (two
/// allocations and one per call).
pub(super) async fn call_tools(
    tools: &BoxToolService,
    calls: &[ToolCall],
    ctx: &RunContext,
    limit: Option<usize>,
    journal: Option<&dyn crate::store::ToolJournal>,
    approved: bool,
) -> (CallResults, bool) {
    let n = calls.len();
    if n == 1 {
        // Made in place (not passed to a function): the call's future is stored once.
        let mut fut = std::pin::pin!(run_call(
            tools.clone(),
            &calls[0],
            ctx.clone(),
            journal,
            CallInfo::new(Some(1), approved)
        ));
        // The cancellation waiter is made only if the call is pending (see `or_cancel`).
        let mut cancelled = None;
        let done = std::future::poll_fn(|cx| {
            if let Poll::Ready(done) = fut.as_mut().poll(cx) {
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
    let one = |i: usize| {
        let call = &calls[i];
        let info = CallInfo::new(Some(n), approved);
        let done = run_call(tools.clone(), call, ctx.clone(), journal, info);
        async move { (i, done.await) }
    };
    run_all((0..n).map(one), n, limit, ctx).await
}

/// [`call_tools`] for an answer whose calls eager dispatch started: each call takes the
/// result (or the future) of the call started for it; the others run now; a started call the
/// answer does not have is cancelled (with a warning).
async fn call_tools_eager<'a>(
    tools: &BoxToolService,
    calls: &[ToolCall],
    ctx: &RunContext,
    limit: Option<usize>,
    journal: Option<&'a dyn crate::store::ToolJournal>,
    mut eager: Eager<'a>,
) -> (CallResults, bool) {
    type Call<'f> = Pin<Box<dyn Future<Output = (usize, Done)> + Send + 'f>>;
    let mut futures: Vec<Call<'_>> = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        futures.push(match eager.take(call) {
            Some(Ok(done)) => Box::pin(std::future::ready((i, done))),
            Some(Err(running)) => Box::pin(async move { (i, running.await) }),
            None => {
                let info = CallInfo::new(Some(calls.len()), false);
                let done = run_call(tools.clone(), call, ctx.clone(), journal, info);
                Box::pin(async move { (i, done.await) })
            }
        });
    }
    let why = "the model's whole answer does not have the call as it started (a layer changed it)";
    if eager.cancel(why).await.1 > 0 {
        ctx.warn(format!(
            "calls started before the answer was whole were cancelled: {why}"
        ));
    }
    run_all(futures.into_iter(), calls.len(), limit, ctx).await
}

/// What the loop tells a tool call besides the call itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct CallInfo {
    /// [`ToolRequest::step_calls`].
    step_calls: Option<usize>,
    /// A person approved the call: its request carries [`Approved`](crate::agent::Approved).
    approved: bool,
}

impl CallInfo {
    pub(super) fn new(step_calls: Option<usize>, approved: bool) -> Self {
        CallInfo {
            step_calls,
            approved,
        }
    }
}

/// One call through the tool stack `svc`: its events (when someone listens), its result as
/// the model sees it, and its journal record.
pub(super) async fn run_call(
    svc: BoxToolService,
    call: &ToolCall,
    ctx: RunContext,
    journal: Option<&dyn crate::store::ToolJournal>,
    info: CallInfo,
) -> Done {
    let mut request = ToolRequest::new(call.clone(), ctx.clone());
    request.step_calls = info.step_calls;
    if info.approved {
        request.extensions.insert(crate::agent::Approved);
    }
    let listening = ctx.is_listening();
    if !listening && journal.is_none() {
        return Done::Raw(queue_reminders(svc.oneshot(request).await, &ctx));
    }
    let step = ctx.step();
    let started = tokio::time::Instant::now();
    if listening {
        ctx.emit(AgentEvent::ToolCallStart {
            step,
            call: call.clone(),
        });
    }
    let result = queue_reminders(svc.oneshot(request).await, &ctx);
    let settled = settle(call, result);
    if let Some(journal) = journal {
        recover::record_finished(journal, &ctx, call, &settled).await;
    }
    if !listening {
        return Done::Settled(settled);
    }
    ctx.emit(AgentEvent::ToolCallEnd {
        step,
        name: call.name.clone(),
        output: settled.output.clone(),
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
    });
    Done::Settled(settled)
}

/// Moves the reminders a call's answer carries ([`ToolOutput::remind`]) into the run's queue as
/// the call ends: the step's reminders keep the order they came in (the model's answer's,
/// the calls' as they end, work outside any call), and are added after the step's results.
fn queue_reminders(
    mut result: Result<ToolOutput, BoxError>,
    ctx: &RunContext,
) -> Result<ToolOutput, BoxError> {
    if let Ok(output) = &mut result {
        for text in Reminders::take(&mut output.extensions) {
            ctx.remind(text);
        }
    }
    result
}

/// Polls the `n` futures of `futures` (each a call's position and result; at most `limit`
/// at a time) until all are done or the run is cancelled: the results in call order, and
/// whether the run was cancelled. Finished calls keep their results.
pub(super) async fn run_all<F>(
    mut futures: impl Iterator<Item = F>,
    n: usize,
    limit: Option<usize>,
    ctx: &RunContext,
) -> (CallResults, bool)
where
    F: Future<Output = (usize, Done)>,
{
    // The cancellation waiter is made only if a call is pending (see `or_cancel`).
    let mut cancelled = None;
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
