//! The [`EventStream`] of a run.

use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::AgentResponse;
use crate::{error::Error, event::AgentEvent};

/// The events of a run, as a [`Stream`]. See [`Agent::stream`](crate::Agent::stream).
///
/// The stream drives the run itself (no task is spawned): poll it to make progress. It ends
/// after [`AgentEvent::AgentStop`].
///
/// # Cancel safety
///
/// Dropping the stream drops the run: tool calls in flight are dropped (and with them any
/// child process they own), and the thread keeps what was saved after the last whole step.
#[must_use = "streams do nothing unless polled"]
pub struct EventStream {
    run: Option<BoxFuture<'static, Result<AgentResponse, Error>>>,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    response: Option<Result<AgentResponse, Error>>,
}

impl EventStream {
    pub(crate) fn new(
        run: BoxFuture<'static, Result<AgentResponse, Error>>,
        rx: mpsc::UnboundedReceiver<AgentEvent>,
    ) -> Self {
        EventStream {
            run: Some(run),
            rx,
            response: None,
        }
    }

    /// The run's result, once the stream has ended (taken: `None` on a second call).
    pub fn take_response(&mut self) -> Option<Result<AgentResponse, Error>> {
        self.response.take()
    }
}

impl Stream for EventStream {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if let Poll::Ready(Some(event)) = this.rx.poll_recv(cx) {
            return Poll::Ready(Some(event));
        }
        if let Some(run) = this.run.as_mut() {
            match run.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    this.run = None;
                    this.response = Some(result);
                }
                Poll::Pending => {
                    // The run may have sent events while it was polled.
                    return match this.rx.poll_recv(cx) {
                        Poll::Ready(Some(event)) => Poll::Ready(Some(event)),
                        _ => Poll::Pending,
                    };
                }
            }
        }
        // The run is over: drain what it sent, then end (clones of the sender may outlive the
        // run, so don't wait for the channel to close).
        Poll::Ready(this.rx.try_recv().ok())
    }
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("running", &self.run.is_some())
            .finish_non_exhaustive()
    }
}
