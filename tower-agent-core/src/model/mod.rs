//! The model level: [`ModelRequest`] in, [`ModelResponse`] out.
//!
//! Any `Service<ModelRequest, Response = ModelResponse, Error = BoxError> + Clone + Send` is a
//! model. Wrap it in layers with [`ServiceBuilder`](tower::ServiceBuilder) — the first
//! `.layer()` is the outermost and sees the request first — and hand the stack to
//! [`AgentBuilder::model`](crate::agent::AgentBuilder::model).
//!
//! [`ScriptedModel`] is a deterministic model for tests, docs and offline demos. The real
//! providers, in the `tower-agent` crate, speak HTTP with reqwest:
//!
//! - `OpenAiChat` (feature `openai`, on by default): the OpenAI Chat
//!   Completions API, for OpenAI and every compatible server (vLLM, Ollama, llama.cpp,
//!   LiteLLM);
//! - `OpenAiResponses` (feature `openai`): the OpenAI Responses API, stateless
//!   (`store: false`), reasoning items carried across turns encrypted;
//! - `Anthropic` (feature `anthropic`): the Anthropic Messages API.
//!
//! They all stream when [`ModelSettings::stream`] is on, fail with a typed [`ProviderError`], and
//! retry transient failures under tower's `retry` with [`RetryPolicy`].
//!
//! A provider of your own (for another API) is a model service built the same way: it fails
//! with [`ProviderError::new`] and a [`ProviderErrorKind`] (so [`RetryPolicy`] retries it as
//! it retries theirs), and it streams with [`body::driven`]: its future answers at the first
//! piece of the answer, and the body reads the rest.
//!
//! # Limits
//!
//! A provider's answer comes from outside the process, so what it may cost is capped; nothing
//! a server sends can panic the provider or make it hold more than these bounds:
//!
//! - **Response size**: a whole (non-streamed) body is read chunk by chunk and the call fails
//!   with a [malformed-response](ProviderError::is_malformed_response) error as soon as it
//!   passes the provider's `max_response_bytes` (default [`DEFAULT_MAX_RESPONSE_BYTES`],
//!   16 MiB; a `Content-Length` over it fails before the body is read). A streamed answer fails
//!   the same way when the text, reasoning, tool-call arguments and provider items
//!   ([`Content::Provider`](crate::message::Content::Provider), kept whole) put together from
//!   it pass that limit.
//! - **Server-sent events**: one event (its lines, buffered until the blank line that ends it)
//!   may hold at most [`MAX_SSE_EVENT_BYTES`] (4 MiB, or `max_response_bytes` if smaller); a
//!   longer line or event fails the call while it is being read. So a stream holds at most
//!   about `MAX_SSE_EVENT_BYTES + max_response_bytes`, however long it runs (bound its time
//!   with a timeout layer).
//! - **Error pages**: of an HTTP error response, only the first [`MAX_ERROR_BODY_BYTES`]
//!   (8 KiB) are read, for the error's code, message and
//!   [excerpt](ProviderError::body_excerpt); the rest is never read (the connection is closed).
//! - **`Retry-After`**: `retry-after-ms`, and `retry-after` in seconds or as an HTTP date, are
//!   parsed without overflow; a negative or unparsable value is ignored, and any delay is
//!   clamped to [`MAX_RETRY_AFTER`] (one day) before it reaches
//!   [`ProviderError::retry_after`]. [`RetryPolicy`] waits at most its
//!   [`max_retry_after`](RetryPolicy::max_retry_after) (default 60 s): asked to wait longer,
//!   it does not retry and returns the error, `retry_after` set.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent_core::model::{ModelRequest, ModelResponse, ScriptedModel};
//! use tower_agent_core::message::Message;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
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

pub mod body;
pub mod error;
pub mod options;
pub mod retry;
mod scripted;

/// The response futures of the model services.
pub mod future {
    pub use super::{body::FirstDelta, scripted::future::ScriptedFuture};
}

use std::{borrow::Cow, sync::Arc, time::Duration};

use tower::util::BoxCloneSyncService;

