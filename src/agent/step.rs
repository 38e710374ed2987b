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
//! step hooks of a [`HookSet`](crate::layers::hooks::HookSet) are one such layer
//! ([`HookSet::step_layer`](crate::layers::hooks::HookSet::step_layer), installed outermost by
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
//! use tower_agent::{Agent, BoxError, agent::Outcome, model::ScriptedModel, tool::tool_fn};
//! use tower_agent::agent::step::{BoxStepService, StepControl, StepEnd};
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
//!         std::future::ready(Ok(if end.ctx.step() >= 2 && !end.batch.calls.is_empty() {
//!             StepControl::end("three steps are enough")
//!         } else {
//!             StepControl::proceed()
//!         }))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::Error> {
//! let model = ScriptedModel::from_fn(|_| {
//!     Ok(tower_agent::model::ModelResponse::tool_calls([tower_agent::message::ToolCall::new(
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
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Service, util::BoxCloneSyncService};

use crate::{context::RunContext, error::BoxError, message::Message};

pub use super::hooks::ToolBatch;

/// How a step ended, for the step stack.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StepEnd {
    /// The run's context, at this step ([`RunContext::step`]).
    pub ctx: RunContext,
    /// The model's message of the step (already in the history).
    pub message: Arc<Message>,
    /// The step's calls and their results as the model will see them, in call order (already
    /// in the history); empty when the model answered without a tool call (the run is about
    /// to finish).
    pub batch: Arc<ToolBatch>,
}

impl StepEnd {
    /// The end of a step at `ctx` with `message` and the step's `batch`.
    pub fn new(ctx: RunContext, message: Arc<Message>, batch: Arc<ToolBatch>) -> Self {
        StepEnd {
            ctx,
            message,
            batch,
        }
    }

    /// Whether the model answered without a tool call: the run finishes unless a layer sends
    /// the agent back to work ([`StepControl::resume`]).
    pub fn is_final(&self) -> bool {
        self.batch.calls.is_empty()
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
    /// as one user message of `<system-hook>` blocks (after a final answer it is dropped).
    Proceed {
        /// Contexts for the next model call.
        context: Vec<String>,
    },
    /// The model answered without a tool call, but the run goes on: `feedback` is added as a
    /// user message and the model is called again (a Stop hook's block). After a step with
    /// tool calls it is context, as with `Proceed`.
    Resume {
        /// What the agent is told.
        feedback: String,
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
    /// is a `Resume` (its feedback the texts, blank-line separated) if either is one, else a
    /// `Proceed` with both contexts.
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
                let texts: Vec<String> = [outer, inner]
                    .into_iter()
                    .flat_map(|c| match c {
                        Proceed { context } => context,
                        Resume { feedback } => vec![feedback],
                        End { .. } => Vec::new(),
                    })
                    .collect();
                Resume {
                    feedback: texts.join("\n\n"),
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
