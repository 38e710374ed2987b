use std::sync::Arc;

use tower::Layer;

use super::{Config, Trace};

/// A [`Layer`] that wraps each model call in a `chat {model}` span and each tool call in an
/// `execute_tool {tool}` span, with the OpenTelemetry GenAI attributes.
///
/// The same layer works on the model stack and on the tool stack. See the
/// [module docs](crate::trace) for the attributes and an example.
///
/// Cloning is one reference count.
#[must_use]
#[derive(Debug, Clone)]
pub struct TraceLayer {
    config: Arc<Config>,
}

impl TraceLayer {
    /// A layer making spans at [`Level::INFO`](tracing::Level::INFO), content capture off.
    pub fn new() -> Self {
        TraceLayer {
            config: Arc::new(Config::DEFAULT),
        }
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
}

impl Default for TraceLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Trace::with_config(inner, Arc::clone(&self.config))
    }
}
