//! [`TraceLayer`]: a tracing span around every model call (`llm.call`) and every tool call
//! (`tool.call`), with OpenTelemetry GenAI attributes.
//!
//! One layer type for both stacks: `Trace<S>` is a model service when `S` is one and a tool
//! service when `S` is one. Put it outermost, so the span covers retries, timeouts and the
//! other layers, and so spans opened below it (a provider's HTTP client, a tool's own
//! instrumentation, a sub-agent) nest under it: the inner future is polled inside the span.
//!
//! # Example
//!
//! ```
//! use serde_json::json;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_agent::{BoxError, context::RunContext, layers::trace::TraceLayer};
//! use tower_agent::message::{Message, ToolCall};
//! use tower_agent::model::{ModelRequest, ScriptedModel};
//! use tower_agent::tool::{ToolRequest, ToolRouter, tool_fn};
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
//!     |args, _ctx| async move { Ok::<_, BoxError>(args["text"].clone()) },
//! ));
//! let mut tools = ServiceBuilder::new()
//!     .layer(TraceLayer::new().level(Level::DEBUG).preview_chars(200))
//!     .service(router);
//! let call = resp.message.tool_calls[0].clone();
//! let out = tools.ready().await?.call(ToolRequest::new(call, RunContext::new())).await?;
//! assert_eq!(out.content, "hi");
//! # Ok(())
//! # }
//! ```
//!
//! This prints (ids and times vary, some fields left out):
//!
//! ```text
//!  INFO llm.call{otel.kind="client" gen_ai.operation.name="chat" session.id="thread_58f3…" run.id="run_c6c4…" step=0 message_count=1 content_length=6 gen_ai.response.finish_reasons="tool_use" tool_calls_count=1 tool_call_names="echo" content_preview=""}: tower_agent::layers::trace: close time.busy=34.3µs time.idle=31.3µs
//! DEBUG tool.call{otel.kind="internal" gen_ai.operation.name="execute_tool" gen_ai.tool.name="echo" gen_ai.tool.call.id="call_1_0" … tool_name="echo" tool_call_id="call_1_0" tool_args="{\"text\":\"hi\"}" output_length=2 output_preview="hi" is_error=false}: tower_agent::layers::trace: close time.busy=80.7µs time.idle=21.5µs
//! ```
//!
//! With an agent, the model layer goes in the model stack and the tool layer in the tool stack:
//! `Agent::builder().model(ServiceBuilder::new().layer(TraceLayer::new()).service(provider))
//! .tool_layer(TraceLayer::new())`.
//!
//! # Fields
//!
//! `llm.call` (fields marked † are recorded when the call completes):
//!
//! | Field | Value |
//! |---|---|
//! | `gen_ai.operation.name` | `"chat"` |
//! | `gen_ai.request.model`, `gen_ai.request.temperature`, `gen_ai.request.max_tokens` | from the request's settings, if set |
//! | `gen_ai.response.finish_reasons` † | the stop reason: `end_turn`, `tool_use`, `max_tokens`, `stop_sequence` or the provider's own (one string: tracing fields are scalars) |
//! | `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` † | from the response's usage, if reported |
//! | `session.id`, `run.id`, `step` | from the request's [`RunContext`](crate::context::RunContext) |
//! | `message_count` | messages in the request |
//! | `content_length` | UTF-8 **bytes** of the text parts of all request messages (images not counted) |
//! | `tool_calls_count` † | tool calls in the response |
//! | `tool_call_names` † | their names, comma-separated (absent if none) |
//! | `content_preview` † | the first 500 characters of the response text |
//! | `error` † | the error's `Display`, if the call failed |
//! | `otel.kind`, `otel.status_code` † | `"client"`; `"ERROR"` if the call failed (read by `tracing-opentelemetry`) |
//!
//! `tool.call`:
//!
//! | Field | Value |
//! |---|---|
//! | `gen_ai.operation.name` | `"execute_tool"` |
//! | `gen_ai.tool.name`, `tool_name` | the tool's name |
//! | `gen_ai.tool.call.id`, `tool_call_id` | the call's id |
//! | `session.id`, `run.id`, `step` | from the request's [`RunContext`](crate::context::RunContext) |
//! | `tool_args` | the arguments as compact JSON text, at most 500 characters |
//! | `output_length` † | UTF-8 **bytes** of the output's content |
//! | `output_preview` † | its first 500 characters |
//! | `is_error` † | whether the output is an error output (a failure the model sees) |
//! | `error` † | the error's `Display`, if the call returned `Err` |
//! | `otel.kind`, `otel.status_code` † | `"internal"`; `"ERROR"` if the call returned `Err` |
//!
//! Previews are cut on a character boundary; set their length with
//! [`preview_chars`](TraceLayer::preview_chars). Spans are at [`Level::INFO`](tracing::Level)
//! unless set with [`level`](TraceLayer::level); their target is `tower_agent::layers::trace`
//! (so `RUST_LOG=tower_agent::layers::trace=debug` selects them).
//!
//! # Cost
//!
//! When no subscriber wants the span, the layer creates a disabled span, computes no lengths,
//! previews or JSON text and allocates nothing. When one does, previews borrow the text and
//! the arguments are serialized only up to the preview length.

pub mod future;
mod layer;
mod record;
mod service;

use std::fmt;

use serde_json::Value;
use tracing::Level;

pub use self::{layer::TraceLayer, service::Trace};

/// The target of the spans.
const TARGET: &str = module_path!();

/// The configuration shared by [`TraceLayer`] and [`Trace`].
#[derive(Debug, Clone, Copy)]
struct Config {
    level: Level,
    preview_chars: usize,
}

impl Config {
    const DEFAULT: Config = Config {
        level: Level::INFO,
        preview_chars: 500,
    };
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
}
