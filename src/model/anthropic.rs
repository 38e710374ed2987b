//! [`Anthropic`]: the Anthropic Messages API over reqwest.
//!
//! # Example
//!
//! ```no_run
//! use tower::ServiceBuilder;
//! use tower_agent::{Agent, model::{RetryPolicy, anthropic::Anthropic}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent::Error> {
//! let claude = Anthropic::builder()
//!     .api_key(std::env::var("ANTHROPIC_API_KEY").unwrap_or_default())
//!     .model("claude-sonnet-4-5")
//!     .max_tokens(8192)
//!     .build();
//!
//! let agent = Agent::builder()
//!     .model(ServiceBuilder::new().retry(RetryPolicy::new()).service(claude))
//!     .build();
//! let resp = agent.run("Say hello").await?;
//! println!("{}", resp.text);
//! # Ok(())
//! # }
//! ```
//!
//! # Mapping
//!
//! | tower-agent | Messages API |
//! |---|---|
//! | system messages | the top-level `system` string (several are joined by blank lines) |
//! | user / assistant messages | `messages[]`; `content` is a string for one text part, else blocks (`text`, `image` with a `url` or `base64` source from a `data:` URL) |
//! | assistant tool calls | `tool_use` blocks `{id, name, input}` after the text (`input` is `{}` for arguments that were not a JSON object) |
//! | tool results | `tool_result` blocks `{tool_use_id, content, is_error}` in a user message (`content` is the text, or `text`, `image` and `document` blocks when the tool returned images or documents: [`ToolOutput::with_image`](crate::message::ToolOutput::with_image), [`with_document`](crate::message::ToolOutput::with_document)); consecutive messages of one role (tool results, then the reminders after them) are merged into one message, as the API wants tool results right after their calls |
//! | [`ToolSpec`](crate::message::ToolSpec)s | `tools: [{name, description, input_schema}]` |
//! | [`ModelSettings`](crate::model::ModelSettings) | `model` (else the provider's), `max_tokens` (required: else the provider's, default 4096), `temperature`, `top_p`, `stop` → `stop_sequences`, `stream`; `tool_choice` (with tools) → `tool_choice: {type: auto \| any \| tool \| none}`, `parallel_tool_calls: false` → its `disable_parallel_tool_use: true`; `response_format` → `output_config: {format: {type: "json_schema", schema}}`; `extra_body` merged at the top level; `seed` is an [invalid-request](crate::model::ProviderError::is_invalid_request) error (the API has none) |
//! | answer | the content blocks in their order: consecutive `text` blocks joined as one text part (their `citations` are not kept), `thinking` (with its `signature`) and `redacted_thinking` blocks as [`Content::Reasoning`] parts, `tool_use` blocks as tool calls, and every other block (a server tool's `server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`, `code_execution_tool_result`, `mcp_tool_use`, `mcp_tool_result`, `container_upload`, …) kept whole as a [`Content::Provider`] part (provider `"anthropic"`) at its place |
//! | [`Content::Provider`] of an assistant message | from `"anthropic"`: the block sent back as it came, at its place among the text and thinking blocks (before the `tool_use` blocks), so a turn paused with `pause_turn` continues where it stopped; from another provider: not sent |
//! | [`Content::Reasoning`] of an assistant message | sent back unmodified, first in the assistant message (before its text and `tool_use` blocks), as the API requires: `thinking {thinking, signature}` or `redacted_thinking {data}`; reasoning with neither a signature nor redacted data (from another provider) is not sent |
//! | [`ModelSettings::thinking_budget`](crate::model::ModelSettings::thinking_budget) | `thinking: {type: "enabled", budget_tokens}` |
//! | prompt caching (default on; [`AnthropicBuilder::prompt_caching`]) | `cache_control: {type: "ephemeral"}` on the last tool, on the system prompt (then one text block) and on the last block the next request repeats (before a trailing `<system-reminder>`): three breakpoints of the API's four |
//! | `usage` | `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens` → `input_tokens` (all the prompt's tokens), with `cache_read_input_tokens` → `cache_read_tokens` and `cache_creation_input_tokens` → `cache_write_tokens` among them; `output_tokens` → `output_tokens` |
//! | `stop_reason` | `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `refusal`, `pause_turn` → the same [`StopReason`] (the agent loop ends a refused run [`Outcome::Refused`](crate::agent::Outcome::Refused) and continues a paused one by sending the answer back); others → `Other` |
//!
//! Headers: `x-api-key`, `anthropic-version: 2023-06-01`, `content-type: application/json`.
//!
//! # Streaming
//!
//! With [`ModelSettings::stream`](crate::model::ModelSettings::stream) on, the answer is read
//! as server-sent events (`message_start`, `content_block_start`/`_delta`/`_stop`,
//! `message_delta`, `message_stop`): text deltas, thinking deltas (as
//! [`ModelDelta::Reasoning`]) and tool-input JSON deltas are sent to the
//! run's events as [`AgentEvent::ModelDelta`] as they
//! arrive, and the service returns one whole [`ModelResponse`]. An `error` event fails the
//! call with its type (`overloaded_error` is a server error, so it is retried by
//! [`RetryPolicy`](crate::model::RetryPolicy)); a stream that ends before `message_stop` is
//! an error ([`is_incomplete`](crate::model::ProviderError::is_incomplete)).
//!
//! A block this crate does not model (a server tool's call or result) is kept whole from its
//! `content_block_start`, with the `input_json_delta`s that follow put together as its
//! `input` (a `server_tool_use`'s); no event is sent for it.
//!
//! Thinking text and signatures count toward `max_response_bytes` with the text and
//! tool-input JSON (16 MiB by default), and a started block (a `redacted_thinking` block's
//! data, a server tool's block, included) counts its whole event. A block kept whole is thus
//! bounded by the same cap, streamed or not (a whole body is read up to `max_response_bytes`).
//!
//! # Errors
//!
//! Every failure is a [`ProviderError`] in the [`BoxError`].

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
    DEFAULT_MAX_RESPONSE_BYTES, ModelRequest, ModelResponse, ResponseMeta, ToolChoice,
    error::{Kind, ProviderError},
    http::{self, Endpoint, Transport},
};
use crate::{
    context::RunContext,
    error::BoxError,
    event::{AgentEvent, ModelDelta},
    message::{Content, Message, ProviderItem, Reasoning, Role, StopReason, ToolCall, Usage},
};

