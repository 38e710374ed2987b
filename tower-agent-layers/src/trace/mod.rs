//! [`TraceLayer`]: OpenTelemetry GenAI spans around every model call (`chat {model}`) and every
//! tool call (`execute_tool {tool}`), nested under the run's `invoke_agent {name}` span.
//!
//! The spans, their names and attributes follow the OpenTelemetry semantic conventions for
//! generative AI (status *Development*) in their current form: the one with
//! `gen_ai.provider.name` (introduced in **v1.37.0**, replacing `gen_ai.system`) and the opt-in
//! `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.tool.call.arguments` and
//! `gen_ai.tool.call.result`, as written in `docs/gen-ai/gen-ai-spans.md` and
//! `gen-ai-agent-spans.md` of open-telemetry/semantic-conventions on its main branch when
//! v1.44.0 was the latest release (the `gen_ai_latest_experimental` flavour).
//! They are [`tracing`] spans: with [`tracing-opentelemetry`](https://docs.rs/tracing-opentelemetry)
//! they become OpenTelemetry spans that a GenAI dashboard understands; with any other
//! subscriber they are ordinary spans.
//!
//! One layer type for both stacks: `Trace<S>` is a model service when `S` is one and a tool
//! service when `S` is one. Put it outermost, so the span covers retries, timeouts and the
//! other layers, and so spans opened below it (a provider's HTTP client, a tool's own
//! instrumentation, a subagent) nest under it: the inner future is polled inside the span.
//!
//! # One trace per run
//!
//! Every run of an [`Agent`](tower_agent_core::Agent) (`run`, `stream` or `call`) is polled inside an
//! `invoke_agent` span (see [`AgentBuilder::name`](tower_agent_core::agent::AgentBuilder::name)), so the
//! `chat` and `execute_tool` spans of a run are its children and a run is one trace, even
//! with no span of the caller around it. A subagent ([`Agent::into_tool`](tower_agent_core::Agent::into_tool))
//! runs inside its `execute_tool` span: its own `invoke_agent` span, and its `chat` and
//! `execute_tool` spans, nest under that tool span.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent_core::{BoxError, context::RunContext};
//! use tower_agent_layers::trace::TraceLayer;
//! use tower_agent_core::message::{Message, ToolCall};
//! use tower_agent_core::model::{ModelRequest, ScriptedModel};
//! use tower_agent_core::tool::{ToolRequest, ToolRouter, tool_fn};
//! use tracing::Level;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! // Any subscriber will do, e.g. one that logs each span when it closes.
//! let subscriber = tracing_subscriber::fmt()
//!     .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
//!     .with_max_level(Level::DEBUG)
//!     .with_test_writer()
//!     .finish();
//! let _guard = tracing::subscriber::set_default(subscriber);
//!
//! let mut model = ServiceBuilder::new()
//!     .layer(TraceLayer::new())
//!     .service(ScriptedModel::new().tool_call("echo", json!({ "text": "hi" })));
//! let resp = model
//!     .ready()
//!     .await?
//!     .call(ModelRequest::new(vec![Message::user("Say hi")]))
//!     .await?;
//! assert_eq!(resp.message.tool_calls[0].name, "echo");
//!
//! let router = ToolRouter::new().tool(tool_fn(
//!     "echo",
//!     "Echoes its input",
//!     json!({ "type": "object" }),
//!     |args, _ctx| async move { Ok(args["text"].clone()) },
//! ));
//! // Content (messages, arguments, results) is recorded only when asked for.
//! let mut tools = ServiceBuilder::new()
//!     .layer(TraceLayer::new().level(Level::DEBUG).capture_content(true))
//!     .service(router);
//! let call = resp.message.tool_calls[0].clone();
//! let out = tools.ready().await?.call(ToolRequest::new(call, RunContext::new())).await?;
//! assert_eq!(out.content, "hi");
//! # Ok(())
//! # }
//! ```
//!
//! With an agent, the model layer goes in the model stack and the tool layer in the tool stack:
//! `Agent::builder().name("support").model(ServiceBuilder::new().layer(TraceLayer::new())
//! .service(provider)).tool_layer(TraceLayer::new())`.
//!
//! # Spans and attributes
//!
//! Fields marked † are recorded when the call completes. Numbers are recorded as given: a
//! temperature of `0.2f32` is recorded as the double `0.2` (its shortest decimal form), not
//! as the widened `0.20000000298023224`.
//!
//! `invoke_agent {gen_ai.agent.name}` (made by the agent, target `tower_agent::agent`, kind
//! `internal`):
//!
//! | Attribute | Value |
//! |---|---|
//! | `gen_ai.operation.name` | `"invoke_agent"` |
//! | `gen_ai.agent.name` | [`AgentBuilder::name`](tower_agent_core::agent::AgentBuilder::name), if set |
//! | `gen_ai.conversation.id` | the thread id (for an ephemeral run, its fresh id †) |
//! | `gen_ai.provider.name`, `gen_ai.request.model` † | from the run's first `chat` span (needs this layer on the model stack) |
//! | `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` † | summed over the run |
//! | `tower_agent.run.id`, `tower_agent.outcome` † | the run id; `finished`, `max_steps`, `blocked`, `aborted` or `cancelled` |
//! | `error.type` † | `aborted` (an abort or a failed model call), `setup` or `store` (the run could not run) |
//!
//! `chat {gen_ai.request.model}` (kind `client`):
//!
//! | Attribute | Value |
//! |---|---|
//! | `gen_ai.operation.name` | `"chat"` |
//! | `gen_ai.provider.name` | the [response's provider](tower_agent_core::model::ResponseMeta::provider) † (`openai`, `anthropic`, `scripted`), else [`provider_name`](TraceLayer::provider_name) |
//! | `gen_ai.request.model` | the request's model, else the one the provider reports it asked for † |
//! | `gen_ai.request.temperature`, `gen_ai.request.max_tokens` | from the request's settings, if set |
//! | `gen_ai.conversation.id` | the thread id of the request's [`RunContext`](tower_agent_core::context::RunContext) |
//! | `gen_ai.response.model`, `gen_ai.response.id` † | as the provider reports them |
//! | `gen_ai.response.finish_reasons` † | the provider's own values (`["stop"]`, `["tool_calls"]`; `["end_turn"]` for Anthropic): an **array** with the `opentelemetry` feature, else its JSON text |
//! | `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` † | from the response's usage, if reported |
//! | `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens` † | the prompt-cache reads and writes among the input tokens ([`Usage::cache_read_tokens`](tower_agent_core::message::Usage::cache_read_tokens), [`cache_write_tokens`](tower_agent_core::message::Usage::cache_write_tokens)), when the provider reports them |
//! | `gen_ai.input.messages`, `gen_ai.output.messages` † | **opt-in** ([`capture_content`](TraceLayer::capture_content)): JSON text in the conventions' message schema |
//! | `tower_agent.run.id`, `tower_agent.step`, `tower_agent.message_count`, `tower_agent.tool_calls` † | the run, the step, the messages sent, the tool calls asked for |
//! | `tower_agent.streamed` | `true` for an answer that streamed: the span stays open until its stream ends, and what the answer tells (usage, finish reasons, output) is recorded then (a stream that fails records its error) |
//! | `error.type` † | see [below](#errors) |
//!
//! `execute_tool {gen_ai.tool.name}` (kind `internal`):
//!
//! | Attribute | Value |
//! |---|---|
//! | `gen_ai.operation.name` | `"execute_tool"` |
//! | `gen_ai.tool.name`, `gen_ai.tool.call.id` | the call's tool name and id |
//! | `gen_ai.tool.type` | `"function"` (tools run in this process, on arguments the model wrote) |
//! | `gen_ai.conversation.id`, `tower_agent.run.id`, `tower_agent.step` | from the request's [`RunContext`](tower_agent_core::context::RunContext) |
//! | `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result` † | **opt-in**: the arguments as compact JSON, the output's text |
//! | `tower_agent.output_length` † | UTF-8 bytes of the output's text |
//! | `error.type` † | `tool_error` for an error output (a failure the model sees), else see [below](#errors) |
//!
//! # Errors
//!
//! On failure a span gets `error.type`, the status `error` and the error's `Display` as the
//! status description (`otel.status_code`, `otel.status_description`, read by
//! `tracing-opentelemetry`). `error.type` is low-cardinality: the HTTP status of a
//! [`ProviderError`] (`"429"`, `"500"`), else its kind
//! (`timeout`, `transport`, `malformed_response`, `incomplete`, `config`); `timeout` for
//! tower's timeout; `tool_error` for a tool's error output; `_OTHER` for anything else.
//!
//! # Content capture
//!
//! Off by default, as the conventions ask: messages, tool arguments and tool results may hold
//! personal data. [`capture_content`](TraceLayer::capture_content) turns it on. Each text
//! part, image URL, tool-call argument text and tool result is cut to
//! [`max_content_chars`](TraceLayer::max_content_chars) characters (default
//! [`DEFAULT_MAX_CONTENT_CHARS`], 4,096), keeping the JSON structure; serializing arguments
//! stops at that cap, so a huge argument costs no more than a small one. The number of
//! messages is not capped: `gen_ai.input.messages` holds every message of the request, so it
//! is at most about (parts in the request) × `max_content_chars` characters, plus the JSON
//! around them. With capture off, no attribute holds content, and the spans' sizes do not
//! depend on the conversation.
//!
//! # Customising
//!
//! In tower-http's style: [`make_span_with`](TraceLayer::make_span_with) replaces the span
//! (the layer still records the attributes above on it, where it declares the field),
//! [`on_response`](TraceLayer::on_response) and [`on_failure`](TraceLayer::on_failure) add
//! your own recording. Spans are at [`Level::INFO`] unless set with
//! [`level`](TraceLayer::level); their target is `tower_agent::layers::trace`.
//!
//! # Cost
//!
//! When no subscriber wants the span, the layer creates a disabled span and records, formats
//! and allocates nothing beyond one reference count.