pub use self::{
    body::{ModelBody, ModelChunk},
    error::{ProviderError, ProviderErrorKind},
    options::{ExtraBody, OutputError, ResponseFormat, ToolChoice},
    retry::RetryPolicy,
    scripted::ScriptedModel,
};
use crate::{
    context::RunContext,
    error::BoxError,
    message::{Message, Messages, StopReason, ToolCall, ToolSpec, Usage},
};

/// The default of the providers' `max_response_bytes`
/// (tower-agent's `OpenAiChatBuilder::max_response_bytes`,
/// `AnthropicBuilder::max_response_bytes`):
/// 16 MiB.
///
/// A model's answer is text and tool-call arguments: even 128k output tokens are well under
/// 1 MiB of JSON, so 16 MiB leaves room for any real answer while a hostile or broken server
/// costs at most about twice this much memory per call (the body, then what is parsed from it).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The largest server-sent event a provider reads: 4 MiB (or the provider's
/// `max_response_bytes`, if smaller). Providers stream small deltas (a few hundred bytes
/// each); a line or event longer than this fails the call as a malformed response.
pub const MAX_SSE_EVENT_BYTES: usize = 4 << 20;

/// How much of an HTTP error response a provider reads: 8 KiB, enough for the providers'
/// JSON error objects. The rest of an error page is not read.
pub const MAX_ERROR_BODY_BYTES: usize = 8 << 10;

/// The longest delay a provider's `Retry-After` may name: one day. Longer delays (up to
/// `1e300` seconds, or an HTTP date in the year 9999) are clamped to it in
/// [`ProviderError::retry_after`].
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

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
    /// Data travelling with this one call, for the layers and the model (as an HTTP request's
    /// extensions, and [`ToolRequest::extensions`](crate::tool::ToolRequest::extensions) for a
    /// tool call): a layer puts a value here for a layer or model under it; layers forward
    /// them. The loop makes each request with none. (Data for the whole run is in
    /// [`RunContext::with_data`].)
    pub extensions: http::Extensions,
}

impl ModelRequest {
    /// A request with `messages`, no tools, default settings, a fresh context and no
    /// extensions.
    pub fn new(messages: impl Into<Messages>) -> Self {
        ModelRequest {
            messages: messages.into(),
            tools: Arc::default(),
            settings: ModelSettings::default(),
            ctx: RunContext::new(),
            extensions: http::Extensions::new(),
        }
    }

    /// This request with `value` in its extensions (replacing a value of its type).
    ///
    /// ```
    /// use tower_agent_core::model::{ModelRequest, ModelResponse, ScriptedModel};
    /// use tower::{Service, ServiceExt};
    ///
    /// #[derive(Clone)]
    /// struct Tenant(&'static str);
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::BoxError> {
    /// // A model (or a layer under the one that set it) reads the call's extension.
    /// let model = ScriptedModel::from_fn(|req: &ModelRequest| {
    ///     let tenant = req.extensions.get::<Tenant>().map_or("none", |t| t.0);
    ///     Ok(ModelResponse::text(format!("tenant {tenant}")))
    /// });
    /// let req = ModelRequest::new(Vec::new()).with_extension(Tenant("acme"));
    /// let resp = model.oneshot(req).await?;
    /// assert_eq!(resp.message.text(), "tenant acme");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
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
            crate::message::Content::Image { .. }
            | crate::message::Content::Reasoning(_)
            | crate::message::Content::Document { .. }
            | crate::message::Content::Provider(_) => None,
        }) {
            Some(last) if !last.is_empty() => {
                last.push_str("\n\n");
                last.push_str(text);
            }
            _ => sys.push_text(text),
        }
    }

    /// Adds `text` at the end of this request, as a user message of one `<system-reminder>`
    /// block, for this call only (the thread does not keep it). For what changes from step to
    /// step (a todo list, a status): appended at the end, it leaves the rest of the request a
    /// byte-identical prefix of the next one, which a provider's prompt cache serves; in the
    /// system message it would change the request's first bytes at every change.
    pub fn append_reminder(&mut self, text: &str) {
        let text = format!("{REMINDER_OPEN}\n{text}\n</system-reminder>");
        self.messages.push(Message::user(text));
    }
}

