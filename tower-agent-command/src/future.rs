//! The response future of [`ElicitationHooks`](super::ElicitationHooks).

use std::{
    fmt,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;

use tower_agent_core::error::BoxError;

use tower_agent_mcp::client::ElicitationResponse;

/// The response future of [`ElicitationHooks<S>`](super::ElicitationHooks): the `Elicitation`
/// hooks, the call of `S` (unless a hook answered), then the `ElicitationResult` hooks.
///
/// Boxed: one allocation per elicitation.
#[must_use = "futures do nothing unless polled"]
pub struct ElicitationHooksFuture<S> {
    inner: BoxFuture<'static, Result<ElicitationResponse, BoxError>>,
    _service: PhantomData<fn() -> S>,
}

impl<S> ElicitationHooksFuture<S> {
    pub(super) fn new(
        fut: impl Future<Output = Result<ElicitationResponse, BoxError>> + Send + 'static,
    ) -> Self {
        ElicitationHooksFuture {
            inner: Box::pin(fut),
            _service: PhantomData,
        }
    }
}

impl<S> Future for ElicitationHooksFuture<S> {
    type Output = Result<ElicitationResponse, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<S> fmt::Debug for ElicitationHooksFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElicitationHooksFuture")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_and_static() {
        fn assert_send_static<T: Send + 'static>() {}
        assert_send_static::<ElicitationHooksFuture<tower_agent_mcp::client::Elicitation>>();
    }
}
