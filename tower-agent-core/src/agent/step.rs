//! The step level: layers that see how each step of the loop ended and decide whether the run
//! goes on.
//!
//! After each step the loop calls the agent's step stack with a [`StepEnd`]: the model's
//! message of the step and, when it called tools, every call with its result as the model will
//! see it. The stack answers a [`StepControl`]: go on (with context for the next model call),
//! send the agent back to work although it answered without a tool call, or end the run with
//! a reason. The innermost service answers [`StepControl::proceed`]; each layer added with
//! [`AgentBuilder::step_layer`](super::AgentBuilder::step_layer) wraps it, the first added
//! outermost, as in a [`ServiceBuilder`](tower::ServiceBuilder). The Stop, PostToolBatch and
//! step hooks of a `HookSet` are one such layer
//! (`HookSet::step_layer`, installed outermost by
//! [`AgentBuilder::hooks`](super::AgentBuilder::hooks)).
//!
//! An agent without step layers calls no service (nothing is built or cloned for it).
//!
//! # Example
//!
//! A layer that ends a run after three steps with tool calls, with its own reason:
//!
//! ```
//! use std::task::{Context, Poll};
//! use serde_json::json;
//! use tower::{Layer, Service, layer::layer_fn};
//! use tower_agent_core::{Agent, BoxError, agent::Outcome, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_core::agent::step::{BoxStepService, StepControl, StepEnd};
//!
//! #[derive(Clone)]
//! struct AtMostThree<S>(S);
//!
//! impl<S: Service<StepEnd, Response = StepControl, Error = BoxError>> Service<StepEnd> for AtMostThree<S> {
//!     type Response = StepControl;
//!     type Error = BoxError;
//!     type Future = std::future::Ready<Result<StepControl, BoxError>>;
//!
//!     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
//!         Poll::Ready(Ok(()))
//!     }
//!
//!     fn call(&mut self, end: StepEnd) -> Self::Future {
//!         std::future::ready(Ok(if end.ctx.step() >= 2 && !end.batch().calls.is_empty() {
//!             StepControl::end("three steps are enough")
//!         } else {
//!             StepControl::proceed()
//!         }))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let model = ScriptedModel::from_fn(|_| {
//!     Ok(tower_agent_core::model::ModelResponse::tool_calls([tower_agent_core::message::ToolCall::new(
//!         "", "noop", json!({}),
//!     )]))
//! });
//! let agent = Agent::builder()
//!     .model(model)
//!     .tool(tool_fn("noop", "Does nothing", json!({"type": "object"}), |_, _| async { Ok("ok") }))
//!     .step_layer(layer_fn(AtMostThree))
//!     .build();
//! let resp = agent.run("go").await?;
//! assert_eq!(resp.outcome, Outcome::Blocked { reason: "three steps are enough".into() });
//! assert_eq!(resp.steps, 3);
//! # Ok(())
//! # }
//! ```

use std::{
    ops::Range,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
};

use serde_json::{Map, Value};
use smallvec::SmallVec;
use tower::{Service, util::BoxCloneSyncService};

use crate::{
    context::RunContext,
    error::BoxError,
    message::{Content, Message, Messages, ToolOutput},
};

pub use super::hooks::ToolBatch;

/// How a step ended, for the step stack.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StepEnd {
    /// The run's context, at this step ([`RunContext::step`]).
    pub ctx: RunContext,
    /// The model's message of the step (already in the history).
    pub message: Arc<Message>,
    /// The step's results in the run's history, for [`batch`](Self::batch).
    results: Option<StepResults>,
    /// The batch, made at its first use.
    batch: OnceLock<Arc<ToolBatch>>,
}

impl StepEnd {
    /// The end of a step at `ctx` with `message` and the step's `batch` (empty when the model
    /// answered without a tool call).
    pub fn new(ctx: RunContext, message: Arc<Message>, batch: Arc<ToolBatch>) -> Self {
        StepEnd {
            ctx,
            message,
            results: None,
            batch: OnceLock::from(batch),
        }
    }

    /// The end of a step whose results are `results` of the run's history; the batch is made
    /// only if a layer asks for it.
    pub(crate) fn of_run(ctx: RunContext, message: Arc<Message>, results: StepResults) -> Self {
        StepEnd {
            ctx,
            message,
            results: Some(results),
            batch: OnceLock::new(),
        }
    }

    /// The end of a final step (no tool call).
    pub(crate) fn last(ctx: RunContext, message: Arc<Message>) -> Self {
        StepEnd {
            ctx,
            message,
            results: None,
            batch: OnceLock::new(),
        }
    }

