//! [`ModelBody`]: the rest of a streamed answer, as the body of an http response is the rest
//! of the response.
//!
//! A model service answers a [`ModelResponse`]. A streaming provider answers as soon as the
//! first piece of the answer arrives: the response's [`body`](ModelResponse::body) then holds
//! the pieces still to come ([`ModelChunk::Delta`]), ending with the whole answer put
//! together ([`ModelChunk::Done`]). A response that is not streaming has an empty body: it
//! is whole as it is (a non-streaming provider is a stream of one item).
//!
//! Layers see the stream by wrapping the body, as tower-http's `MapResponseBody` does for
//! http: [`ModelResponse::map_deltas`] observes, changes or drops each piece, and
//! [`ModelResponse::map_done`] / [`ModelResponse::then_done`] change the whole answer when
//! it is complete (at once for a response that is not streaming). The loop drains the body,
//! sending each piece that comes out of the stack to the run's events
//! ([`AgentEvent::ModelDelta`](crate::event::AgentEvent::ModelDelta)); the answer that enters
//! the thread is the one [`ModelChunk::Done`] carries. A layer that changes the pieces (a
//! redaction, say) changes the whole answer the same way, so that both agree.
//!
//! # Example
//!
//! A layer that upper-cases the answer's text as it streams:
//!
//! ```
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_agent_core::{event::ModelDelta, model::{ModelRequest, ModelResponse, ScriptedModel}};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::BoxError> {
//! let model = ServiceBuilder::new()
//!     .map_response(|resp: ModelResponse| {
//!         resp.map_deltas(|delta| match delta {
//!             ModelDelta::Text { text } => Some(ModelDelta::Text { text: text.to_uppercase() }),
//!             other => Some(other),
//!         })
//!         // The text parts in place: tool calls and reasoning stay.
//!         .map_done(|mut done| {
//!             for part in &mut done.message.content {
//!                 if let tower_agent_core::message::Content::Text { text } = part {
//!                     *text = text.to_uppercase();
//!                 }
//!             }
//!             done
//!         })
//!     })
//!     .service(ScriptedModel::new().text("hello there").streaming(3));
//! let resp = model.oneshot(ModelRequest::new(vec![])).await?;
//! assert!(resp.is_streaming());
//! assert_eq!(resp.collect().await?.message.text(), "HELLO THERE");
//! # Ok(())
//! # }
//! ```

use std::{
    collections::VecDeque,
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use futures_util::{Stream, StreamExt};
use sync_wrapper::SyncWrapper;

use super::ModelResponse;
use crate::{error::BoxError, event::ModelDelta};

/// One item of a [`ModelBody`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ModelChunk {
    /// A piece of the answer.
    Delta(ModelDelta),
    /// The whole answer, put together (its own body empty); the last item.
    Done(Box<ModelResponse>),
}

type BoxChunks = SyncWrapper<Pin<Box<dyn Stream<Item = Result<ModelChunk, BoxError>> + Send>>>;

/// The rest of a streamed answer: a stream of [`ModelChunk`]s, the last one
/// [`Done`](ModelChunk::Done); or nothing (the default) for an answer that is whole. See the
/// [module docs](self).
#[derive(Default)]
pub struct ModelBody {
    stream: Option<BoxChunks>,
}

impl ModelBody {
    /// No body: the response is whole.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A body of `stream`, which must end with a [`ModelChunk::Done`] (a stream that ends
    /// without one is an error for whoever drains it).
    pub fn new<S>(stream: S) -> Self
    where
        S: Stream<Item = Result<ModelChunk, BoxError>> + Send + 'static,
    {
        ModelBody {
            stream: Some(SyncWrapper::new(Box::pin(stream))),
        }
    }

    /// Whether there is nothing to come.
    pub fn is_empty(&self) -> bool {
        self.stream.is_none()
    }
}

impl fmt::Debug for ModelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelBody")
            .field("streaming", &self.stream.is_some())
            .finish()
    }
}

impl Stream for ModelBody {
    type Item = Result<ModelChunk, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.stream {
            Some(s) => s.get_mut().as_mut().poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}

/// A streamed answer that ended without its [`ModelChunk::Done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEnded;

impl fmt::Display for StreamEnded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the model's streamed answer ended before it was complete")
    }
}

