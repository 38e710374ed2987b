//! The tool events: PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest, PermissionDenied, PostToolBatch.

use super::{Inner, joined};
use super::{Live, register::Add, union};
use crate::{
    config::HookEvent,
    handler::Entry,
    process::{Permission, Refusal, Verdict},
    reply::Report,
};
use serde_json::{Value, json};
use std::sync::Arc;
use tower_agent_core::context::RunContext;
use tower_agent_core::message::{ToolCall, ToolOutput};
use tower_agent_layers::hooks::{Hooks, state::Added};
use tower_agent_layers::hooks::{
    PermissionDenied, PermissionRequest, PostToolBatch, PostToolUse, PostToolUseFailure,
    PreToolUse, ToolBatch, ToolFailure,
};

impl Inner {
    pub(super) async fn pre_tool_use(
        self: &Arc<Self>,
        call: &ToolCall,
        ctx: &RunContext,
    ) -> PreToolUse {
        let event = HookEvent::PreToolUse;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        mcp_server(&mut input, call, ctx);
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        merge_pre_tool_use(verdicts, call)
    }

    pub(super) async fn post_tool_use(
        self: &Arc<Self>,
        call: &ToolCall,
        output: &ToolOutput,
        ctx: &RunContext,
    ) -> PostToolUse {
        let event = HookEvent::PostToolUse;
        // The hooks may read the transcript: the result goes there first.
        if let Some(transcript) = ctx.transcript() {
            transcript.record_tool_result(output);
        }
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        let response = output.metadata.get(super::super::TOOL_RESPONSE).cloned();
        input.insert(
            "tool_response".into(),
            response.unwrap_or_else(|| tool_response(&output.content)),
        );
        input.insert("tool_use_id".into(), call.id.clone().into());
        mcp_server(&mut input, call, ctx);
        if let Some(ms) = output.metadata.get(tower_agent_layers::hooks::DURATION_MS) {
            input.insert("duration_ms".into(), ms.clone());
        }
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        merge_post_tool_use(verdicts, output, |why| {
            ctx.warn(format!(
                "{event} hook: updatedToolOutput ignored for `{}`: {why}",
                call.name
            ));
        })
    }

