//! The model-level hooks as a layer: before and after each model call.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt};

use super::{BeforeModel, HookSet, HookSetInner, future::HookModelFuture};
use crate::{
    context::RunContext,
    error::BoxError,
    model::{ModelRequest, ModelResponse},
};

/// The model-level hooks of a [`HookSet`] as a layer. See the
/// [module docs](crate::layers::hooks).
#[derive(Clone, Debug)]
#[must_use]
pub struct HookModelLayer {
    set: HookSet,
}

impl HookModelLayer {
    /// The model hooks of `set`.
    pub fn new(set: HookSet) -> Self {
        HookModelLayer { set }
    }
}

impl<S> Layer<S> for HookModelLayer {
    type Service = HookModel<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HookModel {
            inner,
            set: Arc::clone(&self.set.inner),
        }
    }
}

/// The service of [`HookModelLayer`].
///
/// # Readiness
///
/// `poll_ready` is the inner service's. With no BeforeModel hook the call goes to the service
/// `poll_ready` readied, at once. With BeforeModel hooks, that service is dropped (giving back
/// what it reserved) and a fresh clone is readied once the hooks let the call go on, so a hook
/// may call a model that shares the inner service's capacity.
#[derive(Clone)]
pub struct HookModel<S> {
    inner: S,
    set: Arc<HookSetInner>,
}

impl<S> HookModel<S> {
    /// The model hooks of `set` around `inner`.
    pub fn new(inner: S, set: &HookSet) -> Self {
        HookModel {
            inner,
            set: Arc::clone(&set.inner),
        }
    }

    inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for HookModel<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookModel")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> Service<ModelRequest> for HookModel<S>
where
    S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = HookModelFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        // Synchronous BeforeModel hooks (and none) decide here, so the service `poll_ready`
        // readied is called at once when they all continue; only its response waits for the
        // AfterModel hooks.
        let set = Arc::clone(&self.set);
        let ctx = req.ctx.clone();
        let mut req = req;
        for (i, f) in set.before_model.iter().enumerate() {
            let mut decision = f(req);
            req = match decision.take_ready() {
                Some(BeforeModel::Continue(req)) => req,
                Some(BeforeModel::Respond(resp)) => {
                    // Answered by a hook: the readied service is dropped (giving back what it
                    // reserved) and never called.
                    self.inner = self.inner.clone();
                    return HookModelFuture::hooks(async move {
                        Ok(after_model(&set, resp, ctx).await)
                    });
                }
                None => {
                    // NOTE: an asynchronous hook is awaited before the call, so the service
                    // `poll_ready` readied must not wait with it (a hook sharing its capacity
                    // would wait for it forever). Replacing it drops it, which gives back what
                    // it reserved; a fresh clone is readied (`oneshot`) once the hooks let the
                    // call go on.
                    let inner = self.inner.clone();
                    self.inner = inner.clone();
                    return HookModelFuture::hooks(async move {
                        let mut next = match decision.await {
                            BeforeModel::Continue(req) => Ok(req),
                            BeforeModel::Respond(resp) => Err(resp),
                        };
                        for f in &set.before_model[i + 1..] {
                            let Ok(req) = next else { break };
                            next = match f(req).await {
                                BeforeModel::Continue(req) => Ok(req),
                                BeforeModel::Respond(resp) => Err(resp),
                            };
                        }
                        let resp = match next {
                            Ok(req) => inner.oneshot(req).await.map_err(Into::into)?,
                            // Answered by a hook: `inner` is never readied nor called.
                            Err(resp) => resp,
                        };
                        Ok(after_model(&set, resp, ctx).await)
                    });
                }
            };
        }
        let fut = self.inner.call(req);
        if set.after_model.is_empty() {
            return HookModelFuture::call(fut);
        }
        HookModelFuture::hooks(async move {
            let resp = fut.await.map_err(Into::<BoxError>::into)?;
            Ok(after_model(&set, resp, ctx).await)
        })
    }
}

/// Runs the AfterModel hooks over `resp`, in order.
async fn after_model(
    set: &HookSetInner,
    mut resp: ModelResponse,
    ctx: RunContext,
) -> ModelResponse {
    for f in &set.after_model {
        resp = f(resp, ctx.clone()).await;
    }
    resp
}
