//! [`OpenAiResponses`]: the OpenAI Responses API (`POST /v1/responses`) over reqwest, in its
//! stateless mode.
//!
//! Every request carries the whole conversation as input items and `store: false`, so
//! nothing is kept on OpenAI's side; the reasoning of a reasoning model is carried across
//! turns by its encrypted form: the request asks for `include: ["reasoning.encrypted_content"]`,
//! each `reasoning` item of the answer is kept on the assistant [`Message`] as a
//! [`Content::Reasoning`] part (its summary text as [`Reasoning::text`], the whole item as its
//! [`opaque`](Reasoning::opaque) item, provider [`ITEM_PROVIDER`]) and is sent back
//! unmodified, at its place before the message's text and function calls, on every later
//! request. That is what lets a reasoning model continue its reasoning after a tool call.
//!
//! # Example
//!
//! ```no_run
//! use tower::ServiceBuilder;
//! use tower_agent_core::{Agent, model::RetryPolicy};
//! use tower_agent_providers::responses::OpenAiResponses;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let model = OpenAiResponses::builder()
//!     .api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default())
//!     .model("gpt-5-mini")
//!     .reasoning_summary("auto")
//!     .build();
//! let agent = Agent::builder()
//!     .model(ServiceBuilder::new().retry(RetryPolicy::new()).service(model))
//!     .build();
//! println!("{}", agent.run("Say hello").await?.text);
//! # Ok(())
//! # }
//! ```
//!
//! # Mapping
//!
//! | tower-agent | Responses API |
//! |---|---|
//! | system / user messages | `input[]` messages `{role, content}` (text as a string; a user message with images as `input_text` / `input_image` parts) |
//! | assistant message | its parts in order: the [`opaque`](Reasoning::opaque) item of a [`Content::Reasoning`] and the item of a [`Content::Provider`] from this API ([`ITEM_PROVIDER`]) unmodified, text as `{role: "assistant", content}` (consecutive text parts in one); then one `{type: "function_call", call_id, name, arguments}` per tool call (`arguments` a JSON string). Reasoning and items from another provider are not sent |
//! | tool results | `{type: "function_call_output", call_id, output}`: the text, or `input_text` / `input_image` / `input_file` parts when the tool returned images or documents ([`ToolOutput::with_image`](tower_agent_core::message::ToolOutput::with_image), [`with_document`](tower_agent_core::message::ToolOutput::with_document)); a document is `file_data` + `filename` (a `data:` URL) or `file_url` |
//! | [`ToolSpec`](tower_agent_core::message::ToolSpec)s | `tools: [{type: "function", name, description, parameters, strict: false}]`, `tool_choice: "auto"` |
//! | [`ModelSettings`](tower_agent_core::model::ModelSettings) | `model` (else the provider's), `temperature`, `max_output_tokens`, `stream` |
//! | always | `store: false`, and `include: ["reasoning.encrypted_content"]` unless [turned off](OpenAiResponsesBuilder::encrypted_reasoning) (models without reasoning refuse it) |
//! | answer | `output[]` in order: `message` items' `output_text` (and `refusal`) as text, `function_call` items as tool calls (arguments that are not JSON kept as a JSON string), `reasoning` items as [`Content::Reasoning`] parts (`text`: the `summary[].text`s joined by blank lines; the whole item, `encrypted_content` included, as the opaque item), any other item (a built-in tool's call such as `web_search_call`) kept whole as a [`Content::Provider`] part |
//! | `usage` | `input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens` → [`Usage::cache_read_tokens`], `output_tokens_details.reasoning_tokens` → [`Usage::reasoning_tokens`] |
//! | `status` | `completed` → `EndTurn` (`ToolUse` with function calls), `incomplete` with reason `max_output_tokens` → `MaxTokens`, another reason → `Other(reason)`; `failed` (or an `error` object) → a typed [`ProviderError`] |
//!
//! # Streaming
//!
//! With [`ModelSettings::stream`](tower_agent_core::model::ModelSettings::stream) on, the events are
//! read as they come: `response.output_text.delta` (and `response.refusal.delta`) become
//! [`ModelDelta::Text`], `response.reasoning_summary_text.delta` and
//! `response.reasoning_text.delta` become [`ModelDelta::Reasoning`], a `function_call` item
//! added and its `response.function_call_arguments.delta`s become [`ModelDelta::ToolCall`]
//! (`index` is the item's `output_index`), and `response.function_call_arguments.done`
//! [`ModelDelta::ToolCallEnd`]: the pieces of the answer's [`body`](tower_agent_core::model::body), the
//! service answering at the first one. The answer (the body's last item) is the `response` of
//! `response.completed` (or `response.incomplete`), or, if that lists no output, the items of
//! the `response.output_item.done` events, or, if there were none, the text and calls put
//! together from the deltas. `response.failed` and `error` events fail the call
//! with a typed error; a stream that ends before a terminal event fails as
//! [incomplete](ProviderError::is_incomplete).
//!
//! # Limits
//!
//! As for every provider ([the limits](tower_agent_core::model#limits)): a whole body is read up to
//! `max_response_bytes` (default 16 MiB); one event holds at most
//! [`MAX_SSE_EVENT_BYTES`](tower_agent_core::model::MAX_SSE_EVENT_BYTES) (4 MiB); what a stream puts
//! together (the deltas, the finished items and the final response) is counted against
//! `max_response_bytes` and the call fails past it. An error page is read up to 8 KiB.
//!
//! # Errors
//!
//! Every failure is a [`ProviderError`] (kinds as for [`OpenAiChat`](super::OpenAiChat):
//! rate limit, quota, authentication, context length, invalid request, server, malformed,
//! incomplete); stack [`RetryPolicy`](tower_agent_core::model::RetryPolicy) to retry what is transient.

