//! PreModelSwitch and PostModelSwitch, fired by the model hook layer
//! ([`HookModel`](super::HookModel)) around a call whose model is not the thread's previous
//! call's.
//!
//! The layer keeps the model of the thread's last call in the thread's data (key
//! `tower_agent.model`, saved with the thread) when its set has a hook of either event. A
//! request that names no model ([`ModelSettings::model`](tower_agent_core::model::ModelSettings::model)
//! `None`: the provider's default) is no switch and leaves the record alone.

use tower::{Service, ServiceExt};

use std::time::Duration;

use super::{
    HookSetInner, ModelSwitchInput, PostModelSwitch, PreModelSwitch,
    resume::{self, now_ms},
};
use tower_agent_core::{
    agent::prompt_cache_warm,
    context::{RunContext, data::Persisted},
    error::BoxError,
    message::tokens::{BytesPerFour, TokenCounter},
    model::{ModelRequest, ModelResponse},
};

/// The model of a thread's last model call that a model hook layer with switch hooks saw, and
/// when it was first seen or switched to (milliseconds since the Unix epoch; 0 in a thread
/// saved before this was kept). The time of the last answer is kept apart (see `resume`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum LastModel {
    At { model: String, at_ms: u64 },
    Name(String),
}

impl LastModel {
    fn model(&self) -> &str {
        match self {
            LastModel::At { model, .. } | LastModel::Name(model) => model,
        }
    }

    fn at_ms(&self) -> u64 {
        match self {
            LastModel::At { at_ms, .. } => *at_ms,
            LastModel::Name(_) => 0,
        }
    }
}

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
        Some(last) if last.model() == model => None,
        Some(last) => {
            let mut switch = ModelSwitchInput::new(last.model(), model);
            let tokens = BytesPerFour.count_messages(&req.messages);
            switch.context_tokens = u64::try_from(tokens).unwrap_or(u64::MAX);
            // The last answer's time; in a thread saved before it was kept, the last switch's.
            let since = resume::since_last_response(ctx)
                .unwrap_or_else(|| Duration::from_millis(now_ms().saturating_sub(last.at_ms())));
            switch.prompt_cache_warm = prompt_cache_warm(since);
            Some(switch)
        }
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
            switch.from_model, switch.to_model, switch.from_model
        ));
        req.settings.model = Some(switch.from_model.as_str().into());
        return inner.oneshot(req).await.map_err(Into::into);
    }
    let mut resp = inner.oneshot(req).await.map_err(Into::into)?;
    record(&ctx, &switch.to_model);
    for (m, f) in &set.on_post_model_switch {
        if !m.matches_name(switch.canonical_to_model()) {
            continue;
        }
        if let PostModelSwitch::AddContext(text) = f(switch.clone(), ctx.clone()).await {
            resp.remind(text);
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
        if !m.matches_name(switch.canonical_to_model()) {
            continue;
        }
        if let PreModelSwitch::Block(reason) = f(switch.clone(), ctx.clone()).await {
            return Some(reason);
        }
    }
    None
}

fn record(ctx: &RunContext, model: &str) {
    let last = LastModel::At {
        model: model.to_owned(),
        at_ms: now_ms(),
    };
    if let Err(err) = ctx.persist(&last) {
        ctx.warn(format!(
            "the call's model could not be kept in the thread: {err}"
        ));
    }
}