    /// The step's calls and their results as the model will see them, in call order (already
    /// in the history); empty when the model answered without a tool call (the run is about
    /// to finish). Made at the first call (the step stack of a run pays for it only if one
    /// of its layers looks).
    pub fn batch(&self) -> &Arc<ToolBatch> {
        self.batch.get_or_init(|| {
            Arc::new(match &self.results {
                None => ToolBatch::default(),
                Some(results) => ToolBatch {
                    calls: self.message.tool_calls.clone(),
                    outputs: results.outputs(),
                },
            })
        })
    }

    /// Whether the model answered without a tool call: the run finishes unless a layer sends
    /// the agent back to work ([`StepControl::resume`]).
    pub fn is_final(&self) -> bool {
        self.message.tool_calls.is_empty()
    }
}

/// A step's results as the run's history holds them (a clone of the history is a few
/// reference counts), with what a tool message does not keep of its output.
#[derive(Debug, Clone)]
pub(crate) struct StepResults {
    history: Messages,
    range: Range<usize>,
    /// Per output: whether it had text (the message's first part), and its metadata.
    extra: SmallVec<[(bool, Map<String, Value>); 1]>,
}

impl StepResults {
    /// The results at `range` of `history`; `extra` as [`StepResults::keep`] took it.
    pub(crate) fn new(
        history: Messages,
        range: Range<usize>,
        extra: SmallVec<[(bool, Map<String, Value>); 1]>,
    ) -> Self {
        StepResults {
            history,
            range,
            extra,
        }
    }

    /// What the tool message of `output` will not keep: whether it has text, its metadata.
    pub(crate) fn keep(output: &mut ToolOutput) -> (bool, Map<String, Value>) {
        (
            !output.content.is_empty(),
            std::mem::take(&mut output.metadata),
        )
    }

    /// The outputs again, as they were.
    fn outputs(&self) -> Vec<ToolOutput> {
        self.range
            .clone()
            .filter_map(|i| self.history.get(i))
            .zip(&self.extra)
            .map(|(message, (has_text, metadata))| {
                // `Message::from` made the text, if any, the first part.
                let (content, parts) = match message.content.split_first() {
                    Some((Content::Text { text }, rest)) if *has_text => (text.clone(), rest),
                    _ => (String::new(), &message.content[..]),
                };
                let id = message.tool_call_id.clone().unwrap_or_default();
                let mut output = ToolOutput::text(id, content);
                output.is_error = message.is_error;
                output.parts = parts.to_vec();
                output.metadata = metadata.clone();
                output
            })
            .collect()
    }
}

/// What the step stack decides. Build it with [`proceed`](Self::proceed),
/// [`resume`](Self::resume) or [`end`](Self::end); combine a layer's decision with its inner
/// service's with [`and`](Self::and).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepControl {
    /// The run goes on as the model said: the next step after tool calls, the end of the run
    /// after an answer without one. `context` (in order) is added before the next model call
    /// as one [hook context](crate::message::Message::hook_context) (after a final answer it
    /// is dropped).
    Proceed {
        /// Contexts for the next model call.
        context: Vec<String>,
    },
    /// The model answered without a tool call, but the run goes on: `feedback` is added as a
    /// user message, then `context` (in order, if any) as one [hook
    /// context](crate::message::Message::hook_context), and the model is called again (a Stop
    /// hook's block: Claude Code follows a blocking command's reason with a system message
    /// naming the command). After a step with tool calls both are feedback.
    Resume {
        /// What the agent is told.
        feedback: String,
        /// Contexts that follow the feedback.
        context: Vec<String>,
    },
    /// The run ends now, [`Outcome::Blocked`](crate::agent::Outcome::Blocked) with `reason`
    /// (after a step with tool calls the reason is also added to the conversation, so a later
    /// run sees why it stopped).
    End {
        /// Why.
        reason: String,
    },
}

impl StepControl {
    /// Go on, with no context.
    pub fn proceed() -> Self {
        StepControl::Proceed {
            context: Vec::new(),
        }
    }

    /// Send the agent back to work with `feedback`.
    pub fn resume(feedback: impl Into<String>) -> Self {
        StepControl::Resume {
            feedback: feedback.into(),
            context: Vec::new(),
        }
    }

    /// Send the agent back to work with `feedback`, followed by `context` (see
    /// [`Resume`](Self::Resume)).
    pub fn resume_with_context(feedback: impl Into<String>, context: Vec<String>) -> Self {
        StepControl::Resume {
            feedback: feedback.into(),
            context,
        }
    }

    /// End the run with `reason`.
    pub fn end(reason: impl Into<String>) -> Self {
        StepControl::End {
            reason: reason.into(),
        }
    }