use std::{
    collections::BTreeMap,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tower::Service;
use tower_agent_core::{
    error::BoxError,
    event::ModelDelta,
    message::{Content, Message, ProviderItem, Reasoning, Role, StopReason, ToolCall, Usage},
    model::{
        DEFAULT_MAX_RESPONSE_BYTES, ModelRequest, ModelResponse, ResponseMeta,
        body::DeltaSink,
        error::{ProviderError, ProviderErrorKind},
    },
};

use crate::http::{self, Endpoint, ResponseFuture, Transport};

const PROVIDER: &str = "openai";

/// The [`ProviderItem::provider`] of the items this provider keeps (and sends back): the
/// opaque items of its [`Content::Reasoning`] parts and its [`Content::Provider`] parts.
pub const ITEM_PROVIDER: &str = "openai.responses";

/// The base URL used when none is set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used when neither the provider nor the request names one.
pub const DEFAULT_MODEL: &str = "gpt-5-mini";

/// A model service speaking the OpenAI Responses API, stateless. See the
/// [module docs](crate::responses).
///
/// # Clone
///
/// Cloning is two reference counts; clones share the HTTP client and its connections.
#[derive(Clone)]
pub struct OpenAiResponses {
    shared: Arc<Shared>,
    transport: Transport,
}

struct Shared {
    endpoint: Endpoint,
    model: Arc<str>,
    encrypted_reasoning: bool,
    reasoning_summary: Option<String>,
    max_response_bytes: usize,
}

impl OpenAiResponses {
    /// A builder: base URL [`DEFAULT_BASE_URL`], model [`DEFAULT_MODEL`], no API key.
    pub fn builder() -> OpenAiResponsesBuilder {
        OpenAiResponsesBuilder {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: DEFAULT_MODEL.to_owned(),
            organization: None,
            headers: Vec::new(),
            transport: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            encrypted_reasoning: true,
            reasoning_summary: None,
        }
    }

    /// The provider configured from the environment, if `OPENAI_API_KEY` or
    /// `OPENAI_BASE_URL` is set: the key, the base URL, the model from `TOWER_AGENT_MODEL`
    /// (else [`DEFAULT_MODEL`]) and the organization from `OPENAI_ORG_ID`, as
    /// [`OpenAiChat::from_env`](super::OpenAiChat::from_env). Empty variables count as unset.
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

    /// The URL requests are posted to (`{base_url}/responses`).
    pub fn url(&self) -> &str {
        self.shared.endpoint.url()
    }
}

impl fmt::Debug for OpenAiResponses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponses")
            .field("endpoint", &self.shared.endpoint)
            .field("model", &self.shared.model)
            .field("encrypted_reasoning", &self.shared.encrypted_reasoning)
            .field("max_response_bytes", &self.shared.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// Builds an [`OpenAiResponses`]. From [`OpenAiResponses::builder`].
#[must_use]
pub struct OpenAiResponsesBuilder {
    base_url: String,
    api_key: Option<String>,
    model: String,
    organization: Option<String>,
    headers: Vec<(String, String)>,
    transport: Option<Transport>,
    max_response_bytes: usize,
    encrypted_reasoning: bool,
    reasoning_summary: Option<String>,
}

impl OpenAiResponsesBuilder {
    /// The API's base URL (default [`DEFAULT_BASE_URL`]); requests go to
    /// `{base_url}/responses`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The API key, sent as `Authorization: Bearer …`.
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

    /// One more header on every request (it replaces a header of the same name).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The `reqwest::Client` to send with; by default a new one with reqwest's defaults.
    pub fn client(self, client: reqwest::Client) -> Self {
        self.transport(client)
    }

    /// Any service of reqwest requests to send with (a client wrapped in tower layers).
    pub fn transport<S>(mut self, service: S) -> Self
    where
        S: Service<reqwest::Request, Response = reqwest::Response> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.transport = Some(http::transport(service));
        self
    }

    /// Whether to ask for `include: ["reasoning.encrypted_content"]` (default on). Turn it
    /// off for a model without reasoning, which refuses it.
    pub fn encrypted_reasoning(mut self, on: bool) -> Self {
        self.encrypted_reasoning = on;
        self
    }

    /// Ask for reasoning summaries (`reasoning: {summary}`: `"auto"`, `"concise"` or
    /// `"detailed"`); streamed as [`ModelDelta::Reasoning`]. Default: not asked.
    pub fn reasoning_summary(mut self, summary: impl Into<String>) -> Self {
        self.reasoning_summary = Some(summary.into());
        self
    }

    /// The most bytes of an answer kept in memory (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`], 16 MiB); see [the limits](tower_agent_core::model#limits).
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// The provider. An invalid base URL or header does not fail here: every call then fails
    /// with [`ProviderError::is_config`].
    pub fn build(self) -> OpenAiResponses {
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
        let url = format!("{}/responses", self.base_url.trim_end_matches('/'));
        OpenAiResponses {
            shared: Arc::new(Shared {
                endpoint: Endpoint::new(PROVIDER, url, &headers, config_error),
                model: self.model.into(),
                encrypted_reasoning: self.encrypted_reasoning,
                reasoning_summary: self.reasoning_summary,
                max_response_bytes: self.max_response_bytes,
            }),
            transport,
        }
    }
}

impl fmt::Debug for OpenAiResponsesBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiResponsesBuilder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.len())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl Service<ModelRequest> for OpenAiResponses {
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.transport
            .poll_ready(cx)
            .map_err(|e| http::transport_error(PROVIDER, e).into())
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let body = request_body(&req, &self.shared);
        let http_req = match serde_json::to_vec(&body)
            .map_err(|e| {
                ProviderError::new(PROVIDER, ProviderErrorKind::InvalidRequest)
                    .with_message(format!("the request could not be encoded: {e}"))
            })
            .and_then(|body| self.shared.endpoint.post(body))
        {
            Ok(r) => r,
            Err(err) => return ResponseFuture::failed(err),
        };
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
            let parsed: ApiResponse = http::parse_json(PROVIDER, status, &body)?;
            let mut response = response(parsed, Vec::new()).map_err(|e| e.with_status(status))?;
            response.meta.request_model = Some(request_model);
            Ok(response)
        })
    }
}

