//! The model-level hooks as a layer: before and after each model call.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use tower::{Layer, Service, ServiceExt};

use super::{
    BeforeModel, HookSet, HookSetInner, MessageDisplayInput, PostCompactInput,
    future::HookModelFuture, resume, switch,
};
use tower_agent_core::{
    context::{Compaction, RunContext},
    error::BoxError,
    message::Message,
    model::{Display, ModelRequest, ModelResponse},
};

/// The model-level hooks of a [`HookSet`] as a layer. See the
/// [module docs](crate::hooks).
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
/// `poll_ready` is the inner service's. With no BeforeModel hook to await (and no model
/// switch, see [`Hooks::on_pre_model_switch`](super::Hooks::on_pre_model_switch)) the call
/// goes to the service `poll_ready` readied, at once. With hooks to await, that service is
/// dropped (giving back what it reserved) and a fresh clone is readied once the hooks let the
/// call go on, so a hook may call a model that shares the inner service's capacity.
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
        set.before_step.iter().for_each(|f| f(ctx.step(), &ctx));
        let ctx = After {
            ctx,
            position: req.messages.len(),
            // Only SessionStart (`compact`) hooks read it: no copy per call otherwise.
            model: if set.on_session_start_for.is_empty() {
                None
            } else {
                req.settings.model.as_deref().map(str::to_owned)
            },
        };
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
                        Ok(after_model(&set, 0, resp, ctx).await)
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
                            Ok(req) => {
                                let resp = match switch::switch_of(&set, &req) {
                                    Some(switch) => {
                                        switch::switched(&set, inner, req, switch).await?
                                    }
                                    None => inner.oneshot(req).await.map_err(Into::into)?,
                                };
                                resume::noted(&set, &ctx.ctx, resp)
                            }
                            // Answered by a hook: `inner` is never readied nor called.
                            Err(resp) => resp,
                        };
                        Ok(after_model(&set, 0, resp, ctx).await)
                    });
                }
            };
        }
        if let Some(switch) = switch::switch_of(&set, &req) {
            // The switch hooks are awaited before the call: as above, a fresh clone takes it.
            let inner = self.inner.clone();
            self.inner = inner.clone();
            return HookModelFuture::hooks(async move {
                let resp = switch::switched(&set, inner, req, switch).await?;
                let resp = resume::noted(&set, &ctx.ctx, resp);
                Ok(after_model(&set, 0, resp, ctx).await)
            });
        }
        let fut = self.inner.call(req);
        if !set.acts_after_model() {
            return HookModelFuture::call(fut);
        }
        HookModelFuture::call_then(fut, AfterCall { set, after: ctx })
    }
}

/// The hooks to run on an answer, and what they need of the request.
pub(crate) struct AfterCall {
    set: Arc<HookSetInner>,
    after: After,
}

impl AfterCall {
    /// The hooks on `resp`, at once if every AfterModel hook answers at once and no other
    /// hook runs; else the rest, boxed.
    pub(super) fn run_now(
        self,
        resp: ModelResponse,
    ) -> Result<ModelResponse, BoxFuture<'static, Result<ModelResponse, BoxError>>> {
        let AfterCall { set, after } = self;
        let mut resp = resume::noted(&set, &after.ctx, resp);
        if resp.is_streaming() {
            return Err(Box::pin(async move {
                Ok(after_model(&set, 0, resp, after).await)
            }));
        }
        for (i, f) in set.after_model.iter().enumerate() {
            match f(resp, after.ctx.clone()).ready_or_boxed() {
                Ok(next) => resp = next,
                Err(pending) => {
                    return Err(Box::pin(async move {
                        let resp = pending.await;
                        Ok(after_model(&set, i + 1, resp, after).await)
                    }));
                }
            }
        }
        if resp.extensions.get::<Compaction>().is_none() && set.on_message_display.is_empty() {
            return Ok(resp);
        }
        let from = set.after_model.len();
        Err(Box::pin(async move {
            Ok(after_model(&set, from, resp, after).await)
        }))
    }
}

