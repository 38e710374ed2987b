//! [`OpenAiChat`]: the OpenAI Chat Completions API over reqwest — for OpenAI and every
//! compatible server (vLLM, Ollama, llama.cpp's server, LiteLLM, LM Studio …).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//! use tower_agent::{Agent, model::{ModelSettings, RetryPolicy, openai::OpenAiChat}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::Error> {
//! // OpenAI itself…
//! let openai = OpenAiChat::builder()
//!     .api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default())
//!     .model("gpt-4.1-mini")
//!     .build();
//! // …or a local server (no key needed).
//! let _ollama = OpenAiChat::builder()
//!     .base_url("http://localhost:11434/v1")
//!     .model("qwen3:8b")
//!     .max_tokens_param(tower_agent::model::openai::MaxTokensParam::MaxTokens)
//!     .build();
//!
//! let agent = Agent::builder()
//!     .model(
//!         ServiceBuilder::new()
//!             .retry(RetryPolicy::new())
//!             .timeout(Duration::from_secs(120))
//!             .service(openai),
//!     )
//!     .settings(ModelSettings::default().stream(true))
//!     .build();
//! let resp = agent.run("Say hello").await?;
//! println!("{}", resp.text);
//! # Ok(())
//! # }
//! ```
//!
//! # Mapping
//!
//! | tower-agent | Chat Completions |
//! |---|---|
//! | system / user / assistant messages | `messages[]` with `role` `system` / `user` / `assistant` (text as a string; a user message with images as `text` / `image_url` parts) |
//! | assistant tool calls | `tool_calls: [{id, type: "function", function: {name, arguments}}]`, `arguments` a JSON string |
//! | tool results | `{role: "tool", tool_call_id, content}` (an error result is its text; the API has no error flag); images a tool returned ([`ToolOutput::with_image`](crate::message::ToolOutput::with_image)) follow the run of tool results in one `user` message of `image_url` parts, as a tool message holds only text; documents ([`Content::Document`]) are `file` parts `{file_data, filename}`, and a document by `https:` URL fails the call as an invalid request (the API takes only data) |
//! | [`ToolSpec`](crate::message::ToolSpec)s | `tools: [{type: "function", function: {name, description, parameters}}]` and `tool_choice` (`"auto"` unless [`ModelSettings::tool_choice`](crate::model::ModelSettings::tool_choice) says `"none"`, `"required"` or `{type: "function", function: {name}}`) |
//! | [`ModelSettings`](crate::model::ModelSettings) | `model` (else the provider's), `temperature`, `max_completion_tokens` (or `max_tokens`, see [`MaxTokensParam`]), `reasoning_effort`, `stream` with `stream_options: {include_usage: true}`, `top_p`, `stop`, `seed`, `parallel_tool_calls` (with tools only), `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`, `prompt_cache_key`; `extra_body` merged at the top level (its keys win) |
//! | answer | `choices[0].message`: `content` as text, `refusal` apart (stop reason [`StopReason::Refusal`], its text in [`ResponseMeta::refusal`](crate::model::ResponseMeta::refusal)), `tool_calls` with their `arguments` parsed; arguments that are not JSON are kept as a JSON string, which the [`ToolRouter`](crate::tool::ToolRouter) reports to the model; `reasoning_content` (DeepSeek, vLLM, llama.cpp) or else `reasoning` (OpenRouter, Ollama), when a string, as one [`Content::Reasoning`] part before the text |
//! | [`Content::Reasoning`] of earlier assistant messages | `reasoning_content` on the assistant messages of turns that made tool calls (DeepSeek's rule), never to `api.openai.com`: see [`ReasoningReplay`] |
//! | [`Content::Provider`] parts, and the [`opaque`](crate::message::Reasoning::opaque) items of reasoning | never sent: they are other APIs' items (an Anthropic server-tool block, a Responses API reasoning item) |
//! | `usage` | `prompt_tokens` → `input_tokens`, `completion_tokens` → `output_tokens`; `prompt_tokens_details.cached_tokens` → `cache_read_tokens` and `completion_tokens_details.reasoning_tokens` → `reasoning_tokens` (among them) |
//! | `finish_reason` | `stop` → `EndTurn` (`ToolUse` if there are tool calls), `tool_calls` → `ToolUse`, `length` → `MaxTokens`, others → `Other` |
//!
//! # Streaming
//!
//! With [`ModelSettings::stream`](crate::model::ModelSettings::stream) on, the answer is read
//! as server-sent events: each text piece and each piece of a tool call (its id and name
//! first, then its argument text) is sent to the run's events as an
//! [`AgentEvent::ModelDelta`] as it arrives (built only
//! if someone listens), and the service still returns one whole [`ModelResponse`].
//! `reasoning_content` / `reasoning` deltas are sent as [`ModelDelta::Reasoning`], apart
//! from the text. Tool-call pieces are put together by their `index`, and by their id where
//! the index cannot be trusted: a piece with a new id at an index already taken starts a new
//! call (Ollama sends every call at `index: 0`), a repeated id is kept once, and a server that
//! sends no `index` starts a new call with each new id. A stream
//! that ends before `data: [DONE]` is an error
//! ([`is_incomplete`](crate::model::ProviderError::is_incomplete)), never a short answer.
//!
//! # Limits
//!
//! Besides [the providers' limits](crate::model#limits): streamed reasoning counts toward
//! `max_response_bytes` with the text and tool-call arguments (so endless reasoning fails the
//! call at that size, 16 MiB by default), and each tool call started costs 128 bytes of it
//! more, so a stream of empty calls is bounded too.
//!
//! # Errors
//!
//! Every failure is a [`ProviderError`] in the [`BoxError`]:
//! rate limits, server errors, a bad key, a context too long, a malformed answer. Stack
//! [`RetryPolicy`](crate::model::RetryPolicy) with tower's `retry` to retry what is
//! transient.

