//! [`when`]: a layer applied only to the calls a [`ToolMatcher`] picks, as
//! [`When`](super::When).

use super::*;

/// Applies `layer` only to the tool calls `matcher` picks; the others bypass it untouched.
///
/// See the [module docs](crate::matcher).
pub fn when<L>(matcher: impl Into<ToolMatcher>, layer: L) -> WhenLayer<L> {
    WhenLayer {
        matcher: matcher.into(),
        layer,
    }
}

/// The layer of [`when`].
#[derive(Debug, Clone)]
#[must_use]
pub struct WhenLayer<L> {
    matcher: ToolMatcher,
    layer: L,
}

impl<L> WhenLayer<L> {
    /// A layer applying `layer` to the calls `matcher` picks.
    pub fn new(matcher: impl Into<ToolMatcher>, layer: L) -> Self {
        when(matcher, layer)
    }
}

impl<S: Clone, L: Layer<S>> Layer<S> for WhenLayer<L> {
    type Service = When<S, L::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        When {
            matched: self.layer.layer(inner.clone()),
            inner,
            matcher: self.matcher.clone(),
        }
    }
}
