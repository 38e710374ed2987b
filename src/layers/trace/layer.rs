use tower::Layer;
use tracing::Level;

use super::{Config, Trace};

/// A [`Layer`] that wraps each model call in an `llm.call` span and each tool call in a
/// `tool.call` span.
///
/// The same layer works on the model stack and on the tool stack. See the
/// [module docs](crate::layers::trace) for the fields and an example.
///
/// Cloning is a copy: the layer holds only its level and preview length.
#[must_use]
#[derive(Debug, Clone, Copy)]
pub struct TraceLayer {
    config: Config,
}

impl TraceLayer {
    /// A layer making spans at [`Level::INFO`] with 500-character previews.
    pub const fn new() -> Self {
        TraceLayer {
            config: Config::DEFAULT,
        }
    }

    /// The level of the spans (default [`Level::INFO`]).
    pub const fn level(mut self, level: Level) -> Self {
        self.config.level = level;
        self
    }

    /// The most characters (not bytes) a preview field holds (default 500).
    pub const fn preview_chars(mut self, max_chars: usize) -> Self {
        self.config.preview_chars = max_chars;
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
        Trace::with_config(inner, self.config)
    }
}
