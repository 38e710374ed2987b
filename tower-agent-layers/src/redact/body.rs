//! The model side of a [`Redaction`](super::Redaction): the response future, and the body of
//! a streamed answer with its text redacted as it goes by.

use std::{
    borrow::Cow,
    collections::VecDeque,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures_util::Stream;
use pin_project_lite::pin_project;
use smallvec::{SmallVec, smallvec};

use super::{
    Blocked, LOOK_BEHIND, MAX_HELD, Redaction,
    detect::{apply_cut, find},
    whole::whole,
};
use tower_agent_core::{
    error::BoxError,
    event::ModelDelta,
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
        resp.body = ModelBody::new(RedactBody::new(body, redaction));
        Poll::Ready(Ok(resp))
    }
}

/// A piece of a streamed answer not let out yet, in the order it came.
enum Slot {
    /// The next `n` bytes of the held text.
    Text(usize),
    /// The next `n` bytes of the held reasoning.
    Reasoning(usize),
    /// A piece of another kind (a tool call's), let out once what came before it is.
    Other(ModelDelta),
}

/// A streamed answer's body, its text and reasoning held back by at most [`LOOK_BEHIND`]
/// bytes (see the [module docs](super#streams)) and let out redacted, every piece in the
/// order it came.
struct RedactBody {
    inner: ModelBody,
    redaction: Redaction,
    /// Answer text not let out yet: its look-behind spans pieces of every other kind, as
    /// providers join the text parts around them.
    text: String,
    /// Reasoning not let out yet.
    reasoning: String,
    /// How much of `reasoning` is complete: a piece of another kind ended its run.
    reasoning_done: usize,
    /// What is held, in order.
    queue: VecDeque<Slot>,
    out: VecDeque<Result<ModelChunk, BoxError>>,
    ended: bool,
}

/// Where `held` can be cut: what is before can no longer be part of a value still arriving.
/// It is held back by [`LOOK_BEHIND`] bytes; a value found across that line is held whole,
/// up to [`MAX_HELD`] bytes: a pattern that matches without end (a regex of your own, `\d+`)
/// cannot hold the stream back, nor make each piece rescan all that came.
fn cut(redaction: &Redaction, held: &str) -> usize {
    let mut at = held.len().saturating_sub(LOOK_BEHIND);
    while !held.is_char_boundary(at) {
        at -= 1;
    }
    let mut floor = held.len().saturating_sub(MAX_HELD);
    while !held.is_char_boundary(floor) {
        floor -= 1;
    }
    for (range, _) in find(&redaction.detectors, &held[floor..]) {
        let (start, end) = (floor + range.start, floor + range.end);
        if start < at && end > at {
            at = start;
        }
    }
    at
}

/// `text` redacted, in the pieces its `cuts` (the ends of its slots but the last) make.
fn pieces(
    redaction: &Redaction,
    text: &str,
    cuts: &mut [usize],
) -> Result<SmallVec<[String; 1]>, Blocked> {
    let blocked = |detector| Blocked { detector };
    if cuts.is_empty() {
        let own = text.to_owned();
        let new = match apply_cut(&redaction.detectors, &own, cuts).map_err(blocked)? {
            Cow::Borrowed(_) => None,
            Cow::Owned(new) => Some(new),
        };
        return Ok(smallvec![new.unwrap_or(own)]);
    }
    let new = apply_cut(&redaction.detectors, text, cuts).map_err(blocked)?;
    let mut start = 0;
    let mut out = SmallVec::new();
    for end in cuts.iter().copied().chain([new.len()]) {
        out.push(new[start..end].to_owned());
        start = end;
    }
    Ok(out)
}

impl RedactBody {
    fn new(inner: ModelBody, redaction: Redaction) -> Self {
        RedactBody {
            inner,
            redaction,
            text: String::new(),
            reasoning: String::new(),
            reasoning_done: 0,
            queue: VecDeque::new(),
            out: VecDeque::new(),
            ended: false,
        }
    }

    /// Takes a piece of the answer: text and reasoning are held, a piece of another kind
    /// waits behind what is held; then lets out what can go.
    fn take(&mut self, delta: ModelDelta) {
        let (is_text, text) = match delta {
            ModelDelta::Text { text } => (true, text),
            ModelDelta::Reasoning { text } => (false, text),
            other => {
                let ends_reasoning = self.reasoning_done < self.reasoning.len();
                self.reasoning_done = self.reasoning.len();
                if self.queue.is_empty() {
                    self.out.push_back(Ok(ModelChunk::Delta(other)));
                } else {
                    self.queue.push_back(Slot::Other(other));
                    if ends_reasoning {
                        self.release(false);
                    }
                }
                return;
            }
        };
        if text.is_empty() {
            return;
        }
        if is_text {
            self.reasoning_done = self.reasoning.len();
            self.text.push_str(&text);
        } else {
            self.reasoning.push_str(&text);
        }
        match (self.queue.back_mut(), is_text) {
            (Some(Slot::Text(n)), true) | (Some(Slot::Reasoning(n)), false) => *n += text.len(),
            (_, true) => self.queue.push_back(Slot::Text(text.len())),
            (_, false) => self.queue.push_back(Slot::Reasoning(text.len())),
        }
        self.release(false);
    }

