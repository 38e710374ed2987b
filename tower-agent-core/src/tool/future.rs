//! The response futures of the tool services.

use std::{
    fmt,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;

pub use super::router::future::ResponseFuture;
use crate::{error::BoxError, message::ToolOutput};

/// The response future of [`ToolService<T>`](super::ToolService): the call of the tool `T`.
///
/// Boxed: one allocation per call ([`Tool::call`](super::Tool::call)'s future has no name to
/// keep it inline).
#[must_use = "futures do nothing unless polled"]
pub struct ToolServiceFuture<T> {
    inner: BoxFuture<'static, Result<ToolOutput, BoxError>>,
    _tool: PhantomData<fn() -> T>,
}

impl<T> ToolServiceFuture<T> {
    pub(super) fn new(
        call: impl Future<Output = Result<ToolOutput, BoxError>> + Send + 'static,
    ) -> Self {
        ToolServiceFuture {
            inner: Box::pin(call),
            _tool: PhantomData,
        }
    }
}

impl<T> Future for ToolServiceFuture<T> {
    type Output = Result<ToolOutput, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for ToolServiceFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolServiceFuture").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_and_static() {
        fn assert_send_static<T: Send + 'static>() {}
        // Whatever the tool type: the future holds none.
        assert_send_static::<ToolServiceFuture<std::rc::Rc<u8>>>();
        assert_send_static::<ResponseFuture>();
    }
}
