//! A streamed answer's body with the deadline of the whole answer.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use futures_util::Stream;
use tokio::time::{Instant, Sleep, sleep_until};

use super::StreamTimedOut;
use tower_agent_core::{
    error::BoxError,
    model::{ModelBody, ModelChunk},
};

/// `body`, ending with [`StreamTimedOut::Whole`] if its last item has not come by the
/// deadline.
pub(super) struct Deadline {
    body: ModelBody,
    sleep: Pin<Box<Sleep>>,
    limit: Duration,
    ended: bool,
}

impl Deadline {
    pub(super) fn new(body: ModelBody, at: Instant, limit: Duration) -> Self {
        Deadline {
            body,
            sleep: Box::pin(sleep_until(at)),
            limit,
            ended: false,
        }
    }
}

impl Stream for Deadline {
    type Item = Result<ModelChunk, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.body).poll_next(cx) {
            self.ended = !matches!(item, Some(Ok(ModelChunk::Delta(_))));
            return Poll::Ready(item);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.ended = true;
                Poll::Ready(Some(Err(StreamTimedOut::Whole(self.limit).into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