use std::{
    borrow::Cow,
    collections::BTreeMap,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower::Service;

use super::http::ResponseFuture;
use super::{
    DEFAULT_MAX_RESPONSE_BYTES, ModelRequest, ModelResponse, ResponseFormat, ResponseMeta,
    ToolChoice,
    error::ProviderError,
    http::{self, Endpoint, Transport},
};
use crate::{
    context::RunContext,
    error::BoxError,
    event::{AgentEvent, ModelDelta},
    message::{Content, Message, Reasoning, Role, StopReason, ToolCall},
};

const PROVIDER: &str = "openai";

/// The base URL used when none is set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when neither the provider nor the request names one.
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// Which request field carries [`ModelSettings::max_tokens`](crate::model::ModelSettings).
///
/// OpenAI deprecated `max_tokens` for `max_completion_tokens`, and its reasoning models reject
/// `max_tokens`; vLLM, llama.cpp and LiteLLM accept both. Ollama and LM Studio read only
/// `max_tokens` (they ignore the other field), so choose [`MaxTokens`](Self::MaxTokens) for
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MaxTokensParam {
    /// `max_completion_tokens` (the default: the current API).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens` (the older field, for servers that know only it).
    MaxTokens,
}

/// Whether the reasoning of earlier assistant messages ([`Content::Reasoning`] text) goes
/// back to the server, as `reasoning_content` on the assistant message.
///
/// DeepSeek's thinking mode (and servers that copy it) returns the model's reasoning as
/// `reasoning_content` and documents: between two user messages, if the model made tool
/// calls, the `reasoning_content` of those assistant messages must be sent back in all
/// later requests (else the API answers 400); if it made none, that reasoning need not be
/// sent (it is ignored). OpenAI's own API returns no reasoning in Chat Completions and must
/// not get the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningReplay {
    /// DeepSeek's rule: `reasoning_content` on every assistant message of a turn (the
    /// messages between two user messages) that made tool calls; none elsewhere. The default
    /// for every base URL but `api.openai.com`.
    ToolTurns,
    /// Never send reasoning back (the default for `api.openai.com`).
    Never,
}

/// A model service speaking the OpenAI Chat Completions API. See the
/// [module docs](crate::model::openai).
///
/// # Clone
///
/// Cloning is two reference counts; clones share the HTTP client and its connections.
#[derive(Clone)]
pub struct OpenAiChat {
    shared: Arc<Shared>,
    transport: Transport,
}

struct Shared {
    endpoint: Endpoint,
    model: Arc<str>,
    max_tokens_param: MaxTokensParam,
    has_key: bool,
    max_response_bytes: usize,
    reasoning_replay: ReasoningReplay,
}

impl OpenAiChat {
    /// A builder: base URL [`DEFAULT_BASE_URL`], model [`DEFAULT_MODEL`], no API key.
    pub fn builder() -> OpenAiChatBuilder {
        OpenAiChatBuilder {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: DEFAULT_MODEL.to_owned(),
            organization: None,
            headers: Vec::new(),
            transport: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_tokens_param: MaxTokensParam::default(),
            reasoning_replay: None,
        }
    }

    /// The provider configured from the environment, if `OPENAI_API_KEY` or
    /// `OPENAI_BASE_URL` is set: the key, the base URL (for a compatible server), the model
    /// from `TOWER_AGENT_MODEL` (else [`DEFAULT_MODEL`]) and the organization from
    /// `OPENAI_ORG_ID`. Empty variables count as unset.
    pub fn from_env() -> Option<Self> {
        let key = http::env("OPENAI_API_KEY");
        let base_url = http::env("OPENAI_BASE_URL");
        if key.is_none() && base_url.is_none() {
            return None;
        }
        let mut builder = Self::builder();
        if let Some(key) = key {
            builder = builder.api_key(key);
        }
        if let Some(url) = base_url {
            builder = builder.base_url(url);
        }
        if let Some(model) = http::env("TOWER_AGENT_MODEL") {
            builder = builder.model(model);
        }
        if let Some(org) = http::env("OPENAI_ORG_ID") {
            builder = builder.organization(org);
        }
        Some(builder.build())
    }

    /// The model asked for when a request names none.
    pub fn model(&self) -> &str {
        &self.shared.model
    }

    /// The URL requests are posted to (`{base_url}/chat/completions`).
    pub fn url(&self) -> &str {
        self.shared.endpoint.url()
    }
}

