use std::sync::Arc;

use tower::Layer;

use super::{Config, Trace, config_methods};

/// A [`Layer`] that wraps each model call in a `chat {model}` span and each tool call in an
/// `execute_tool {tool}` span, with the OpenTelemetry GenAI attributes.
///
/// The same layer works on the model stack and on the tool stack. See the
/// [module docs](crate::layers::trace) for the attributes and an example.
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

    config_methods!();
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