    pub(super) async fn post_tool_use_failure(
        self: &Arc<Self>,
        call: &ToolCall,
        failure: &ToolFailure,
        ctx: &RunContext,
    ) -> PostToolUseFailure {
        let event = HookEvent::PostToolUseFailure;
        // The hooks may read the transcript: the failed result goes there first.
        if let Some(transcript) = ctx.transcript() {
            match &failure.output {
                Some(output) => transcript.record_tool_result(output),
                None => transcript
                    .record_tool_result(&ToolOutput::error(call.id.clone(), failure.error.clone())),
            }
        }
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        input.insert("error".into(), failure.error.clone().into());
        input.insert("is_interrupt".into(), false.into());
        let took = failure.output.as_ref();
        if let Some(ms) = took.and_then(|o| o.metadata.get(tower_agent_layers::hooks::DURATION_MS))
        {
            input.insert("duration_ms".into(), ms.clone());
        }
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        let mut contexts = Vec::new();
        for v in verdicts {
            if let Some(reason) = v.stop {
                return PostToolUseFailure::Abort(reason);
            }
            contexts.extend(v.block.or(v.failed));
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(PostToolUseFailure::Keep, PostToolUseFailure::AddContext)
    }

    pub(super) async fn permission_request(
        self: &Arc<Self>,
        call: &ToolCall,
        ctx: &RunContext,
    ) -> PermissionRequest {
        let event = HookEvent::PermissionRequest;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        // Claude Code's suggestions for a call no rule allows.
        let rules = &self.config.rules;
        if let Some(suggestions) = rules.suggestions(call, &self.hook_dir(ctx), &self.project_dir) {
            input.insert("permission_suggestions".into(), suggestions);
        }
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        merge_permission_request(verdicts)
    }

    pub(super) async fn permission_denied(
        self: &Arc<Self>,
        call: &ToolCall,
        reason: &str,
        ctx: &RunContext,
    ) -> PermissionDenied {
        let event = HookEvent::PermissionDenied;
        let mut input = self.base(event, ctx);
        input.insert("tool_name".into(), call.name.clone().into());
        input.insert("tool_input".into(), call.arguments.clone());
        input.insert("tool_use_id".into(), call.id.clone().into());
        input.insert("reason".into(), reason.into());
        let verdicts = self
            .run(event, Some(&call.name), input, Report::Run(ctx))
            .await;
        if verdicts.iter().any(|v| v.retry) {
            PermissionDenied::Retry
        } else {
            PermissionDenied::Stand
        }
    }

    pub(super) async fn post_tool_batch(
        self: &Arc<Self>,
        batch: &ToolBatch,
        ctx: &RunContext,
    ) -> PostToolBatch {
        let event = HookEvent::PostToolBatch;
        let mut input = self.base(event, ctx);
        let calls: Vec<Value> = batch
            .calls
            .iter()
            .zip(&batch.outputs)
            .map(|(call, output)| {
                // The result as the model gets it: its content blocks when the tool gave
                // those (an MCP tool, as Claude Code shows it), else its text.
                let blocks = output.metadata.get(super::super::TOOL_RESPONSE);
                let response = match blocks {
                    Some(Value::Array(blocks)) => Value::Array(blocks.clone()),
                    _ => output.content.clone().into(),
                };
                json!({
                    "tool_name": call.name,
                    "tool_input": call.arguments,
                    "tool_use_id": call.id,
                    "tool_response": response,
                })
            })
            .collect();
        input.insert("tool_calls".into(), calls.into());
        let verdicts = self.run(event, None, input, Report::Run(ctx)).await;
        let mut contexts = Vec::new();
        for v in verdicts {
            // `continue: false` first, then a block (exit 2 or `decision: "block"`).
            if let Some(reason) = v.stop.or(v.block).or(v.failed) {
                return PostToolBatch::Stop(reason);
            }
            contexts.extend(v.contexts);
        }
        joined(contexts, "\n\n").map_or(PostToolBatch::Continue, PostToolBatch::AddContext)
    }
}

/// An MCP tool call's server, `{name, source}`, as Claude Code's PreToolUse and PostToolUse
/// inputs have it (measured: `tests/reference`, vector `mcp_tools`).
fn mcp_server(input: &mut serde_json::Map<String, Value>, call: &ToolCall, ctx: &RunContext) {
    #[cfg(feature = "mcp")]
    if let Some(server) = tower_agent_mcp::client::McpServers::server_of(ctx, &call.name) {
        let server = json!({ "name": server.name, "source": server.source });
        input.insert("mcp_server".into(), server);
    }
    #[cfg(not(feature = "mcp"))]
    let _ = (input, call, ctx);
}

/// A tool's output as `tool_response`: the JSON it holds if it is a JSON object or array,
/// else the text.
pub(super) fn tool_response(content: &str) -> Value {
    let t = content.trim_start();
    if (t.starts_with('{') || t.starts_with('['))
        && let Ok(value) = serde_json::from_str::<Value>(content)
    {
        return value;
    }
    Value::String(content.to_owned())
}

/// PostToolUse verdicts over `output`, in configuration order, as one decision: `continue:
/// false` aborts; each replacement (`updatedToolOutput`, checked against the tool's response
/// shape, `warn`ed of when it does not fit; a Codex or Gemini CLI block's reason) starts from
/// the result the ones before left; a Claude Code block's reason and contexts go next to the
/// result, a handler's whose dialect puts its contexts into the result (Gemini CLI's) into it.
pub(super) fn merge_post_tool_use(
    verdicts: Vec<Verdict>,
    output: &ToolOutput,
    warn: impl Fn(String),
) -> PostToolUse {
    let mut decisions = Vec::new();
    // The result as the replacements so far left it.
    let mut result: Option<ToolOutput> = None;
    for v in verdicts {
        if let Some(reason) = v.stop {
            return PostToolUse::Abort(reason);
        }
        let mut replaced = None;
        if let Some(new) = v.updated_output {
            match updated_output(result.as_ref().unwrap_or(output), new) {
                Ok(new) => replaced = Some(new),
                Err(why) => warn(why),
            }
        }
        let current = |replaced: Option<ToolOutput>, result: &Option<ToolOutput>| {
            replaced
                .or_else(|| result.clone())
                .unwrap_or_else(|| output.clone())
        };
        if let Some((text, is_error)) = v.replace_output {
            replaced = Some(ToolOutput {
                content: text,
                is_error,
                ..current(replaced, &result)
            });
        }
        // A block after the fact: its reason goes next to the result.
        if let Some(reason) = v.block.or(v.failed) {
            decisions.push(PostToolUse::AddContext(reason));
        }
        match v.context_in_result {
            Some(put) if !v.contexts.is_empty() => {
                let mut new = current(replaced, &result);
                for context in &v.contexts {
                    put(&mut new.content, context);
                }
                replaced = Some(new);
            }
            _ => decisions.extend(v.contexts.into_iter().map(PostToolUse::AddContext)),
        }
        if let Some(new) = replaced {
            decisions.push(PostToolUse::Replace(new.clone()));
            result = Some(new);
        }
    }
    match decisions.len() {
        0 => PostToolUse::Keep,
        1 => decisions.pop().expect("one decision"),
        _ => PostToolUse::Many(decisions),
    }
}

/// PermissionRequest verdicts, in configuration order, as one decision: `continue: false`
/// denies and interrupts; a deny (messages joined) beats an allow (the last `updatedInput`
/// wins); a fail-closed failure denies.
pub(super) fn merge_permission_request(verdicts: Vec<Verdict>) -> PermissionRequest {
    let mut denies = Vec::new();
    let mut interrupt = false;
    let mut allow: Option<Option<Value>> = None;
    for v in verdicts {
        if let Some(reason) = v.stop {
            return PermissionRequest::Deny {
                message: reason,
                interrupt: true,
            };
        }
        if let Some(why) = v.failed {
            denies.push(why);
            continue;
        }
        match v.request {
            Some(PermissionRequest::Deny {
                message,
                interrupt: i,
            }) => {
                denies.push(message);
                interrupt |= i;
            }
            Some(PermissionRequest::Allow { updated_input }) => {
                allow = Some(updated_input.or(allow.flatten()));
            }
            Some(PermissionRequest::NoDecision) | None => {}
        }
    }
    if let Some(message) = joined(denies, "; ") {
        return PermissionRequest::Deny { message, interrupt };
    }
    match allow {
        Some(updated_input) => PermissionRequest::Allow { updated_input },
        None => PermissionRequest::NoDecision,
    }
}

/// PreToolUse verdicts of `call`, in configuration order, as one decision: `continue: false`
/// aborts; deny > defer > ask > allow (reasons of the winning kind joined); every
/// `updatedInput` applied in order; every context kept in order. A denial is worded as the
/// first denying handler's dialect words it: Claude Code's a [`PreToolUse::Deny`], another's
/// (its verdict's `refusal`) a [`PreToolUse::Refuse`].
pub(super) fn merge_pre_tool_use(verdicts: Vec<Verdict>, call: &ToolCall) -> PreToolUse {
    let mut contexts = Vec::new();
    let mut denies = Vec::new();
    let mut worded: Option<Option<Refusal>> = None;
    let mut asks = Vec::new();
    let mut rewrites = Vec::new();
    let mut allowed = false;
    let mut deferred = false;
    for v in verdicts {
        if let Some(reason) = v.stop {
            return PreToolUse::Abort(reason);
        }
        contexts.extend(v.contexts.into_iter().map(PreToolUse::AddContext));
        if let Some(reason) = v.block.or(v.failed) {
            denies.push(reason);
            worded.get_or_insert(v.refusal);
            continue;
        }
        match v.permission {
            Some((Permission::Deny, reason)) => {
                denies.push(reason);
                worded.get_or_insert(v.refusal);
            }
            Some((Permission::Ask, reason)) => asks.push(reason),
            Some((Permission::Defer, _)) => deferred = true,
            Some((Permission::Allow, _)) => allowed = true,
            None => {}
        }
        rewrites.extend(v.updated_input.map(PreToolUse::Rewrite));
    }
    let mut decisions = contexts;
    if let Some(reason) = joined(denies, "; ") {
        decisions.push(match worded.flatten() {
            Some(refusal) => PreToolUse::Refuse(refusal(call, &reason)),
            None => PreToolUse::Deny(reason),
        });
    } else {
        decisions.extend(rewrites);
        if deferred {
            // Ignored by the tool layer in a step of several calls: the asks still count.
            decisions.push(PreToolUse::Defer);
        }
        if let Some(reason) = joined(asks, "; ") {
            decisions.push(PreToolUse::Ask(reason));
        } else if allowed {
            decisions.push(PreToolUse::Allow);
        }
    }
    match decisions.len() {
        0 => PreToolUse::Continue,
        1 => decisions.pop().expect("one decision"),
        _ => PreToolUse::Many(decisions),
    }
}

/// The tool events [`register`](super::register) adds a callback for, in registration order,
/// each with how it is added.
pub(super) const EVENTS: &[(HookEvent, Add)] = &[
    (HookEvent::PreToolUse, add_pre_tool_use),
    (HookEvent::PostToolUse, add_post_tool_use),
    (HookEvent::PostToolUseFailure, add_post_tool_use_failure),
    (HookEvent::PermissionRequest, add_permission_request),
    (HookEvent::PermissionDenied, add_permission_denied),
    (HookEvent::PostToolBatch, add_post_tool_batch),
];

fn add_pre_tool_use(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.before_tool_use(union(entries), move |call, ctx| {
        let i = i.current();
        async move { i.pre_tool_use(&call, &ctx).await }
    })
}

fn add_post_tool_use(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.after_tool_use(union(entries), move |call, output, ctx| {
        let i = i.current();
        async move { i.post_tool_use(&call, &output, &ctx).await }
    })
}

fn add_post_tool_use_failure(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_tool_failure(union(entries), move |call, failure, ctx| {
        let i = i.current();
        async move { i.post_tool_use_failure(&call, &failure, &ctx).await }
    })
}

fn add_permission_request(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_request(union(entries), move |call, ctx| {
        let i = i.current();
        async move { i.permission_request(&call, &ctx).await }
    })
}

fn add_permission_denied(inner: &Arc<Live>, entries: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_permission_denied(union(entries), move |call, reason, ctx| {
        let i = i.current();
        async move { i.permission_denied(&call, &reason, &ctx).await }
    })
}

fn add_post_tool_batch(inner: &Arc<Live>, _: &[Entry], hooks: Hooks) -> Hooks<Added> {
    let i = Arc::clone(inner);
    hooks.on_post_tool_batch(move |batch, ctx| {
        let i = i.current();
        async move { i.post_tool_batch(&batch, &ctx).await }
    })
}

/// The output a PostToolUse `updatedToolOutput` makes of `output`.
///
/// A tool that answers a structured response (the [`TOOL_RESPONSE`] metadata, as Claude Code's
/// tools do) takes only an update of its shape — an object of the response's fields, each of
/// the same JSON type — as Claude Code checks an update against the tool's output schema and
/// keeps the result otherwise (measured against 2.1.328: `tests/reference`). The update
/// becomes the response, and the text the model sees is the update's field that held the
/// whole text before (Bash's `stdout`), else the update's JSON text. Any other tool takes any
/// update: a string is the new text, anything else its JSON text.
///
/// [`TOOL_RESPONSE`]: super::super::TOOL_RESPONSE
fn updated_output(output: &ToolOutput, new: Value) -> Result<ToolOutput, String> {
    let key = super::super::TOOL_RESPONSE;
    let Some(Value::Object(old)) = output.metadata.get(key) else {
        let content = match new {
            Value::String(text) => text,
            other => other.to_string(),
        };
        return Ok(ToolOutput {
            content,
            ..output.clone()
        });
    };
    let Value::Object(fields) = &new else {
        return Err("not an object of the tool's response fields".into());
    };
    for (name, value) in fields {
        match old.get(name) {
            Some(was) if same_kind(was, value) => {}
            Some(_) => return Err(format!("`{name}` is not of the type the tool gives it")),
            None => return Err(format!("the tool's response has no `{name}`")),
        }
    }
    // The field that was the whole text, in the update.
    let shown = old
        .iter()
        .find(|(_, v)| v.as_str() == Some(output.content.as_str()))
        .and_then(|(name, _)| fields.get(name)?.as_str());
    let content = shown.map_or_else(|| new.to_string(), str::to_owned);
    let mut replaced = ToolOutput {
        content,
        ..output.clone()
    };
    replaced.metadata.insert(key.to_owned(), new);
    Ok(replaced)
}

/// Whether two JSON values are of one type (numbers of any kind alike).
fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}
