//! Crash recovery ([`AgentRequest::recover`](crate::AgentRequest::recover)) and the tool-call
//! journal's writes (see [`store::journal`](crate::store::journal)).

use std::{
    collections::HashMap,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use tower::Service;

use super::{
    Run, Stacks, Started,
    tools::{CallResults, Done, Settled, call_tools},
};
use crate::{
    agent::{AgentEvent, Outcome, hooks::SessionSource},
    context::RunContext,
    error::{BoxError, Error},
    message::{Messages, Role, ToolCall, ToolOutput},
    store::{JournalEntry, ThreadStore, ToolJournal, journal::in_doubt_output},
    tool::{BoxToolService, ToolRequest, ToolRouter},
};

/// What [`Run::recover`] did.
pub(super) enum Recovered {
    /// The thread had no step in flight: the loop goes on from its first step.
    Nothing,
    /// It finished the step in flight (step 0); the loop goes on.
    Stepped,
    /// The run ends.
    Ended(Outcome),
}

/// `router` with each tool wrapped so that a call reaching it is recorded as started in the
/// journal of `store` first (the tool is not run if that fails).
pub(super) fn journaled(router: &ToolRouter, store: &Arc<dyn ThreadStore>) -> ToolRouter {
    router.map_services(|svc| {
        BoxToolService::new(Journaled {
            inner: svc,
            store: Arc::clone(store),
        })
    })
}

/// A tool service that records each call as started before it calls the tool.
#[derive(Clone)]
struct Journaled {
    inner: BoxToolService,
    store: Arc<dyn ThreadStore>,
}

impl Service<ToolRequest> for Journaled {
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<ToolOutput, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        // The service made ready is the one called (tower's clone-and-swap).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let store = Arc::clone(&self.store);
        Box::pin(async move {
            if let Some(journal) = store.journal() {
                let thread = req.ctx.session_id();
                if let Err(err) = journal.started(thread, &req.call).await {
                    tracing::warn!(
                        call = %req.call.id,
                        tool = %req.call.name,
                        error = %crate::error::chain(&*err),
                        "tool call not run: the journal could not record it"
                    );
                    return Ok(ToolOutput::error(
                        req.call.id.clone(),
                        format!(
                            "the call was not run: the tool-call journal could not record it ({})",
                            crate::error::chain(&*err)
                        ),
                    ));
                }
            }
            inner.call(req).await
        })
    }
}

/// Records a settled call as finished (unless the run deferred or aborted it, or it waits for
/// approval): failures are
/// logged, the output still goes to the model.
pub(super) async fn record_finished(
    journal: &dyn ToolJournal,
    ctx: &RunContext,
    call: &ToolCall,
    settled: &Settled,
) {
    if settled.abort.is_some() || settled.deferred.is_some() || settled.pending.is_some() {
        return;
    }
    if let Err(err) = journal
        .finished(ctx.session_id(), call, &settled.output)
        .await
    {
        tracing::warn!(
            call = %call.id,
            tool = %call.name,
            error = %crate::error::chain(&*err),
            "the journal could not record a finished tool call"
        );
    }
}

