//! [`Anthropic`]: the Anthropic Messages API over reqwest.
//!
//! # Example
//!
//! ```no_run
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, model::RetryPolicy};
//! use tower_agent_providers::anthropic::Anthropic;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
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
//! | tool results | `tool_result` blocks `{tool_use_id, content, is_error}` in a user message (`content` is the text, or `text`, `image` and `document` blocks when the tool returned images or documents: [`ToolOutput::with_image`](tower_agent_core::message::ToolOutput::with_image), [`with_document`](tower_agent_core::message::ToolOutput::with_document)); consecutive messages of one role (tool results, then the reminders after them) are merged into one message, as the API wants tool results right after their calls |
//! | [`ToolSpec`](tower_agent_core::message::ToolSpec)s | `tools: [{name, description, input_schema}]` |
//! | [`ModelSettings`](tower_agent_core::model::ModelSettings) | `model` (else the provider's), `max_tokens` (required: else the provider's, default 4096), `temperature`, `top_p`, `stop` → `stop_sequences`, `stream`; `tool_choice` (with tools) → `tool_choice: {type: auto \| any \| tool \| none}`, `parallel_tool_calls: false` → its `disable_parallel_tool_use: true`; `response_format` → `output_config: {format: {type: "json_schema", schema}}`; `extra_body` merged at the top level; `seed` is an [invalid-request](tower_agent_core::model::ProviderError::is_invalid_request) error (the API has none) |
//! | answer | the content blocks in their order: consecutive `text` blocks joined as one text part (their `citations` are not kept), `thinking` (with its `signature`) and `redacted_thinking` blocks as [`Content::Reasoning`](tower_agent_core::message::Content::Reasoning) parts, `tool_use` blocks as tool calls, and every other block (a server tool's `server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`, `code_execution_tool_result`, `mcp_tool_use`, `mcp_tool_result`, `container_upload`, …) kept whole as a [`Content::Provider`](tower_agent_core::message::Content::Provider) part (provider `"anthropic"`) at its place |
//! | [`Content::Provider`](tower_agent_core::message::Content::Provider) of an assistant message | from `"anthropic"`: the block sent back as it came, at its place among the text and thinking blocks (before the `tool_use` blocks), so a turn paused with `pause_turn` continues where it stopped; from another provider: not sent |
//! | [`Content::Reasoning`](tower_agent_core::message::Content::Reasoning) of an assistant message | sent back unmodified, first in the assistant message (before its text and `tool_use` blocks), as the API requires: `thinking {thinking, signature}` or `redacted_thinking {data}`; reasoning with neither a signature nor redacted data (from another provider) is not sent |
//! | [`ModelSettings::thinking_budget`](tower_agent_core::model::ModelSettings::thinking_budget) | `thinking: {type: "enabled", budget_tokens}` |
//! | prompt caching (default on; [`AnthropicBuilder::prompt_caching`]) | `cache_control: {type: "ephemeral"}` on the last tool, on the system prompt (then one text block) and on the last block the next request repeats (before a trailing `<system-reminder>`): three breakpoints of the API's four |
//! | `usage` | `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens` → `input_tokens` (all the prompt's tokens), with `cache_read_input_tokens` → `cache_read_tokens` and `cache_creation_input_tokens` → `cache_write_tokens` among them; `output_tokens` → `output_tokens` |
//! | `stop_reason` | `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`, `refusal`, `pause_turn` → the same [`StopReason`](tower_agent_core::message::StopReason) (the agent loop ends a refused run [`Outcome::Refused`](tower_agent_core::agent::Outcome::Refused) and continues a paused one by sending the answer back); others → `Other` |
//!
//! Headers: `x-api-key`, `anthropic-version: 2023-06-01`, `content-type: application/json`.
//!
//! # Streaming
//!
//! With [`ModelSettings::stream`](tower_agent_core::model::ModelSettings::stream) on, the answer is read as
//! server-sent events (`message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`,
//! `message_stop`): text deltas, thinking deltas (as
//! [`ModelDelta::Reasoning`](tower_agent_core::event::ModelDelta::Reasoning)) and tool-input JSON deltas
//! (each tool call's `content_block_stop` a [`ModelDelta::ToolCallEnd`](tower_agent_core::event::ModelDelta::ToolCallEnd))
//! are the pieces of the answer's [`body`](tower_agent_core::model::body): the service answers at the first
//! one, and the body ends with the whole answer. An `error` event fails the call with its type
//! (`overloaded_error` is a server error: before the first piece, the call's error, retried by
//! [`RetryPolicy`](tower_agent_core::model::RetryPolicy); after, the stream's); a stream that ends before
//! `message_stop` is an error ([`is_incomplete`](tower_agent_core::model::ProviderError::is_incomplete)).
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