const PROVIDER: &str = "anthropic";

/// The base URL used when none is set (requests go to `{base_url}/v1/messages`).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model used when neither the provider nor the request names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `max_tokens` sent when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The `anthropic-version` header sent.
pub const API_VERSION: &str = "2023-06-01";

/// A model service speaking the Anthropic Messages API. See the
/// [module docs](crate::model::anthropic).
///
/// # Clone
///
/// Cloning is two reference counts; clones share the HTTP client and its connections.
#[derive(Clone)]
pub struct Anthropic {
    shared: Arc<Shared>,
    transport: Transport,
}

struct Shared {
    endpoint: Endpoint,
    model: Arc<str>,
    max_tokens: u32,
    has_key: bool,
    max_response_bytes: usize,
    prompt_caching: bool,
}

impl Anthropic {
    /// A builder: base URL [`DEFAULT_BASE_URL`], model [`DEFAULT_MODEL`], `max_tokens`
    /// [`DEFAULT_MAX_TOKENS`], no API key.
    pub fn builder() -> AnthropicBuilder {
        AnthropicBuilder {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: DEFAULT_MODEL.to_owned(),
            max_tokens: DEFAULT_MAX_TOKENS,
            version: API_VERSION.to_owned(),
            headers: Vec::new(),
            transport: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            prompt_caching: true,
        }
    }

    /// The provider configured from the environment, if `ANTHROPIC_API_KEY` is set: the key,
    /// the base URL from `ANTHROPIC_BASE_URL` (else [`DEFAULT_BASE_URL`]) and the model from
    /// `TOWER_AGENT_MODEL` (else [`DEFAULT_MODEL`]). Empty variables count as unset.
    pub fn from_env() -> Option<Self> {
        let mut builder = Self::builder().api_key(http::env("ANTHROPIC_API_KEY")?);
        if let Some(url) = http::env("ANTHROPIC_BASE_URL") {
            builder = builder.base_url(url);
        }
        if let Some(model) = http::env("TOWER_AGENT_MODEL") {
            builder = builder.model(model);
        }
        Some(builder.build())
    }

    /// The model asked for when a request names none.
    pub fn model(&self) -> &str {
        &self.shared.model
    }

    /// The URL requests are posted to (`{base_url}/v1/messages`).
    pub fn url(&self) -> &str {
        self.shared.endpoint.url()
    }
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("url", &self.shared.endpoint.url())
            .field("model", &self.shared.model)
            .field("max_tokens", &self.shared.max_tokens)
            .field("api_key", &self.shared.has_key.then_some("<redacted>"))
            .finish_non_exhaustive()
    }
}

/// Builds an [`Anthropic`]. From [`Anthropic::builder`].
#[must_use]
pub struct AnthropicBuilder {
    base_url: String,
    api_key: Option<String>,
    model: String,
    max_tokens: u32,
    version: String,
    headers: Vec<(String, String)>,
    transport: Option<Transport>,
    max_response_bytes: usize,
    prompt_caching: bool,
}

impl AnthropicBuilder {
    /// The API's base URL (default [`DEFAULT_BASE_URL`]); requests go to
    /// `{base_url}/v1/messages`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key, sent as `x-api-key`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model asked for when a request's settings name none (default [`DEFAULT_MODEL`]).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The `max_tokens` sent when a request's settings set none (default
    /// [`DEFAULT_MAX_TOKENS`]).
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// The `anthropic-version` header (default [`API_VERSION`]).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// One more header on every request, such as `anthropic-beta` (it replaces a header of
    /// the same name).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The `reqwest::Client` to send with; by default a new one with reqwest's defaults.
    pub fn client(self, client: reqwest::Client) -> Self {
        self.transport(client)
    }

    /// Any service of reqwest requests to send with — a `reqwest::Client` wrapped in tower
    /// layers.
    pub fn transport<S>(mut self, service: S) -> Self
    where
        S: Service<reqwest::Request, Response = reqwest::Response> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.transport = Some(http::transport(service));
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