pub mod future;
mod layer;
mod record;
mod service;

use std::{any::Any, borrow::Cow, fmt, sync::Arc};

use serde_json::{Map, Value, json};
use tracing::{Level, Span};

pub use self::{layer::TraceLayer, service::Trace};
use tower_agent_core::{
    error::BoxError,
    message::{Content, Message, ToolOutput},
    model::{ModelRequest, ModelResponse, ProviderError},
    tool::ToolRequest,
};

/// The target of the spans: the path users reach this module by (`tower_agent::layers::trace`,
/// as before the layers had a crate of their own), so filters and subscribers keep matching.
const TARGET: &str = "tower_agent::layers::trace";

/// The default of [`TraceLayer::max_content_chars`]: 4,096 characters per captured part.
pub const DEFAULT_MAX_CONTENT_CHARS: usize = 4096;

/// A request as [`make_span_with`](TraceLayer::make_span_with) sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum TracedRequest<'a> {
    /// A model call.
    Model(&'a ModelRequest),
    /// A tool call.
    Tool(&'a ToolRequest),
}

/// A response as [`on_response`](TraceLayer::on_response) sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum TracedResponse<'a> {
    /// A model's answer.
    Model(&'a ModelResponse),
    /// A tool's output.
    Tool(&'a ToolOutput),
}

type MakeSpan = dyn Fn(&TracedRequest<'_>) -> Span + Send + Sync;
type OnResponse = dyn Fn(&TracedResponse<'_>, &Span) + Send + Sync;
type OnFailure = dyn Fn(&dyn fmt::Display, &Span) + Send + Sync;

/// The configuration shared by [`TraceLayer`], [`Trace`] and their futures.
#[derive(Clone)]
pub(crate) struct Config {
    level: Level,
    capture_content: bool,
    max_content_chars: usize,
    provider_name: Option<Cow<'static, str>>,
    make_span: Option<Arc<MakeSpan>>,
    on_response: Option<Arc<OnResponse>>,
    on_failure: Option<Arc<OnFailure>>,
}

impl Config {
    const DEFAULT: Config = Config {
        level: Level::INFO,
        capture_content: false,
        max_content_chars: DEFAULT_MAX_CONTENT_CHARS,
        provider_name: None,
        make_span: None,
        on_response: None,
        on_failure: None,
    };
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("level", &self.level)
            .field("capture_content", &self.capture_content)
            .field("max_content_chars", &self.max_content_chars)
            .field("provider_name", &self.provider_name)
            .field("make_span", &self.make_span.is_some())
            .field("on_response", &self.on_response.is_some())
            .field("on_failure", &self.on_failure.is_some())
            .finish()
    }
}

/// `n` as an `i64` (saturating): `tracing-opentelemetry` exports `i64` fields as integers
/// but `u64` fields as text.
pub(crate) fn int<N: TryInto<i64>>(n: N) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// `t` as the double it was written as: `0.2f32` is `0.2`, not `0.20000000298023224`.
///
/// An `f32` prints as the shortest decimal that reads back as the same `f32`; read as an
/// `f64`, that decimal is the value the user wrote (for any value written with at most the
/// ~7 significant digits an `f32` holds).
pub(crate) fn exact_f64(t: f32) -> f64 {
    t.to_string().parse().unwrap_or(f64::from(t))
}

/// A low-cardinality `error.type` for `error` (see [errors](self#errors)).
pub(crate) fn error_type(error: &(dyn Any + 'static)) -> Cow<'static, str> {
    let boxed = error.downcast_ref::<BoxError>();
    let dyn_error: Option<&(dyn std::error::Error + 'static)> = match boxed {
        Some(boxed) => Some(&**boxed),
        None => error
            .downcast_ref::<tower_agent_core::Error>()
            .map(|e| e as &(dyn std::error::Error + 'static)),
    };
    if let Some(err) = dyn_error {
        if let Some(provider) = ProviderError::find(err) {
            return provider_error_type(provider);
        }
        if let Some(err) = err.downcast_ref::<tower_agent_core::Error>() {
            if err.is_setup() {
                return "setup".into();
            }
            if err.is_store() {
                return "store".into();
            }
        }
        let mut source = Some(err);
        while let Some(err) = source {
            if err.is::<tower::timeout::error::Elapsed>() {
                return "timeout".into();
            }
            source = err.source();
        }
    }
    if error.is::<tower::timeout::error::Elapsed>() {
        return "timeout".into();
    }
    "_OTHER".into()
}

fn provider_error_type(err: &ProviderError) -> Cow<'static, str> {
    if let Some(status) = err.status().filter(|s| *s >= 400) {
        return status.to_string().into();
    }
    let kind = if err.is_timeout() {
        "timeout"
    } else if err.is_transport() {
        "transport"
    } else if err.is_malformed_response() {
        "malformed_response"
    } else if err.is_incomplete() {
        "incomplete"
    } else if err.is_config() {
        "config"
    } else if err.is_rate_limited() {
        "rate_limited"
    } else if err.is_authentication() {
        "authentication"
    } else if err.is_invalid_request() {
        "invalid_request"
    } else {
        "_OTHER"
    };
    kind.into()
}

/// Records the error attributes and status on `span`.
pub(crate) fn record_error(span: &Span, error_type: &str, description: &dyn fmt::Display) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
    span.record(
        "otel.status_description",
        tracing::field::display(description),
    );
}

/// Records `reasons` as `gen_ai.response.finish_reasons`: an array through
/// `tracing-opentelemetry` with the `opentelemetry` feature, else JSON text.
pub(crate) fn record_finish_reasons(span: &Span, reasons: &[String]) {
    #[cfg(feature = "opentelemetry")]
    {
        use opentelemetry::{Array, StringValue, Value};
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let values: Vec<StringValue> = reasons.iter().map(|r| r.clone().into()).collect();
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            Value::Array(Array::String(values)),
        );
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        let text = Value::from(reasons).to_string();
        span.record("gen_ai.response.finish_reasons", text.as_str());
    }
}

/// The first `max_chars` characters of `s` (all of it if shorter), cut on a char boundary.
pub(crate) fn preview(s: &str, max_chars: usize) -> &str {
    // A string of at most `max_chars` bytes has at most `max_chars` characters.
    if s.len() <= max_chars {
        return s;
    }
    match s.char_indices().nth(max_chars) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// `value` as compact JSON text, at most `max_chars` characters: serialization stops at the
/// cap, so a huge argument costs no more than a small one.
fn capped_json(value: &Value, max_chars: usize) -> String {
    let mut out = Capped::new(max_chars);
    // An error only means the cap was reached.
    let _ = fmt::write(&mut out, format_args!("{value}"));
    out.into_string()
}

/// Messages as the conventions' message schema (`gen_ai.input.messages`,
/// `gen_ai.output.messages`): `[{"role", "parts": [{"type": "text", "content"}, …]}]`,
/// each part cut to `max_chars` characters.
pub(crate) fn messages_json<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
    finish_reason: Option<&str>,
    max_chars: usize,
) -> String {
    let list: Vec<Value> = messages
        .into_iter()
        .map(|m| message_json(m, finish_reason, max_chars))
        .collect();
    Value::Array(list).to_string()
}

fn message_json(m: &Message, finish_reason: Option<&str>, max_chars: usize) -> Value {
    let mut parts = Vec::new();
    if let Some(id) = &m.tool_call_id {
        let text: String = m.content.iter().filter_map(Content::as_text).collect();
        parts.push(json!({
            "type": "tool_call_response",
            "id": id,
            "result": preview(&text, max_chars),
        }));
    } else {
        for part in &m.content {
            parts.push(match part {
                Content::Text { text } => {
                    json!({ "type": "text", "content": preview(text, max_chars) })
                }
                Content::Image { url } => {
                    json!({ "type": "uri", "modality": "image", "uri": preview(url, max_chars) })
                }
                Content::Reasoning(r) => {
                    json!({ "type": "reasoning", "content": preview(&r.text, max_chars) })
                }
                Content::Document { url, .. } => {
                    json!({ "type": "uri", "modality": "document", "uri": preview(url, max_chars) })
                }
                // A provider's own item (a server-tool call or result): its type only.
                Content::Provider(p) => json!({
                    "type": p.item.get("type").and_then(Value::as_str).unwrap_or("provider"),
                    "provider": p.provider,
                }),
            });
        }
    }
    for call in &m.tool_calls {
        parts.push(json!({
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": capped_arguments(&call.arguments, max_chars),
        }));
    }
    let mut out = Map::new();
    out.insert("role".into(), m.role.to_string().into());
    out.insert("parts".into(), parts.into());
    if let Some(reason) = finish_reason {
        out.insert("finish_reason".into(), reason.into());
    }
    Value::Object(out)
}

/// The arguments as they are if their JSON text fits the cap, else the cut text.
fn capped_arguments(arguments: &Value, max_chars: usize) -> Value {
    let text = capped_json(arguments, max_chars.saturating_add(1));
    if text.chars().count() <= max_chars {
        arguments.clone()
    } else {
        Value::String(preview(&text, max_chars).to_owned())
    }
}

/// A string writer that keeps the first `remaining` characters and then fails.
struct Capped {
    buf: String,
    remaining: usize,
}

impl Capped {
    fn new(max_chars: usize) -> Self {
        Capped {
            buf: String::new(),
            remaining: max_chars,
        }
    }

    fn into_string(self) -> String {
        self.buf
    }
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let kept = preview(s, self.remaining);
        self.buf.push_str(kept);
        if kept.len() < s.len() {
            self.remaining = 0;
            return Err(fmt::Error);
        }
        self.remaining -= kept.chars().count();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn preview_cuts_on_char_boundaries() {
        assert_eq!(preview("hello", 10), "hello");
        assert_eq!(preview("hello", 5), "hello");
        assert_eq!(preview("hello", 2), "he");
        assert_eq!(preview("hello", 0), "");
        assert_eq!(preview("", 3), "");
        assert_eq!(preview("héllo", 2), "hé");
        assert_eq!(preview("🦀🦀🦀", 2), "🦀🦀");
        assert_eq!(preview("🦀🦀🦀", 3), "🦀🦀🦀");
        let s = "é".repeat(600);
        assert_eq!(preview(&s, 500).chars().count(), 500);
        assert_eq!(preview(&s, 500).len(), 1000);
    }

    #[test]
    fn capped_json_stops_at_the_cap() {
        let v = json!({ "path": "a.txt", "content": "x".repeat(10_000) });
        let s = capped_json(&v, 500);
        assert_eq!(s.chars().count(), 500);
        assert!(v.to_string().starts_with(&s));
        assert_eq!(capped_json(&json!({ "a": 1 }), 500), r#"{"a":1}"#);
        let v = json!({ "t": "ü".repeat(1000) });
        let s = capped_json(&v, 10);
        assert_eq!(s, r#"{"t":"üüüü"#);
        assert_eq!(capped_json(&v, 0), "");
    }

    #[test]
    fn exact_f64_keeps_the_written_value() {
        assert_eq!(exact_f64(0.2), 0.2);
        assert_eq!(exact_f64(0.7), 0.7);
        assert_eq!(exact_f64(1.0), 1.0);
        assert_eq!(exact_f64(0.0), 0.0);
        assert_ne!(f64::from(0.2f32), 0.2);
        // A seeded sweep: every value with up to 6 decimals written as f32 comes back as
        // the f64 of the same text.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let text = format!("{}.{:06}", x % 3, (x >> 8) % 1_000_000);
            let t: f32 = text.parse().unwrap();
            assert_eq!(
                exact_f64(t),
                text.parse::<f32>()
                    .unwrap()
                    .to_string()
                    .parse::<f64>()
                    .unwrap()
            );
            assert_eq!(exact_f64(t) as f32, t, "{text}");
        }
    }

    #[test]
    fn messages_json_follows_the_schema_and_caps_parts() {
        use tower_agent_core::message::ToolCall;
        let long = "y".repeat(100);
        let messages = [
            Message::system("be brief"),
            Message::user(long.clone()),
            Message::assistant("").with_tool_calls(vec![ToolCall::new(
                "c1",
                "echo",
                json!({ "text": long }),
            )]),
        ];
        let v: Value = serde_json::from_str(&messages_json(&messages, None, 10)).unwrap();
        assert_eq!(
            v[0],
            json!({ "role": "system", "parts": [{ "type": "text", "content": "be brief" }] })
        );
        assert_eq!(v[1]["parts"][0]["content"], "y".repeat(10));
        assert_eq!(v[2]["parts"][0]["type"], "tool_call");
        assert_eq!(v[2]["parts"][0]["arguments"], json!("{\"text\":\"y"));
        let v: Value =
            serde_json::from_str(&messages_json(&messages[..1], Some("stop"), 10)).unwrap();
        assert_eq!(v[0]["finish_reason"], "stop");
    }
}
