//! [`HookStepLayer`]: the step hooks of a [`HookSet`] (FileChanged, `after_step`,
//! `should_continue`, PostToolBatch, Stop) as a layer of the agent's step stack.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt};

use super::{HookSet, future::HookStepFuture};
use tower_agent_core::{
    agent::{
        StopBlocks, StopInput,
        step::{StepControl, StepEnd},
    },
    context::{InstanceId, RunContext},
    error::BoxError,
};

/// The step hooks of a [`HookSet`] as a layer of the step stack
/// ([`AgentBuilder::step_layer`](tower_agent_core::agent::AgentBuilder::step_layer);
/// [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks) installs it outermost). See
/// [`agent::step`](tower_agent_core::agent::step).
///
/// At the end of a step with tool calls: the CwdChanged hooks, if a tool moved the run's
/// directory ([`RunContext::set_cwd`]; the watched files are then the new directory's), the
/// FileChanged hooks of the watched files that
/// changed (see [`FileChanged`](super::FileChanged)), the PostToolBatch hooks (their contexts, or the first
/// `Stop`, which ends the run), the `after_step` observers, then the `should_continue` hooks
/// (a `false` ends the run). At the end of a step without one (the model's final answer): the
/// `after_step` observers, then the Stop hooks (the feedback of every hook that continues
/// sends the agent back to work), bounded by the stop cap
/// ([`Hooks::stop_cap`](super::Hooks::stop_cap)): past the cap of blocks in a row (with no
/// step with a tool call in between) the next one is overridden, with a warning. The count and
/// `stop_hook_active` are per run and per layer (clones share them).
///
/// A decision that ends the run answers at once; otherwise the inner service is called (a
/// fresh clone, after the hooks) and its decision follows this layer's
/// ([`StepControl::and`]).
#[derive(Clone)]
pub struct HookStepLayer {
    set: HookSet,
    id: InstanceId,
}

impl HookStepLayer {
    /// The layer of `set`'s step hooks.
    pub fn new(set: HookSet) -> Self {
        HookStepLayer {
            set,
            id: InstanceId::new(),
        }
    }
}

impl fmt::Debug for HookStepLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStepLayer")
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Layer<S> for HookStepLayer {
    type Service = HookStep<S>;

    fn layer(&self, inner: S) -> HookStep<S> {
        HookStep {
            inner,
            set: self.set.clone(),
            id: self.id,
        }
    }
}

/// The service of [`HookStepLayer`].
#[derive(Clone)]
pub struct HookStep<S> {
    inner: S,
    set: HookSet,
    id: InstanceId,
}

impl<S: fmt::Debug> fmt::Debug for HookStep<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStep")
            .field("inner", &self.inner)
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Service<StepEnd> for HookStep<S>
where
    S: Service<StepEnd, Response = StepControl> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = StepControl;
    type Error = BoxError;
    type Future = HookStepFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, end: StepEnd) -> Self::Future {
        let hooks = &self.set.inner;
        // The watched files, after the step's tool calls.
        let changes = if end.is_final() {
            Vec::new()
        } else {
            hooks.file_changes(&end.ctx)
        };
        // The settings the hooks were read from, changed by the step's tool calls.
        let settings = if end.is_final() || hooks.settings.is_empty() {
            Vec::new()
        } else {
            hooks.settings_changes()
        };
        // A tool moved the run's directory during the step (`RunContext::set_cwd`).
        let moved = !end.is_final()
            && !hooks.on_cwd_changed.is_empty()
            && super::start::cwd_moved(&end.ctx);
        let asynchronous = if end.is_final() {
            after_step(&self.set, &end);
            !hooks.on_stop.is_empty()
        } else {
            // The count of Stop blocks in a row matters to Stop hooks only.
            if !hooks.on_stop.is_empty() {
                with_blocks(&end.ctx, self.id, StopBlocks::acted);
            }
            if hooks.on_post_tool_batch.is_empty()
                && changes.is_empty()
                && settings.is_empty()
                && !moved
            {
                if let Some(end_run) = after_step(&self.set, &end) {
                    return HookStepFuture::hooks(std::future::ready(Ok(end_run)));
                }
                false
            } else {
                true
            }
        };
        if !asynchronous {
            return HookStepFuture::call(self.inner.call(end));
        }
        // The call comes after the hooks: release what readiness reserved by dropping the
        // readied service, and call a fresh clone, readied then.
        let inner = self.inner.clone();
        drop(std::mem::replace(&mut self.inner, inner.clone()));
        let (set, id) = (self.set.clone(), self.id);
        HookStepFuture::hooks(async move {
            let own = if end.is_final() {
                stop(&set, id, &end).await
            } else {
                // First: the hooks below are those of the settings as they are now.
                if !settings.is_empty() {
                    super::settings::apply(settings, &end.ctx).await;
                }
                if moved {
                    let watch = super::start::cwd_changed(&set.inner, &end.ctx).await;
                    set.inner.watch(&end.ctx, watch);
                }
                if !changes.is_empty() {
                    set.inner.files_changed(&end.ctx, changes).await;
                }
                let batch = set.inner.post_tool_batch(Arc::clone(end.batch()), &end.ctx);
                match batch.await {
                    Ok(context) => match after_step(&set, &end) {
                        Some(end_run) => end_run,
                        None => StepControl::Proceed { context },
                    },
                    Err(reason) => StepControl::End { reason },
                }
            };
            if let StepControl::End { .. } = own {
                return Ok(own);
            }
            let next = inner.oneshot(end).await.map_err(Into::into)?;
            Ok(own.and(next))
        })
    }
}

/// The `after_step` observers, then (after a step with tool calls) the `should_continue`
/// hooks: `Some` if one ends the run.
fn after_step(set: &HookSet, end: &StepEnd) -> Option<StepControl> {
    let (hooks, step) = (&set.inner, end.ctx.step());
    hooks.after_step.iter().for_each(|f| f(step, &end.ctx));
    let go_on = end.is_final() || hooks.should_continue.iter().all(|f| f(step, &end.ctx));
    (!go_on).then(|| StepControl::end("a should_continue hook ended the run"))
}

/// The Stop hooks at the end of a final step: `Resume` with their feedback, unless none
/// continues or the stop cap overrides them.
async fn stop(set: &HookSet, id: InstanceId, end: &StepEnd) -> StepControl {
    let active = with_blocks(&end.ctx, id, |b| b.active());
    let input = StopInput::new(end.message.text().into_owned(), active);
    let Some(stop) = set.inner.stop(None, input, &end.ctx).await else {
        return StepControl::proceed();
    };
    // Claude Code's rule: after `stop_cap` consecutive blocks (8 by default), the next one is
    // overridden and the run ends, with a warning. Consecutive: with no tool call in between
    // (a step with tool calls resets the count), so a loop whose model works between blocks
    // is not cut, and one that makes no progress is.
    let cap = set.inner.stop_cap;
    if let Err(blocks) = with_blocks(&end.ctx, id, |b| b.block(cap)) {
        end.ctx.warn(format!(
            "Stop hooks blocked the run from ending {blocks} times in a row with no tool \
             call in between; the stop cap ({cap}) overrides them and the run ends"
        ));
        return StepControl::proceed();
    }
    StepControl::resume_with_context(stop.feedback, stop.context)
}

/// Runs `f` on the run's Stop-hook blocks counted by the layer `id`.
fn with_blocks<R>(ctx: &RunContext, id: InstanceId, f: impl FnOnce(&mut StopBlocks) -> R) -> R {
    ctx.with_data(|data| f(data.get_or_default_for::<StopBlocks>(id)))
}