    /// Prompt caching (default on): every request marks three cache breakpoints — the last
    /// tool, the system prompt, and the last block of the conversation the next request will
    /// repeat (a trailing `<system-reminder>` is left after it) — so a run's growing prefix is
    /// read from Anthropic's prompt cache instead of processed again. `false` sends no
    /// `cache_control` (and the system prompt as a string). The request goes through a JSON
    /// value to be marked. Cache reads and writes are reported in
    /// [`Usage`].
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// The provider. An invalid base URL or header does not fail here: every call then fails
    /// with [`ProviderError::is_config`].
    pub fn build(self) -> Anthropic {
        let (transport, config_error) = match self.transport {
            Some(t) => (t, None),
            None => http::default_transport(),
        };
        let mut headers = Vec::new();
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key".to_owned(), key.clone()));
        }
        headers.push(("anthropic-version".to_owned(), self.version));
        headers.extend(self.headers);
        let url = format!("{}/v1/messages", self.base_url.trim_end_matches('/'));
        Anthropic {
            shared: Arc::new(Shared {
                endpoint: Endpoint::new(PROVIDER, url, &headers, config_error),
                model: self.model.into(),
                max_tokens: self.max_tokens,
                has_key: self.api_key.is_some(),
                max_response_bytes: self.max_response_bytes,
                prompt_caching: self.prompt_caching,
            }),
            transport,
        }
    }
}

impl fmt::Debug for AnthropicBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicBuilder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("max_tokens", &self.max_tokens)
            .field("version", &self.version)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.len())
            .field("transport", &self.transport.is_some())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl Service<ModelRequest> for Anthropic {
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.transport
            .poll_ready(cx)
            .map_err(|e| http::transport_error(PROVIDER, e).into())
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        if let Some(err) = unsupported(&req.settings) {
            return ResponseFuture::failed(err);
        }
        let mut body = request_body(&req, &self.shared.model, self.shared.max_tokens);
        if self.shared.prompt_caching {
            body.cache_breakpoints();
        }
        let http_req = match super::options::encode(&body, req.settings.extra_body.as_ref())
            .map_err(|e| {
                ProviderError::new(PROVIDER, Kind::InvalidRequest)
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
/// The body's fields in the order of the API's prompt-cache prefix (tools, then system, then
/// messages), after the settings, which do not change within a run: a request's body is then
/// a byte-identical prefix of the next request's up to its last messages, so what serves the
/// prompt cache also serves any cache keyed on the bytes.
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<Value>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ApiTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<SystemPrompt>,
    messages: Vec<ApiMessage<'a>>,
}

/// The system prompt: a string, or one text block when it carries a cache breakpoint.
#[derive(Serialize)]
#[serde(untagged)]
enum SystemPrompt {
    Text(String),
    Blocks([SystemBlock; 1]),
}

#[derive(Serialize)]
struct SystemBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    cache_control: CacheControl,
}

/// A prompt-caching breakpoint: `{type: "ephemeral"}`.
#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

impl MessagesRequest<'_> {
    /// Prompt-caching breakpoints ([`AnthropicBuilder::prompt_caching`]): on the last tool, on
    /// the system prompt (then sent as one text block), and on the last block of the
    /// conversation that the next request repeats — the last one that is not a
    /// `<system-reminder>` text
    /// ([`ModelRequest::append_reminder`](crate::model::ModelRequest::append_reminder)), which
    /// the next request replaces. Three breakpoints, within the API's limit of four; thinking
    /// blocks are never marked (the API does not allow it), nor the blocks kept verbatim
    /// ([`Content::Provider`]), which go back exactly as they came.
    fn cache_breakpoints(&mut self) {
        if let Some(tool) = self.tools.last_mut() {
            tool.cache_control = Some(EPHEMERAL);
        }
        if let Some(SystemPrompt::Text(text)) = self.system.take() {
            self.system = Some(SystemPrompt::Blocks([SystemBlock {
                kind: "text",
                text,
                cache_control: EPHEMERAL,
            }]));
        }
        let is_reminder = |text: &str| text.starts_with(super::REMINDER_OPEN);
        for message in self.messages.iter_mut().rev() {
            match &mut message.content {
                ApiContent::Text(text) if is_reminder(text) => {}
                ApiContent::Text(text) => {
                    let text: &str = text;
                    message.content = ApiContent::Blocks(MarkedBlocks {
                        blocks: vec![Block::Text { text }],
                        mark: Some(0),
                    });
                    return;
                }
                ApiContent::Blocks(marked) => {
                    let last = marked.blocks.iter().rposition(|b| match b {
                        Block::Text { text } => !is_reminder(text),
                        Block::Image { .. }
                        | Block::Document { .. }
                        | Block::ToolUse { .. }
                        | Block::ToolResult { .. } => true,
                        Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::Raw(_) => {
                            false
                        }
                    });
                    if let Some(i) = last {
                        marked.mark = Some(i);
                        return;
                    }
                }
            }
        }
    }
}

/// A message's blocks, one of which may carry a cache breakpoint.
struct MarkedBlocks<'a> {
    blocks: Vec<Block<'a>>,
    mark: Option<usize>,
}

impl Serialize for MarkedBlocks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;

        #[derive(Serialize)]
        struct Marked<'b, 'a> {
            #[serde(flatten)]
            block: &'b Block<'a>,
            cache_control: CacheControl,
        }

        let mut seq = serializer.serialize_seq(Some(self.blocks.len()))?;
        for (i, block) in self.blocks.iter().enumerate() {
            if self.mark == Some(i) {
                seq.serialize_element(&Marked {
                    block,
                    cache_control: EPHEMERAL,
                })?;
            } else {
                seq.serialize_element(block)?;
            }
        }
        seq.end()
    }
}