/// How the text of a reminder of [`ModelRequest::append_reminder`] starts (its user
/// message is `<system-reminder>`, a line break, the reminder, a line break and
/// `</system-reminder>`).
///
/// A provider that marks the request for prompt caching (as tower-agent's `Anthropic` marks
/// its last message) recognises reminders by this start and marks the last message that is
/// not one: a reminder changes from call to call, so a cache entry ending with it would never
/// be read again.
pub const REMINDER_OPEN: &str = "<system-reminder>";

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
    /// Which tools the model may or must call (sent only with tools; by default `auto`).
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one answer (OpenAI
    /// `parallel_tool_calls`; Anthropic `tool_choice.disable_parallel_tool_use` is its
    /// negation). Sent only with tools.
    pub parallel_tool_calls: Option<bool>,
    /// Stop sequences (OpenAI `stop`, Anthropic `stop_sequences`).
    pub stop: Arc<[String]>,
    /// Nucleus sampling (`top_p`).
    pub top_p: Option<f32>,
    /// A sampling seed (OpenAI `seed`). The Anthropic Messages API has none: a request with a
    /// seed fails there with an [invalid-request](ProviderError::is_invalid_request) error
    /// rather than silently being random.
    pub seed: Option<u64>,
    /// Structured output: the JSON schema the answer must follow. See [`options`].
    pub response_format: Option<ResponseFormat>,
    /// Provider-specific fields merged into the top level of the request body (each key
    /// replaces a field of the same name). See [`ExtraBody`].
    pub extra_body: Option<ExtraBody>,
    /// OpenAI's `prompt_cache_key` (Chat Completions and Responses): requests with the same
    /// key and prefix are routed to the same prompt cache, e.g. one key per thread. Anthropic
    /// caches by breakpoints instead (see tower-agent's `AnthropicBuilder::prompt_caching`).
    pub prompt_cache_key: Option<Arc<str>>,
    /// Extended thinking with this token budget: Anthropic
    /// `thinking: {type: "enabled", budget_tokens}` (the API wants at least 1024, and less than
    /// `max_tokens`). Chat Completions servers ignore it (use
    /// [`reasoning_effort`](Self::reasoning_effort)).
    pub thinking_budget: Option<u32>,
    /// How hard a reasoning model should think: OpenAI's (and DeepSeek's) `reasoning_effort`,
    /// the Responses API's `reasoning.effort`, Anthropic's `output_config.effort` (as Claude
    /// Code sends it, `"medium"` by default for the models that take one). Command hooks see
    /// the agent's as `effort: {"level": …}` (see tower-agent's `command` module).
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// How hard a reasoning model should think: [`ModelSettings::reasoning_effort`], sent as
/// Chat Completions' `reasoning_effort` (`"minimal"`, `"low"`, `"medium"`, `"high"`, or any
/// other value a server documents).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// `"minimal"`.
    Minimal,
    /// `"low"`.
    Low,
    /// `"medium"`.
    Medium,
    /// `"high"`.
    High,
    /// Another value, sent as it is (e.g. `"none"`, `"xhigh"`, DeepSeek's `"max"`).
    Other(Cow<'static, str>),
}

impl ReasoningEffort {
    /// The value as sent.
    pub fn as_str(&self) -> &str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::Other(other) => other,
        }
    }
}

impl ModelSettings {
    /// These settings without what asks for another kind of answer than free text
    /// (structured output, a forced tool call, parallel calls): for a side call of a layer
    /// that wants plain text back with the run's model and limits, as the summary of a
    /// compaction does. Everything else (model, temperature, token limits, provider extras)
    /// is kept.
    ///
    /// ```
    /// use tower_agent_core::model::{ModelSettings, ToolChoice};
    ///
    /// let mut settings = ModelSettings::default().model("m").max_tokens(500);
    /// settings.tool_choice = Some(ToolChoice::Required);
    /// let summary = settings.free_text();
    /// assert_eq!(summary.tool_choice, None);
    /// assert_eq!((summary.model.as_deref(), summary.max_tokens), (Some("m"), Some(500)));
    /// ```
    #[must_use]
    pub fn free_text(&self) -> ModelSettings {
        let mut settings = self.clone();
        settings.response_format = None;
        settings.tool_choice = None;
        settings.parallel_tool_calls = None;
        settings
    }

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

