//! The model events: PreCompact, BeforeModel, AfterModel, PreModelSwitch, PostModelSwitch.

use super::register::Add;
use super::{Inner, Live, TRIGGER};
use crate::{config::HookEvent, handler::Entry, process::Permission, reply::Report};
use serde_json::{Value, json};
use std::sync::Arc;
use tower_agent_core::context::RunContext;
use tower_agent_core::message::{Message, Messages, StopReason, ToolSpec, Usage};
use tower_agent_core::model::{ModelRequest, ModelResponse, ModelSettings};
use tower_agent_layers::hooks::{HookFuture, Hooks, state::Added};
use tower_agent_layers::{
    hooks::{
        BeforeModel, ModelSwitchInput, PostModelSwitch, PreCompact, PreCompactInput, PreModelSwitch,
    },
    summarize::{CompactDecision, CompactInfo},
};

impl Inner {
    /// PreModelSwitch: a block (exit 2, `decision: "block"`, `continue: false`, a
    /// `permissionDecision` of `deny` or `ask` — there is no one to ask at a model call — or
    /// a handler that failed closed or timed out) keeps the previous model.
    pub(super) async fn pre_model_switch(
        self: &Arc<Self>,
        switch: ModelSwitchInput,
        ctx: &RunContext,
    ) -> PreModelSwitch {
        let event = HookEvent::PreModelSwitch;
        let input = self.switch_input(event, &switch, ctx);
        let verdicts = self
            .run(
                event,
                Some(switch.canonical_to_model()),
                input,
                Report::Run(ctx),
            )
            .await;
        for v in verdicts {
            let asked = v.permission.and_then(|(p, why)| match p {
                Permission::Deny => Some(why),
                Permission::Ask => Some(format!("{why} (asked; no one to ask at a model call)")),
                Permission::Allow | Permission::Defer => None,
            });
            if let Some(reason) = v.stop.or(v.block).or(v.failed).or(asked) {
                return PreModelSwitch::Block(reason);
            }
        }
        PreModelSwitch::Allow
    }

    /// PostModelSwitch: observe; contexts (`additionalContext`, plain stdout) for the model.
    pub(super) async fn post_model_switch(
        self: &Arc<Self>,
        switch: ModelSwitchInput,
        ctx: &RunContext,
    ) -> PostModelSwitch {
        let event = HookEvent::PostModelSwitch;
        let input = self.switch_input(event, &switch, ctx);
        let mut contexts = Vec::new();
        for v in self
            .run(
                event,
                Some(switch.canonical_to_model()),
                input,
                Report::Run(ctx),
            )
            .await
        {
            if let Some(reason) = v.block.or(v.stop) {
                ctx.warn(format!(
                    "a PostModelSwitch hook: {reason} (the switch is made)"
                ));
            }
            contexts.extend(v.contexts);
        }
        if contexts.is_empty() {
            PostModelSwitch::Continue
        } else {
            PostModelSwitch::AddContext(contexts.join("\n"))
        }
    }

    fn switch_input(
        &self,
        event: HookEvent,
        switch: &ModelSwitchInput,
        ctx: &RunContext,
    ) -> serde_json::Map<String, Value> {
        let mut input = self.base(event, ctx);
        input.insert("from_model".into(), switch.from_model.clone().into());
        input.insert("to_model".into(), switch.to_model.clone().into());
        input.insert(
            "requested_model".into(),
            switch.requested_model.clone().into(),
        );
        input.insert("source".into(), switch.source.as_str().into());
        input.insert("context_tokens".into(), switch.context_tokens.into());
        input.insert("prompt_cache_warm".into(), switch.prompt_cache_warm.into());
        input.insert("cache_ttl".into(), switch.cache_ttl.clone().into());
        input.insert(
            "estimated_cache_write_usd".into(),
            switch.estimated_cache_write_usd.into(),
        );
        input.insert("pricing".into(), switch.pricing.clone().into());
        input
    }