impl fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("url", &self.shared.endpoint.url())
            .field("model", &self.shared.model)
            .field("api_key", &self.shared.has_key.then_some("<redacted>"))
            .field("max_tokens_param", &self.shared.max_tokens_param)
            .finish_non_exhaustive()
    }
}

/// Builds an [`OpenAiChat`]. From [`OpenAiChat::builder`].
#[must_use]
pub struct OpenAiChatBuilder {
    base_url: String,
    api_key: Option<String>,
    model: String,
    organization: Option<String>,
    headers: Vec<(String, String)>,
    transport: Option<Transport>,
    max_response_bytes: usize,
    max_tokens_param: MaxTokensParam,
    reasoning_replay: Option<ReasoningReplay>,
}

impl OpenAiChatBuilder {
    /// The API's base URL (default [`DEFAULT_BASE_URL`]); requests go to
    /// `{base_url}/chat/completions`. For a compatible server, e.g.
    /// `http://localhost:8000/v1` (vLLM) or `http://localhost:11434/v1` (Ollama).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key, sent as `Authorization: Bearer …` (local servers often need none).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model asked for when a request's settings name none (default [`DEFAULT_MODEL`]).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The organization, sent as `OpenAI-Organization`.
    pub fn organization(mut self, org: impl Into<String>) -> Self {
        self.organization = Some(org.into());
        self
    }

    /// One more header on every request (it replaces a header of the same name, the
    /// `Authorization` one included).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The `reqwest::Client` to send with (its timeouts, proxy, TLS settings and pool); by
    /// default a new one with reqwest's defaults.
    pub fn client(self, client: reqwest::Client) -> Self {
        self.transport(client)
    }

    /// Any service of reqwest requests to send with — a `reqwest::Client` wrapped in tower
    /// layers (rate limits, recording, test doubles).
    pub fn transport<S>(mut self, service: S) -> Self
    where
        S: Service<reqwest::Request, Response = reqwest::Response> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.transport = Some(http::transport(service));
        self
    }

    /// Which field carries the token limit (default `max_completion_tokens`).
    pub fn max_tokens_param(mut self, param: MaxTokensParam) -> Self {
        self.max_tokens_param = param;
        self
    }

    /// The most bytes of an answer kept in memory (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`], 16 MiB): a whole response body longer than this (or
    /// announcing it in `Content-Length`) fails as soon as the limit is passed, without
    /// reading the rest, and so does a streamed answer whose text and tool-call arguments
    /// grow past it. One server-sent event may hold at most
    /// [`MAX_SSE_EVENT_BYTES`](crate::model::MAX_SSE_EVENT_BYTES) (4 MiB) or this limit if
    /// smaller. The error [`is_malformed_response`](ProviderError::is_malformed_response)
    /// and says which limit was passed. See [the limits](crate::model#limits).
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// Whether reasoning goes back to the server (default: [`ReasoningReplay::Never`] for
    /// `api.openai.com`, else [`ReasoningReplay::ToolTurns`], DeepSeek's rule).
    pub fn reasoning_replay(mut self, replay: ReasoningReplay) -> Self {
        self.reasoning_replay = Some(replay);
        self
    }

    /// The provider. An invalid base URL or header does not fail here: every call then fails
    /// with [`ProviderError::is_config`].
    pub fn build(self) -> OpenAiChat {
        let reasoning_replay = self.reasoning_replay.unwrap_or_else(|| {
            let host = reqwest::Url::parse(&self.base_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            if host.as_deref() == Some("api.openai.com") {
                ReasoningReplay::Never
            } else {
                ReasoningReplay::ToolTurns
            }
        });
        let (transport, config_error) = match self.transport {
            Some(t) => (t, None),
            None => http::default_transport(),
        };
        let mut headers = Vec::new();
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        if let Some(org) = self.organization {
            headers.push(("openai-organization".to_owned(), org));
        }
        headers.extend(self.headers);
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        OpenAiChat {
            shared: Arc::new(Shared {
                endpoint: Endpoint::new(PROVIDER, url, &headers, config_error),
                model: self.model.into(),
                max_tokens_param: self.max_tokens_param,
                has_key: self.api_key.is_some(),
                max_response_bytes: self.max_response_bytes,
                reasoning_replay,
            }),
            transport,
        }
    }
}

impl fmt::Debug for OpenAiChatBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiChatBuilder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("organization", &self.organization)
            .field("headers", &self.headers.len())
            .field("transport", &self.transport.is_some())
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_tokens_param", &self.max_tokens_param)
            .field("reasoning_replay", &self.reasoning_replay)
            .finish()
    }
}

