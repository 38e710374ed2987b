//! What the span records of a response, per level.

use tracing::Span;

use super::{
    Config, TracedResponse, int, messages_json, preview, record_error, record_finish_reasons,
};
use tower_agent_core::{message::ToolOutput, model::ModelResponse};

/// A response [`Trace`](super::Trace) records on its span: [`ModelResponse`] or
/// [`ToolOutput`]. Only called when the span is enabled.
///
/// Crate-private, so sealed: the future's `Future` impl names it in a bound, and no other
/// type can implement it.
pub(crate) trait Record {
    /// Records the response's attributes on `span` (and, for a model response, the
    /// provider and model on the run's `agent` span).
    fn record(&self, span: &Span, config: &Config, agent: Option<&Span>, request_model_set: bool);

    /// The response as the `on_response` callback sees it.
    fn traced(&self) -> TracedResponse<'_>;

    /// A streaming response, its recording moved to the end of its stream (`Ok`; the span
    /// stays open until then); `Err(self)` if it does not stream.
    fn defer(self, _end: End) -> Result<Self, Self>
    where
        Self: Sized,
    {
        Err(self)
    }
}

/// What a response recorded at the end of its stream needs of the call's future.
pub(crate) struct End {
    pub(crate) span: Span,
    pub(crate) config: std::sync::Arc<Config>,
    pub(crate) agent: Option<Span>,
    pub(crate) request_model_set: bool,
}

impl Record for ModelResponse {
    fn defer(self, end: End) -> Result<Self, Self> {
        if !self.is_streaming() {
            return Err(self);
        }
        end.span.record("tower_agent.streamed", true);
        Ok(self.on_end(move |result| match result {
            Ok(done) => {
                done.record(
                    &end.span,
                    &end.config,
                    end.agent.as_ref(),
                    end.request_model_set,
                );
                if let Some(f) = &end.config.on_response {
                    f(&done.traced(), &end.span);
                }
            }
            Err(error) => {
                record_error(&end.span, &super::error_type(error), error);
                if let Some(f) = &end.config.on_failure {
                    f(error, &end.span);
                }
            }
        }))
    }

    fn record(&self, span: &Span, config: &Config, agent: Option<&Span>, request_model_set: bool) {
        let meta = &self.meta;
        let provider = meta.provider.as_deref().or(config.provider_name.as_deref());
        if let Some(provider) = provider {
            span.record("gen_ai.provider.name", provider);
        }
        if let (false, Some(model)) = (request_model_set, meta.request_model.as_deref()) {
            span.record("gen_ai.request.model", model);
            let name = format!("chat {model}");
            span.record("otel.name", name.as_str());
            // The OpenTelemetry span was started when it was first entered; its name is
            // changed there directly.
            #[cfg(feature = "opentelemetry")]
            {
                use opentelemetry::trace::TraceContextExt as _;
                use tracing_opentelemetry::OpenTelemetrySpanExt as _;
                span.context().span().update_name(name);
            }
        }
        if let Some(model) = &meta.model {
            span.record("gen_ai.response.model", model.as_str());
        }
        if let Some(id) = &meta.id {
            span.record("gen_ai.response.id", id.as_str());
        }
        if !meta.finish_reasons.is_empty() {
            record_finish_reasons(span, &meta.finish_reasons);
        }
        if let Some(usage) = self.usage {
            span.record("gen_ai.usage.input_tokens", int(usage.input_tokens));
            span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
            // Among the input tokens (as the conventions count them), when reported.
            if usage.cache_read_tokens > 0 {
                let n = int(usage.cache_read_tokens);
                span.record("gen_ai.usage.cache_read.input_tokens", n);
            }
            if usage.cache_write_tokens > 0 {
                let n = int(usage.cache_write_tokens);
                span.record("gen_ai.usage.cache_creation.input_tokens", n);
            }
        }
        span.record("tower_agent.tool_calls", int(self.message.tool_calls.len()));
        if config.capture_content {
            let text = messages_json(
                [&self.message],
                meta.finish_reasons.first().map(String::as_str),
                config.max_content_chars,
            );
            span.record("gen_ai.output.messages", text.as_str());
        }
        if let Some(agent) = agent {
            // Only the first model call of a run (step 0) reports to the agent span.
            if let Some(provider) = provider {
                agent.record("gen_ai.provider.name", provider);
            }
            // The agent span names the agent's model already if the request named one.
            let model = meta.request_model.as_deref().or(meta.model.as_deref());
            if let (false, Some(model)) = (request_model_set, model) {
                agent.record("gen_ai.request.model", model);
            }
        }
    }

    fn traced(&self) -> TracedResponse<'_> {
        TracedResponse::Model(self)
    }
}

impl Record for ToolOutput {
    fn record(&self, span: &Span, config: &Config, _agent: Option<&Span>, _: bool) {
        span.record("tower_agent.output_length", int(self.content.len()));
        if config.capture_content {
            span.record(
                "gen_ai.tool.call.result",
                preview(&self.content, config.max_content_chars),
            );
        }
        if self.is_error {
            record_error(span, "tool_error", &"the tool returned an error output");
        }
    }

    fn traced(&self) -> TracedResponse<'_> {
        TracedResponse::Tool(self)
    }
}
