//! The tool side of a [`Redaction`](super::Redaction).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use tower::{Layer, Service};

use super::Redaction;
use tower_agent_core::{message::ToolOutput, tool::ToolRequest};

/// The tool stack's layer of a [`Redaction`]: each output's text redacted; a block makes it an
/// error output naming the detector.
#[derive(Clone, Debug)]
pub struct RedactToolLayer {
    redaction: Redaction,
}

impl RedactToolLayer {
    pub(super) fn new(redaction: Redaction) -> Self {
        RedactToolLayer { redaction }
    }
}

impl<S> Layer<S> for RedactToolLayer {
    type Service = RedactTool<S>;

    fn layer(&self, inner: S) -> RedactTool<S> {
        RedactTool {
            inner,
            redaction: self.redaction.clone(),
        }
    }
}

/// The service of [`RedactToolLayer`].
#[derive(Clone, Debug)]
pub struct RedactTool<S> {
    inner: S,
    redaction: Redaction,
}

impl<S> Service<ToolRequest> for RedactTool<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
{
    type Response = ToolOutput;
    type Error = S::Error;
    type Future = RedactToolFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        RedactToolFuture {
            inner: self.inner.call(req),
            redaction: self.redaction.clone(),
        }
    }
}

pin_project! {
    /// The response future of [`RedactTool`].
    pub struct RedactToolFuture<F> {
        #[pin]
        inner: F,
        redaction: Redaction,
    }
}

impl<F> std::fmt::Debug for RedactToolFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactToolFuture").finish_non_exhaustive()
    }
}

impl<F, E> Future for RedactToolFuture<F>
where
    F: Future<Output = Result<ToolOutput, E>>,
{
    type Output = Result<ToolOutput, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut output = ready!(this.inner.poll(cx))?;
        match this.redaction.redact(&output.content) {
            Ok(std::borrow::Cow::Borrowed(_)) => {}
            Ok(std::borrow::Cow::Owned(text)) => output.content = text,
            Err(blocked) => {
                output = ToolOutput::error(output.call_id, blocked.to_string());
            }
        }
        Poll::Ready(Ok(output))
    }
}