    /// PreCompact: `Some(reason)` of the first block (exit 2, `decision: "block"`,
    /// `continue: false`, a handler that failed closed). The summarize layer's compactions
    /// (`auto`) give their estimate (`info`) and an empty `custom_instructions`; the caller's
    /// (`manual`) give the caller's instructions, or `null` (measured: vector
    /// `compact_manual`).
    pub(super) async fn pre_compact(
        self: &Arc<Self>,
        input: PreCompactInput,
        info: Option<CompactInfo>,
        ctx: &RunContext,
    ) -> Option<String> {
        let event = HookEvent::PreCompact;
        let trigger = input.trigger;
        let mut fields = self.base(event, ctx);
        fields.insert("trigger".into(), trigger.into());
        match info {
            Some(info) => {
                fields.insert("custom_instructions".into(), "".into());
                fields.insert("tokens".into(), info.tokens.into());
                fields.insert("threshold".into(), info.threshold.into());
                fields.insert("summarized_messages".into(), info.summarized.into());
                fields.insert("kept_messages".into(), info.kept.into());
            }
            None => {
                fields.insert(
                    "custom_instructions".into(),
                    input.custom_instructions.into(),
                );
            }
        }
        let verdicts = self
            .run(event, Some(trigger), fields, Report::Run(ctx))
            .await;
        let reason = verdicts
            .into_iter()
            .find_map(|v| v.stop.or(v.block).or(v.failed));
        if let Some(reason) = &reason {
            tracing::info!("compaction vetoed by a PreCompact hook: {reason}");
        }
        reason
    }

    pub(super) async fn before_model(self: &Arc<Self>, mut req: ModelRequest) -> BeforeModel {
        let event = HookEvent::BeforeModel;
        let ctx = req.ctx.clone();
        let mut input = self.base(event, &ctx);
        input.insert(
            "llm_request".into(),
            json!({
                "messages": req.messages,
                "tools": *req.tools,
                "settings": settings_json(&req.settings),
            }),
        );
        let verdicts = self.run(event, None, input, Report::Run(&ctx)).await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                return BeforeModel::Respond(ModelResponse::text(reason));
            }
            if let Some(new) = v.llm_request
                && let Err(why) = replace_request(&mut req, new)
            {
                ctx.warn(format!(
                    "a BeforeModel hook's llm_request is ignored: {why}"
                ));
            }
        }
        BeforeModel::Continue(req)
    }

    pub(super) async fn after_model(
        self: &Arc<Self>,
        mut resp: ModelResponse,
        ctx: &RunContext,
    ) -> ModelResponse {
        let event = HookEvent::AfterModel;
        let mut input = self.base(event, ctx);
        input.insert(
            "llm_response".into(),
            json!({
                "message": resp.message,
                "usage": resp.usage,
                "stop_reason": resp.stop_reason,
            }),
        );
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        for v in verdicts {
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                let usage = resp.usage;
                let mut blocked = ModelResponse::text(reason);
                blocked.usage = usage;
                return blocked;
            }
            if let Some(new) = v.llm_response
                && let Err(why) = replace_response(&mut resp, new)
            {
                ctx.warn(format!(
                    "an AfterModel hook's llm_response is ignored: {why}"
                ));
            }
        }
        resp
    }
}

pub(super) fn settings_json(s: &ModelSettings) -> Value {
    json!({
        "model": s.model.as_deref(),
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
        "stream": s.stream,
    })
}

/// Replaces the parts of `req` present in `new` (`messages`, `tools`, `settings`).
pub(super) fn replace_request(req: &mut ModelRequest, new: Value) -> Result<(), String> {
    let Value::Object(mut new) = new else {
        return Err("it is not an object".into());
    };
    let messages = match new.remove("messages") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<Messages>(v).map_err(|e| format!("messages: {e}"))?)
        }
    };
    let tools = match new.remove("tools") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<Vec<ToolSpec>>(v).map_err(|e| format!("tools: {e}"))?)
        }
    };
    let settings = match new.remove("settings") {
        None | Some(Value::Null) => None,
        Some(Value::Object(s)) => {
            let mut settings = req.settings.clone();
            if let Some(v) = s.get("model") {
                settings.model = v.as_str().map(Into::into);
            }
            if let Some(v) = s.get("temperature") {
                settings.temperature = v.as_f64().map(|t| t as f32);
            }
            if let Some(v) = s.get("max_tokens") {
                settings.max_tokens = v.as_u64().and_then(|n| u32::try_from(n).ok());
            }
            if let Some(v) = s.get("stream").and_then(Value::as_bool) {
                settings.stream = v;
            }
            Some(settings)
        }
        Some(_) => return Err("settings: not an object".into()),
    };
    if let Some(messages) = messages {
        req.messages = messages;
    }
    if let Some(tools) = tools {
        req.tools = Arc::new(tools);
    }
    if let Some(settings) = settings {
        req.settings = settings;
    }
    Ok(())
}

