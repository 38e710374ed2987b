use std::{
    fmt,
    task::{Context, Poll},
};

use tower::Service;
use tracing::{Level, Span, field::Empty};

use super::{Config, TARGET, capped_json, future::ResponseFuture};
use crate::{
    message::{Messages, ToolOutput},
    model::{ModelRequest, ModelResponse},
    tool::ToolRequest,
};

/// Wraps each model call in an `llm.call` span and each tool call in a `tool.call` span.
///
/// `Trace<S>` is a model service when `S` is one and a tool service when `S` is one. It adds
/// no failure of its own: errors of `S` pass through unchanged (and are recorded in the
/// span's `error` field). See the [module docs](crate::layers::trace) for the fields.
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
    config: Config,
}

impl<S> Trace<S> {
    /// Wraps `inner`, with spans at [`Level::INFO`] and 500-character previews.
    pub const fn new(inner: S) -> Self {
        Self::with_config(inner, Config::DEFAULT)
    }

    pub(super) const fn with_config(inner: S, config: Config) -> Self {
        Trace { inner, config }
    }

    /// The level of the spans (default [`Level::INFO`]).
    #[must_use]
    pub const fn level(mut self, level: Level) -> Self {
        self.config.level = level;
        self
    }

    /// The most characters (not bytes) a preview field holds (default 500).
    #[must_use]
    pub const fn preview_chars(mut self, max_chars: usize) -> Self {
        self.config.preview_chars = max_chars;
        self
    }

    inner_service_accessors!();
}

/// `tracing::span!` wants a constant level; this expands one `span!` per level (as
/// tower-http's trace module does), all with the target [`TARGET`].
macro_rules! span_at {
    ($level:expr, $($rest:tt)+) => {
        match $level {
            Level::ERROR => tracing::span!(target: TARGET, Level::ERROR, $($rest)+),
            Level::WARN => tracing::span!(target: TARGET, Level::WARN, $($rest)+),
            Level::INFO => tracing::span!(target: TARGET, Level::INFO, $($rest)+),
            Level::DEBUG => tracing::span!(target: TARGET, Level::DEBUG, $($rest)+),
            Level::TRACE => tracing::span!(target: TARGET, Level::TRACE, $($rest)+),
        }
    };
}

// ===== impl Service<ModelRequest> =====

impl<S> Service<ModelRequest> for Trace<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: fmt::Display,
{
    type Response = ModelResponse;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        // Field values of `span!` are only evaluated when the span is enabled; every field
        // here is a cheap read.
        let span = span_at!(
            self.config.level,
            "llm.call",
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.request.model = req.settings.model.as_deref(),
            gen_ai.request.temperature = req.settings.temperature,
            gen_ai.request.max_tokens = req.settings.max_tokens,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            session.id = req.ctx.session_id(),
            run.id = req.ctx.run_id(),
            step = req.ctx.step(),
            message_count = req.messages.len(),
            content_length = Empty,
            tool_calls_count = Empty,
            tool_call_names = Empty,
            content_preview = Empty,
            error = Empty,
        );
        if !span.is_disabled() {
            span.record("content_length", content_length(&req.messages));
        }
        call_in_span(&mut self.inner, req, span, self.config.preview_chars)
    }
}

/// Bytes of text in all messages.
fn content_length(messages: &Messages) -> usize {
    messages.iter().map(|m| m.content_len()).sum()
}

// ===== impl Service<ToolRequest> =====

impl<S> Service<ToolRequest> for Trace<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: fmt::Display,
{
    type Response = ToolOutput;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let name = req.call.name.as_str();
        let id = req.call.id.as_str();
        let span = span_at!(
            self.config.level,
            "tool.call",
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = name,
            gen_ai.tool.call.id = id,
            session.id = req.ctx.session_id(),
            run.id = req.ctx.run_id(),
            step = req.ctx.step(),
            tool_name = name,
            tool_call_id = id,
            tool_args = Empty,
            output_length = Empty,
            output_preview = Empty,
            is_error = Empty,
            error = Empty,
        );
        if !span.is_disabled() {
            let args = capped_json(&req.call.arguments, self.config.preview_chars);
            span.record("tool_args", args.as_str());
        }
        call_in_span(&mut self.inner, req, span, self.config.preview_chars)
    }
}

/// Calls `inner` inside `span` (so spans it opens synchronously nest under it) and wraps its
/// future, which enters the span on every poll.
fn call_in_span<S, R>(
    inner: &mut S,
    req: R,
    span: Span,
    preview_chars: usize,
) -> ResponseFuture<S::Future>
where
    S: Service<R>,
{
    let future = {
        let _entered = span.enter();
        inner.call(req)
    };
    ResponseFuture::new(future, span, preview_chars)
}
