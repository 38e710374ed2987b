//! The response future of [`Ledger`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::*;

pin_project! {
    /// The response future of [`Ledger`](super::Ledger). Dropped before the call ends, it
    /// records the call as [`CallStatus::Cancelled`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        pending: Option<Pending>,
    }

    impl<F> PinnedDrop for ResponseFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(pending) = this.project().pending.take() {
                pending.finish(CallStatus::Cancelled, "cancelled before it ended".into());
            }
        }
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, pending: Pending) -> Self {
        ResponseFuture {
            inner,
            pending: Some(pending),
        }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<ToolOutput, E>>,
    E: Into<BoxError>,
{
    type Output = Result<ToolOutput, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx)).map_err(Into::into);
        if let Some(pending) = this.pending.take() {
            match &result {
                Ok(out) => {
                    let status = if out.is_error {
                        CallStatus::Error
                    } else {
                        CallStatus::Ok
                    };
                    pending.finish(status, out.content.clone());
                }
                Err(err) => pending.finish(CallStatus::Err, error::chain(&**err)),
            }
        }
        Poll::Ready(result)
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