impl Service<ModelRequest> for OpenAiChat {
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.transport
            .poll_ready(cx)
            .map_err(|e| http::transport_error(PROVIDER, e).into())
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        if let Some(url) = remote_document(&req) {
            return ResponseFuture::failed(
                ProviderError::new(PROVIDER, super::error::Kind::InvalidRequest).with_message(
                    format!(
                        "Chat Completions takes a document only as a `data:` URL, not {}",
                        url.chars().take(100).collect::<String>()
                    ),
                ),
            );
        }
        let mut body = request_body(&req, &self.shared.model, self.shared.max_tokens_param);
        if self.shared.reasoning_replay == ReasoningReplay::ToolTurns {
            replay_reasoning(&mut body.messages, &req);
        }
        let http_req = match super::options::encode(&body, req.settings.extra_body.as_ref())
            .map_err(|e| {
                ProviderError::new(PROVIDER, super::error::Kind::InvalidRequest)
                    .with_message(format!("the request could not be encoded: {e}"))
            })
            .and_then(|body| self.shared.endpoint.post(body))
        {
            Ok(r) => r,
            Err(err) => return ResponseFuture::failed(err),
        };
        // NOTE: the transport was made ready by `poll_ready`; only its future moves on.
        let sent = self.transport.call(http_req);
        let stream = req.settings.stream;
        let ctx = req.ctx;
        let max_bytes = self.shared.max_response_bytes;
        let request_model = match &req.settings.model {
            Some(model) => Arc::clone(model),
            None => Arc::clone(&self.shared.model),
        };
        ResponseFuture::new(async move {
            let resp = http::check(PROVIDER, sent).await?;
            let status = resp.status().as_u16();
            let mut response = if stream && !http::is_json(&resp) {
                read_stream(resp, &ctx, max_bytes).await?
            } else {
                let body = http::body(PROVIDER, resp, max_bytes).await?;
                parse_response(status, &body)?
            };
            response.meta.request_model = Some(request_model);
            Ok(response)
        })
    }
}

// ===== request =====

#[derive(Serialize)]
/// The body's fields with what does not change within a run first (settings, then tools) and
/// the growing conversation last, so a request's body is a byte-identical prefix of the next
/// request's up to its last messages (prompt caching matches prefixes).
struct ChatRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ChatTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    messages: Vec<ChatMessage<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ChatMessage<'a> {
    System {
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl<'a> },
    File { file: FileData<'a> },
}

#[derive(Serialize)]
struct FileData<'a> {
    file_data: &'a str,
    filename: &'a str,
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

#[derive(Serialize)]
struct ChatToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    name: &'a str,
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionSpec<'a>,
}

#[derive(Serialize)]
struct FunctionSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn request_body<'a>(
    req: &'a ModelRequest,
    default_model: &'a str,
    param: MaxTokensParam,
) -> ChatRequest<'a> {
    let settings = &req.settings;
    let tools: Vec<ChatTool<'a>> = req
        .tools
        .iter()
        .map(|spec| ChatTool {
            kind: "function",
            function: FunctionSpec {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        })
        .collect();
    let (max_completion_tokens, max_tokens) = match param {
        MaxTokensParam::MaxCompletionTokens => (settings.max_tokens, None),
        MaxTokensParam::MaxTokens => (None, settings.max_tokens),
    };
    ChatRequest {
        model: settings.model.as_deref().unwrap_or(default_model),
        messages: chat_messages(req.messages.iter()),
        tool_choice: (!tools.is_empty()).then(|| tool_choice(settings.tool_choice.as_ref())),
        parallel_tool_calls: settings.parallel_tool_calls.filter(|_| !tools.is_empty()),
        prompt_cache_key: settings.prompt_cache_key.as_deref(),
        tools,
        temperature: settings.temperature,
        top_p: settings.top_p,
        stop: &settings.stop,
        seed: settings.seed,
        response_format: settings.response_format.as_ref().map(response_format),
        max_completion_tokens,
        max_tokens,
        reasoning_effort: settings.reasoning_effort.as_ref().map(|e| e.as_str()),
        stream: settings.stream,
        stream_options: settings.stream.then_some(StreamOptions {
            include_usage: true,
        }),
    }
}

/// `tool_choice` as Chat Completions documents it (`auto` when not set).
fn tool_choice(choice: Option<&ToolChoice>) -> Value {
    match choice {
        None | Some(ToolChoice::Auto) => Value::from("auto"),
        Some(ToolChoice::None) => Value::from("none"),
        Some(ToolChoice::Required) => Value::from("required"),
        Some(ToolChoice::Tool(name)) => {
            serde_json::json!({"type": "function", "function": {"name": &**name}})
        }
    }
}

/// `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`.
fn response_format(format: &ResponseFormat) -> Value {
    serde_json::json!({
        "type": "json_schema",
        "json_schema": {"name": &*format.name, "schema": &*format.schema, "strict": format.strict},
    })
}

/// The conversation as Chat Completions messages. A `tool` message holds only text, so the
/// images and documents a tool returned go in one `user` message right after the run of tool
/// results, each tool's introduced by the call id it came from (the workaround OpenAI's forum and the
/// peers use; the API has no image in a tool message).
fn chat_messages<'a>(history: impl Iterator<Item = &'a Message>) -> Vec<ChatMessage<'a>> {
    let mut out = Vec::new();
    let mut images: Vec<Part<'a>> = Vec::new();
    for m in history {
        if m.role != Role::Tool && !images.is_empty() {
            out.push(ChatMessage::User {
                content: UserContent::Parts(std::mem::take(&mut images)),
            });
        }
        if m.role == Role::Tool {
            let mut media = m
                .content
                .iter()
                .filter(|c| matches!(c, Content::Image { .. } | Content::Document { .. }));
            if let Some(first) = media.next() {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                images.push(Part::Text {
                    text: Cow::Owned(format!("What tool call {id} returned:")),
                });
                images.extend(std::iter::once(first).chain(media).filter_map(part));
            }
        }
        out.push(chat_message(m));
    }
    if !images.is_empty() {
        out.push(ChatMessage::User {
            content: UserContent::Parts(images),
        });
    }
    out
}

