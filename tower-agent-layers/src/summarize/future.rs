//! The response future of [`Summarize`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use pin_project_lite::pin_project;

use super::*;

pin_project! {
    /// The response future of [`Summarize`](super::Summarize): the inner future as it is
    /// when no compaction is needed; boxed when the summarizer is called.
    pub struct ResponseFuture<F> {
        #[pin]
        kind: Kind<F>,
    }
}

/// What a passed-through call does when it fails with a context-length error.
pub(super) type Recover =
    Box<dyn FnOnce(BoxError) -> BoxFuture<'static, Result<ModelResponse, BoxError>> + Send>;

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Passthrough { #[pin] fut: F, recover: Option<Recover> },
        Compacting { fut: BoxFuture<'static, Result<ModelResponse, BoxError>> },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn passthrough(fut: F, recover: Option<Recover>) -> Self {
        ResponseFuture {
            kind: Kind::Passthrough { fut, recover },
        }
    }

    pub(super) fn compacting(fut: BoxFuture<'static, Result<ModelResponse, BoxError>>) -> Self {
        ResponseFuture {
            kind: Kind::Compacting { fut },
        }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<ModelResponse, E>>,
    E: Into<BoxError>,
{
    type Output = Result<ModelResponse, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let next = match this.kind.as_mut().project() {
                KindProj::Passthrough { fut, recover } => {
                    match std::task::ready!(fut.poll(cx)).map_err(Into::into) {
                        Err(err)
                            if recover.is_some()
                                && tower_agent_core::model::ProviderError::find(&*err)
                                    .is_some_and(|e| e.is_context_length_exceeded()) =>
                        {
                            let recover = recover.take().expect("checked above");
                            recover(err)
                        }
                        other => return Poll::Ready(other),
                    }
                }
                KindProj::Compacting { fut } => return fut.as_mut().poll(cx),
            };
            this.kind.set(Kind::Compacting { fut: next });
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