    /// These settings with a tool choice.
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// These settings allowing (or not) several tool calls in one answer.
    #[must_use]
    pub fn parallel_tool_calls(mut self, on: bool) -> Self {
        self.parallel_tool_calls = Some(on);
        self
    }

    /// These settings with stop sequences.
    #[must_use]
    pub fn stop<S: Into<String>>(mut self, sequences: impl IntoIterator<Item = S>) -> Self {
        self.stop = sequences.into_iter().map(Into::into).collect();
        self
    }

    /// These settings with a `top_p`.
    #[must_use]
    pub fn top_p(mut self, p: f32) -> Self {
        self.top_p = Some(p);
        self
    }

    /// These settings with a seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// These settings asking for structured output.
    #[must_use]
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.response_format = Some(format);
        self
    }

    /// These settings with an OpenAI `prompt_cache_key`.
    #[must_use]
    pub fn prompt_cache_key(mut self, key: impl Into<Arc<str>>) -> Self {
        self.prompt_cache_key = Some(key.into());
        self
    }

    /// These settings with extra body fields (`extra` should be a JSON object; anything
    /// else is ignored).
    #[must_use]
    pub fn extra_body(mut self, extra: serde_json::Value) -> Self {
        self.extra_body = match extra {
            serde_json::Value::Object(map) => Some(Arc::new(map)),
            _ => None,
        };
        self
    }

    /// These settings with extended thinking on, with a budget of `tokens`.
    #[must_use]
    pub fn thinking_budget(mut self, tokens: u32) -> Self {
        self.thinking_budget = Some(tokens);
        self
    }

    /// These settings with a reasoning effort.
    #[must_use]
    pub fn reasoning_effort(mut self, effort: ReasoningEffort) -> Self {
        self.reasoning_effort = Some(effort);
        self
    }
}

/// What the model answered.
///
/// Equality compares the answer (message, usage, stop reason, metadata), not the
/// [`extensions`](Self::extensions) nor the [`body`](Self::body).
///
/// # Streaming
///
/// A streaming answer comes as its head (this, with no message, usage nor stop reason yet:
/// [`is_streaming`](Self::is_streaming) says which) and its [`body`](Self::body), the pieces
/// still to come, ending with the whole answer: see [`body`](mod@body). A clone of a
/// streaming response has an empty body (the stream stays with the original):
/// [`collect`](Self::collect) it first to clone the whole answer.
#[derive(Debug)]
pub struct ModelResponse {
    /// The assistant message (text and/or tool calls). Empty on the head of a streaming
    /// answer: the message is the whole answer's, at the stream's end (see below).
    pub message: Message,
    /// Token counts, if the provider reported them.
    ///
    /// `None` on the head of a streaming answer ([`is_streaming`](Self::is_streaming)) even
    /// when the provider reports usage: it comes with the whole answer, at the stream's
    /// [`Done`](body::ModelChunk::Done). A layer that counts tokens reads it there —
    /// [`on_end`](Self::on_end), [`map_done`](Self::map_done), [`then_done`](Self::then_done)
    /// or [`collect`](Self::collect), each at once for an answer that does not stream (the
    /// stateful layer guide of tower-agent counts a budget so).
    pub usage: Option<Usage>,
    /// Why the model stopped (on the head of a streaming answer, not the answer's yet: the
    /// whole answer's is at the stream's end).
    pub stop_reason: StopReason,
    /// Who answered and how, as the provider reported it (for tracing: see
    /// tower-agent's `layers::trace`).
    pub meta: ResponseMeta,
    /// What layers of the model stack report with the answer, typed, as
    /// [`http::Response::extensions`](::http::Response::extensions) do: the loop reads a
    /// [`Compaction`](crate::context::Compaction) (a layer compacted the request: the thread
    /// keeps it) and a [`Display`] (the text a MessageDisplay hook
    /// shows) here. A layer of yours can carry its own data to an outer layer.
    pub extensions: ::http::Extensions,
    /// The rest of a streaming answer; empty when the answer is whole (see
    /// [`body`](mod@body)).
    pub body: ModelBody,
}