mod request;
mod response;
mod stream;

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::Service;
use tower_agent_core::{
    error::BoxError,
    model::{
        DEFAULT_MAX_RESPONSE_BYTES, ModelRequest, ModelResponse,
        error::{ProviderError, ProviderErrorKind},
    },
};

use self::{
    request::{request_body, unsupported},
    response::parse_response,
    stream::read_stream,
};
use crate::http::{self, Endpoint, ResponseFuture, Transport};

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
/// [module docs](crate::anthropic).
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
    mid_conversation_system: bool,
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
            mid_conversation_system: false,
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
    mid_conversation_system: bool,
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
    /// [`MAX_SSE_EVENT_BYTES`](tower_agent_core::model::MAX_SSE_EVENT_BYTES) (4 MiB) or this limit if
    /// smaller. The error [`is_malformed_response`](ProviderError::is_malformed_response)
    /// and says which limit was passed. See [the limits](tower_agent_core::model#limits).
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
    /// [`Usage`](tower_agent_core::message::Usage).
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// Mid-conversation system messages (default off): a system message after the
    /// conversation's first message — the contexts hooks add, which the agent loop places
    /// where they arose (after a tool's result, after the prompt: see
    /// [`Message::hook_context`](tower_agent_core::message::Message::hook_context)) — is sent where it
    /// is, with role `system`, as Claude Code sends its hooks' contexts to the models that
    /// take it (the API accepts it right after a user turn). Off, it is sent as user text in a
    /// `<system-hook>` block, which every model takes. The system messages that open the
    /// conversation are the `system` prompt either way.
    pub fn mid_conversation_system_messages(mut self, on: bool) -> Self {
        self.mid_conversation_system = on;
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
                mid_conversation_system: self.mid_conversation_system,
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
        let shared = &self.shared;
        let in_place = shared.mid_conversation_system;
        let mut body = request_body(&req, &shared.model, shared.max_tokens, in_place);
        if self.shared.prompt_caching {
            body.cache_breakpoints();
        }
        let http_req = match http::encode(&body, req.settings.extra_body.as_ref())
            .map_err(|e| {
                ProviderError::new(PROVIDER, ProviderErrorKind::InvalidRequest)
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
        let max_bytes = self.shared.max_response_bytes;
        let request_model = match &req.settings.model {
            Some(model) => Arc::clone(model),
            None => Arc::clone(&self.shared.model),
        };
        ResponseFuture::new(async move {
            let resp = http::check(PROVIDER, sent).await?;
            let status = resp.status().as_u16();
            if stream && !http::is_json(&resp) {
                // Answers at the first piece; the body reads the rest.
                return tower_agent_core::model::body::driven(move |sink| async move {
                    let mut response = read_stream(resp, &sink, max_bytes).await?;
                    response.meta.request_model = Some(request_model);
                    Ok(response)
                })
                .await;
            }
            let body = http::body(PROVIDER, resp, max_bytes).await?;
            let mut response = parse_response(status, &body)?;
            response.meta.request_model = Some(request_model);
            Ok(response)
        })
    }
}