    /// This decision (an outer layer's) combined with `inner`'s: an `End` wins (the outer
    /// one's first); otherwise the texts are kept in order, the outer's first, and the result
    /// is a `Resume` if either is one (its feedback the feedbacks and a `Proceed`'s contexts,
    /// blank-line separated; its context the `Resume`s' contexts), else a `Proceed` with both
    /// contexts.
    #[must_use]
    pub fn and(self, inner: StepControl) -> Self {
        use StepControl::{End, Proceed, Resume};
        match (self, inner) {
            (End { reason }, _) | (_, End { reason }) => End { reason },
            (Proceed { mut context }, Proceed { context: more }) => {
                context.extend(more);
                Proceed { context }
            }
            (outer, inner) => {
                let (mut texts, mut contexts) = (Vec::new(), Vec::new());
                for control in [outer, inner] {
                    match control {
                        Proceed { context } => texts.extend(context),
                        Resume { feedback, context } => {
                            texts.push(feedback);
                            contexts.extend(context);
                        }
                        End { .. } => {}
                    }
                }
                Resume {
                    feedback: texts.join("\n\n"),
                    context: contexts,
                }
            }
        }
    }
}

/// The agent's step stack, boxed.
pub type BoxStepService = BoxCloneSyncService<StepEnd, StepControl, BoxError>;

/// The innermost service of a step stack: [`StepControl::proceed`], at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Proceed;

impl Service<StepEnd> for Proceed {
    type Response = StepControl;
    type Error = BoxError;
    type Future = std::future::Ready<Result<StepControl, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: StepEnd) -> Self::Future {
        std::future::ready(Ok(StepControl::proceed()))
    }
}

/// A layer of the step stack, as the agent keeps it.
pub(crate) type StepLayerFn = dyn Fn(BoxStepService) -> BoxStepService + Send + Sync;

#[cfg(test)]
mod tests {
    use serde_json::json;
    use smallvec::SmallVec;

    use super::{StepEnd, StepResults};
    use crate::{
        context::RunContext,
        message::{Content, Message, Messages, ToolCall, ToolOutput},
    };

    /// The batch made from the history is the step's outputs as they were: text or not, an
    /// error or not, with parts and metadata (which the tool message does not keep).
    #[test]
    fn the_batch_is_the_outputs_as_they_were() {
        let mut with_metadata = ToolOutput::text("a", "plain");
        with_metadata.metadata.insert("k".into(), json!(1));
        let mut text_as_part = ToolOutput::text("e", "");
        text_as_part.parts.push(Content::Text {
            text: "only a part".into(),
        });
        let outputs = vec![
            with_metadata,
            ToolOutput::error("b", "failed"),
            ToolOutput::text("c", "see").with_image("https://example.com/a.png"),
            ToolOutput::text("d", ""),
            text_as_part,
        ];
        let calls: Vec<ToolCall> = outputs
            .iter()
            .map(|o| ToolCall::new(o.call_id.clone(), "t", json!({})))
            .collect();
        let mut message = Message::assistant("");
        message.tool_calls = calls.clone();
        let mut history = Messages::new();
        history.push(Message::user("go"));
        history.push(message.clone());
        let start = history.len();
        let mut extra = SmallVec::new();
        for mut output in outputs.clone() {
            extra.push(StepResults::keep(&mut output));
            history.push(Message::from(output));
        }
        let results = StepResults::new(history.clone(), start..history.len(), extra);
        let end = StepEnd::of_run(RunContext::default(), message.into(), results);
        assert!(!end.is_final());
        assert_eq!(end.batch().calls, calls);
        assert_eq!(end.batch().outputs, outputs);
    }

    /// `and` over every pair of forms: an `End` wins (the outer's first); a `Resume` takes
    /// the feedbacks and `Proceed` contexts as its feedback, the `Resume`s' contexts as its
    /// context, the outer's first.
    #[test]
    fn and_combines_every_pair_of_decisions() {
        use super::StepControl;
        let proceed = |c: &str| StepControl::Proceed {
            context: vec![c.to_owned()],
        };
        let resume = |f: &str, c: &str| StepControl::resume_with_context(f, vec![c.to_owned()]);
        let end = |r: &str| StepControl::end(r);
        let cases = [
            (
                proceed("p1"),
                proceed("p2"),
                StepControl::Proceed {
                    context: vec!["p1".into(), "p2".into()],
                },
            ),
            (proceed("p1"), resume("f2", "c2"), resume("p1\n\nf2", "c2")),
            (resume("f1", "c1"), proceed("p2"), resume("f1\n\np2", "c1")),
            (
                resume("f1", "c1"),
                resume("f2", "c2"),
                StepControl::resume_with_context("f1\n\nf2", vec!["c1".into(), "c2".into()]),
            ),
            (end("e1"), resume("f2", "c2"), end("e1")),
            (resume("f1", "c1"), end("e2"), end("e2")),
            (end("e1"), end("e2"), end("e1")),
            (proceed("p1"), end("e2"), end("e2")),
        ];
        for (outer, inner, want) in cases {
            assert_eq!(
                outer.clone().and(inner.clone()),
                want,
                "{outer:?} and {inner:?}"
            );
        }
    }
}