impl std::error::Error for StreamEnded {}

impl ModelResponse {
    /// The head of a streaming answer: no message yet, the rest in `body`.
    pub fn streaming(body: ModelBody) -> Self {
        let mut resp = ModelResponse::text("");
        resp.body = body;
        resp
    }

    /// Whether the answer is still streaming (its [`body`](Self::body) has more to come).
    pub fn is_streaming(&self) -> bool {
        !self.body.is_empty()
    }

    /// The whole answer: the body drained (its pieces dropped) into the
    /// [`Done`](ModelChunk::Done) answer, whose extensions gain this head's. A response that
    /// is not streaming is itself.
    ///
    /// # Errors
    ///
    /// The stream's error, or [`StreamEnded`] if it ended without its `Done`.
    pub async fn collect(self) -> Result<ModelResponse, BoxError> {
        self.collect_with(|_| {}).await
    }

    /// [`collect`](Self::collect), giving each piece to `on_delta` as it comes.
    ///
    /// # Errors
    ///
    /// As [`collect`](Self::collect).
    pub async fn collect_with(
        mut self,
        mut on_delta: impl FnMut(ModelDelta),
    ) -> Result<ModelResponse, BoxError> {
        let mut body = std::mem::take(&mut self.body);
        if body.is_empty() {
            return Ok(self);
        }
        while let Some(chunk) = body.next().await {
            match chunk? {
                ModelChunk::Delta(delta) => on_delta(delta),
                ModelChunk::Done(done) => {
                    let mut done = *done;
                    done.extensions.extend(self.extensions);
                    return Ok(done);
                }
            }
        }
        Err(StreamEnded.into())
    }

    /// This response with each piece of its stream passed through `f` (`None` drops it);
    /// the whole answer is not changed (see [`map_done`](Self::map_done)). A response that is
    /// not streaming is returned as it is.
    #[must_use]
    pub fn map_deltas<F>(self, mut f: F) -> Self
    where
        F: FnMut(ModelDelta) -> Option<ModelDelta> + Send + 'static,
    {
        self.try_map_deltas(move |d| Ok(f(d)))
    }

    /// [`map_deltas`](Self::map_deltas) that can end the stream: an `Err` is the stream's
    /// last item (nothing after it is read; the connection is dropped with the body), so the
    /// loop ends the run on it as on a failed model call, and no tool call of the answer runs.
    #[must_use]
    pub fn try_map_deltas<F>(mut self, mut f: F) -> Self
    where
        F: FnMut(ModelDelta) -> Result<Option<ModelDelta>, BoxError> + Send + 'static,
    {
        let Some(mut stream) = self.body.stream.take().map(SyncWrapper::into_inner) else {
            return self;
        };
        let mut ended = false;
        let mapped = futures_util::stream::poll_fn(move |cx| {
            loop {
                if ended {
                    return Poll::Ready(None);
                }
                let chunk = std::task::ready!(stream.as_mut().poll_next(cx));
                let out = match chunk {
                    Some(Ok(ModelChunk::Delta(d))) => match f(d) {
                        Ok(Some(d)) => Some(Ok(ModelChunk::Delta(d))),
                        Ok(None) => continue,
                        Err(err) => Some(Err(err)),
                    },
                    other => other,
                };
                ended = !matches!(out, Some(Ok(ModelChunk::Delta(_))));
                return Poll::Ready(out);
            }
        });
        self.body = ModelBody::new(mapped);
        self
    }

    /// This response with its whole answer passed through `f` when it is complete: at once
    /// for a response that is not streaming, else as the stream's
    /// [`Done`](ModelChunk::Done) goes by (the pieces before it are not changed: see
    /// [`map_deltas`](Self::map_deltas)).
    #[must_use]
    pub fn map_done<F>(mut self, f: F) -> Self
    where
        F: FnOnce(ModelResponse) -> ModelResponse + Send + 'static,
    {
        let Some(stream) = self.body.stream.take().map(SyncWrapper::into_inner) else {
            return f(self);
        };
        let mut f = Some(f);
        let mapped = stream.map(move |chunk| match chunk {
            Ok(ModelChunk::Done(done)) => match f.take() {
                Some(f) => Ok(ModelChunk::Done(Box::new(f(*done)))),
                None => Ok(ModelChunk::Done(done)),
            },
            other => other,
        });
        self.body = ModelBody::new(mapped);
        self
    }

