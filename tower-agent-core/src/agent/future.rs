//! The response future of [`Agent`](super::Agent) as a service.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;

use super::AgentResponse;
use crate::error::Error;

/// The response future of [`Agent`](super::Agent) as a service (`Agent::call`): one run, from
/// the request to its [`AgentResponse`].
///
/// Boxed: one allocation per run, not per step. [`Agent::run`](super::Agent::run) returns the
/// same run unboxed. Dropping it cancels the run (see the
/// [module docs](crate::agent#cancel-safety)).
#[must_use = "futures do nothing unless polled"]
pub struct AgentFuture(BoxFuture<'static, Result<AgentResponse, Error>>);

impl AgentFuture {
    pub(super) fn new(
        run: impl Future<Output = Result<AgentResponse, Error>> + Send + 'static,
    ) -> Self {
        AgentFuture(Box::pin(run))
    }
}

impl Future for AgentFuture {
    type Output = Result<AgentResponse, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl fmt::Debug for AgentFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentFuture").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_and_static() {
        fn assert_send_static<T: Send + 'static>() {}
        assert_send_static::<AgentFuture>();
    }
}
