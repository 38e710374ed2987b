//! The response future of [`Evict`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures_util::future::BoxFuture;
use pin_project_lite::pin_project;

use super::*;

pin_project! {
    /// The response future of [`Evict`](super::Evict).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Inner { #[pin] fut: F, config: Option<Arc<Config>> },
        Spilling { fut: BoxFuture<'static, ToolOutput> },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(fut: F, config: Option<Arc<Config>>) -> Self {
        ResponseFuture {
            state: State::Inner { fut, config },
        }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<ToolOutput, E>>,
    E: Into<BoxError>,
{
    type Output = Result<ToolOutput, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project().state.project() {
                StateProj::Inner { fut, config } => {
                    let output = ready!(fut.poll(cx)).map_err(Into::into)?;
                    let Some(config) = config.take() else {
                        return Poll::Ready(Ok(output));
                    };
                    if !needs_eviction(&config, &output) {
                        return Poll::Ready(Ok(output));
                    }
                    let Some(dir) = config.spill_dir.clone() else {
                        return Poll::Ready(Ok(evict(&config, output, None)));
                    };
                    let fut = Box::pin(async move {
                        match spill(&dir, &output).await {
                            Ok(path) => {
                                let note = format!("full output saved to {}", path.display());
                                let mut out = evict(&config, output, Some(&note));
                                out.metadata
                                    .insert("spilled_to".into(), json!(path.display().to_string()));
                                out
                            }
                            Err(err) => {
                                tracing::warn!(
                                    dir = %dir.display(),
                                    error = %err,
                                    "could not save an evicted tool output"
                                );
                                let note = format!("could not save the full output: {err}");
                                evict(&config, output, Some(&note))
                            }
                        }
                    });
                    self.as_mut().project().state.set(State::Spilling { fut });
                }
                StateProj::Spilling { fut } => {
                    return Poll::Ready(Ok(ready!(fut.as_mut().poll(cx))));
                }
            }
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