    /// This response with its whole answer passed through the future `f` makes when it is
    /// complete: the stream waits for it before its [`Done`](ModelChunk::Done), and what `f`
    /// fails with is the stream's error. A response that is not streaming becomes a stream of
    /// one item, the answer `f` makes (so `f` runs when the body is read, as for a stream).
    #[must_use]
    pub fn then_done<F, Fut>(mut self, f: F) -> Self
    where
        F: FnOnce(ModelResponse) -> Fut + Send + 'static,
        Fut: Future<Output = Result<ModelResponse, BoxError>> + Send + 'static,
    {
        if !self.is_streaming() {
            let whole = std::mem::replace(&mut self, ModelResponse::text(""));
            let done = futures_util::stream::once(async move {
                f(whole).await.map(|d| ModelChunk::Done(Box::new(d)))
            });
            return ModelResponse::streaming(ModelBody::new(done));
        }
        let Some(stream) = self.body.stream.take().map(SyncWrapper::into_inner) else {
            return self;
        };
        let mut f = Some(f);
        let mapped = stream.then(move |chunk| {
            let f = match &chunk {
                Ok(ModelChunk::Done(_)) => f.take(),
                _ => None,
            };
            async move {
                match (chunk, f) {
                    (Ok(ModelChunk::Done(done)), Some(f)) => {
                        f(*done).await.map(|d| ModelChunk::Done(Box::new(d)))
                    }
                    (chunk, _) => chunk,
                }
            }
        });
        self.body = ModelBody::new(mapped);
        self
    }
}

impl ModelResponse {
    /// This response with `f` told how its stream ended: the whole answer, or the error (a
    /// stream that ends without its [`Done`](ModelChunk::Done) is a [`StreamEnded`]). At once
    /// for a response that is not streaming. Not called if the body is dropped before its
    /// end.
    #[must_use]
    pub fn on_end<F>(mut self, f: F) -> Self
    where
        F: FnOnce(Result<&ModelResponse, &BoxError>) + Send + 'static,
    {
        let Some(stream) = self.body.stream.take().map(SyncWrapper::into_inner) else {
            f(Ok(&self));
            return self;
        };
        self.body = ModelBody::new(OnEnd {
            stream,
            f: Some(Box::new(f)),
        });
        self
    }

    /// This whole answer as a stream: its reasoning, text and each tool call's arguments in
    /// pieces of at most `chars` characters (a call's id and name in its first piece, then a
    /// [`ToolCallEnd`](ModelDelta::ToolCallEnd)), then the answer itself as the
    /// [`Done`](ModelChunk::Done). What a recorded answer replayed, or a test, streams.
    #[must_use]
    pub fn into_streaming(self, chars: usize) -> ModelResponse {
        let chars = chars.max(1);
        let mut deltas = Vec::new();
        for r in self.message.reasoning() {
            for text in pieces(&r.text, chars) {
                deltas.push(ModelDelta::Reasoning { text });
            }
        }
        for text in pieces(&self.message.text(), chars) {
            deltas.push(ModelDelta::Text { text });
        }
        for (index, call) in self.message.tool_calls.iter().enumerate() {
            let arguments = call.arguments.to_string();
            let mut parts = pieces(&arguments, chars).into_iter();
            deltas.push(ModelDelta::ToolCall {
                index,
                id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                arguments: parts.next().unwrap_or_default(),
            });
            for arguments in parts {
                deltas.push(ModelDelta::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments,
                });
            }
            deltas.push(ModelDelta::ToolCallEnd { index });
        }
        let chunks = deltas
            .into_iter()
            .map(|d| Ok(ModelChunk::Delta(d)))
            .chain(std::iter::once(Ok(ModelChunk::Done(Box::new(self)))));
        ModelResponse::streaming(ModelBody::new(futures_util::stream::iter(chunks)))
    }
}

/// `text` in pieces of at most `chars` characters.
fn pieces(text: &str, chars: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(i, _)| i);
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

