//! Eager tool dispatch ([`AgentBuilder::eager_tools`](crate::agent::AgentBuilder::eager_tools)):
//! each call of a streamed answer starts through the tool stack as soon as its arguments are
//! complete ([`ModelDelta::ToolCallEnd`]), while the model still writes the rest.
//!
//! The calls started are polled with the stream. Once the answer is whole, each call of its
//! message takes the result of the call started for it (same id, tool and arguments), and
//! the others run then; a started call the whole answer does not have as it started (a layer
//! changed or dropped it) is cancelled. If the stream fails, is cut off, or the run is
//! cancelled, every started call is cancelled (its future dropped: process trees are killed
//! as on any drop), and the history gets the answer as far as it came — its text and the
//! calls started — with an output for each: the result of a call that finished, else an error
//! saying the call was cancelled and may or may not have happened (what a resume says of a
//! call in doubt). For a run on a thread, the thread is saved with the calls before the first
//! one starts, so a process that dies mid-call is resumed by the journal's rules
//! ([`store::journal`](crate::store::journal)).

use std::{collections::BTreeMap, future::Future, pin::Pin, task::Context};

use super::tools::{CallInfo, Done, run_call, settle};
use crate::{
    context::RunContext,
    event::ModelDelta,
    message::{Message, ToolCall, ToolOutput},
    store::ToolJournal,
    tool::BoxToolService,
};

type CallFuture<'a> = Pin<Box<dyn Future<Output = Done> + Send + 'a>>;

/// A call started before the answer was whole.
pub(super) struct Started<'a> {
    pub(super) call: ToolCall,
    fut: Option<CallFuture<'a>>,
    done: Option<Done>,
}

/// The calls of a streamed answer, as they come and start.
pub(super) struct Eager<'a> {
    tools: BoxToolService,
    ctx: RunContext,
    journal: Option<&'a dyn ToolJournal>,
    /// The calls being streamed, by the pieces' index: id, tool, argument text.
    building: BTreeMap<usize, (String, String, String)>,
    /// The answer's text so far (for the history, if the stream fails).
    text: String,
    pub(super) started: Vec<Started<'a>>,
}

impl<'a> Eager<'a> {
    pub(super) fn new(
        tools: BoxToolService,
        ctx: RunContext,
        journal: Option<&'a dyn ToolJournal>,
    ) -> Self {
        Eager {
            tools,
            ctx,
            journal,
            building: BTreeMap::new(),
            text: String::new(),
            started: Vec::new(),
        }
    }

    /// Takes a piece: the call to start, if it completes one whose arguments are a JSON
    /// object (a call whose arguments are not waits for the whole answer, which gives it its
    /// error output as always).
    pub(super) fn observe(&mut self, delta: &ModelDelta) -> Option<ToolCall> {
        match delta {
            ModelDelta::Text { text } => self.text.push_str(text),
            ModelDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let entry = self.building.entry(*index).or_default();
                if let Some(id) = id {
                    entry.0.clone_from(id);
                }
                if let Some(name) = name {
                    entry.1.push_str(name);
                }
                entry.2.push_str(arguments);
            }
            ModelDelta::ToolCallEnd { index } => {
                let (id, name, arguments) = self.building.remove(index)?;
                let arguments = if arguments.trim().is_empty() {
                    serde_json::Value::Object(Default::default())
                } else {
                    serde_json::from_str(&arguments).ok()?
                };
                if id.is_empty() || name.is_empty() || !arguments.is_object() {
                    return None;
                }
                return Some(ToolCall::new(id, name, arguments));
            }
            _ => {}
        }
        None
    }

    /// Starts `call` through the tool stack.
    pub(super) fn start(&mut self, call: ToolCall) {
        let (svc, ctx, journal) = (self.tools.clone(), self.ctx.clone(), self.journal);
        let owned = call.clone();
        let fut: CallFuture<'a> = Box::pin(async move {
            run_call(svc, &owned, ctx, journal, CallInfo::new(None, false)).await
        });
        self.started.push(Started {
            call,
            fut: Some(fut),
            done: None,
        });
    }

    /// Polls the calls still running; those done keep their results.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) {
        for s in &mut self.started {
            if let Some(fut) = &mut s.fut
                && let std::task::Poll::Ready(done) = fut.as_mut().poll(cx)
            {
                s.fut = None;
                s.done = Some(done);
            }
        }
    }

    /// The answer as far as it came: its text and the calls started.
    pub(super) fn partial_message(&self) -> Message {
        Message::assistant(self.text.clone())
            .with_tool_calls(self.started.iter().map(|s| s.call.clone()).collect())
    }

    /// The call started for `call` (same id, tool and arguments): its result, or its future
    /// if it still runs.
    pub(super) fn take(&mut self, call: &ToolCall) -> Option<Result<Done, CallFuture<'a>>> {
        let s = self.started.iter_mut().find(|s| s.call == *call)?;
        match (s.done.take(), s.fut.take()) {
            (Some(done), _) => Some(Ok(done)),
            (None, Some(fut)) => Some(Err(fut)),
            (None, None) => None,
        }
    }

    /// Cancels every call not taken (dropping it), recording the cancellation in the journal;
    /// the outputs of the calls started, in order (a finished call's own), and how many were
    /// cancelled.
    pub(super) async fn cancel(&mut self, why: &str) -> (Vec<ToolOutput>, usize) {
        let mut outputs = Vec::new();
        let mut cancelled = 0;
        for s in &mut self.started {
            let output = match s.done.take() {
                Some(done) => settled_output(&s.call, done),
                None if s.fut.take().is_some() => {
                    cancelled += 1;
                    let output = cancelled_output(&s.call, why);
                    if let Some(journal) = self.journal {
                        let recorded = journal.finished(self.ctx.session_id(), &s.call, &output);
                        if let Err(err) = recorded.await {
                            tracing::warn!(call = %s.call.id, "the journal could not record a cancelled call: {err}");
                        }
                    }
                    output
                }
                // Taken by the whole answer: not this method's.
                None => continue,
            };
            outputs.push(output);
        }
        (outputs, cancelled)
    }
}

fn settled_output(call: &ToolCall, done: Done) -> ToolOutput {
    match done {
        Done::Settled(settled) => settled.output,
        Done::Raw(result) => settle(call, result).output,
    }
}

/// The output of a started call that was cancelled.
fn cancelled_output(call: &ToolCall, why: &str) -> ToolOutput {
    ToolOutput::error(
        call.id.clone(),
        format!(
            "tool call cancelled: {why}; the tool `{}` had started, so the call may or may not \
             have happened. Check its effect before calling it again.",
            call.name
        ),
    )
}
