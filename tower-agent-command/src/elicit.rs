//! The `Elicitation` and `ElicitationResult` hooks as a tower layer over an MCP
//! [`Elicitation`](tower_agent_mcp::client::Elicitation) service.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use super::{events::Inner, future::ElicitationHooksFuture};
use tower_agent_core::error::BoxError;
use tower_agent_mcp::client::{ElicitationRequest, ElicitationResponse};

/// Fires the `Elicitation` and `ElicitationResult` command hooks around an elicitation
/// service. Made by [`CommandHooks::elicitation_layer`](super::CommandHooks::elicitation_layer);
/// see the [module docs](super#mcp-elicitation).
#[derive(Clone)]
pub struct ElicitationHooksLayer {
    inner: Arc<Inner>,
}

impl ElicitationHooksLayer {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        ElicitationHooksLayer { inner }
    }
}

impl fmt::Debug for ElicitationHooksLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElicitationHooksLayer")
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for ElicitationHooksLayer {
    type Service = ElicitationHooks<S>;

    fn layer(&self, inner: S) -> ElicitationHooks<S> {
        ElicitationHooks {
            inner,
            hooks: Arc::clone(&self.inner),
        }
    }
}

/// An elicitation service with the `Elicitation` and `ElicitationResult` command hooks
/// around it (see [`ElicitationHooksLayer`]).
#[derive(Clone)]
pub struct ElicitationHooks<S> {
    inner: S,
    hooks: Arc<Inner>,
}

impl<S: fmt::Debug> fmt::Debug for ElicitationHooks<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElicitationHooks")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<ElicitationRequest> for ElicitationHooks<S>
where
    S: Service<ElicitationRequest, Response = ElicitationResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = ElicitationResponse;
    type Error = BoxError;
    type Future = ElicitationHooksFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ElicitationRequest) -> Self::Future {
        // The readied service answers; a clone stays for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let hooks = Arc::clone(&self.hooks);
        ElicitationHooksFuture::new(async move {
            // Elicitation: a hook that answers (or blocks) stands for the user.
            if let Some(answer) = hooks.elicitation(&req).await {
                return Ok(answer);
            }
            let answer = inner.call(req.clone()).await.map_err(Into::into)?;
            // ElicitationResult: the user's answer, overridden or blocked by the hooks.
            Ok(hooks.elicitation_result(&req, answer).await)
        })
    }
}
