//! The response future of [`SchemaGuard`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::*;

pin_project! {
    /// The response future of [`SchemaGuard`](super::SchemaGuard).
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Call { #[pin] fut: F, nudge: Option<Arc<Compiled>> },
        Denied { output: Option<ToolOutput> },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn call(fut: F, nudge: Option<Arc<Compiled>>) -> Self {
        ResponseFuture {
            kind: Kind::Call { fut, nudge },
        }
    }

    pub(super) fn denied(output: ToolOutput) -> Self {
        ResponseFuture {
            kind: Kind::Denied {
                output: Some(output),
            },
        }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<ToolOutput, E>>,
{
    type Output = Result<ToolOutput, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Call { fut, nudge } => {
                let mut result = ready!(fut.poll(cx));
                if let (Ok(output), Some(compiled)) = (&mut result, nudge.take()) {
                    compiled.nudge(output);
                }
                Poll::Ready(result)
            }
            KindProj::Denied { output } => Poll::Ready(Ok(output
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