// ===== request =====

fn request_body(req: &ModelRequest, shared: &Shared) -> Value {
    let settings = &req.settings;
    let mut input = Vec::with_capacity(req.messages.len());
    for m in req.messages.iter() {
        input_items(m, &mut input);
    }
    let mut body = Map::new();
    body.insert(
        "model".into(),
        json!(settings.model.as_deref().unwrap_or(&shared.model)),
    );
    body.insert("input".into(), Value::Array(input));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|spec| {
                json!({
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    body.insert("store".into(), json!(false));
    if let Some(key) = &settings.prompt_cache_key {
        body.insert("prompt_cache_key".into(), json!(&**key));
    }
    if shared.encrypted_reasoning {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    let effort = settings.reasoning_effort.as_ref();
    if shared.reasoning_summary.is_some() || effort.is_some() {
        let mut reasoning = serde_json::Map::new();
        if let Some(summary) = &shared.reasoning_summary {
            reasoning.insert("summary".into(), json!(summary));
        }
        if let Some(effort) = effort {
            reasoning.insert("effort".into(), json!(effort.as_str()));
        }
        body.insert("reasoning".into(), Value::Object(reasoning));
    }
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(n) = settings.max_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if settings.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The input items of one message (see the mapping table in the module docs).
fn input_items(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::System => out.push(json!({ "role": "system", "content": m.text() })),
        Role::User => out.push(json!({ "role": "user", "content": user_content(m) })),
        Role::Assistant => {
            let mut text = String::new();
            let flush = |text: &mut String, out: &mut Vec<Value>| {
                if !text.is_empty() {
                    let text = std::mem::take(text);
                    out.push(json!({ "role": "assistant", "content": text }));
                }
            };
            for part in &m.content {
                let item = match part {
                    Content::Text { text: t } => {
                        text.push_str(t);
                        continue;
                    }
                    Content::Reasoning(r) => r.opaque_from(ITEM_PROVIDER),
                    Content::Provider(_) => part.provider_item(ITEM_PROVIDER),
                    Content::Image { .. } | Content::Document { .. } => None,
                };
                if let Some(item) = item {
                    flush(&mut text, out);
                    out.push(item.clone());
                }
            }
            flush(&mut text, out);
            for call in &m.tool_calls {
                let arguments = match &call.arguments {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                out.push(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                }));
            }
        }
        Role::Tool => {
            let output = if m.content.iter().all(|c| c.as_text().is_some()) {
                json!(m.text())
            } else {
                Value::Array(parts(m))
            };
            out.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "output": output,
            }));
        }
    }
}

