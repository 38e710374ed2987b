//! The model side of a [`Redaction`](super::Redaction): the response future, and the body of
//! a streamed answer with its text redacted as it goes by.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures_util::Stream;
use pin_project_lite::pin_project;

use super::{Blocked, LOOK_BEHIND, MAX_HELD, Redaction, detect::find};
use crate::{
    error::BoxError,
    event::ModelDelta,
    message::Content,
    model::{ModelBody, ModelChunk, ModelResponse},
};

pin_project! {
    /// The response future of [`RedactModel`](super::RedactModel): the inner call, its answer
    /// redacted (a streaming answer's body wrapped).
    pub struct RedactModelFuture<F> {
        #[pin]
        inner: Option<F>,
        redaction: Option<Redaction>,
        blocked: Option<Blocked>,
    }
}

impl<F> RedactModelFuture<F> {
    pub(super) fn new(inner: F, redaction: Redaction) -> Self {
        RedactModelFuture {
            inner: Some(inner),
            redaction: Some(redaction),
            blocked: None,
        }
    }

    pub(super) fn blocked(blocked: Blocked) -> Self {
        RedactModelFuture {
            inner: None,
            redaction: None,
            blocked: Some(blocked),
        }
    }
}

impl<F> std::fmt::Debug for RedactModelFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedactModelFuture").finish_non_exhaustive()
    }
}

impl<F, E> Future for RedactModelFuture<F>
where
    F: Future<Output = Result<ModelResponse, E>>,
    E: Into<BoxError>,
{
    type Output = Result<ModelResponse, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(inner) = this.inner.as_pin_mut() else {
            let blocked = this.blocked.take().expect("polled after it resolved");
            return Poll::Ready(Err(blocked.into()));
        };
        let mut resp = ready!(inner.poll(cx)).map_err(Into::into)?;
        let redaction = this.redaction.take().expect("polled after it resolved");
        if !resp.is_streaming() {
            return Poll::Ready(whole(&redaction, resp).map_err(Into::into));
        }
        let body = std::mem::take(&mut resp.body);
        resp.body = ModelBody::new(RedactBody {
            inner: body,
            redaction,
            held: String::new(),
            out: VecDeque::new(),
            ended: false,
        });
        Poll::Ready(Ok(resp))
    }
}

/// The whole answer with its text redacted.
fn whole(redaction: &Redaction, mut resp: ModelResponse) -> Result<ModelResponse, Blocked> {
    for c in &mut resp.message.content {
        if let Content::Text { text } = c
            && let std::borrow::Cow::Owned(new) = redaction.redact(text)?
        {
            *text = new;
        }
    }
    Ok(resp)
}

/// A streamed answer's body, its text held back by at most [`LOOK_BEHIND`] bytes and let out
/// redacted.
struct RedactBody {
    inner: ModelBody,
    redaction: Redaction,
    /// Text not let out yet.
    held: String,
    out: VecDeque<Result<ModelChunk, BoxError>>,
    ended: bool,
}

impl RedactBody {
    /// Lets out the held text that can no longer be part of a value still arriving (`all`:
    /// all of it), redacted; a block ends the stream.
    fn release(&mut self, all: bool) {
        let mut cut = if all {
            self.held.len()
        } else {
            let mut at = self.held.len().saturating_sub(LOOK_BEHIND);
            while !self.held.is_char_boundary(at) {
                at -= 1;
            }
            at
        };
        if !all {
            // A value found across the cut is held whole, up to `MAX_HELD` bytes: a pattern
            // that matches without end (a regex of your own, `\d+`) cannot hold the stream
            // back, nor make each piece rescan all that came.
            let floor = self.held.len().saturating_sub(MAX_HELD);
            for (range, _) in find(&self.redaction.detectors, &self.held) {
                if range.start < cut && range.end > cut && range.start >= floor {
                    cut = range.start;
                }
            }
        }
        if cut == 0 {
            return;
        }
        let rest = self.held.split_off(cut);
        let head = std::mem::replace(&mut self.held, rest);
        match self.redaction.redact(&head) {
            Ok(text) => {
                let text = text.into_owned();
                self.out
                    .push_back(Ok(ModelChunk::Delta(ModelDelta::Text { text })));
            }
            Err(blocked) => self.fail(blocked.into()),
        }
    }

    fn fail(&mut self, err: BoxError) {
        self.held.clear();
        self.out.push_back(Err(err));
        self.ended = true;
    }
}

impl Stream for RedactBody {
    type Item = Result<ModelChunk, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(item) = this.out.pop_front() {
                return Poll::Ready(Some(item));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
                Some(Ok(ModelChunk::Delta(ModelDelta::Text { text }))) => {
                    this.held.push_str(&text);
                    this.release(false);
                }
                Some(Ok(ModelChunk::Delta(other))) => {
                    this.release(true);
                    if !this.ended {
                        this.out.push_back(Ok(ModelChunk::Delta(other)));
                    }
                }
                Some(Ok(ModelChunk::Done(done))) => {
                    this.release(true);
                    if !this.ended {
                        match whole(&this.redaction, *done) {
                            Ok(done) => this.out.push_back(Ok(ModelChunk::Done(Box::new(done)))),
                            Err(blocked) => this.fail(blocked.into()),
                        }
                        this.ended = true;
                    }
                }
                // What was held never shows.
                Some(Err(err)) => this.fail(err),
                None => {
                    this.held.clear();
                    this.ended = true;
                }
            }
        }
    }
}