/// A content part: `text`, `image_url`, or `file` (a document as a `data:` URL); reasoning
/// is never a part.
fn part(c: &Content) -> Option<Part<'_>> {
    Some(match c {
        Content::Text { text } => Part::Text {
            text: Cow::Borrowed(text),
        },
        Content::Image { url } => Part::ImageUrl {
            image_url: ImageUrl { url },
        },
        Content::Document { url, name } => Part::File {
            file: FileData {
                file_data: url,
                filename: name.as_deref().unwrap_or("document.pdf"),
            },
        },
        Content::Reasoning(_) | Content::Provider(_) => return None,
    })
}

/// The first document of the history given by an `https:` (not a `data:`) URL: Chat
/// Completions takes a file only as data or as an uploaded file's id.
fn remote_document(req: &ModelRequest) -> Option<&str> {
    req.messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|c| match c {
            Content::Document { url, .. } if !url.starts_with("data:") => Some(url.as_str()),
            _ => None,
        })
}

fn chat_message(m: &Message) -> ChatMessage<'_> {
    match m.role {
        Role::System => ChatMessage::System { content: m.text() },
        Role::User => {
            let content = if m
                .content
                .iter()
                .all(|c| !matches!(c, Content::Image { .. }))
            {
                UserContent::Text(m.text())
            } else {
                UserContent::Parts(m.content.iter().filter_map(part).collect())
            };
            ChatMessage::User { content }
        }
        Role::Assistant => {
            let text = m.text();
            ChatMessage::Assistant {
                content: (!text.is_empty() || m.tool_calls.is_empty()).then_some(text),
                reasoning_content: None,
                tool_calls: m
                    .tool_calls
                    .iter()
                    .map(|call| ChatToolCall {
                        id: &call.id,
                        kind: "function",
                        function: FunctionCall {
                            name: &call.name,
                            arguments: match &call.arguments {
                                // Arguments the model wrote that were not JSON go back as
                                // they were.
                                Value::String(raw) => Cow::Borrowed(raw),
                                other => Cow::Owned(other.to_string()),
                            },
                        },
                    })
                    .collect(),
            }
        }
        Role::Tool => ChatMessage::Tool {
            tool_call_id: m.tool_call_id.as_deref().unwrap_or_default(),
            content: m.text(),
        },
    }
}

/// Sets `reasoning_content` on the assistant messages of the turns that made tool calls
/// ([`ReasoningReplay::ToolTurns`]): a turn is the messages between two user messages, as the
/// server sees them (`out`, the messages as sent). `chat_messages` keeps the assistant
/// messages one to one and in order (it only adds user messages for tools' images), so the
/// n-th assistant message of `out` is the n-th of the history.
fn replay_reasoning(out: &mut [ChatMessage<'_>], req: &ModelRequest) {
    // The common case (a model that does not reason): nothing to send back, nothing built.
    if !req.messages.iter().any(|m| m.reasoning().next().is_some()) {
        return;
    }
    let mut assistants = req.messages.iter().filter(|m| m.role == Role::Assistant);
    let mut start = 0;
    while start < out.len() {
        let end = out[start + 1..]
            .iter()
            .position(|m| matches!(m, ChatMessage::User { .. }))
            .map_or(out.len(), |i| start + 1 + i);
        let turn = &mut out[start..end];
        // Each assistant message's reasoning text, and whether it made tool calls.
        let replies: Vec<(String, bool)> = turn
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .map_while(|_| assistants.next())
            .map(|m| {
                let text = m.reasoning().map(|r| r.text.as_str()).collect();
                (text, !m.tool_calls.is_empty())
            })
            .collect();
        if replies.iter().any(|(_, calls)| *calls) {
            let mut replies = replies.into_iter();
            for chat in turn.iter_mut() {
                if let ChatMessage::Assistant {
                    reasoning_content, ..
                } = chat
                    && let Some((text, _)) = replies.next()
                {
                    *reasoning_content = (!text.is_empty()).then_some(text);
                }
            }
        }
        start = end;
    }
}

/// The reasoning text of a message or delta: `reasoning_content` (DeepSeek, vLLM, llama.cpp)
/// or `reasoning` (OpenRouter, Ollama, newer vLLM), when it is a string.
fn reasoning_text(reasoning_content: Option<Value>, reasoning: Option<Value>) -> Option<String> {
    [reasoning_content, reasoning]
        .into_iter()
        .flatten()
        .find_map(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s),
            _ => None,
        })
}

// ===== response =====

// NOTE: `Option`s where a compatible server may send `null` rather than leave a field out.
#[derive(Deserialize)]
struct ChatResponse {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
struct ResponseToolCall {
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Deserialize)]
struct ResponseFunction {
    name: String,
    arguments: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
struct ChatUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize, Clone, Copy)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Clone, Copy)]
struct CompletionTokensDetails {
    reasoning_tokens: Option<u64>,
}