impl Clone for ModelResponse {
    fn clone(&self) -> Self {
        ModelResponse {
            message: self.message.clone(),
            usage: self.usage,
            stop_reason: self.stop_reason.clone(),
            meta: self.meta.clone(),
            extensions: self.extensions.clone(),
            body: ModelBody::empty(),
        }
    }
}

impl PartialEq for ModelResponse {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
            && self.usage == other.usage
            && self.stop_reason == other.stop_reason
            && self.meta == other.meta
    }
}

/// The text to display for a response's message in place of its own (the
/// [`AgentEvent::MessageDisplay`](crate::agent::AgentEvent::MessageDisplay) event), carried
/// in [`ModelResponse::extensions`] by the model layer that decided it (MessageDisplay hooks).
/// The history keeps the model's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Display(pub String);

/// What a provider reports about a response besides its content: the provider's name, the
/// model asked for and the one that answered, the response's id and the finish reasons in
/// the provider's own words. tower-agent's `TraceLayer` records them
/// as the OpenTelemetry attributes `gen_ai.provider.name`, `gen_ai.request.model`,
/// `gen_ai.response.model`, `gen_ai.response.id` and `gen_ai.response.finish_reasons`.
///
/// Every field is optional: a model service that knows nothing of these leaves them empty.
/// The strings come from the provider's answer, which is already bounded by its
/// `max_response_bytes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseMeta {
    /// The provider, as the OpenTelemetry GenAI conventions name it: `"openai"` (also for
    /// compatible servers), `"anthropic"`, or a custom name.
    pub provider: Option<Cow<'static, str>>,
    /// The model the request asked for (the request's [`ModelSettings::model`], else the
    /// provider's default).
    pub request_model: Option<Arc<str>>,
    /// The model that answered, as the response names it (e.g. `gpt-4o-2024-08-06`).
    pub model: Option<String>,
    /// The response's id (e.g. `chatcmpl-123`, `msg_01…`).
    pub id: Option<String>,
    /// The finish reason of each generation, in the provider's own words (`stop`,
    /// `tool_calls`, `length` for OpenAI; `end_turn`, `tool_use`, `max_tokens` for
    /// Anthropic).
    pub finish_reasons: Vec<String>,
    /// The model's refusal message, when the provider sends one apart from the answer
    /// (OpenAI's `message.refusal`); the stop reason is then
    /// [`StopReason::Refusal`]. Not part of the answer's text.
    pub refusal: Option<String>,
}

impl ResponseMeta {
    /// Metadata naming the provider.
    pub fn new(provider: impl Into<Cow<'static, str>>) -> Self {
        ResponseMeta {
            provider: Some(provider.into()),
            ..Self::default()
        }
    }

    /// This metadata with the model asked for.
    #[must_use]
    pub fn request_model(mut self, model: impl Into<Arc<str>>) -> Self {
        self.request_model = Some(model.into());
        self
    }

    /// This metadata with the model that answered.
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// This metadata with the response id.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// This metadata with the finish reasons.
    #[must_use]
    pub fn finish_reasons(mut self, reasons: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.finish_reasons = reasons.into_iter().map(Into::into).collect();
        self
    }
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
            meta: ResponseMeta::default(),
            extensions: ::http::Extensions::new(),
            body: ModelBody::empty(),
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

    /// This response with provider metadata.
    #[must_use]
    pub fn with_meta(mut self, meta: ResponseMeta) -> Self {
        self.meta = meta;
        self
    }

    /// Adds a reminder for the model to this response (see
    /// [`Reminders`](crate::message::Reminders)): the loop takes it as the response arrives
    /// and adds it after the step's tool results (a step that calls no tool keeps it for the
    /// next step that does); a model layer above this one sees it in the response's
    /// extensions.
    pub fn remind(&mut self, text: impl Into<String>) {
        crate::message::Reminders::push(&mut self.extensions, text);
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
