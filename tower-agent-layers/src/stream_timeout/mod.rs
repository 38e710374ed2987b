//! [`StreamTimeoutLayer`]: deadlines for a model's streamed answer, one for its first piece and
//! one for the whole stream, set apart.
//!
//! `tower::timeout::TimeoutLayer` bounds a call's future; a streaming model's future resolves
//! at the answer's first piece (see [`body`](tower_agent_core::model::body)), so it bounds the time to the
//! first piece only. This layer bounds both: the call must answer (a first piece, or a whole
//! answer) within [`first_delta`](StreamTimeoutLayer::first_delta), and the answer must be
//! complete (the body's last item) within [`whole`](StreamTimeoutLayer::whole) of the call.
//! A deadline that passes is a [`StreamTimedOut`] error: the call's, before the first piece;
//! the stream's (its last item), after. The connection is dropped with the body.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_agent_layers::stream_timeout::{StreamTimedOut, StreamTimeoutLayer};
//! use tower_agent_core::model::{ModelRequest, ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let slow = ScriptedModel::new().text("hi").latency(Duration::from_secs(20));
//! let model = ServiceBuilder::new()
//!     .layer(StreamTimeoutLayer::new().first_delta(Duration::from_secs(10)).whole(Duration::from_secs(120)))
//!     .service(slow);
//! let err = model.oneshot(ModelRequest::new(vec![])).await.unwrap_err();
//! assert_eq!(err.downcast_ref::<StreamTimedOut>(), Some(&StreamTimedOut::FirstDelta(Duration::from_secs(10))));
//! # Ok(())
//! # }
//! ```

mod body;
mod error;
pub mod future;

use std::{
    task::{Context, Poll},
    time::Duration,
};

use tower::{Layer, Service};

pub use self::error::StreamTimedOut;
use tower_agent_core::{
    error::BoxError,
    model::{ModelRequest, ModelResponse},
};

/// Deadlines for a model's answer: see the [module docs](self). Without either deadline the
/// layer passes calls through.
#[derive(Debug, Clone, Copy, Default)]
#[must_use]
pub struct StreamTimeoutLayer {
    first: Option<Duration>,
    whole: Option<Duration>,
}

impl StreamTimeoutLayer {
    /// No deadline yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The call must answer (its first piece, or the whole answer) within `limit`.
    pub fn first_delta(mut self, limit: Duration) -> Self {
        self.first = Some(limit);
        self
    }

    /// The answer must be complete within `limit` of the call.
    pub fn whole(mut self, limit: Duration) -> Self {
        self.whole = Some(limit);
        self
    }
}

impl<S> Layer<S> for StreamTimeoutLayer {
    type Service = StreamTimeout<S>;

    fn layer(&self, inner: S) -> StreamTimeout<S> {
        StreamTimeout {
            inner,
            limits: *self,
        }
    }
}

/// The service of [`StreamTimeoutLayer`].
#[derive(Debug, Clone)]
pub struct StreamTimeout<S> {
    inner: S,
    limits: StreamTimeoutLayer,
}

impl<S> Service<ModelRequest> for StreamTimeout<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: Into<BoxError>,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        future::ResponseFuture::new(self.inner.call(req), self.limits.first, self.limits.whole)
    }
}

/// The response future of [`StreamTimeout`], by its former name.
#[deprecated(
    note = "renamed `stream_timeout::future::ResponseFuture`, as every layer module names its future"
)]
pub type StreamTimeoutFuture<F> = future::ResponseFuture<F>;