/// `thinking: {type: "enabled", budget_tokens}`.
#[derive(Serialize)]
struct ThinkingConfig {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

#[derive(Serialize)]
struct ApiMessage<'a> {
    role: &'static str,
    content: ApiContent<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ApiContent<'a> {
    Text(&'a str),
    Blocks(MarkedBlocks<'a>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: ImageSource<'a>,
    },
    Document {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<&'a str>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Cow<'a, Value>,
    },
    /// Signed reasoning, sent back as it came.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    /// Encrypted reasoning, sent back as it came.
    RedactedThinking {
        data: &'a str,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "ToolResultContent::is_empty")]
        content: ToolResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// A block of the API's that this crate does not model (a server tool's call or result),
    /// sent back as it came.
    #[serde(untagged)]
    Raw(&'a Value),
}

/// A `tool_result`'s content: its text, or text and image blocks when the tool returned
/// images.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl ToolResultContent<'_> {
    fn is_empty(&self) -> bool {
        match self {
            ToolResultContent::Text(text) => text.is_empty(),
            ToolResultContent::Blocks(blocks) => blocks.is_empty(),
        }
    }
}

/// A tool message's content: plain text when it has only text (the form the API documents
/// first), else `text` and `image` blocks in order.
fn tool_result_content(m: &Message) -> ToolResultContent<'_> {
    if m.content.iter().all(|c| c.as_text().is_some()) {
        ToolResultContent::Text(m.text())
    } else {
        ToolResultContent::Blocks(content_blocks(m))
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageSource<'a> {
    Url { url: &'a str },
    Base64 { media_type: &'a str, data: &'a str },
}

#[derive(Serialize)]
struct ApiTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

fn request_body<'a>(
    req: &'a ModelRequest,
    default_model: &'a str,
    default_max: u32,
) -> MessagesRequest<'a> {
    let settings = &req.settings;
    let system: Vec<Cow<'_, str>> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::text)
        .filter(|t| !t.is_empty())
        .collect();
    MessagesRequest {
        model: settings.model.as_deref().unwrap_or(default_model),
        max_tokens: settings.max_tokens.unwrap_or(default_max),
        system: (!system.is_empty()).then(|| SystemPrompt::Text(system.join("\n\n"))),
        messages: messages(req.messages.iter()),
        tools: req
            .tools
            .iter()
            .map(|spec| ApiTool {
                name: &spec.name,
                description: &spec.description,
                input_schema: &spec.parameters,
                cache_control: None,
            })
            .collect(),
        tool_choice: (!req.tools.is_empty())
            .then(|| tool_choice(settings.tool_choice.as_ref(), settings.parallel_tool_calls))
            .flatten(),
        temperature: settings.temperature,
        top_p: settings.top_p,
        stop_sequences: &settings.stop,
        output_config: settings
            .response_format
            .as_ref()
            .map(|f| serde_json::json!({"format": {"type": "json_schema", "schema": &*f.schema}})),
        thinking: settings
            .thinking_budget
            .map(|budget_tokens| ThinkingConfig {
                kind: "enabled",
                budget_tokens,
            }),
        stream: settings.stream,
    }
}

/// `tool_choice` as the Messages API documents it: `{type: auto | any | tool | none}`, with
/// `disable_parallel_tool_use` when parallel calls are turned off. `None` (the API's default,
/// `auto`) when nothing is set.
fn tool_choice(choice: Option<&ToolChoice>, parallel: Option<bool>) -> Option<Value> {
    let mut value = match choice {
        None if parallel.is_none() => return None,
        None | Some(ToolChoice::Auto) => serde_json::json!({"type": "auto"}),
        Some(ToolChoice::None) => return Some(serde_json::json!({"type": "none"})),
        Some(ToolChoice::Required) => serde_json::json!({"type": "any"}),
        Some(ToolChoice::Tool(name)) => serde_json::json!({"type": "tool", "name": &**name}),
    };
    if let Some(parallel) = parallel {
        value["disable_parallel_tool_use"] = Value::Bool(!parallel);
    }
    Some(value)
}

/// Settings the Messages API cannot honour: an error rather than a silently different call.
fn unsupported(settings: &super::ModelSettings) -> Option<ProviderError> {
    settings.seed.is_some().then(|| {
        ProviderError::new(PROVIDER, Kind::InvalidRequest).with_message(
            "the Anthropic Messages API has no `seed`: unset ModelSettings::seed for this provider",
        )
    })
}

/// The conversation without its system messages, one API message per run of messages of
/// the same API role.
fn messages<'a>(history: impl Iterator<Item = &'a Message>) -> Vec<ApiMessage<'a>> {
    let mut out: Vec<(&'static str, Vec<Block<'a>>)> = Vec::new();
    for m in history {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", content_blocks(m)),
            Role::Assistant => {
                let mut blocks = content_blocks(m);
                blocks.extend(m.tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: if call.arguments.is_object() {
                        Cow::Borrowed(&call.arguments)
                    } else {
                        Cow::Owned(Value::Object(Default::default()))
                    },
                }));
                ("assistant", blocks)
            }
            Role::Tool => (
                "user",
                vec![Block::ToolResult {
                    tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
                    content: tool_result_content(m),
                    is_error: m.is_error,
                }],
            ),
        };
        if blocks.is_empty() {
            // The API rejects empty messages.
            continue;
        }
        match out.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            let content = match blocks.as_slice() {
                [Block::Text { text }] => ApiContent::Text(text),
                _ => ApiContent::Blocks(MarkedBlocks {
                    blocks: std::mem::take(&mut blocks),
                    mark: None,
                }),
            };
            ApiMessage { role, content }
        })
        .collect()
}