impl<'a> Run<'a> {
    /// Phase "start" of a recovery: the thread as it was saved, SessionStart hooks (source
    /// `resume`); no prompt, no UserPromptSubmit hooks.
    pub(super) async fn recovered_start(
        mut self,
        history: Messages,
        persist: bool,
        transcribed: usize,
    ) -> Result<Started<'a>, Error> {
        if !persist {
            return Err(Error::store(
                "a recovery needs a thread id (`AgentRequest::recover`)".into(),
            ));
        }
        if history.is_empty() {
            return Err(Error::store(
                format!(
                    "no thread `{}` to resume in the store",
                    self.ctx.session_id()
                )
                .into(),
            ));
        }
        (self.history, self.persist, self.transcribed) = (history.clone(), persist, transcribed);
        if let Err(outcome) = self
            .start_stack(SessionSource::Resume, None, None, Vec::new(), &history)
            .await
        {
            return Ok(Started::Ended(self, outcome));
        }
        Ok(Started::Running(self))
    }

    /// Finishes the step in flight of the thread, if it has one: the calls of its last
    /// assistant message, from the journal (see [`AgentRequest::recover`](crate::AgentRequest::recover)).
    pub(super) async fn recover(&mut self, stacks: &Stacks) -> Result<Recovered, Error> {
        // A thread waiting for approvals is answered with them (`interrupt`), not resumed.
        if !self.pending.is_empty() {
            let pending = self.pending.clone();
            return Ok(Recovered::Ended(Outcome::Interrupted { pending }));
        }
        let calls = match self.history.last() {
            Some(last) if last.role == Role::Assistant && last.tool_calls.is_empty() => {
                return Ok(Recovered::Ended(Outcome::Finished));
            }
            Some(last) if last.role == Role::Assistant => last.tool_calls.clone(),
            _ => return Ok(Recovered::Nothing),
        };
        let ctx = self.ctx.with_step(0);
        self.steps = 1;
        self.guard.steps = 1;
        ctx.emit_with(|| AgentEvent::StepStart { step: 0 });
        let (done, cancelled) = self.finish_calls(&ctx, &calls, stacks, false).await?;
        Ok(match self.after_tools(&ctx, done, cancelled).await? {
            Some(outcome) => Recovered::Ended(outcome),
            None => Recovered::Stepped,
        })
    }
}

impl Run<'_> {
    /// Runs `calls` of a step a run may have started before it stopped, by the journal's
    /// rules: a call recorded finished is replayed, one in doubt (started, not finished) gets
    /// [`in_doubt_output`] unless its tool is idempotent, and the others run (again) through
    /// the tool stack (with the [`Approved`](crate::agent::Approved) mark if `approved`). Each
    /// call's result in call order, and whether the run was cancelled.
    pub(super) async fn finish_calls(
        &self,
        ctx: &RunContext,
        calls: &[ToolCall],
        stacks: &Stacks,
        approved: bool,
    ) -> Result<(CallResults, bool), Error> {
        let journal = self.journal();
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        let entries: HashMap<String, JournalEntry> = match journal {
            Some(journal) => journal
                .entries(ctx.session_id(), &ids)
                .await
                .map_err(Error::store)?,
            None => HashMap::new(),
        };
        let mut done: CallResults = calls.iter().map(|_| None).collect();
        let (mut to_run, mut positions) = (Vec::new(), Vec::new());
        for (i, call) in calls.iter().enumerate() {
            let idempotent = stacks
                .specs
                .iter()
                .any(|s| s.name == call.name && s.idempotent);
            let output = match entries.get(&call.id) {
                // Finished: replayed.
                Some(JournalEntry {
                    output: Some(output),
                    ..
                }) => {
                    let mut output = output.clone();
                    output.call_id.clone_from(&call.id);
                    output
                }
                // In doubt, and not to be run twice.
                Some(_) if !idempotent => {
                    let output = in_doubt_output(call);
                    if let Some(journal) = journal {
                        let settled = settled(output.clone());
                        record_finished(journal, ctx, call, &settled).await;
                    }
                    output
                }
                // In doubt and idempotent, or never started: run (again).
                _ => {
                    to_run.push(call.clone());
                    positions.push(i);
                    continue;
                }
            };
            let step = ctx.step();
            ctx.emit_with(|| AgentEvent::ToolCallEnd {
                step,
                name: call.name.clone(),
                output: output.clone(),
                duration_ms: 0.0,
            });
            done[i] = Some(Done::Settled(settled(output)));
        }
        let limit = self.inner.max_concurrent_tools;
        let (ran, cancelled) =
            call_tools(&stacks.tools, &to_run, ctx, limit, journal, approved).await;
        for (i, result) in positions.into_iter().zip(ran) {
            done[i] = result;
        }
        Ok((done, cancelled))
    }
}

