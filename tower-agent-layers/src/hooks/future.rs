//! The response futures of the hook services: [`HookModelFuture`], [`HookToolFuture`],
//! [`HookStepFuture`] and [`HookStartFuture`].
//!
//! Each is the inner service's own future, unboxed, when no hook is left to run once the call
//! is made (no hook for the call, or only synchronous ones that let it go on): that path
//! allocates nothing. Otherwise it is the hooks and the call in one boxed future (one
//! allocation per call).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use pin_project_lite::pin_project;
use tower::Service;

use tower_agent_core::{
    agent::{
        start::RunStart,
        step::{StepControl, StepEnd},
    },
    error::BoxError,
    message::ToolOutput,
    model::{ModelRequest, ModelResponse},
    tool::ToolRequest,
};

pin_project! {
    /// The response future of [`HookModel<S>`](super::HookModel): the call of `S`, with the
    /// model hooks around it.
    #[must_use = "futures do nothing unless polled"]
    pub struct HookModelFuture<S>
    where
        S: Service<ModelRequest>,
    {
        #[pin]
        kind: Kind<S::Future, ModelResponse, BoxError>,
        // The after-call hooks to run on the unboxed call's answer: at once if they all
        // answer at once, else boxed in `kind`.
        after: Option<super::model::AfterCall>,
    }
}

pin_project! {
    /// The response future of [`HookTool<S>`](super::HookTool): the call of `S`, with the tool
    /// hooks around it.
    #[must_use = "futures do nothing unless polled"]
    pub struct HookToolFuture<S>
    where
        S: Service<ToolRequest>,
    {
        #[pin]
        kind: Kind<S::Future, ToolOutput, BoxError>,
    }
}

pin_project! {
    /// The response future of [`HookStart<S>`](super::HookStart): the call of `S`, after the
    /// prompt hooks.
    #[must_use = "futures do nothing unless polled"]
    pub struct HookStartFuture<S>
    where
        S: Service<RunStart>,
    {
        #[pin]
        kind: Kind<S::Future, RunStart, BoxError>,
    }
}

pin_project! {
    /// The response future of [`HookStep<S>`](super::HookStep): the step hooks, then the call
    /// of `S`.
    #[must_use = "futures do nothing unless polled"]
    pub struct HookStepFuture<S>
    where
        S: Service<StepEnd>,
    {
        #[pin]
        kind: Kind<S::Future, StepControl, BoxError>,
    }
}

pin_project! {
    /// The inner service's call as it is (`F`), or the hooks and the call, boxed.
    #[project = KindProj]
    enum Kind<F, T, E> {
        Call { #[pin] fut: F },
        Hooks { fut: BoxFuture<'static, Result<T, E>> },
    }
}

impl<F, T, E> Kind<F, T, E> {
    fn hooks(fut: impl Future<Output = Result<T, E>> + Send + 'static) -> Self {
        Kind::Hooks { fut: Box::pin(fut) }
    }
}

impl<F, T, E, E2> Future for Kind<F, T, E>
where
    F: Future<Output = Result<T, E2>>,
    E2: Into<E>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            KindProj::Call { fut } => fut.poll(cx).map_err(Into::into),
            KindProj::Hooks { fut } => fut.as_mut().poll(cx),
        }
    }
}

impl<S: Service<ModelRequest>> HookModelFuture<S> {
    /// The inner service's call, unboxed.
    pub(super) fn call(fut: S::Future) -> Self {
        HookModelFuture {
            kind: Kind::Call { fut },
            after: None,
        }
    }

    /// The inner service's call, unboxed, then the after-call hooks on its answer.
    pub(super) fn call_then(fut: S::Future, after: super::model::AfterCall) -> Self {
        HookModelFuture {
            kind: Kind::Call { fut },
            after: Some(after),
        }
    }

    /// The hooks and the call.
    pub(super) fn hooks(
        fut: impl Future<Output = Result<ModelResponse, BoxError>> + Send + 'static,
    ) -> Self {
        HookModelFuture {
            kind: Kind::hooks(fut),
            after: None,
        }
    }
}

impl<S> Future for HookModelFuture<S>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: Into<BoxError>,
{
    type Output = Result<ModelResponse, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let resp = std::task::ready!(this.kind.as_mut().poll(cx))?;
            let Some(after) = this.after.take() else {
                return Poll::Ready(Ok(resp));
            };
            match after.run_now(resp) {
                Ok(resp) => return Poll::Ready(Ok(resp)),
                Err(rest) => this.kind.set(Kind::Hooks { fut: rest }),
            }
        }
    }
}

impl<S: Service<ModelRequest>> fmt::Debug for HookModelFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookModelFuture").finish_non_exhaustive()
    }
}

impl<S: Service<ToolRequest>> HookToolFuture<S> {
    /// The inner service's call, unboxed.
    pub(super) fn call(fut: S::Future) -> Self {
        HookToolFuture {
            kind: Kind::Call { fut },
        }
    }

    /// The hooks and the call.
    pub(super) fn hooks(
        fut: impl Future<Output = Result<ToolOutput, BoxError>> + Send + 'static,
    ) -> Self {
        HookToolFuture {
            kind: Kind::hooks(fut),
        }
    }
}

impl<S> Future for HookToolFuture<S>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
{
    type Output = Result<ToolOutput, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().kind.poll(cx)
    }
}

impl<S: Service<ToolRequest>> fmt::Debug for HookToolFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookToolFuture").finish_non_exhaustive()
    }
}

impl<S: Service<RunStart>> HookStartFuture<S> {
    /// The inner service's call, unboxed.
    pub(super) fn call(fut: S::Future) -> Self {
        HookStartFuture {
            kind: Kind::Call { fut },
        }
    }

    /// The hooks and the call.
    pub(super) fn hooks(
        fut: impl Future<Output = Result<RunStart, BoxError>> + Send + 'static,
    ) -> Self {
        HookStartFuture {
            kind: Kind::hooks(fut),
        }
    }
}

impl<S> Future for HookStartFuture<S>
where
    S: Service<RunStart, Response = RunStart>,
    S::Error: Into<BoxError>,
{
    type Output = Result<RunStart, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().kind.poll(cx)
    }
}

impl<S: Service<RunStart>> fmt::Debug for HookStartFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStartFuture").finish_non_exhaustive()
    }
}

impl<S: Service<StepEnd>> HookStepFuture<S> {
    /// The inner service's call, unboxed.
    pub(super) fn call(fut: S::Future) -> Self {
        HookStepFuture {
            kind: Kind::Call { fut },
        }
    }

    /// The hooks and the call.
    pub(super) fn hooks(
        fut: impl Future<Output = Result<StepControl, BoxError>> + Send + 'static,
    ) -> Self {
        HookStepFuture {
            kind: Kind::hooks(fut),
        }
    }
}

impl<S> Future for HookStepFuture<S>
where
    S: Service<StepEnd, Response = StepControl>,
    S::Error: Into<BoxError>,
{
    type Output = Result<StepControl, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().kind.poll(cx)
    }
}

impl<S: Service<StepEnd>> fmt::Debug for HookStepFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStepFuture").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_agent_core::{model::BoxModelService, tool::BoxToolService};

    #[test]
    fn send_and_static() {
        fn assert_send_static<T: Send + 'static>() {}
        assert_send_static::<HookModelFuture<BoxModelService>>();
        assert_send_static::<HookToolFuture<BoxToolService>>();
        assert_send_static::<HookStartFuture<tower_agent_core::agent::start::BoxStartService>>();
        assert_send_static::<HookStepFuture<tower_agent_core::agent::step::BoxStepService>>();
    }
}
