//! [`AgentEvent`]s and the [`EventStream`] of a run.

use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{AgentResponse, Outcome};
use crate::{
    error::Error,
    message::{Message, ToolCall, ToolOutput, Usage},
};

/// What happens in a run, in order. Tool call starts and ends come as they happen (the calls
/// of one step run concurrently); everything else follows the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The run started.
    AgentStart {
        /// The thread (session) id.
        thread_id: String,
        /// The run id.
        run_id: String,
    },
    /// A step (one model call and its tool calls) starts.
    StepStart {
        /// The step, from 0.
        step: u32,
    },
    /// The model answered.
    ModelResponse {
        /// The step.
        step: u32,
        /// The assistant message.
        message: Message,
        /// Token counts, if reported.
        usage: Option<Usage>,
    },
    /// A piece of the model's answer as it streams (providers that stream send these; the
    /// layers above the provider still get one whole response).
    ModelDelta {
        /// The step.
        step: u32,
        /// The piece.
        delta: ModelDelta,
    },
    /// A tool call was dispatched.
    ToolCallStart {
        /// The step.
        step: u32,
        /// The call.
        call: ToolCall,
    },
    /// A tool call finished (as the model will see it).
    ToolCallEnd {
        /// The step.
        step: u32,
        /// The tool's name.
        name: String,
        /// The output.
        output: ToolOutput,
        /// How long the call took, in milliseconds.
        duration_ms: f64,
    },
    /// Reminders were appended after the step's tool results.
    Reminders {
        /// The step.
        step: u32,
        /// The reminders' texts.
        reminders: Vec<String>,
    },
    /// The thread's history was compacted (old messages replaced by a summary).
    Compacted {
        /// The step.
        step: u32,
        /// How many messages were replaced.
        replaced: usize,
        /// How many messages replaced them.
        replacement: usize,
    },
    /// An assistant message's text as it is to be displayed: sent only when MessageDisplay
    /// hooks are configured ([`LoopHooks::message_display`](super::LoopHooks::message_display)),
    /// after the message's [`ModelResponse`](AgentEvent::ModelResponse), with the hooks'
    /// `displayContent` (or the original text if none gave one). The history keeps the
    /// original.
    MessageDisplay {
        /// The step.
        step: u32,
        /// The text to display.
        text: String,
    },
    /// Something worth knowing that did not stop the run.
    Warning {
        /// What happened.
        message: String,
    },
    /// The run ended. Always the last event.
    AgentStop {
        /// How it ended.
        outcome: Outcome,
        /// The final assistant text.
        text: String,
        /// Steps taken.
        steps: u32,
        /// Tokens used, summed over the run's model calls.
        usage: Usage,
    },
}

/// A piece of a streamed model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelDelta {
    /// More answer text.
    Text {
        /// The text.
        text: String,
    },
    /// More reasoning ("thinking") text, separate from the answer text: Anthropic
    /// `thinking_delta`s, and the `reasoning_content` / `reasoning` deltas of compatible
    /// servers (DeepSeek, vLLM, Ollama, OpenRouter …), and the Responses API's reasoning (summary)
    /// deltas. The whole reasoning is kept on the
    /// response's message as [`Content::Reasoning`](crate::message::Content::Reasoning).
    Reasoning {
        /// The text.
        text: String,
    },
    /// A piece of a tool call: its id and name come first, its argument text in pieces.
    ToolCall {
        /// The call's position in the answer.
        index: usize,
        /// The call's id, when this piece carries it.
        id: Option<String>,
        /// The tool's name, when this piece carries it.
        name: Option<String>,
        /// More argument text (JSON, possibly cut anywhere).
        arguments: String,
    },
}

/// The events of a run, as a [`Stream`]. See [`Agent::stream`](crate::Agent::stream).
///
/// The stream drives the run itself (no task is spawned): poll it to make progress. It ends
/// after [`AgentEvent::AgentStop`].
///
/// # Cancel safety
///
/// Dropping the stream drops the run: tool calls in flight are dropped (and with them any
/// child process they own), and the thread keeps what was saved after the last whole step.
#[must_use = "streams do nothing unless polled"]
pub struct EventStream {
    run: Option<BoxFuture<'static, Result<AgentResponse, Error>>>,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    response: Option<Result<AgentResponse, Error>>,
}

impl EventStream {
    pub(crate) fn new(
        run: BoxFuture<'static, Result<AgentResponse, Error>>,
        rx: mpsc::UnboundedReceiver<AgentEvent>,
    ) -> Self {
        EventStream {
            run: Some(run),
            rx,
            response: None,
        }
    }

    /// The run's result, once the stream has ended (taken: `None` on a second call).
    pub fn take_response(&mut self) -> Option<Result<AgentResponse, Error>> {
        self.response.take()
    }
}

impl Stream for EventStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if let Poll::Ready(Some(event)) = this.rx.poll_recv(cx) {
            return Poll::Ready(Some(event));
        }
        if let Some(run) = this.run.as_mut() {
            match run.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    this.run = None;
                    this.response = Some(result);
                }
                Poll::Pending => {
                    // The run may have sent events while it was polled.
                    return match this.rx.poll_recv(cx) {
                        Poll::Ready(Some(event)) => Poll::Ready(Some(event)),
                        _ => Poll::Pending,
                    };
                }
            }
        }
        // The run is over: drain what it sent, then end (clones of the sender may outlive the
        // run, so don't wait for the channel to close).
        Poll::Ready(this.rx.try_recv().ok())
    }
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}