fn content_blocks(m: &Message) -> Vec<Block<'_>> {
    m.content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if text.is_empty() => None,
            Content::Text { text } => Some(Block::Text { text }),
            Content::Image { url } => Some(Block::Image {
                source: image_source(url),
            }),
            Content::Reasoning(r) => thinking_block(r),
            Content::Document { url, name } => Some(Block::Document {
                source: image_source(url),
                title: name.as_deref(),
            }),
            Content::Provider(_) => c.provider_item(PROVIDER).map(Block::Raw),
        })
        .collect()
}

/// A reasoning part as the API wants it back: `redacted_thinking` with its data, or
/// `thinking` with its signature. Reasoning without either (from another provider) cannot be
/// verified by the API and is not sent.
fn thinking_block(r: &Reasoning) -> Option<Block<'_>> {
    match (&r.redacted, &r.signature) {
        (Some(data), _) => Some(Block::RedactedThinking { data }),
        (None, Some(signature)) => Some(Block::Thinking {
            thinking: &r.text,
            signature,
        }),
        (None, None) => None,
    }
}

/// A `data:<media type>;base64,<data>` URL as a base64 source, any other URL as a URL source.
fn image_source(url: &str) -> ImageSource<'_> {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(media_type) = meta.strip_suffix(";base64")
    {
        return ImageSource::Base64 { media_type, data };
    }
    ImageSource::Url { url }
}

// ===== response =====

#[derive(Deserialize)]
struct MessagesResponse {
    id: Option<String>,
    model: Option<String>,
    content: Option<Vec<Value>>,
    stop_reason: Option<String>,
    usage: Option<ApiUsage>,
    #[serde(rename = "type")]
    kind: Option<String>,
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseBlock {
    Text {
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
}

/// The block types this crate models; every other block is kept whole as a
/// [`Content::Provider`].
const KNOWN_BLOCKS: [&str; 4] = ["text", "thinking", "redacted_thinking", "tool_use"];

/// Whether `block` is of a type this crate models; `None` if it is not a block at all (not
/// an object with a string `type`), which is a malformed answer, not an item to send back.
fn is_known(block: &Value) -> Option<bool> {
    let kind = block.as_object()?.get("type")?.as_str()?;
    Some(KNOWN_BLOCKS.contains(&kind))
}

/// An answer's parts put together in order: consecutive text in one part, reasoning and
/// provider blocks where they came, tool calls apart.
#[derive(Default)]
struct Parts {
    content: Vec<Content>,
    calls: Vec<ToolCall>,
}

impl Parts {
    fn text(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        match self.content.last_mut() {
            Some(Content::Text { text: last }) => last.push_str(&text),
            _ => self.content.push(Content::Text { text }),
        }
    }

    fn push(&mut self, part: Content) {
        self.content.push(part);
    }
}

#[derive(Deserialize, Default, Clone, Copy)]
struct ApiUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl ApiUsage {
    /// The usage: input tokens cached or not (as OpenTelemetry's `gen_ai.usage.input_tokens`
    /// counts them), with the cache reads and writes among them apart.
    fn usage(&self) -> Option<Usage> {
        let mut usage = http::usage(self.input(), self.output_tokens)?;
        usage.cache_read_tokens = self.cache_read_input_tokens.unwrap_or_default();
        usage.cache_write_tokens = self.cache_creation_input_tokens.unwrap_or_default();
        Some(usage)
    }

    /// All the prompt's tokens, cached or not.
    fn input(&self) -> Option<u64> {
        self.input_tokens.map(|n| {
            n + self.cache_creation_input_tokens.unwrap_or_default()
                + self.cache_read_input_tokens.unwrap_or_default()
        })
    }
}

fn parse_response(status: u16, body: &[u8]) -> Result<ModelResponse, ProviderError> {
    let resp: MessagesResponse = http::parse_json(PROVIDER, status, body)?;
    if resp.kind.as_deref() == Some("error") || resp.error.is_some() {
        let error = resp.error.unwrap_or_default();
        return Err(http::error_object(PROVIDER, &error).with_status(status));
    }
    let content = match (resp.kind.as_deref(), resp.content) {
        (Some("message") | None, Some(content)) => content,
        _ => {
            return Err(
                http::malformed(PROVIDER, "the response is not a message", body)
                    .with_status(status),
            );
        }
    };
    let mut parts = Parts::default();
    for block in content {
        let Some(known) = is_known(&block) else {
            return Err(
                http::malformed(PROVIDER, "a content block has no `type`", body)
                    .with_status(status),
            );
        };
        if !known {
            parts.push(Content::Provider(ProviderItem::new(PROVIDER, block)));
            continue;
        }
        let block: ResponseBlock = serde_json::from_value(block).map_err(|e| {
            http::malformed(PROVIDER, format!("a content block is not valid: {e}"), body)
                .with_status(status)
        })?;
        match block {
            ResponseBlock::Text { text } => parts.text(text),
            ResponseBlock::Thinking {
                thinking,
                signature,
            } => parts.push(Content::Reasoning(Reasoning {
                signature,
                ..Reasoning::text(thinking)
            })),
            ResponseBlock::RedactedThinking { data } => {
                parts.push(Content::Reasoning(Reasoning::redacted(data)))
            }
            ResponseBlock::ToolUse { id, name, input } => {
                parts.calls.push(ToolCall::new(id, name, input))
            }
        }
    }
    let usage = resp.usage.unwrap_or_default();
    Ok(response(
        parts,
        resp.stop_reason.as_deref(),
        usage.usage(),
        meta(resp.id, resp.model, resp.stop_reason.as_deref()),
    ))
}

/// The response's metadata: provider `"anthropic"`, the message's id and model, and the
/// stop reason as the API said it.
fn meta(id: Option<String>, model: Option<String>, stop_reason: Option<&str>) -> ResponseMeta {
    let mut meta = ResponseMeta::new(PROVIDER);
    meta.id = id;
    meta.model = model;
    meta.finish_reasons = stop_reason.map(str::to_owned).into_iter().collect();
    meta
}

fn response(
    parts: Parts,
    stop_reason: Option<&str>,
    usage: Option<Usage>,
    meta: ResponseMeta,
) -> ModelResponse {
    let Parts { content, calls } = parts;
    let stop_reason = match stop_reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_owned()),
        None if calls.is_empty() => StopReason::EndTurn,
        None => StopReason::ToolUse,
    };
    let mut message = Message::assistant("").with_tool_calls(calls);
    message.content = content;
    ModelResponse {
        message,
        usage,
        stop_reason,
        meta,
    }
}