impl ChatUsage {
    /// The usage, with the cached prompt tokens and the reasoning tokens among the others.
    fn usage(self) -> Option<crate::message::Usage> {
        let mut usage = http::usage(self.prompt_tokens, self.completion_tokens)?;
        usage.cache_read_tokens = self
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or_default();
        usage.reasoning_tokens = self
            .completion_tokens_details
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or_default();
        Some(usage)
    }
}

fn parse_response(status: u16, body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let resp: ChatResponse = http::parse_json(PROVIDER, status, body)?;
    if let Some(error) = &resp.error {
        return Err(http::error_object(PROVIDER, error).with_status(status));
    }
    let Some(choice) = resp.choices.unwrap_or_default().into_iter().next() else {
        return Err(
            http::malformed(PROVIDER, "the response has no choices", body).with_status(status),
        );
    };
    let message = choice.message;
    let reasoning = reasoning_text(message.reasoning_content, message.reasoning);
    let text = message.content.unwrap_or_default();
    let calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let arguments = http::parse_arguments(c.function.arguments.unwrap_or_default());
            ToolCall::new(c.id.unwrap_or_default(), c.function.name, arguments)
        })
        .collect();
    let mut response = refused(
        response(
            text,
            calls,
            choice.finish_reason.as_deref(),
            resp.usage,
            meta(resp.id, resp.model, choice.finish_reason.as_deref()),
        ),
        message.refusal,
    );
    response.message = response
        .message
        .with_reasoning(reasoning.map(Reasoning::text));
    Ok(response)
}

/// The response's metadata: provider `"openai"`, the id and model the server named,
/// and the finish reason as the server said it.
fn meta(id: Option<String>, model: Option<String>, finish_reason: Option<&str>) -> ResponseMeta {
    let mut meta = ResponseMeta::new(PROVIDER);
    meta.id = id;
    meta.model = model;
    meta.finish_reasons = finish_reason.map(str::to_owned).into_iter().collect();
    meta
}

fn response(
    text: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<&str>,
    usage: Option<ChatUsage>,
    meta: ResponseMeta,
) -> ModelResponse {
    let stop_reason = match finish_reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        // Some compatible servers say `stop` after tool calls.
        Some("stop") | None if !calls.is_empty() => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    ModelResponse {
        message: Message::assistant(text).with_tool_calls(calls),
        usage: usage.and_then(ChatUsage::usage),
        stop_reason,
        meta,
    }
}

/// `resp` with the model's refusal (OpenAI's `refusal` field, kept out of the text): stop
/// reason [`StopReason::Refusal`], the message in [`ResponseMeta::refusal`].
fn refused(mut resp: ModelResponse, refusal: Option<String>) -> ModelResponse {
    if let Some(refusal) = refusal.filter(|r| !r.is_empty()) {
        resp.stop_reason = StopReason::Refusal;
        resp.meta.refusal = Some(refusal);
    }
    resp
}

// ===== streaming =====

