//! [`OpenAiChat`]: the OpenAI Chat Completions API over reqwest — for OpenAI and every
//! compatible server (vLLM, Ollama, llama.cpp's server, LiteLLM, LM Studio …).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, model::{ModelSettings, RetryPolicy}};
//! use tower_agent_providers::openai::{MaxTokensParam, OpenAiChat};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! // OpenAI itself…
//! let openai = OpenAiChat::builder()
//!     .api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default())
//!     .model("gpt-4.1-mini")
//!     .build();
//! // …or a local server (no key needed).
//! let _ollama = OpenAiChat::builder()
//!     .base_url("http://localhost:11434/v1")
//!     .model("qwen3:8b")
//!     .max_tokens_param(MaxTokensParam::MaxTokens)
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
//! | tool results | `{role: "tool", tool_call_id, content}` (an error result is its text; the API has no error flag); images a tool returned ([`ToolOutput::with_image`](tower_agent_core::message::ToolOutput::with_image)) follow the run of tool results in one `user` message of `image_url` parts, as a tool message holds only text; documents ([`Content::Document`](tower_agent_core::message::Content::Document)) are `file` parts `{file_data, filename}`, and a document by `https:` URL fails the call as an invalid request (the API takes only data) |
//! | [`ToolSpec`](tower_agent_core::message::ToolSpec)s | `tools: [{type: "function", function: {name, description, parameters}}]` and `tool_choice` (`"auto"` unless [`ModelSettings::tool_choice`](tower_agent_core::model::ModelSettings::tool_choice) says `"none"`, `"required"` or `{type: "function", function: {name}}`) |
//! | [`ModelSettings`](tower_agent_core::model::ModelSettings) | `model` (else the provider's), `temperature`, `max_completion_tokens` (or `max_tokens`, see [`MaxTokensParam`]), `reasoning_effort`, `stream` with `stream_options: {include_usage: true}`, `top_p`, `stop`, `seed`, `parallel_tool_calls` (with tools only), `response_format: {type: "json_schema", json_schema: {name, schema, strict}}`, `prompt_cache_key`; `extra_body` merged at the top level (its keys win) |
//! | answer | `choices[0].message`: `content` as text, `refusal` apart (stop reason [`StopReason::Refusal`](tower_agent_core::message::StopReason::Refusal), its text in [`ResponseMeta::refusal`](tower_agent_core::model::ResponseMeta::refusal)), `tool_calls` with their `arguments` parsed; arguments that are not JSON are kept as a JSON string, which the [`ToolRouter`](tower_agent_core::tool::ToolRouter) reports to the model; `reasoning_content` (DeepSeek, vLLM, llama.cpp) or else `reasoning` (OpenRouter, Ollama), when a string, as one [`Content::Reasoning`](tower_agent_core::message::Content::Reasoning) part before the text |
//! | [`Content::Reasoning`](tower_agent_core::message::Content::Reasoning) of earlier assistant messages | `reasoning_content` on the assistant messages of turns that made tool calls (DeepSeek's rule), never to `api.openai.com`: see [`ReasoningReplay`] |
//! | [`Content::Provider`](tower_agent_core::message::Content::Provider) parts, and the [`opaque`](tower_agent_core::message::Reasoning::opaque) items of reasoning | never sent: they are other APIs' items (an Anthropic server-tool block, a Responses API reasoning item) |
//! | `usage` | `prompt_tokens` → `input_tokens`, `completion_tokens` → `output_tokens`; `prompt_tokens_details.cached_tokens` → `cache_read_tokens` and `completion_tokens_details.reasoning_tokens` → `reasoning_tokens` (among them) |
//! | `finish_reason` | `stop` → `EndTurn` (`ToolUse` if there are tool calls), `tool_calls` → `ToolUse`, `length` → `MaxTokens`, others → `Other` |
//!
//! # Streaming
//!
//! With [`ModelSettings::stream`](tower_agent_core::model::ModelSettings::stream) on, the answer is read as
//! server-sent events: each text piece and each piece of a tool call (its id and name first, then
//! its argument text; a call is complete, [`ModelDelta::ToolCallEnd`](tower_agent_core::event::ModelDelta::ToolCallEnd),
//! when the next one starts or the answer finishes) is a piece of the answer's
//! [`body`](tower_agent_core::model::body): the service answers at the first one, and the body ends with
//! the whole [`ModelResponse`]. `reasoning_content`
//! / `reasoning` deltas are sent as [`ModelDelta::Reasoning`](tower_agent_core::event::ModelDelta::Reasoning),
//! apart from the text. Tool-call pieces are put together by their `index`, and by their id where
//! the index cannot be trusted: a piece with a new id at an index already taken starts a new call
//! (Ollama sends every call at `index: 0`), a repeated id is kept once, and a server that sends no
//! `index` starts a new call with each new id. A stream that ends before `data: [DONE]` is an error
//! ([`is_incomplete`](tower_agent_core::model::ProviderError::is_incomplete)), never a short answer.
//!
//! # Limits
//!
//! Besides [the providers' limits](tower_agent_core::model#limits): streamed reasoning counts toward
//! `max_response_bytes` with the text and tool-call arguments (so endless reasoning fails the
//! call at that size, 16 MiB by default), and each tool call started costs 128 bytes of it
//! more, so a stream of empty calls is bounded too.
//!
//! # Errors
//!
//! Every failure is a [`ProviderError`] in the [`BoxError`]:
//! rate limits, server errors, a bad key, a context too long, a malformed answer. Stack
//! [`RetryPolicy`](tower_agent_core::model::RetryPolicy) with tower's `retry` to retry what is
//! transient.

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
    request::{remote_document, request_body},
    response::parse_response,
    stream::read_stream,
};
use crate::http::{self, Endpoint, ResponseFuture, Transport};

const PROVIDER: &str = "openai";

/// The base URL used when none is set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when neither the provider nor the request names one.
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// Which request field carries [`ModelSettings::max_tokens`](tower_agent_core::model::ModelSettings).
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

/// Whether the reasoning of earlier assistant messages
/// ([`Content::Reasoning`](tower_agent_core::message::Content::Reasoning) text) goes back to the server, as
/// `reasoning_content` on the assistant message.
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
/// [module docs](crate::openai).
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
    /// [`MAX_SSE_EVENT_BYTES`](tower_agent_core::model::MAX_SSE_EVENT_BYTES) (4 MiB) or this limit if
    /// smaller. The error [`is_malformed_response`](ProviderError::is_malformed_response)
    /// and says which limit was passed. See [the limits](tower_agent_core::model#limits).
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
                ProviderError::new(PROVIDER, ProviderErrorKind::InvalidRequest).with_message(
                    format!(
                        "Chat Completions takes a document only as a `data:` URL, not {}",
                        url.chars().take(100).collect::<String>()
                    ),
                ),
            );
        }
        let mut body = request_body(&req, &self.shared.model, self.shared.max_tokens_param);
        if self.shared.reasoning_replay == ReasoningReplay::ToolTurns {
            body.replay_reasoning(&req);
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
