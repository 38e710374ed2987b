//! The response future of [`StreamTimeout`](super::StreamTimeout).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};

use super::{StreamTimedOut, body::Deadline};
use tower_agent_core::{
    error::BoxError,
    model::{ModelBody, ModelResponse},
};

pin_project! {
    /// The response future of [`StreamTimeout`](super::StreamTimeout): the inner call, raced
    /// against the earlier of the two deadlines; a streaming answer's body is given the
    /// deadline of the whole.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Option<Sleep>,
        // What the sleep is for: the error it means.
        error: StreamTimedOut,
        whole: Option<(Instant, Duration)>,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, first: Option<Duration>, whole: Option<Duration>) -> Self {
        let now = Instant::now();
        let whole = whole.map(|limit| (now + limit, limit));
        // The earlier deadline bounds the call (a whole answer that comes at once must come
        // within both).
        let (sleep, error) = match (first, whole) {
            (Some(f), Some((at, limit))) if at < now + f => {
                (Some(sleep_until(at)), StreamTimedOut::Whole(limit))
            }
            (Some(f), _) => (Some(sleep_until(now + f)), StreamTimedOut::FirstDelta(f)),
            (None, Some((at, limit))) => (Some(sleep_until(at)), StreamTimedOut::Whole(limit)),
            (None, None) => (None, StreamTimedOut::FirstDelta(Duration::ZERO)),
        };
        ResponseFuture {
            inner,
            sleep,
            error,
            whole,
        }
    }
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<ModelResponse, E>>,
    E: Into<BoxError>,
{
    type Output = Result<ModelResponse, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.inner.poll(cx) {
            let mut resp = result.map_err(Into::into)?;
            if let (true, Some((at, limit))) = (resp.is_streaming(), *this.whole) {
                let body = std::mem::take(&mut resp.body);
                resp.body = ModelBody::new(Deadline::new(body, at, limit));
            }
            return Poll::Ready(Ok(resp));
        }
        match this.sleep.as_pin_mut() {
            Some(sleep) => sleep.poll(cx).map(|()| Err((*this.error).into())),
            None => Poll::Pending,
        }
    }
}