#[derive(Deserialize)]
struct Chunk {
    id: Option<String>,
    model: Option<String>,
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

/// What a tool call being put together costs besides its text, counted in
/// `Assembly::kept` (so a stream of empty calls is bounded too).
const CALL_OVERHEAD: usize = 128;

/// A streamed answer being put together.
#[derive(Default)]
struct Assembly {
    /// Bytes put together so far (text, and the calls with an overhead each), checked
    /// against `max_response_bytes`.
    kept: usize,
    text: String,
    /// The refusal, streamed apart from the text.
    refusal: String,
    reasoning: String,
    /// The calls (id, name, argument text), in the order they started.
    calls: Vec<(String, String, String)>,
    /// The server's `index` of a call → its place in `calls` (the latest call at that index).
    slots: BTreeMap<usize, usize>,
    last_slot: Option<usize>,
    finish_reason: Option<String>,
    usage: Option<ChatUsage>,
    /// The response id and model, from the first chunk that names them.
    id: Option<String>,
    model: Option<String>,
}

impl Assembly {
    /// Takes one chunk; `Ok(true)` at `[DONE]`.
    fn push(&mut self, data: &str, ctx: &RunContext) -> Result<bool, ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a streamed chunk is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        if let Some(error) = &chunk.error {
            return Err(http::error_object(PROVIDER, error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        // Every chunk repeats them; the first is kept (so a long stream holds one copy).
        if self.id.is_none() {
            self.id = chunk.id;
        }
        if self.model.is_none() {
            self.model = chunk.model;
        }
        let choices = chunk.choices.unwrap_or_default();
        for choice in choices.into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let delta = choice.delta.unwrap_or_default();
            if let Some(text) = reasoning_text(delta.reasoning_content, delta.reasoning) {
                self.kept = self.kept.saturating_add(text.len());
                self.reasoning.push_str(&text);
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step: ctx.step(),
                    delta: ModelDelta::Reasoning { text },
                });
            }
            if let Some(refusal) = delta.refusal {
                self.kept = self.kept.saturating_add(refusal.len());
                self.refusal.push_str(&refusal);
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.kept = self.kept.saturating_add(text.len());
                self.text.push_str(&text);
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step: ctx.step(),
                    delta: ModelDelta::Text { text },
                });
            }
            for call in delta.tool_calls.into_iter().flatten() {
                self.push_call(call, ctx);
            }
        }
        Ok(false)
    }

    fn push_call(&mut self, call: DeltaToolCall, ctx: &RunContext) {
        let id = call.id.filter(|id| !id.is_empty());
        let slot = match call.index {
            // A new id at an index already taken is a new call: Ollama puts every call at
            // `index: 0`, each with its own id.
            Some(index) => match self.slots.get(&index) {
                Some(&slot)
                    if id.as_ref().is_none_or(|id| {
                        self.calls[slot].0.is_empty() || self.calls[slot].0 == *id
                    }) =>
                {
                    slot
                }
                _ => {
                    self.slots.insert(index, self.calls.len());
                    self.calls.len()
                }
            },
            // Servers that leave out `index` send a new id for each new call.
            None => match (self.last_slot, &id) {
                (Some(last), Some(id)) if self.calls[last].0 == *id => last,
                (Some(last), None) => last,
                _ => self.calls.len(),
            },
        };
        self.last_slot = Some(slot);
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments.unwrap_or_default()),
            None => (None, String::new()),
        };
        let added = id.as_ref().map_or(0, String::len)
            + name.as_ref().map_or(0, String::len)
            + arguments.len();
        if slot == self.calls.len() {
            self.kept = self.kept.saturating_add(CALL_OVERHEAD);
            self.calls.push(Default::default());
        }
        self.kept = self.kept.saturating_add(added);
        let entry = &mut self.calls[slot];
        // Some servers repeat the id on every piece: it is set once.
        if let Some(id) = &id
            && entry.0.is_empty()
        {
            entry.0.push_str(id);
        }
        if let Some(name) = &name {
            entry.1.push_str(name);
        }
        entry.2.push_str(&arguments);
        ctx.emit_with(|| AgentEvent::ModelDelta {
            step: ctx.step(),
            delta: ModelDelta::ToolCall {
                index: slot,
                id,
                name,
                arguments,
            },
        });
    }

    fn finish(self) -> ModelResponse {
        let calls = self
            .calls
            .into_iter()
            .map(|(id, name, args)| ToolCall::new(id, name, http::parse_arguments(args)))
            .collect();
        let meta = meta(self.id, self.model, self.finish_reason.as_deref());
        let mut response = refused(
            response(
                self.text,
                calls,
                self.finish_reason.as_deref(),
                self.usage,
                meta,
            ),
            Some(self.refusal),
        );
        if !self.reasoning.is_empty() {
            response.message = response
                .message
                .with_reasoning([Reasoning::text(self.reasoning)]);
        }
        response
    }
}