fn settled(output: ToolOutput) -> Settled {
    Settled {
        output,
        abort: None,
        deferred: None,
        pending: None,
    }
}

/// The output a new run gives a call a person approved that its run never started (the run
/// stopped first, and the thread was continued without resuming it).
pub(crate) fn not_run_output(call: &ToolCall) -> ToolOutput {
    ToolOutput::error(
        call.id.clone(),
        format!(
            "not run: the call to the tool `{}` was approved, but the run that was to make it \
             stopped before it started, and the thread was continued without resuming it; \
             the call did not happen.",
            call.name
        ),
    )
}

/// The output a new run gives a call its thread's last run left unanswered (the run stopped in
/// the middle of the step and was not resumed), unless the journal has its output.
pub(crate) fn interrupted_output(call: &ToolCall) -> ToolOutput {
    ToolOutput::error(
        call.id.clone(),
        format!(
            "interrupted: the run that called the tool `{}` stopped before the call finished, \
             and the thread was continued without resuming it; the call may or may not have \
             happened.",
            call.name
        ),
    )
}

impl Run<'_> {
    /// A new run (not a recovery) on a thread whose last message is an assistant message with
    /// calls and no results (its run stopped mid-step): each call gets its output from the
    /// journal if it finished, else [`interrupted_output`], so the history stays valid (every
    /// call answered) and nothing is run.
    pub(super) async fn close_unanswered(&self, history: &mut Messages) -> Result<(), Error> {
        // Calls waiting for approval are not unanswered: the `interrupt` logic answers them.
        let calls: Vec<ToolCall> = match history.last() {
            Some(last) if last.role == Role::Assistant => last
                .tool_calls
                .iter()
                .filter(|c| !self.pending.iter().any(|p| p.id == c.id))
                .cloned()
                .collect(),
            _ => return Ok(()),
        };
        if calls.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        let mut entries = match self.inner.store.journal() {
            Some(journal) => journal
                .entries(self.ctx.session_id(), &ids)
                .await
                .map_err(Error::store)?,
            None => HashMap::new(),
        };
        for call in &calls {
            let output = match entries.remove(&call.id).and_then(|e| e.output) {
                Some(mut output) => {
                    output.call_id.clone_from(&call.id);
                    output
                }
                None => interrupted_output(call),
            };
            history.push(output.into());
        }
        Ok(())
    }

    /// A new run (not a recovery) on a thread whose last run stopped before finishing the
    /// calls a person approved: each placeholder is replaced by the call's output from the
    /// journal if it finished, else by [`interrupted_output`] if it started (or the store
    /// keeps no journal), else by [`not_run_output`]. Nothing is run.
    pub(super) async fn close_approved(&mut self, history: &mut Messages) -> Result<(), Error> {
        if self.approved.is_empty() {
            return Ok(());
        }
        let approved = std::mem::take(&mut self.approved);
        let ids: Vec<String> = approved.iter().map(|p| p.id.clone()).collect();
        let journal = self.inner.store.journal();
        let mut entries = match journal {
            Some(journal) => journal
                .entries(self.ctx.session_id(), &ids)
                .await
                .map_err(Error::store)?,
            None => HashMap::new(),
        };
        let mut outputs = Vec::with_capacity(approved.len());
        for call in approved.iter().map(crate::agent::PendingCall::call) {
            let output = match entries.remove(&call.id) {
                Some(JournalEntry {
                    output: Some(mut output),
                    ..
                }) => {
                    output.call_id.clone_from(&call.id);
                    output
                }
                None if journal.is_some() => not_run_output(&call),
                _ => interrupted_output(&call),
            };
            let message = crate::message::Message::from(output);
            outputs.push(message.clone());
            crate::agent::interrupt::replace_placeholder(history, message);
        }
        if let Some(transcript) = self.ctx.transcript() {
            transcript.append(outputs.iter());
        }
        Ok(())
    }
}