type EndFn = Box<dyn FnOnce(Result<&ModelResponse, &BoxError>) + Send>;

/// The body of [`ModelResponse::on_end`].
struct OnEnd {
    stream: Pin<Box<dyn Stream<Item = Result<ModelChunk, BoxError>> + Send>>,
    f: Option<EndFn>,
}

impl Stream for OnEnd {
    type Item = Result<ModelChunk, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = std::task::ready!(self.stream.as_mut().poll_next(cx));
        match &next {
            Some(Ok(ModelChunk::Done(done))) => {
                if let Some(f) = self.f.take() {
                    f(Ok(done));
                }
            }
            Some(Err(err)) => {
                if let Some(f) = self.f.take() {
                    f(Err(err));
                }
            }
            None => {
                if let Some(f) = self.f.take() {
                    f(Err(&StreamEnded.into()));
                }
            }
            Some(Ok(ModelChunk::Delta(_))) => {}
        }
        Poll::Ready(next)
    }
}

/// Where a provider puts the pieces of an answer as it reads them: the sink [`driven`] gives
/// the provider's reading future, whose pieces come out of the response's body in the order
/// they were [pushed](Self::push).
///
/// A clone is a handle to the same queue. The queue is not bounded by a size, but it holds
/// only what the provider pushes while it is polled once: the body polls the provider again
/// only when every piece pushed before is out, so a provider that pushes the pieces of each
/// chunk it reads holds at most one chunk's pieces (a test or a sink of no body, made with
/// [`default`](Self::default), holds whatever is pushed).
#[derive(Clone, Default)]
pub struct DeltaSink {
    queue: Arc<Mutex<VecDeque<ModelDelta>>>,
}

impl DeltaSink {
    /// Adds a piece of the answer, after those already pushed.
    pub fn push(&self, delta: ModelDelta) {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(delta);
    }

    fn pop(&self) -> Option<ModelDelta> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
    }

    fn is_empty(&self) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }
}

impl fmt::Debug for DeltaSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        f.debug_struct("DeltaSink")
            .field("pending", &pending)
            .finish()
    }
}

type Driver = Pin<Box<dyn Future<Output = Result<ModelResponse, BoxError>> + Send>>;

/// A body whose pieces a driver (the provider reading its stream) puts in a [`DeltaSink`]:
/// polling the body polls the driver. No task is spawned: dropping the body drops the
/// driver (and the connection it reads).
struct Driven {
    driver: Option<Driver>,
    sink: DeltaSink,
    /// The driver's end, held back until the pieces it put before are out.
    end: Option<Result<ModelResponse, BoxError>>,
}

impl Driven {
    /// Polls the driver if it has not ended; `true` if it has.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(driver) = &mut self.driver {
            match driver.as_mut().poll(cx) {
                Poll::Ready(end) => {
                    self.driver = None;
                    self.end = Some(end);
                }
                Poll::Pending => return false,
            }
        }
        true
    }
}

impl Stream for Driven {
    type Item = Result<ModelChunk, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(delta) = self.sink.pop() {
            return Poll::Ready(Some(Ok(ModelChunk::Delta(delta))));
        }
        let ended = self.drive(cx);
        if let Some(delta) = self.sink.pop() {
            return Poll::Ready(Some(Ok(ModelChunk::Delta(delta))));
        }
        if !ended {
            return Poll::Pending;
        }
        Poll::Ready(
            self.end
                .take()
                .map(|end| end.map(|done| ModelChunk::Done(Box::new(done)))),
        )
    }
}