/// What the hooks after the call need of the request.
struct After {
    ctx: RunContext,
    /// Where the answer goes in the conversation (the request's length): its MessageDisplay id.
    position: usize,
    /// The model asked for (a SessionStart input's `model`).
    model: Option<String>,
}

impl HookSetInner {
    /// Whether anything runs on a model call's answer: AfterModel, MessageDisplay, (on a
    /// compacted request) PostCompact and SessionStart hooks, or the record of the answer's
    /// time (see `resume`).
    fn acts_after_model(&self) -> bool {
        !(self.after_model.is_empty()
            && self.on_message_display.is_empty()
            && self.on_post_compact.is_empty()
            && !self.keeps_last_response())
    }
}

/// Runs the AfterModel hooks over `resp`, in order; then, if a layer below compacted the
/// request, the SessionStart hooks of source `compact` (their contexts follow the summary)
/// and the PostCompact hooks; then the MessageDisplay hooks, whose text travels in the
/// response ([`Display`]).
async fn after_model(
    set: &Arc<HookSetInner>,
    from: usize,
    mut resp: ModelResponse,
    after: After,
) -> ModelResponse {
    if resp.is_streaming() {
        return Box::pin(after_stream(Arc::clone(set), from, resp, after)).await;
    }
    let ctx = after.ctx;
    for f in &set.after_model[from..] {
        resp = match f(resp, ctx.clone()).ready_or_boxed() {
            Ok(resp) => resp,
            Err(pending) => pending.await,
        };
    }
    // The rare paths are boxed, to keep this future small.
    if let Some(compaction) = resp.extensions.get_mut::<Compaction>() {
        Box::pin(compacted(set, compaction, after.model, &ctx)).await;
    }
    if !set.on_message_display.is_empty() {
        resp = Box::pin(display(set, resp, after.position, &ctx)).await;
    }
    resp
}

/// [`after_model`] on a streaming answer: a compaction is known at its head (the layer that
/// compacted put it there), so SessionStart (`compact`) and PostCompact run now; the AfterModel
/// and MessageDisplay hooks run on the whole answer, as its stream ends (the stream waits for
/// them).
async fn after_stream(
    set: Arc<HookSetInner>,
    from: usize,
    mut resp: ModelResponse,
    after: After,
) -> ModelResponse {
    if let Some(compaction) = resp.extensions.get_mut::<Compaction>() {
        compacted(&set, compaction, after.model.clone(), &after.ctx).await;
    }
    if from == set.after_model.len() && set.on_message_display.is_empty() {
        return resp;
    }
    resp.then_done(move |mut done| async move {
        let ctx = after.ctx;
        for f in &set.after_model[from..] {
            done = f(done, ctx.clone()).await;
        }
        if !set.on_message_display.is_empty() {
            done = display(&set, done, after.position, &ctx).await;
        }
        Ok(done)
    })
}

/// The MessageDisplay hooks over the answer's text, which travels in the response
/// ([`Display`]).
async fn display(
    set: &HookSetInner,
    mut resp: ModelResponse,
    position: usize,
    ctx: &RunContext,
) -> ModelResponse {
    let text = resp.message.text();
    if text.is_empty() {
        return resp;
    }
    let input = MessageDisplayInput::new(
        ctx.run_id(),
        format!("{}-{}", ctx.run_id(), position),
        text.into_owned(),
    );
    let shown = set.message_display(input, ctx).await;
    resp.extensions.insert(Display(shown));
    resp
}

/// SessionStart with source `compact`, then PostCompact: the SessionStart contexts join the
/// compaction's replacement, after the summary.
async fn compacted(
    set: &HookSetInner,
    compaction: &mut Compaction,
    model: Option<String>,
    ctx: &RunContext,
) {
    let input = PostCompactInput::new(compaction.trigger, compaction.summary.clone());
    let contexts = set.compacted(&input, model, ctx).await;
    if !contexts.is_empty() {
        compaction
            .replacement
            .push(Message::hook_context(&contexts));
    }
}