// ===== streaming =====

/// The cache reads and writes among a usage's input tokens (0 for a count left out).
fn cache_tokens(usage: &ApiUsage) -> (u64, u64) {
    (
        usage.cache_read_input_tokens.unwrap_or_default(),
        usage.cache_creation_input_tokens.unwrap_or_default(),
    )
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageDeltaBody,
        usage: Option<ApiUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping`, `content_block_stop` and any event added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<ApiUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

enum Part {
    Text(String),
    Tool {
        call: usize,
        id: String,
        name: String,
        input: Value,
        json: String,
    },
    Reasoning(Reasoning),
    /// A block this crate does not model, kept whole; its `input_json_delta`s (a
    /// `server_tool_use`'s input) put together in `json`.
    Provider {
        block: Value,
        json: String,
    },
}

/// A streamed answer being put together.
#[derive(Default)]
struct Assembly {
    /// Bytes put together so far (each started block counts its whole event), checked
    /// against `max_response_bytes`.
    kept: usize,
    parts: BTreeMap<usize, Part>,
    calls: usize,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// Cache reads and writes among the input tokens.
    cache_tokens: (u64, u64),
    /// The message's id and model, from `message_start`.
    id: Option<String>,
    model: Option<String>,
}

impl Assembly {
    /// Takes one event; `Ok(true)` at `message_stop`.
    fn push(&mut self, data: &str, ctx: &RunContext) -> Result<bool, ProviderError> {
        let event: StreamEvent = serde_json::from_str(data).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a streamed event is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        match event {
            StreamEvent::MessageStart { message } => self.start_message(message),
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, data, ctx)?,
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.add_delta(index, delta, data, ctx)?;
            }
            StreamEvent::MessageDelta { delta, usage } => self.update_message(delta, usage),
            StreamEvent::MessageStop => return Ok(true),
            StreamEvent::Error { error } => return Err(http::error_object(PROVIDER, &error)),
            StreamEvent::Other => {}
        }
        Ok(false)
    }

    /// `message_start`: the message's id, model and first usage.
    fn start_message(&mut self, message: StartMessage) {
        self.id = message.id;
        self.model = message.model;
        if let Some(usage) = message.usage {
            self.input_tokens = usage.input();
            self.output_tokens = usage.output_tokens;
            self.cache_tokens = cache_tokens(&usage);
        }
    }

    /// `content_block_start`: a new part at `index`, kept whole if this crate does not
    /// model its type. `data` is the whole event, counted and quoted in errors.
    fn start_block(
        &mut self,
        index: usize,
        content_block: Value,
        data: &str,
        ctx: &RunContext,
    ) -> Result<(), ProviderError> {
        self.kept = self.kept.saturating_add(data.len());
        let Some(known) = is_known(&content_block) else {
            return Err(http::malformed(
                PROVIDER,
                "a started content block has no `type`",
                data.as_bytes(),
            ));
        };
        if !known {
            self.parts.insert(
                index,
                Part::Provider {
                    block: content_block,
                    json: String::new(),
                },
            );
            return Ok(());
        }
        let content_block = StartBlock::deserialize(&content_block).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a started content block is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        let part = self.open_part(content_block, ctx);
        self.parts.insert(index, part);
        Ok(())
    }

    /// The part a known block starts, its first text or the tool call emitted as a delta.
    fn open_part(&mut self, block: StartBlock, ctx: &RunContext) -> Part {
        let step = ctx.step();
        match block {
            StartBlock::Text { text } => {
                if !text.is_empty() {
                    let text = text.clone();
                    ctx.emit_with(|| AgentEvent::ModelDelta {
                        step,
                        delta: ModelDelta::Text { text },
                    });
                }
                Part::Text(text)
            }
            StartBlock::ToolUse { id, name, input } => {
                let call = self.calls;
                self.calls += 1;
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step,
                    delta: ModelDelta::ToolCall {
                        index: call,
                        id: Some(id.clone()),
                        name: Some(name.clone()),
                        arguments: String::new(),
                    },
                });
                Part::Tool {
                    call,
                    id,
                    name,
                    input,
                    json: String::new(),
                }
            }
            StartBlock::Thinking {
                thinking,
                signature,
            } => {
                if !thinking.is_empty() {
                    let text = thinking.clone();
                    ctx.emit_with(|| AgentEvent::ModelDelta {
                        step,
                        delta: ModelDelta::Reasoning { text },
                    });
                }
                Part::Reasoning(Reasoning {
                    signature: (!signature.is_empty()).then_some(signature),
                    ..Reasoning::text(thinking)
                })
            }
            StartBlock::RedactedThinking { data } => Part::Reasoning(Reasoning::redacted(data)),
        }
    }

    /// `content_block_delta`: a piece added to the part at `index` (and emitted as a delta);
    /// a piece of another kind than its part is dropped.
    fn add_delta(
        &mut self,
        index: usize,
        delta: BlockDelta,
        data: &str,
        ctx: &RunContext,
    ) -> Result<(), ProviderError> {
        let step = ctx.step();
        match (self.parts.get_mut(&index), delta) {
            (Some(Part::Text(text)), BlockDelta::TextDelta { text: piece }) => {
                self.kept = self.kept.saturating_add(piece.len());
                text.push_str(&piece);
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step,
                    delta: ModelDelta::Text { text: piece },
                });
            }
            (Some(Part::Tool { call, json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                self.kept = self.kept.saturating_add(partial_json.len());
                json.push_str(&partial_json);
                let index = *call;
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step,
                    delta: ModelDelta::ToolCall {
                        index,
                        id: None,
                        name: None,
                        arguments: partial_json,
                    },
                });
            }
            (Some(Part::Reasoning(r)), BlockDelta::ThinkingDelta { thinking }) => {
                self.kept = self.kept.saturating_add(thinking.len());
                r.text.push_str(&thinking);
                ctx.emit_with(|| AgentEvent::ModelDelta {
                    step,
                    delta: ModelDelta::Reasoning { text: thinking },
                });
            }
            (Some(Part::Reasoning(r)), BlockDelta::SignatureDelta { signature }) => {
                self.kept = self.kept.saturating_add(signature.len());
                r.signature.get_or_insert_default().push_str(&signature);
            }
            (Some(Part::Provider { json, .. }), BlockDelta::InputJsonDelta { partial_json }) => {
                self.kept = self.kept.saturating_add(partial_json.len());
                json.push_str(&partial_json);
            }
            (None, _) => {
                return Err(http::malformed(
                    PROVIDER,
                    format!("a delta for content block {index}, which never started"),
                    data.as_bytes(),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// `message_delta`: the stop reason and the usage so far (a field left out keeps the
    /// value before).
    fn update_message(&mut self, delta: MessageDeltaBody, usage: Option<ApiUsage>) {
        if let Some(reason) = delta.stop_reason {
            self.stop_reason = Some(reason);
        }
        let Some(usage) = usage else { return };
        if let Some(input) = usage.input() {
            self.input_tokens = Some(input);
            self.cache_tokens = cache_tokens(&usage);
        }
        if let Some(output) = usage.output_tokens {
            self.output_tokens = Some(output);
        }
    }

    fn finish(self) -> ModelResponse {
        let mut parts = Parts::default();
        for part in self.parts.into_values() {
            match part {
                Part::Text(t) => parts.text(t),
                Part::Reasoning(r) => parts.push(Content::Reasoning(r)),
                Part::Provider { mut block, json } => {
                    if !json.is_empty()
                        && let Some(fields) = block.as_object_mut()
                    {
                        fields.insert("input".to_owned(), http::parse_arguments(json));
                    }
                    parts.push(Content::Provider(ProviderItem::new(PROVIDER, block)));
                }
                Part::Tool {
                    id,
                    name,
                    input,
                    json,
                    ..
                } => {
                    let arguments = if json.is_empty() {
                        if input.is_null() {
                            Value::Object(Default::default())
                        } else {
                            input
                        }
                    } else {
                        http::parse_arguments(json)
                    };
                    parts.calls.push(ToolCall::new(id, name, arguments));
                }
            }
        }
        let meta = meta(self.id, self.model, self.stop_reason.as_deref());
        response(
            parts,
            self.stop_reason.as_deref(),
            http::usage(self.input_tokens, self.output_tokens).map(|mut usage| {
                (usage.cache_read_tokens, usage.cache_write_tokens) = self.cache_tokens;
                usage
            }),
            meta,
        )
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
        return Err(http::incomplete(PROVIDER, "`message_stop`"));
    }
    Ok(assembly.finish())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::message::{ToolOutput, ToolSpec};

    /// Event-shaped JSON: the events and block types this module reads, and blocks it does
    /// not model, with fields of any JSON type.
    fn event() -> impl Strategy<Value = String> {
        let kind = prop_oneof![
            Just("message_start"),
            Just("content_block_start"),
            Just("content_block_delta"),
            Just("message_delta"),
            Just("message_stop"),
            Just("ping"),
        ];
        let block_type = prop_oneof![
            Just(json!("text")),
            Just(json!("tool_use")),
            Just(json!("thinking")),
            Just(json!("redacted_thinking")),
            Just(json!("server_tool_use")),
            Just(json!("web_search_tool_result")),
            Just(json!(7)),
            Just(Value::Null),
        ];
        let delta_type = prop_oneof![
            Just("text_delta"),
            Just("input_json_delta"),
            Just("thinking_delta"),
            Just("signature_delta"),
            Just("citations_delta"),
        ];
        let leaf = http::fuzz::leaf();
        let value = leaf.prop_recursive(2, 12, 3, |inner| {
            proptest::collection::vec(inner, 0..3).prop_map(Value::Array)
        });
        (
            kind,
            block_type,
            delta_type,
            value.clone(),
            value,
            0usize..4,
        )
            .prop_map(|(kind, block_type, delta_type, a, b, index)| {
                json!({
                    "type": kind,
                    "index": index,
                    "message": {"id": "msg_1", "usage": {"input_tokens": 1}},
                    "content_block": {
                        "type": block_type, "text": a, "id": "x", "name": "y", "input": b,
                        "thinking": "t", "data": "d",
                    },
                    "delta": {
                        "type": delta_type, "text": a, "partial_json": "{\"q\":", "thinking": "t",
                        "signature": "s", "stop_reason": "pause_turn",
                    },
                })
                .to_string()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Whatever a server streams, known blocks or not, the assembly returns an answer or
        /// a typed error, never panics, and counts at least what it keeps.
        #[test]
        fn any_event_sequence_is_an_answer_or_an_error(
            events in proptest::collection::vec(prop_oneof![event(), ".{0,16}"], 0..12)
        ) {
            let ctx = RunContext::new();
            let mut a = Assembly::default();
            let total = http::fuzz::feed(&events, |data| a.push(data, &ctx));
            prop_assert!(a.kept <= total);
            let resp = a.finish();
            // What is kept goes back as blocks without panicking.
            let _ = serde_json::to_vec(&messages([&resp.message].into_iter()));
        }
    }

    #[test]
    fn body_splits_system_and_groups_tool_results() {
        let mut req = ModelRequest::new(vec![
            Message::system("Be brief."),
            Message::user("Weather?"),
            Message::assistant("Checking.").with_tool_calls(vec![
                ToolCall::new("toolu_1", "weather", json!({"city": "Oslo"})),
                ToolCall::new("toolu_2", "weather", Value::String("{bad".into())),
            ]),
            Message::tool_result(&ToolOutput::text("toolu_1", "rain")),
            Message::tool_result(&ToolOutput::error("toolu_2", "not JSON")),
            Message::user("<system-hook>remember</system-hook>"),
        ]);
        req.tools = Arc::new(vec![ToolSpec::new(
            "weather",
            "Weather",
            json!({"type": "object"}),
        )]);
        req.settings = crate::model::ModelSettings::default().temperature(0.0);
        let body = serde_json::to_value(request_body(&req, "claude", 1024)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 1024,
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "not JSON", "is_error": true},
                        {"type": "text", "text": "<system-hook>remember</system-hook>"},
                    ]},
                ],
                "tools": [{"name": "weather", "description": "Weather", "input_schema": {"type": "object"}}],
                "temperature": 0.0,
            })
        );
    }

    #[test]
    fn unknown_blocks_are_kept_in_order_and_blocks_without_a_type_are_malformed() {
        let server_tool = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}});
        let body = json!({
            "type": "message",
            "content": [
                {"type": "text", "text": "a"},
                server_tool,
                {"type": "text", "text": "b"},
                {"type": "text", "text": "c"},
            ],
            "stop_reason": "pause_turn",
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        assert_eq!(
            resp.message.content,
            [
                Content::text("a"),
                Content::Provider(ProviderItem::new(PROVIDER, server_tool)),
                Content::text("bc"),
            ]
        );
        assert_eq!(resp.stop_reason, StopReason::PauseTurn);
        for block in [
            json!("text"),
            json!({"text": "no type"}),
            json!({"type": 7}),
            json!({"type": "text"}),
        ] {
            let body = json!({"type": "message", "content": [block]});
            let err = parse_response(200, body.to_string().as_bytes()).unwrap_err();
            assert!(err.is_malformed_response(), "{block}: {err}");
            if block == json!({"type": "text"}) {
                continue; // a streamed text block may start without its text
            }
            let ctx = RunContext::new();
            let start = json!({"type": "content_block_start", "index": 0, "content_block": block});
            let err = Assembly::default().push(&start.to_string(), &ctx).err();
            assert!(err.is_some_and(|e| e.is_malformed_response()), "{block}");
        }
    }

    #[test]
    fn images_by_url_or_data() {
        assert_eq!(
            serde_json::to_value(image_source("data:image/png;base64,AAAA")).unwrap(),
            json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
        );
        assert_eq!(
            serde_json::to_value(image_source("https://example.com/a.png")).unwrap(),
            json!({"type": "url", "url": "https://example.com/a.png"})
        );
    }

    #[test]
    fn responses_report_provider_id_model_and_stop_reason() {
        let body = json!({
            "type": "message",
            "id": "msg_01",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{ "type": "text", "text": "hi" }],
            "stop_reason": "end_turn",
        });
        let resp = parse_response(200, body.to_string().as_bytes()).unwrap();
        let expected = ResponseMeta::new("anthropic")
            .id("msg_01")
            .model("claude-sonnet-4-5-20250929")
            .finish_reasons(["end_turn"]);
        assert_eq!(resp.meta, expected);

        let ctx = RunContext::new();
        let mut a = Assembly::default();
        for data in [
            r#"{"type":"message_start","message":{"id":"msg_02","model":"claude-x","usage":{"input_tokens":3}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"a"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":1}}"#,
        ] {
            assert!(!a.push(data, &ctx).unwrap());
        }
        let meta = a.finish().meta;
        assert_eq!(meta.id.as_deref(), Some("msg_02"));
        assert_eq!(meta.model.as_deref(), Some("claude-x"));
        assert_eq!(meta.finish_reasons, ["max_tokens"]);
        assert_eq!(meta.provider.as_deref(), Some("anthropic"));
    }
}
