//! The response future of [`When`].

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::*;

pin_project! {
    /// The response future of [`When`](super::When).
    pub struct ResponseFuture<S, M>
    where
        S: Service<ToolRequest>,
        M: Service<ToolRequest>,
    {
        #[pin]
        branch: Branch<S, M>,
    }
}

pin_project! {
    #[project = BranchProj]
    enum Branch<S, M>
    where
        S: Service<ToolRequest>,
        M: Service<ToolRequest>,
    {
        Matched { #[pin] fut: Oneshot<M, ToolRequest> },
        Bypass { #[pin] fut: Oneshot<S, ToolRequest> },
    }
}

impl<S: Service<ToolRequest>, M: Service<ToolRequest>> ResponseFuture<S, M> {
    pub(super) fn matched(fut: Oneshot<M, ToolRequest>) -> Self {
        ResponseFuture {
            branch: Branch::Matched { fut },
        }
    }

    pub(super) fn bypass(fut: Oneshot<S, ToolRequest>) -> Self {
        ResponseFuture {
            branch: Branch::Bypass { fut },
        }
    }
}

impl<S, M> Future for ResponseFuture<S, M>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
    M: Service<ToolRequest, Response = ToolOutput>,
    M::Error: Into<BoxError>,
{
    type Output = Result<ToolOutput, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match self.project().branch.project() {
            BranchProj::Matched { fut } => ready!(fut.poll(cx)).map_err(Into::into),
            BranchProj::Bypass { fut } => ready!(fut.poll(cx)).map_err(Into::into),
        })
    }
}

impl<S: Service<ToolRequest>, M: Service<ToolRequest>> fmt::Debug for ResponseFuture<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