/// Replaces the parts of `resp` present in `new` (`message`, `usage`, `stop_reason`).
pub(super) fn replace_response(resp: &mut ModelResponse, new: Value) -> Result<(), String> {
    let Value::Object(mut new) = new else {
        return Err("it is not an object".into());
    };
    let message = match new.remove("message") {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value::<Message>(v).map_err(|e| format!("message: {e}"))?),
    };
    let usage = match new.remove("usage") {
        None => None,
        Some(v) => {
            Some(serde_json::from_value::<Option<Usage>>(v).map_err(|e| format!("usage: {e}"))?)
        }
    };
    let stop_reason = match new.remove("stop_reason") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(serde_json::from_value::<StopReason>(v).map_err(|e| format!("stop_reason: {e}"))?)
        }
    };
    if let Some(message) = message {
        resp.message = message;
    }
    if let Some(usage) = usage {
        resp.usage = usage;
    }
    if let Some(stop_reason) = stop_reason {
        resp.stop_reason = stop_reason;
    }
    Ok(())
}

/// The model events [`register`](super::register) adds a callback for, in registration order,
/// each with how it is added.
pub(super) const EVENTS: &[(HookEvent, Add)] = &[
    (HookEvent::BeforeModel, add_before_model),
    (HookEvent::AfterModel, add_after_model),
    (HookEvent::PreModelSwitch, add_pre_model_switch),
    (HookEvent::PostModelSwitch, add_post_model_switch),
    (HookEvent::PreCompact, add_pre_compact),
];

fn add_pre_model_switch(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_pre_model_switch(super::union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.pre_model_switch(input, &ctx).await }
    })
}

fn add_post_model_switch(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_model_switch(super::union(entries), move |input, ctx| {
        let i = i.current();
        async move { i.post_model_switch(input, &ctx).await }
    })
}

fn add_before_model(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_model(move |req| {
        let i = i.current();
        async move { i.before_model(req).await }
    })
}

fn add_after_model(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_model(move |resp, ctx| {
        let i = i.current();
        async move { i.after_model(resp, &ctx).await }
    })
}

/// The PreCompact callback for [`SummarizeLayer::on_compact`](tower_agent_layers::summarize::SummarizeLayer::on_compact).
pub(crate) fn pre_compact(
    inner: &Arc<Inner>,
) -> impl Fn(CompactInfo, ModelRequest) -> HookFuture<CompactDecision> + Clone + Send + Sync + 'static
{
    let inner = inner
        .wants(HookEvent::PreCompact, TRIGGER)
        .then(|| Arc::clone(inner));
    move |info, req| match &inner {
        None => HookFuture::ready(CompactDecision::Proceed),
        Some(i) => {
            let i = Arc::clone(i);
            HookFuture::boxed(async move {
                let input = PreCompactInput::auto();
                match i.pre_compact(input, Some(info), &req.ctx).await {
                    Some(_) => CompactDecision::Veto,
                    None => CompactDecision::Proceed,
                }
            })
        }
    }
}

/// PreCompact of the compactions the caller asks for (`manual`,
/// [`Agent::compact`](tower_agent_core::Agent::compact)): a block leaves the thread as it is.
fn add_pre_compact(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_pre_compact(super::union(entries), move |input, ctx| {
        let i = i.current();
        async move {
            match i.pre_compact(input, None, &ctx).await {
                Some(reason) => PreCompact::Block(reason),
                None => PreCompact::Continue,
            }
        }
    })
}