async fn read_stream(
    resp: reqwest::Response,
    ctx: &RunContext,
    max_bytes: usize,
) -> Result<ModelResponse, ProviderError> {
    let mut assembly = Assembly::default();
    let done = http::read_events(PROVIDER, resp, max_bytes, |event| {
        let done = assembly.push(&event.data, ctx)?;
        http::check_kept(PROVIDER, assembly.kept, max_bytes)?;
        Ok(done)
    })
    .await?;
    if !done {
        return Err(http::incomplete(PROVIDER, "`data: [DONE]`"));
    }
    Ok(assembly.finish())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::{ToolOutput, ToolSpec};

    #[test]
    fn body_maps_messages_tools_and_settings() {
        let mut req = ModelRequest::new(vec![
            Message::system("Be brief."),
            Message::user("Weather?"),
            Message::assistant("").with_tool_calls(vec![
                ToolCall::new("call_1", "weather", json!({"city": "Oslo"})),
                ToolCall::new("call_2", "weather", Value::String("{bad".into())),
            ]),
            Message::tool_result(&ToolOutput::text("call_1", "rain")),
            Message::tool_result(&ToolOutput::error("call_2", "not JSON")),
        ]);
        req.tools = Arc::new(vec![ToolSpec::new(
            "weather",
            "Weather",
            json!({"type": "object"}),
        )]);
        req.settings = crate::model::ModelSettings::default()
            .temperature(0.5)
            .max_tokens(100);
        let body =
            serde_json::to_value(request_body(&req, "m", MaxTokensParam::default())).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                        {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{bad"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "not JSON"},
                ],
                "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather", "parameters": {"type": "object"}}}],
                "tool_choice": "auto",
                "temperature": 0.5,
                "max_completion_tokens": 100,
            })
        );
        let legacy =
            serde_json::to_value(request_body(&req, "m", MaxTokensParam::MaxTokens)).unwrap();
        assert_eq!(legacy["max_tokens"], 100);
        assert!(legacy.get("max_completion_tokens").is_none());
    }

    #[test]
    fn user_images_become_parts() {
        let mut m = Message::user("What is this?");
        m.content.push(Content::Image {
            url: "https://example.com/a.png".into(),
        });
        let v = serde_json::to_value(chat_message(&m)).unwrap();
        assert_eq!(
            v,
            json!({"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ]})
        );
    }

    #[test]
    fn stream_assembles_calls_without_index_and_tolerates_nulls() {
        let ctx = RunContext::new();
        let mut a = Assembly::default();
        for data in [
            r#"{"choices":null,"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{\"k\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]},"finish_reason":"stop"}]}"#,
        ] {
            assert!(!a.push(data, &ctx).unwrap());
        }
        assert!(a.push("[DONE]", &ctx).unwrap());
        let resp = a.finish();
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
        assert_eq!(
            resp.message.tool_calls,
            vec![
                ToolCall::new("a", "x", json!({})),
                ToolCall::new("b", "y", json!({"k": 1}))
            ]
        );
    }

    /// A streamed piece of a tool call: `(index, id, name, arguments)`.
    type Piece<'a> = (Option<usize>, Option<&'a str>, Option<&'a str>, &'a str);

    /// The calls a stream of `pieces` puts together.
    fn assemble(pieces: &[Piece<'_>]) -> Vec<ToolCall> {
        let ctx = RunContext::new();
        let mut a = Assembly::default();
        for (index, id, name, args) in pieces {
            let mut call = json!({ "function": { "arguments": args } });
            if let Some(index) = index {
                call["index"] = json!(index);
            }
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            if let Some(name) = name {
                call["function"]["name"] = json!(name);
            }
            let chunk = json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [call] } }] });
            assert!(!a.push(&chunk.to_string(), &ctx).unwrap());
        }
        a.finish().message.tool_calls
    }

    #[test]
    fn stream_keys_calls_by_id_when_the_index_repeats() {
        let expected = vec![
            ToolCall::new("a", "x", json!({"k": 1})),
            ToolCall::new("b", "y", json!({})),
        ];
        // Ollama: every call at index 0, each whole with its own id.
        assert_eq!(
            assemble(&[
                (Some(0), Some("a"), Some("x"), "{\"k\":1}"),
                (Some(0), Some("b"), Some("y"), "{}"),
            ]),
            expected
        );
        // The id repeated on every piece is kept once; pieces with no id go to the latest call
        // at their index.
        assert_eq!(
            assemble(&[
                (Some(0), Some("a"), Some("x"), "{\"k\""),
                (Some(0), Some("a"), None, ":1}"),
                (Some(0), Some("b"), Some("y"), ""),
                (Some(0), None, None, "{}"),
            ]),
            expected
        );
    }

    /// A seeded property: however a server numbers and cuts the pieces (OpenAI's indexes,
    /// Ollama's index 0, ids repeated on every piece, no index at all), the calls come out
    /// whole and in order.
    #[test]
    fn stream_assembles_calls_in_every_known_server_style() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n.max(1)
        };
        for case in 0..3000 {
            let n = 1 + next(4);
            let calls: Vec<(String, String, String)> = (0..n)
                .map(|i| {
                    let args = json!({ "v": next(1000), "s": "ünï \"q\"" }).to_string();
                    (format!("call_{case}_{i}"), format!("tool{}", next(3)), args)
                })
                .collect();
            let style = case % 4;
            let mut pieces = Vec::new();
            for (i, (id, name, args)) in calls.iter().enumerate() {
                let index = match style {
                    0 | 2 => Some(i),
                    1 => Some(0),
                    _ => None,
                };
                // Cut the arguments at char boundaries.
                let cuts: Vec<usize> = {
                    let mut c: Vec<usize> = (0..next(4))
                        .map(|_| next(args.len() + 1))
                        .filter(|&k| args.is_char_boundary(k))
                        .collect();
                    c.sort_unstable();
                    c.dedup();
                    c
                };
                let mut start = 0;
                let mut first = true;
                for end in cuts.into_iter().chain([args.len()]) {
                    let piece_id = (first || style == 2).then_some(id.as_str());
                    let piece_name = first.then_some(name.as_str());
                    pieces.push((index, piece_id, piece_name, &args[start..end]));
                    start = end;
                    first = false;
                }
            }
            let got = assemble(&pieces);
            let want: Vec<ToolCall> = calls
                .iter()
                .map(|(id, name, args)| {
                    ToolCall::new(id, name, serde_json::from_str(args).unwrap())
                })
                .collect();
            assert_eq!(got, want, "case {case}, style {style}: {pieces:?}");
        }
    }

    #[test]
    fn responses_report_provider_id_model_and_finish_reason() {
        let body = json!({
            "id": "chatcmpl-9",
            "model": "gpt-4o-2024-08-06",
            "choices": [{ "message": { "content": "hi" }, "finish_reason": "length" }],
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        let expected = ResponseMeta::new("openai")
            .id("chatcmpl-9")
            .model("gpt-4o-2024-08-06")
            .finish_reasons(["length"]);
        assert_eq!(resp.meta, expected);

        // Streamed: the first chunk's id and model, the last finish reason.
        let ctx = RunContext::new();
        let mut a = Assembly::default();
        for data in [
            r#"{"id":"chatcmpl-7","model":"m-1","choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"id":"chatcmpl-7","model":"m-1","choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            assert!(!a.push(data, &ctx).unwrap());
        }
        let meta = a.finish().meta;
        assert_eq!(meta.id.as_deref(), Some("chatcmpl-7"));
        assert_eq!(meta.model.as_deref(), Some("m-1"));
        assert_eq!(meta.finish_reasons, ["stop"]);
        assert_eq!(meta.provider.as_deref(), Some("openai"));
    }
}
