//! The response future of [`Trace`](super::Trace).

use std::{
    any::Any,
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use tracing::Span;

use super::{
    Config, error_type,
    record::{End, Record},
    record_error,
};

pin_project! {
    /// The response future of [`Trace`](super::Trace): polls the inner future inside the
    /// call's span, then records the response (or the error) on the span.
    ///
    /// It is a future for both levels: its output is the inner future's output, a
    /// [`ModelResponse`](tower_agent_core::model::ModelResponse) or a
    /// [`ToolOutput`](tower_agent_core::message::ToolOutput) (the bound `T: Record` names exactly these
    /// two types).
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        config: Arc<Config>,
        // The run's `invoke_agent` span, for a model call made inside one.
        agent: Option<Span>,
        // A model call (not a tool call).
        model_call: bool,
        // The request named its model (so `gen_ai.request.model` is recorded already).
        request_model_set: bool,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, span: Span, config: Arc<Config>) -> Self {
        ResponseFuture {
            inner,
            span,
            config,
            agent: None,
            model_call: false,
            request_model_set: false,
        }
    }

    pub(super) fn model(mut self, agent: Option<Span>, request_model_set: bool) -> Self {
        self.agent = agent;
        self.model_call = true;
        self.request_model_set = request_model_set;
        self
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    T: Record,
    E: fmt::Display + Any,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // Entered for this poll only, never across an await: spans the inner future opens
        // nest under this one.
        let _entered = this.span.enter();
        let mut result = ready!(this.inner.poll(cx));
        if !this.span.is_disabled() {
            if let Ok(response) = result {
                let end = End {
                    span: this.span.clone(),
                    config: Arc::clone(this.config),
                    agent: this.agent.clone(),
                    request_model_set: *this.request_model_set,
                };
                match response.defer(end) {
                    // Recorded as its stream ends.
                    Ok(streaming) => return Poll::Ready(Ok(streaming)),
                    Err(response) => result = Ok(response),
                }
            }
            match &result {
                Ok(response) => {
                    response.record(
                        this.span,
                        this.config,
                        this.agent.as_ref(),
                        *this.request_model_set,
                    );
                    if let Some(f) = &this.config.on_response {
                        f(&response.traced(), this.span);
                    }
                }
                Err(error) => {
                    if let (true, Some(name)) = (*this.model_call, &this.config.provider_name) {
                        this.span.record("gen_ai.provider.name", name.as_ref());
                    }
                    record_error(this.span, &error_type(error), error);
                    if let Some(f) = &this.config.on_failure {
                        f(error, this.span);
                    }
                }
            }
        }
        Poll::Ready(result)
    }
}
