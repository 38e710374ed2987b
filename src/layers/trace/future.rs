//! The response future of [`Trace`](super::Trace).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use tracing::Span;

use super::record::Record;

pin_project! {
    /// The response future of [`Trace`](super::Trace): polls the inner future inside the
    /// call's span, then records the response (or the error) on the span.
    ///
    /// It is a future for both levels: its output is the inner future's output, a
    /// [`ModelResponse`](crate::model::ModelResponse) or a
    /// [`ToolOutput`](crate::message::ToolOutput) (the bound `T: Record` names exactly these
    /// two types).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        preview_chars: usize,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, span: Span, preview_chars: usize) -> Self {
        ResponseFuture {
            inner,
            span,
            preview_chars,
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    T: Record,
    E: fmt::Display,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // Entered for this poll only, never across an await: spans the inner future opens
        // nest under this one.
        let _entered = this.span.enter();
        let result = ready!(this.inner.poll(cx));
        if !this.span.is_disabled() {
            match &result {
                Ok(response) => response.record(this.span, *this.preview_chars),
                Err(error) => {
                    this.span.record("error", tracing::field::display(error));
                    this.span.record("otel.status_code", "ERROR");
                }
            }
        }
        Poll::Ready(result)
    }
}
