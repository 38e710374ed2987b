//! The vocabulary of a run, shared by every module: what happens in it ([`AgentEvent`], with
//! the pieces of a streamed answer, [`ModelDelta`]), how it ends ([`Outcome`]), and the tool
//! calls that wait for a person ([`PendingCall`]). The ground floor: it imports only
//! [`message`](crate::message), so models, stores and layers name these types without
//! importing the agent (which re-exports them: `agent::AgentEvent` is `event::AgentEvent`).
//!
//! ```
//! use tower_agent_core::event::{AgentEvent, Outcome};
//!
//! let stop = AgentEvent::Warning { message: "slow tool".into() };
//! assert_eq!(serde_json::to_value(&stop).unwrap()["type"], "warning");
//! assert!(Outcome::Finished.is_finished());
//! ```

use serde::{Deserialize, Serialize};

use crate::message::{Message, ToolCall, ToolOutput, Usage};

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
    /// A piece of the model's answer as it streams: what comes out of the model stack's
    /// [`body`](crate::model::body) (layers may have changed or dropped pieces on the way).
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
    /// hooks are configured (`Hooks::on_message_display`),
    /// after the message's [`ModelResponse`](AgentEvent::ModelResponse), with the hooks'
    /// `displayContent` (or the original text if none gave one). The history keeps the
    /// original.
    MessageDisplay {
        /// The step.
        step: u32,
        /// The text to display.
        text: String,
    },
    /// Something worth knowing that did not stop the run. Every one is also logged at
    /// `WARN` (with the run's ids) and listed in the run's answer (`AgentResponse::warnings`).
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
    /// The tool call at `index` is complete: its arguments will not grow (Anthropic's
    /// `content_block_stop`, OpenAI's next call or `finish_reason`, the Responses API's
    /// `function_call_arguments.done`).
    ToolCallEnd {
        /// The call's position in the answer.
        index: usize,
    },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The model answered without tool calls.
    Finished,
    /// The step limit was reached.
    MaxSteps,
    /// A hook blocked the run.
    Blocked {
        /// Why.
        reason: String,
    },
    /// An [`Abort`](crate::error::Abort), a failed model call or a failed prepare stage ended
    /// the run.
    Aborted {
        /// What went wrong.
        error: String,
    },
    /// The run's cancellation token was cancelled.
    Cancelled,
    /// The model refused to answer ([`StopReason::Refusal`](crate::message::StopReason::Refusal)):
    /// its refusal message (OpenAI's `refusal`, or the text of an Anthropic answer that
    /// stopped with `refusal`). The refusal is not the run's
    /// [`text`](crate::AgentResponse::text) when the provider sends it apart.
    Refused {
        /// What the model said.
        refusal: String,
    },
    /// A PreToolUse hook deferred the step's only tool call
    /// (`PreToolUse::Defer`, the reference's
    /// `stop_reason: "tool_deferred"`): the tool did not run. The model is told so in the
    /// call's result (`deferred: …`), which keeps the thread valid for a later run. The call
    /// (the reference's `deferred_tool_use`).
    Deferred {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments the model generated, before any hook rewrote them.
        input: serde_json::Value,
    },
    /// Calls of the last step wait for a person's decision (the deferring approval policy,
    /// `Hooks::defer_approvals`): they did not
    /// run; the step's other calls did, and their results are in the thread. The pending calls
    /// are saved with the thread; answer them with [`AgentRequest::approvals`](crate::AgentRequest::approvals) (or
    /// `POST /threads/{id}/approvals`). See [`interrupt`](crate::agent::interrupt).
    Interrupted {
        /// The calls waiting, in the order the model made them.
        pending: Vec<PendingCall>,
    },
}

impl Outcome {
    /// Whether the run finished normally.
    pub fn is_finished(&self) -> bool {
        matches!(self, Outcome::Finished)
    }
}

/// A tool call waiting for a decision, saved with its thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call's id (answer with it).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments the model generated (before any hook rewrote them).
    pub arguments: serde_json::Value,
    /// Why it waits: the reasons of the hooks that asked, or that a hook deferred it.
    pub reason: String,
}

impl PendingCall {
    pub(crate) fn new(call: ToolCall, reason: String) -> Self {
        PendingCall {
            id: call.id,
            name: call.name,
            arguments: call.arguments,
            reason,
        }
    }

    /// The call, with the arguments it runs with.
    pub(crate) fn call(&self) -> ToolCall {
        ToolCall::new(self.id.clone(), self.name.clone(), self.arguments.clone())
    }
}