fn user_content(m: &Message) -> Value {
    if m.content.iter().all(|c| c.as_text().is_some()) {
        json!(m.text())
    } else {
        Value::Array(parts(m))
    }
}

/// A message's content as `input_text` / `input_image` / `input_file` parts (reasoning and
/// provider items are never parts: they travel as input items of an assistant message).
fn parts(m: &Message) -> Vec<Value> {
    m.content
        .iter()
        .filter_map(|c| {
            Some(match c {
                Content::Text { text } => json!({ "type": "input_text", "text": text }),
                Content::Image { url } => {
                    json!({ "type": "input_image", "image_url": url, "detail": "auto" })
                }
                Content::Document { url, name } => {
                    let mut part = json!({ "type": "input_file" });
                    if url.starts_with("data:") {
                        part["file_data"] = json!(url);
                        part["filename"] = json!(name.as_deref().unwrap_or("document.pdf"));
                    } else {
                        part["file_url"] = json!(url);
                    }
                    part
                }
                Content::Reasoning(_) | Content::Provider(_) => return None,
            })
        })
        .collect()
}

// ===== response =====

// NOTE: `Option`s where a compatible server may send `null` rather than leave a field out.
#[derive(Deserialize, Default)]
struct ApiResponse {
    id: Option<String>,
    model: Option<String>,
    status: Option<String>,
    output: Option<Vec<Value>>,
    usage: Option<ApiUsage>,
    error: Option<Value>,
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ApiUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl ApiUsage {
    fn usage(&self) -> Option<Usage> {
        let mut usage = http::usage(self.input_tokens, self.output_tokens)?;
        usage.cache_read_tokens = self
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or_default();
        usage.reasoning_tokens = self
            .output_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or_default();
        Some(usage)
    }
}

fn str_field<'v>(item: &'v Value, key: &str) -> Option<&'v str> {
    item.get(key).and_then(Value::as_str)
}

