//! The model level: [`ModelRequest`] in, [`ModelResponse`] out.
//!
//! Any `Service<ModelRequest, Response = ModelResponse, Error = BoxError> + Clone + Send` is a
//! model. Wrap it in layers with [`ServiceBuilder`](tower::ServiceBuilder) — the first
//! `.layer()` is the outermost and sees the request first — and hand the stack to
//! [`AgentBuilder::model`](crate::agent::AgentBuilder::model).
//!
//! [`ScriptedModel`] is a deterministic model for tests, docs and offline demos. The real
//! providers speak HTTP with reqwest:
//!
//! - [`OpenAiChat`] (feature `openai`, on by default): the OpenAI Chat
//!   Completions API, for OpenAI and every compatible server (vLLM, Ollama, llama.cpp,
//!   LiteLLM);
//! - [`Anthropic`] (feature `anthropic`): the Anthropic Messages API.
//!
//! Both stream when [`ModelSettings::stream`] is on, fail with a typed [`ProviderError`], and
//! retry transient failures under tower's `retry` with [`RetryPolicy`].
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent::model::{ModelRequest, ModelResponse, ScriptedModel};
//! use tower_agent::message::Message;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::BoxError> {
//! let mut model = ServiceBuilder::new()
//!     .timeout(Duration::from_secs(30))
//!     .map_request(|mut req: ModelRequest| {
//!         req.settings.temperature = Some(0.0);
//!         req
//!     })
//!     .service(ScriptedModel::new().text("Hello!"));
//!
//! let req = ModelRequest::new(vec![Message::user("Hi")]);
//! let resp: ModelResponse = model.ready().await?.call(req).await?;
//! assert_eq!(resp.message.text(), "Hello!");
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub mod anthropic;
pub mod error;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod http;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub mod openai;
pub mod retry;
mod scripted;

use std::sync::Arc;

use tower::util::BoxCloneSyncService;

#[cfg(feature = "anthropic")]
pub use self::anthropic::Anthropic;
#[cfg(feature = "openai")]
pub use self::openai::OpenAiChat;
pub use self::{
    error::ProviderError,
    retry::RetryPolicy,
    scripted::{ScriptedModel, future::ScriptedFuture},
};
use crate::{
    context::RunContext,
    error::BoxError,
    message::{Message, Messages, StopReason, ToolCall, ToolSpec, Usage},
};

/// A type-erased model service (`Clone + Send + Sync`, as axum requires).
pub type BoxModelService = BoxCloneSyncService<ModelRequest, ModelResponse, BoxError>;

/// One call to the model.
///
/// Cloning is cheap: the history and the tool list are shared (copy-on-write), so tower's
/// `retry` can replay a request and a step costs the same at 10 messages as at 1,000.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The conversation so far, system message first.
    pub messages: Messages,
    /// The tools the model may call.
    pub tools: Arc<Vec<ToolSpec>>,
    /// Model name, temperature, limits.
    pub settings: ModelSettings,
    /// The run this call belongs to.
    pub ctx: RunContext,
}

impl ModelRequest {
    /// A request with `messages`, no tools, default settings and a fresh context.
    pub fn new(messages: impl Into<Messages>) -> Self {
        ModelRequest {
            messages: messages.into(),
            tools: Arc::default(),
            settings: ModelSettings::default(),
            ctx: RunContext::new(),
        }
    }

    /// The system message, if the history starts with one.
    pub fn system(&self) -> Option<&Message> {
        self.messages
            .first()
            .filter(|m| m.role == crate::message::Role::System)
    }

    /// A mutable system message: the first message if it is a system message, else a new empty
    /// one inserted first.
    pub fn system_mut(&mut self) -> &mut Message {
        if self.system().is_none() {
            self.messages.insert(0, Message::system(""));
        }
        self.messages.get_mut(0).expect("a system message is first")
    }

    /// Appends `text` to the system message, separated by a blank line.
    pub fn append_system(&mut self, text: &str) {
        let sys = self.system_mut();
        match sys.content.iter_mut().rev().find_map(|c| match c {
            crate::message::Content::Text { text } => Some(text),
            crate::message::Content::Image { .. } => None,
        }) {
            Some(last) if !last.is_empty() => {
                last.push_str("\n\n");
                last.push_str(text);
            }
            _ => sys.push_text(text),
        }
    }
}

/// Settings of a model call. Providers map what they support and ignore the rest.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ModelSettings {
    /// The model's name, as the provider knows it.
    pub model: Option<Arc<str>>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Maximum tokens to generate.
    pub max_tokens: Option<u32>,
    /// Ask the provider to stream its answer (deltas go to the event stream).
    pub stream: bool,
}

impl ModelSettings {
    /// These settings with a model name.
    #[must_use]
    pub fn model(mut self, model: impl Into<Arc<str>>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// These settings with a temperature.
    #[must_use]
    pub fn temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }

    /// These settings with a token limit.
    #[must_use]
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// These settings with streaming on or off.
    #[must_use]
    pub fn stream(mut self, on: bool) -> Self {
        self.stream = on;
        self
    }
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message (text and/or tool calls).
    pub message: Message,
    /// Token counts, if the provider reported them.
    pub usage: Option<Usage>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
}

impl ModelResponse {
    /// A response carrying `message`; the stop reason is `ToolUse` if it has tool calls.
    pub fn new(message: Message) -> Self {
        let stop_reason = if message.tool_calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        ModelResponse {
            message,
            usage: None,
            stop_reason,
        }
    }

    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(Message::assistant(text))
    }

    /// An answer that calls tools.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self::new(Message::assistant("").with_tool_calls(calls.into_iter().collect()))
    }

    /// This response with usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_system_creates_or_extends() {
        let mut req = ModelRequest::new(vec![Message::user("u")]);
        req.append_system("one");
        req.append_system("two");
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.system().unwrap().text(), "one\n\ntwo");
    }

    #[test]
    fn response_stop_reason_follows_tool_calls() {
        assert_eq!(ModelResponse::text("x").stop_reason, StopReason::EndTurn);
        let r = ModelResponse::tool_calls([ToolCall::new("1", "a", serde_json::json!({}))]);
        assert_eq!(r.stop_reason, StopReason::ToolUse);
    }
}
