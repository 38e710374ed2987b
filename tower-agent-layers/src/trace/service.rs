use std::{
    any::Any,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::Service;
use tracing::{Level, Span, field::Empty};

use super::{
    Config, TARGET, TracedRequest, capped_json, exact_f64, future::ResponseFuture, int,
    messages_json,
};
use tower_agent_core::{
    message::ToolOutput,
    model::{ModelRequest, ModelResponse},
    tool::ToolRequest,
};

/// Wraps each model call in a `chat {model}` span and each tool call in an
/// `execute_tool {tool}` span.
///
/// `Trace<S>` is a model service when `S` is one and a tool service when `S` is one. It adds
/// no failure of its own: errors of `S` pass through unchanged (and are recorded on the
/// span). See the [module docs](crate::trace) for the attributes.
#[must_use]
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Trace<S> {
    /// Wraps `inner`, with spans at [`Level::INFO`] and content capture off.
    pub fn new(inner: S) -> Self {
        Self::with_config(inner, Arc::new(Config::DEFAULT))
    }

    pub(super) fn with_config(inner: S, config: Arc<Config>) -> Self {
        Trace { inner, config }
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }

    /// The level of the spans (default [`Level::INFO`](tracing::Level::INFO)).
    pub fn level(mut self, level: tracing::Level) -> Self {
        self.config_mut().level = level;
        self
    }

    /// Records content — the messages sent and received, tool arguments and results —
    /// on the spans (default off). See [content capture](crate::trace#content-capture).
    pub fn capture_content(mut self, on: bool) -> Self {
        self.config_mut().capture_content = on;
        self
    }

    /// The most characters (not bytes) of each captured part (default
    /// [`DEFAULT_MAX_CONTENT_CHARS`](crate::trace::DEFAULT_MAX_CONTENT_CHARS)).
    pub fn max_content_chars(mut self, max_chars: usize) -> Self {
        self.config_mut().max_content_chars = max_chars;
        self
    }

    /// The `gen_ai.provider.name` of a model call whose response does not name its
    /// provider (a failed call, or a model service that fills no
    /// [`ResponseMeta`](tower_agent_core::model::ResponseMeta)).
    pub fn provider_name(mut self, name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        self.config_mut().provider_name = Some(name.into());
        self
    }

    /// Makes the span of each call with `f` instead of the default span. The layer
    /// still records its attributes on it, where the span declares the field (declare
    /// them as `tracing::field::Empty`), and enters it while the call is polled.
    pub fn make_span_with<F>(mut self, f: F) -> Self
    where
        F: Fn(&crate::trace::TracedRequest<'_>) -> tracing::Span + Send + Sync + 'static,
    {
        self.config_mut().make_span = Some(std::sync::Arc::new(f));
        self
    }

    /// Calls `f` with each response and its span, after the layer recorded its own
    /// attributes (only when the span is enabled).
    pub fn on_response<F>(mut self, f: F) -> Self
    where
        F: Fn(&crate::trace::TracedResponse<'_>, &tracing::Span) + Send + Sync + 'static,
    {
        self.config_mut().on_response = Some(std::sync::Arc::new(f));
        self
    }

    /// Calls `f` with each error (a call that returned `Err`) and its span, after the
    /// layer recorded `error.type` and the status (only when the span is enabled).
    pub fn on_failure<F>(mut self, f: F) -> Self
    where
        F: Fn(&dyn std::fmt::Display, &tracing::Span) + Send + Sync + 'static,
    {
        self.config_mut().on_failure = Some(std::sync::Arc::new(f));
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

/// The name of the agent span the model spans report their provider and model to.
pub(super) const AGENT_SPAN: &str = "invoke_agent";

// ===== impl Service<ModelRequest> =====

impl<S> Service<ModelRequest> for Trace<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: fmt::Display + Any,
{
    type Response = ModelResponse;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let config = &self.config;
        // Field values of `span!` are only evaluated when the span is enabled; every field
        // here is a cheap read.
        let span = match &config.make_span {
            Some(make) => make(&TracedRequest::Model(&req)),
            None => span_at!(
                config.level,
                "chat",
                otel.name = Empty,
                otel.kind = "client",
                otel.status_code = Empty,
                otel.status_description = Empty,
                gen_ai.operation.name = "chat",
                gen_ai.provider.name = Empty,
                gen_ai.request.model = req.settings.model.as_deref(),
                gen_ai.request.temperature = req.settings.temperature.map(exact_f64),
                gen_ai.request.max_tokens = req.settings.max_tokens.map(i64::from),
                gen_ai.conversation.id = req.ctx.session_id(),
                gen_ai.response.model = Empty,
                gen_ai.response.id = Empty,
                gen_ai.response.finish_reasons = Empty,
                gen_ai.usage.input_tokens = Empty,
                gen_ai.usage.output_tokens = Empty,
                gen_ai.usage.cache_read.input_tokens = Empty,
                gen_ai.usage.cache_creation.input_tokens = Empty,
                gen_ai.input.messages = Empty,
                gen_ai.output.messages = Empty,
                error.type = Empty,
                tower_agent.run.id = req.ctx.run_id(),
                tower_agent.step = i64::from(req.ctx.step()),
                tower_agent.message_count = int(req.messages.len()),
                tower_agent.tool_calls = Empty,
                tower_agent.streamed = Empty,
            ),
        };
        let mut agent = None;
        let request_model_set = req.settings.model.is_some();
        if !span.is_disabled() {
            if let Some(model) = req.settings.model.as_deref() {
                span.record("otel.name", format!("chat {model}").as_str());
            }
            if config.capture_content {
                let text = messages_json(req.messages.iter(), None, config.max_content_chars);
                span.record("gen_ai.input.messages", text.as_str());
            }
            // The run's agent span, told the provider and model of its first model call
            // once the response names them.
            let current = Span::current();
            if req.ctx.step() == 0
                && current
                    .metadata()
                    .is_some_and(|m| m.name() == AGENT_SPAN && m.target() == "tower_agent::agent")
            {
                agent = Some(current);
            }
        }
        let future = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        ResponseFuture::new(future, span, Arc::clone(&self.config)).model(agent, request_model_set)
    }
}

// ===== impl Service<ToolRequest> =====

impl<S> Service<ToolRequest> for Trace<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: fmt::Display + Any,
{
    type Response = ToolOutput;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let config = &self.config;
        let name = req.call.name.as_str();
        let span = match &config.make_span {
            Some(make) => make(&TracedRequest::Tool(&req)),
            None => span_at!(
                config.level,
                "execute_tool",
                otel.name = Empty,
                otel.kind = "internal",
                otel.status_code = Empty,
                otel.status_description = Empty,
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = name,
                gen_ai.tool.call.id = req.call.id.as_str(),
                gen_ai.tool.type = "function",
                gen_ai.tool.call.arguments = Empty,
                gen_ai.tool.call.result = Empty,
                gen_ai.conversation.id = req.ctx.session_id(),
                error.type = Empty,
                tower_agent.run.id = req.ctx.run_id(),
                tower_agent.step = i64::from(req.ctx.step()),
                tower_agent.output_length = Empty,
            ),
        };
        if !span.is_disabled() {
            span.record("otel.name", format!("execute_tool {name}").as_str());
            if config.capture_content {
                let args = capped_json(&req.call.arguments, config.max_content_chars);
                span.record("gen_ai.tool.call.arguments", args.as_str());
            }
        }
        let future = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        ResponseFuture::new(future, span, Arc::clone(&self.config))
    }
}