/// The answer of a provider that reads a stream: `drive` reads it, putting each piece in the
/// [`DeltaSink`] it is given, and resolves with the whole answer (or the call's error).
///
/// The future this returns resolves at the first piece, with a
/// [`streaming`](ModelResponse::streaming) response whose body goes on driving `drive`'s
/// future; or at its end if no piece came before it: then the answer is whole, or the error
/// is the call's, so a layer such as a retry sees it as it would without streaming. After
/// the first piece, the error `drive` ends with is the body's last item.
///
/// No task is spawned: `drive`'s future runs only when the returned future, then the body,
/// is polled, and dropping them drops it (and the connection it reads). This is how
/// tower-agent's `OpenAiChat` and `Anthropic` stream; a provider of your own is a model
/// service whose `call` returns this future (or a future that awaits it after sending the
/// request).
///
/// # Example
///
/// A provider-shaped closure: it "reads" three pieces, pushing each into the sink, then
/// resolves with the whole answer.
///
/// ```
/// use tower_agent_core::{event::ModelDelta, model::{ModelResponse, body}};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::BoxError> {
/// let resp = body::driven(|sink| async move {
///     let mut text = String::new();
///     for piece in ["Hel", "lo", "!"] {
///         // A real provider awaits the next event of its HTTP stream here.
///         tokio::task::yield_now().await;
///         sink.push(ModelDelta::Text { text: piece.to_owned() });
///         text.push_str(piece);
///     }
///     Ok(ModelResponse::text(text))
/// })
/// .await?;
/// assert!(resp.is_streaming());
///
/// let mut pieces = Vec::new();
/// let whole = resp
///     .collect_with(|delta| {
///         if let ModelDelta::Text { text } = delta {
///             pieces.push(text);
///         }
///     })
///     .await?;
/// assert_eq!(pieces, ["Hel", "lo", "!"]);
/// assert_eq!(whole.message.text(), "Hello!");
/// # Ok(())
/// # }
/// ```
pub fn driven<D, F>(drive: D) -> FirstDelta
where
    D: FnOnce(DeltaSink) -> F,
    F: Future<Output = Result<ModelResponse, BoxError>> + Send + 'static,
{
    let sink = DeltaSink::default();
    FirstDelta {
        body: Some(Driven {
            driver: Some(Box::pin(drive(sink.clone()))),
            sink,
            end: None,
        }),
    }
}

/// The future of [`driven`]: the head of the answer, at its first piece.
///
/// # Panics
///
/// Polling it again after it resolved panics.
#[must_use = "futures do nothing unless polled"]
pub struct FirstDelta {
    body: Option<Driven>,
}

impl fmt::Debug for FirstDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FirstDelta")
            .field("resolved", &self.body.is_none())
            .finish_non_exhaustive()
    }
}

impl Future for FirstDelta {
    type Output = Result<ModelResponse, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(body) = &mut self.body else {
            panic!("FirstDelta polled after it resolved");
        };
        let ended = body.drive(cx);
        if !body.sink.is_empty() {
            let body = self.body.take().expect("checked");
            return Poll::Ready(Ok(ModelResponse::streaming(ModelBody::new(body))));
        }
        if !ended {
            return Poll::Pending;
        }
        let end = body.end.take().expect("the driver ended");
        self.body = None;
        Poll::Ready(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> ModelDelta {
        ModelDelta::Text { text: t.to_owned() }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn driven_fails_as_the_call_before_the_first_piece() {
        let err = driven(|_sink| async { Err::<ModelResponse, BoxError>("refused".into()) })
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "refused");
        // No piece: the answer is whole.
        let resp = driven(|_sink| async { Ok(ModelResponse::text("whole")) })
            .await
            .unwrap();
        assert!(!resp.is_streaming());
        assert_eq!(resp.message.text(), "whole");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn driven_ends_its_body_with_the_error_after_a_piece() {
        let resp = driven(|sink| async move {
            sink.push(text("a"));
            tokio::task::yield_now().await;
            sink.push(text("b"));
            Err::<ModelResponse, BoxError>("cut".into())
        })
        .await
        .unwrap();
        assert!(resp.is_streaming());
        let mut pieces = Vec::new();
        let err = resp.collect_with(|d| pieces.push(d)).await.unwrap_err();
        assert_eq!(pieces, [text("a"), text("b")]);
        assert_eq!(err.to_string(), "cut");
    }

    #[test]
    fn sink_and_future_are_send_sync_debug() {
        fn assert_traits<T: Send + Sync + fmt::Debug>() {}
        assert_traits::<DeltaSink>();
        fn assert_send<T: Send + fmt::Debug>() {}
        assert_send::<FirstDelta>();
        let sink = DeltaSink::default();
        sink.push(text("x"));
        assert_eq!(format!("{sink:?}"), "DeltaSink { pending: 1 }");
    }
}
