//! PreModelSwitch and PostModelSwitch, fired by the model hook layer
//! ([`HookModel`](super::HookModel)) around a call whose model is not the thread's previous
//! call's.
//!
//! The layer keeps the model of the thread's last call in the thread's data (key
//! `tower_agent.model`, saved with the thread) when its set has a hook of either event. A
//! request that names no model ([`ModelSettings::model`](crate::model::ModelSettings::model)
//! `None`: the provider's default) is no switch and leaves the record alone.

use tower::{Service, ServiceExt};

use super::{HookSetInner, ModelSwitchInput, PostModelSwitch, PreModelSwitch};
use crate::{
    context::{RunContext, data::Persisted},
    error::BoxError,
    model::{ModelRequest, ModelResponse},
};

/// The model of a thread's last model call that a model hook layer with switch hooks saw.
#[derive(serde::Serialize, serde::Deserialize)]
struct LastModel(String);

impl Persisted for LastModel {
    const KEY: &'static str = "tower_agent.model";
}

impl HookSetInner {
    /// Whether the layer watches the thread's model (it has a hook of a switch event).
    pub(super) fn watches_model(&self) -> bool {
        !(self.on_pre_model_switch.is_empty() && self.on_post_model_switch.is_empty())
    }
}

/// The switch `req` makes, if the set watches the thread's model and the request names
/// another model than the thread's last call. The first model a thread names is recorded
/// here (no switch).
pub(super) fn switch_of(set: &HookSetInner, req: &ModelRequest) -> Option<ModelSwitchInput> {
    if !set.watches_model() {
        return None;
    }
    let model = req.settings.model.as_deref()?;
    let ctx = &req.ctx;
    let last = ctx.persisted::<LastModel>().unwrap_or_else(|err| {
        ctx.warn(format!(
            "the thread's `{}` data is not a model name: {err}",
            LastModel::KEY
        ));
        None
    });
    match last {
        Some(LastModel(previous)) if previous == model => None,
        Some(LastModel(previous)) => Some(ModelSwitchInput::new(previous, model)),
        None => {
            record(ctx, model);
            None
        }
    }
}

/// The call of `req`, which makes `switch`: PreModelSwitch hooks first (a block sends the
/// call with the previous model), then the call, then — the switch made — the record and the
/// PostModelSwitch hooks, whose contexts are queued as reminders.
pub(super) async fn switched<S>(
    set: &HookSetInner,
    inner: S,
    mut req: ModelRequest,
    switch: ModelSwitchInput,
) -> Result<ModelResponse, BoxError>
where
    S: Service<ModelRequest, Response = ModelResponse>,
    S::Error: Into<BoxError>,
{
    let ctx = req.ctx.clone();
    if let Some(reason) = pre_switch(set, &switch, &ctx).await {
        ctx.warn(format!(
            "a PreModelSwitch hook blocked the switch from model `{}` to `{}`: {reason}; the \
             call keeps `{}`",
            switch.previous_model, switch.model, switch.previous_model
        ));
        req.settings.model = Some(switch.previous_model.as_str().into());
        return inner.oneshot(req).await.map_err(Into::into);
    }
    let resp = inner.oneshot(req).await.map_err(Into::into)?;
    record(&ctx, &switch.model);
    for (m, f) in &set.on_post_model_switch {
        if !m.matches_name(&switch.model) {
            continue;
        }
        if let PostModelSwitch::AddContext(text) = f(switch.clone(), ctx.clone()).await {
            ctx.remind(text);
        }
    }
    Ok(resp)
}

/// The PreModelSwitch hooks matching the new model, in order: the first block's reason.
async fn pre_switch(
    set: &HookSetInner,
    switch: &ModelSwitchInput,
    ctx: &RunContext,
) -> Option<String> {
    for (m, f) in &set.on_pre_model_switch {
        if !m.matches_name(&switch.model) {
            continue;
        }
        if let PreModelSwitch::Block(reason) = f(switch.clone(), ctx.clone()).await {
            return Some(reason);
        }
    }
    None
}

fn record(ctx: &RunContext, model: &str) {
    if let Err(err) = ctx.persist(&LastModel(model.to_owned())) {
        ctx.warn(format!(
            "the call's model could not be kept in the thread: {err}"
        ));
    }
}