/// The summary text of a `reasoning` item: its `summary[].text` joined by blank lines.
// NOTE: the core crate reads reasoning items stored by earlier versions with the same rule
// (`message::StoredMessage`).
fn summary_text(item: &Value) -> String {
    let texts = item.get("summary").and_then(Value::as_array);
    let mut out = String::new();
    for text in texts
        .into_iter()
        .flatten()
        .filter_map(|s| str_field(s, "text"))
    {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(text);
    }
    out
}

/// The answer of a response: its `output` items (or `streamed` items if it lists none), its
/// status, usage and metadata; an error if it failed.
fn response(resp: ApiResponse, streamed: Vec<Value>) -> Result<ModelResponse, ProviderError> {
    if let Some(error) = resp.error.as_ref().filter(|e| !e.is_null()) {
        return Err(http::error_object(PROVIDER, error));
    }
    if resp.status.as_deref() == Some("failed") {
        return Err(ProviderError::new(PROVIDER, ProviderErrorKind::ServerError)
            .with_message("the response failed without an error object"));
    }
    let output = match resp.output {
        Some(output) if !output.is_empty() => output,
        _ => streamed,
    };
    let mut message = Message::assistant("");
    for item in output {
        match str_field(&item, "type") {
            Some("message") => {
                let parts = item.get("content").and_then(Value::as_array);
                for part in parts.into_iter().flatten() {
                    let text = match str_field(part, "type") {
                        Some("output_text") => str_field(part, "text"),
                        Some("refusal") => str_field(part, "refusal"),
                        _ => None,
                    };
                    if let Some(text) = text.filter(|t| !t.is_empty()) {
                        message.push_text(text);
                    }
                }
            }
            Some("function_call") => {
                let arguments = str_field(&item, "arguments").unwrap_or_default();
                message.tool_calls.push(ToolCall::new(
                    str_field(&item, "call_id").unwrap_or_default(),
                    str_field(&item, "name").unwrap_or_default(),
                    http::parse_arguments(arguments.to_owned()),
                ));
            }
            Some("reasoning") => {
                let text = summary_text(&item);
                message.content.push(Content::Reasoning(
                    Reasoning::text(text).with_opaque(ProviderItem::new(ITEM_PROVIDER, item)),
                ));
            }
            // Another item of this API (a built-in tool's call): kept to be sent back.
            Some(_) => message
                .content
                .push(Content::Provider(ProviderItem::new(ITEM_PROVIDER, item))),
            None => {}
        }
    }
    let reason = resp.incomplete_details.and_then(|d| d.reason);
    let stop_reason = match (resp.status.as_deref(), reason.as_deref()) {
        (Some("incomplete"), Some("max_output_tokens")) => StopReason::MaxTokens,
        (Some("incomplete"), Some(other)) => StopReason::Other(other.to_owned()),
        _ if !message.tool_calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    };
    let mut meta = ResponseMeta::new(PROVIDER);
    meta.id = resp.id;
    meta.model = resp.model;
    meta.finish_reasons = reason.or(resp.status).into_iter().collect();
    Ok(ModelResponse {
        message,
        usage: resp.usage.as_ref().and_then(ApiUsage::usage),
        stop_reason,
        meta,
        extensions: Default::default(),
        body: tower_agent_core::model::ModelBody::empty(),
    })
}

// ===== streaming =====

/// A streamed answer being put together.
#[derive(Default)]
struct Assembly {
    /// Bytes kept so far (deltas, finished items, the final response), checked against
    /// `max_response_bytes`.
    kept: usize,
    /// The finished output items, by `output_index`.
    items: BTreeMap<u64, Value>,
    /// The final response, once a terminal event came.
    done: Option<ApiResponse>,
    /// The text and calls put together from the deltas: the answer when a server sends
    /// neither finished items nor a final output.
    text: String,
    calls: BTreeMap<u64, (String, String, String)>,
}