    /// How many bytes of the held text and reasoning go out now (`all`: everything): the
    /// slots in order, up to the first one whose kind must still hold some back.
    fn releasable(&self, all: bool) -> (usize, usize) {
        let (mut text_limit, mut reasoning_limit) = (None, None);
        let (mut t, mut r) = (0, 0);
        for slot in &self.queue {
            let (at, n, limit) = match slot {
                Slot::Text(n) => {
                    let limit = *text_limit.get_or_insert_with(|| {
                        if all {
                            self.text.len()
                        } else {
                            cut(&self.redaction, &self.text)
                        }
                    });
                    (&mut t, *n, limit)
                }
                Slot::Reasoning(n) => {
                    let limit = *reasoning_limit.get_or_insert_with(|| {
                        if all {
                            self.reasoning.len()
                        } else {
                            self.reasoning_done
                                .max(cut(&self.redaction, &self.reasoning))
                        }
                    });
                    (&mut r, *n, limit)
                }
                Slot::Other(_) => continue,
            };
            if *at + n > limit {
                *at = limit;
                break;
            }
            *at += n;
        }
        (t, r)
    }

    /// Lets out the held pieces that can go (`all`: all of them), text and reasoning
    /// redacted — each as one text, so that a value across a piece of another kind is
    /// found —; a block ends the stream.
    fn release(&mut self, all: bool) {
        let (t, r) = self.releasable(all);
        if t == 0 && r == 0 {
            return;
        }
        // Where the slots let out end, in the text and the reasoning let out.
        let mut text_cuts = SmallVec::<[usize; 4]>::new();
        let mut reasoning_cuts = SmallVec::<[usize; 4]>::new();
        let (mut te, mut re) = (0, 0);
        for slot in &self.queue {
            match slot {
                Slot::Text(n) => {
                    te += n;
                    if te < t {
                        text_cuts.push(te);
                    }
                }
                Slot::Reasoning(n) => {
                    re += n;
                    if re < r {
                        reasoning_cuts.push(re);
                    }
                }
                Slot::Other(_) => {}
            }
            if te >= t && re >= r {
                break;
            }
        }
        let split = |held: &str, upto: usize, cuts: &mut [usize]| {
            if upto == 0 {
                Ok(SmallVec::new())
            } else {
                pieces(&self.redaction, &held[..upto], cuts)
            }
        };
        let pieces = split(&self.text, t, &mut text_cuts)
            .and_then(|text| Ok((text, split(&self.reasoning, r, &mut reasoning_cuts)?)));
        let (text, reasoning) = match pieces {
            Ok(pieces) => pieces,
            Err(blocked) => return self.fail(blocked.into()),
        };
        self.text.drain(..t);
        self.reasoning.drain(..r);
        self.reasoning_done = self.reasoning_done.saturating_sub(r);
        self.emit(t, text, r, reasoning);
    }

    /// Lets out the first slots of the queue: `t` bytes of text in `text`'s pieces and `r`
    /// of reasoning in `reasoning`'s, and the pieces of other kinds among them.
    fn emit(
        &mut self,
        mut t: usize,
        text: SmallVec<[String; 1]>,
        mut r: usize,
        reasoning: SmallVec<[String; 1]>,
    ) {
        let (mut text, mut reasoning) = (text.into_iter(), reasoning.into_iter());
        while let Some(slot) = self.queue.front_mut() {
            let (n, left, piece) = match slot {
                Slot::Text(n) => (n, &mut t, text.next().map(|text| ModelDelta::Text { text })),
                Slot::Reasoning(n) => (
                    n,
                    &mut r,
                    reasoning.next().map(|text| ModelDelta::Reasoning { text }),
                ),
                Slot::Other(_) => {
                    if let Some(Slot::Other(other)) = self.queue.pop_front() {
                        self.out.push_back(Ok(ModelChunk::Delta(other)));
                    }
                    continue;
                }
            };
            if *left == 0 {
                break;
            }
            let taken = (*n).min(*left);
            *left -= taken;
            *n -= taken;
            let rest = *n;
            match piece {
                Some(ModelDelta::Text { text } | ModelDelta::Reasoning { text })
                    if text.is_empty() => {}
                Some(piece) => self.out.push_back(Ok(ModelChunk::Delta(piece))),
                None => {}
            }
            if rest > 0 {
                break;
            }
            self.queue.pop_front();
        }
    }

    fn fail(&mut self, err: BoxError) {
        self.text.clear();
        self.reasoning.clear();
        self.queue.clear();
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
                Some(Ok(ModelChunk::Delta(delta))) => this.take(delta),
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
                // NOTE: a kind of chunk the core adds later may carry text this layer cannot
                // redact: the answer fails rather than let it out as it is.
                Some(Ok(_)) => {
                    this.fail("a model chunk of a kind the redaction does not know".into())
                }
                // What was held never shows.
                Some(Err(err)) => this.fail(err),
                None => {
                    this.text.clear();
                    this.reasoning.clear();
                    this.queue.clear();
                    this.ended = true;
                }
            }
        }
    }
}