impl Assembly {
    /// Takes one event's data; `Ok(true)` at a terminal event.
    fn push(&mut self, data: &str, sink: &DeltaSink) -> Result<bool, ProviderError> {
        let event: Value = serde_json::from_str(data).map_err(|e| {
            http::malformed(
                PROVIDER,
                format!("a streamed event is not valid: {e}"),
                data.as_bytes(),
            )
        })?;
        let index = event.get("output_index").and_then(Value::as_u64);
        let delta = || str_field(&event, "delta").unwrap_or_default().to_owned();
        match str_field(&event, "type").unwrap_or_default() {
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = delta();
                self.kept = self.kept.saturating_add(text.len());
                self.text.push_str(&text);
                sink.push(ModelDelta::Text { text });
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let text = delta();
                self.kept = self.kept.saturating_add(text.len());
                sink.push(ModelDelta::Reasoning { text });
            }
            "response.output_item.added" => {
                let item = event.get("item").unwrap_or(&Value::Null);
                if str_field(item, "type") == Some("function_call") {
                    self.kept = self.kept.saturating_add(data.len());
                    let call = self.calls.entry(index.unwrap_or_default()).or_default();
                    call.0 = str_field(item, "call_id").unwrap_or_default().to_owned();
                    call.1 = str_field(item, "name").unwrap_or_default().to_owned();
                    sink.push(ModelDelta::ToolCall {
                        index: usize::try_from(index.unwrap_or_default()).unwrap_or(0),
                        id: str_field(item, "call_id").map(str::to_owned),
                        name: str_field(item, "name").map(str::to_owned),
                        arguments: String::new(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let arguments = delta();
                self.kept = self.kept.saturating_add(arguments.len());
                if let Some(call) = self.calls.get_mut(&index.unwrap_or_default()) {
                    call.2.push_str(&arguments);
                }
                sink.push(ModelDelta::ToolCall {
                    index: usize::try_from(index.unwrap_or_default()).unwrap_or(0),
                    id: None,
                    name: None,
                    arguments,
                });
            }
            "response.function_call_arguments.done" => {
                let index = usize::try_from(index.unwrap_or_default()).unwrap_or(0);
                sink.push(ModelDelta::ToolCallEnd { index });
            }
            "response.output_item.done" => {
                if let (Some(index), Some(item)) = (index, event.get("item")) {
                    self.kept = self.kept.saturating_add(data.len());
                    self.items.insert(index, item.clone());
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.kept = self.kept.saturating_add(data.len());
                let resp = event.get("response").cloned().unwrap_or(Value::Null);
                let resp: ApiResponse = serde_json::from_value(resp).map_err(|e| {
                    http::malformed(
                        PROVIDER,
                        format!("the final response is not valid: {e}"),
                        data.as_bytes(),
                    )
                })?;
                self.done = Some(resp);
                return Ok(true);
            }
            "error" => return Err(http::error_object(PROVIDER, &event)),
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> Result<ModelResponse, ProviderError> {
        let mut items: Vec<Value> = self.items.into_values().collect();
        if items.is_empty() {
            if !self.text.is_empty() {
                items.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{ "type": "output_text", "text": self.text }],
                }));
            }
            items.extend(self.calls.into_values().map(|(call_id, name, arguments)| {
                json!({
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": arguments,
                })
            }));
        }
        response(self.done.unwrap_or_default(), items)
    }
}

async fn read_stream(
    resp: reqwest::Response,
    sink: &DeltaSink,
    max_bytes: usize,
) -> Result<ModelResponse, ProviderError> {
    let mut assembly = Assembly::default();
    let done = http::read_events(PROVIDER, resp, max_bytes, |event| {
        let done = assembly.push(&event.data, sink)?;
        http::check_kept(PROVIDER, assembly.kept, max_bytes)?;
        Ok(done)
    })
    .await?;
    if !done {
        return Err(http::incomplete(PROVIDER, "`response.completed`"));
    }
    assembly.finish()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Event-shaped JSON: the event types this module reads, with fields of any JSON type.
    fn event() -> impl Strategy<Value = String> {
        let kind = prop_oneof![
            Just("response.output_text.delta"),
            Just("response.refusal.delta"),
            Just("response.reasoning_summary_text.delta"),
            Just("response.output_item.added"),
            Just("response.output_item.done"),
            Just("response.function_call_arguments.delta"),
            Just("response.completed"),
            Just("response.incomplete"),
            Just("response.failed"),
            Just("error"),
            Just("other"),
        ];
        let leaf = http::fuzz::leaf();
        let value = leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("type".to_owned()),
                        Just("output".to_owned()),
                        Just("content".to_owned()),
                        Just("text".to_owned()),
                        Just("status".to_owned()),
                        Just("usage".to_owned()),
                        Just("error".to_owned()),
                        Just("arguments".to_owned()),
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        (kind, value.clone(), value.clone(), value, any::<u8>()).prop_map(
            |(kind, item, response, delta, index)| {
                json!({
                    "type": kind,
                    "output_index": index,
                    "item": item,
                    "response": response,
                    "delta": delta,
                })
                .to_string()
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Whatever a server streams, the assembly returns a response or a typed error, never
        /// panics, and counts at least what it keeps of the text and the items.
        #[test]
        fn any_event_sequence_is_an_answer_or_an_error(
            events in proptest::collection::vec(prop_oneof![event(), ".{0,16}"], 0..12)
        ) {
            let sink = DeltaSink::default();
            let mut a = Assembly::default();
            let total = http::fuzz::feed(&events, |data| a.push(data, &sink));
            prop_assert!(a.kept <= total);
            let _ = a.finish();
        }
    }

    #[test]
    fn url_defaults_and_redacted_key() {
        let p = OpenAiResponses::builder()
            .base_url("http://127.0.0.1:9/v1/")
            .api_key("sk-secret")
            .build();
        assert_eq!(p.url(), "http://127.0.0.1:9/v1/responses");
        assert_eq!(p.model(), DEFAULT_MODEL);
        let debug = format!(
            "{p:?} {:?}",
            OpenAiResponses::builder().api_key("sk-secret")
        );
        assert!(!debug.contains("sk-secret"), "{debug}");
    }

    #[test]
    fn a_stream_of_deltas_only_is_assembled() {
        let sink = DeltaSink::default();
        let mut a = Assembly::default();
        for data in [
            r#"{"type":"response.output_text.delta","output_index":0,"delta":"Let me "}"#,
            r#"{"type":"response.output_text.delta","output_index":0,"delta":"check."}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_1","name":"ls","arguments":""}}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"path\":"}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":1,"delta":"\".\"}"}"#,
        ] {
            assert!(!a.push(data, &sink).unwrap());
        }
        assert!(
            a.push(
                r#"{"type":"response.completed","response":{"status":"completed"}}"#,
                &sink
            )
            .unwrap()
        );
        let resp = a.finish().unwrap();
        assert_eq!(resp.message.text(), "Let me check.");
        assert_eq!(
            resp.message.tool_calls,
            [ToolCall::new("call_1", "ls", json!({"path": "."}))]
        );
        assert_eq!(resp.stop_reason, StopReason::ToolUse);
    }

    #[test]
    fn failed_and_incomplete_statuses_map_to_errors_and_stop_reasons() {
        let failed: ApiResponse = serde_json::from_value(json!({
            "status": "failed",
            "error": {"code": "rate_limit_exceeded", "message": "slow down"}
        }))
        .unwrap();
        let err = response(failed, Vec::new()).unwrap_err();
        assert!(err.is_rate_limited(), "{err}");
        let incomplete: ApiResponse = serde_json::from_value(json!({
            "status": "incomplete",
            "incomplete_details": {"reason": "content_filter"},
            "output": []
        }))
        .unwrap();
        let resp = response(incomplete, Vec::new()).unwrap();
        assert_eq!(resp.stop_reason, StopReason::Other("content_filter".into()));
    }
}
