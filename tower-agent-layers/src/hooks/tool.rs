//! The tool-level hooks as a layer: PreToolUse, PostToolUse, PostToolUseFailure.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use tower::{Layer, Service, ServiceExt};

use super::{
    ApprovalDecision, ApprovalRequest, Deferred, HookSet, HookSetInner, NOTIFY_PERMISSION_PROMPT,
    Notification, Permission, PermissionDenied, PermissionRequest, PostToolUse, PostToolUseFailure,
    PreToolUse, ToolFailure, future::HookToolFuture,
};
use tower_agent_core::{
    context::RunContext,
    error::{self, Abort, BoxError},
    message::{ToolCall, ToolOutput},
    tool::{Check, Checked, ObservableInput, ToolChecks, ToolRequest},
};

/// The tool-level hooks of a [`HookSet`] as a layer. See the
/// [module docs](crate::hooks).
#[derive(Clone, Debug)]
#[must_use]
pub struct HookToolLayer {
    set: HookSet,
}

impl HookToolLayer {
    /// The tool hooks of `set`.
    pub fn new(set: HookSet) -> Self {
        HookToolLayer { set }
    }
}

impl<S> Layer<S> for HookToolLayer {
    type Service = HookTool<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HookTool {
            inner,
            set: Arc::clone(&self.set.inner),
        }
    }
}

/// The service of [`HookToolLayer`].
///
/// # Readiness
///
/// `poll_ready` is the inner service's. With no matching PreToolUse hook the call goes to the
/// service `poll_ready` readied, at once. With one, that service is dropped (giving back what
/// it reserved) and a fresh clone is readied once the hooks (and the approval) let the call go
/// on, so a hook may call a tool that shares the inner service's capacity, and a call waiting
/// for an approval holds no slot.
#[derive(Clone)]
pub struct HookTool<S> {
    inner: S,
    set: Arc<HookSetInner>,
}

impl<S> HookTool<S> {
    /// The tool hooks of `set` around `inner`.
    pub fn new(inner: S, set: &HookSet) -> Self {
        HookTool {
            inner,
            set: Arc::clone(&set.inner),
        }
    }

    inner_service_accessors!();
}

impl<S: fmt::Debug> fmt::Debug for HookTool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookTool")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Adds `contexts` to an output ([`ToolOutput::add_context`]): the loop puts them after the
/// step's results.
fn add_contexts(output: &mut ToolOutput, contexts: &[String]) {
    for c in contexts {
        output.add_context(c.as_str());
    }
}

impl<S> Service<ToolRequest> for HookTool<S>
where
    S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = HookToolFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        let set = &self.set;
        let call = &req.call;
        let wanted = !set.permissions.is_empty()
            || set.before_tool_use.iter().any(|(m, _)| m.matches(call))
            || set.after_tool_use.iter().any(|(m, _)| m.matches(call))
            || set.on_tool_failure.iter().any(|(m, _)| m.matches(call));
        if !wanted {
            return HookToolFuture::call(self.inner.call(req));
        }
        // The tool checks its input first, as Claude Code does: a refused call fires no hook.
        let Some(checks) = req.extensions.get::<ToolChecks>().cloned() else {
            return self.hooked(req);
        };
        match checks.check(req) {
            Check::Accept(req) => self.hooked(req),
            Check::Refuse(output) => {
                self.release();
                HookToolFuture::hooks(std::future::ready(Ok(output)))
            }
            Check::Later(answer) => {
                let mut this = HookTool {
                    inner: self.release(),
                    set: Arc::clone(&self.set),
                };
                HookToolFuture::hooks(async move {
                    match answer.await {
                        // Checked now: the call does not check it again.
                        Ok(req) => this.ready().await?.call(req).await,
                        Err(output) => Ok(output),
                    }
                })
            }
        }
    }
}

impl<S> HookTool<S>
where
    S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    /// The hooks around a call some hook or permission rule wants, its input checked.
    fn hooked(&mut self, req: ToolRequest) -> HookToolFuture<S> {
        use futures_util::TryFutureExt;
        // Synchronous PreToolUse hooks (and none) decide here, so the service `poll_ready`
        // readied is called at once when they let the call go on; only its result waits for
        // the after-hooks.
        let set = Arc::clone(&self.set);
        let (original, mut call, ctx) = Original::of(req);
        let mut pre = PreState::default();
        for (i, (matcher, f)) in set.before_tool_use.iter().enumerate() {
            if !matcher.matches(&call) {
                continue;
            }
            let mut decision = f(Arc::clone(&call), ctx.clone());
            let Some(now) = decision.take_ready() else {
                // An asynchronous hook: the rest runs after it.
                let inner = self.release();
                return HookToolFuture::hooks(run(
                    set,
                    inner,
                    (original, call),
                    ctx,
                    pre,
                    Some((i, decision)),
                ));
            };
            match pre.apply(now, &mut call) {
                None => {}
                Some(exit) => {
                    self.release();
                    return HookToolFuture::hooks(std::future::ready(pre.exit(exit, &call)));
                }
            }
        }
        match pre.gate(&set, &call, &ctx) {
            Gate::Refuse(text) => {
                self.release();
                return HookToolFuture::hooks(std::future::ready(Ok(pre.refusal(text, &call))));
            }
            Gate::Run if !pre.deferred => {}
            gate => {
                // The approval (or the deferral) is settled before the call.
                let inner = self.release();
                return HookToolFuture::hooks(settle(set, inner, (original, call), ctx, pre, gate));
            }
        }
        let PreState { contexts, .. } = pre;
        let wants_after = set.after_tool_use.iter().any(|(m, _)| m.matches(&call))
            || set.on_tool_failure.iter().any(|(m, _)| m.matches(&call));
        if !wants_after && contexts.is_empty() {
            return HookToolFuture::call(self.inner.call(original.into_request(call, ctx)));
        }
        let started = set.times_tool_calls.then(Instant::now);
        let fut = self
            .inner
            .call(original.request(&call, &ctx))
            .map_err(Into::into);
        HookToolFuture::hooks(async move {
            let result = timed(fut.await, started);
            after(&set, call, ctx, contexts, result).await
        })
    }
}

/// A call as it came into the layer: the call the tool runs unless the hooks (or an approval)
/// rewrite it, the call the hooks were shown first, and the request's extensions.
struct Original {
    /// The call as the tool takes it (its check's normalised input).
    tool: Arc<ToolCall>,
    /// The call the hooks were shown: with the [`ObservableInput`] when the check gave one.
    seen: Arc<ToolCall>,
    extensions: http::Extensions,
    /// How many calls its step makes ([`ToolRequest::step_calls`]).
    step_calls: Option<usize>,
}

impl Original {
    /// The parts of `req`: the original, the call to show the hooks, and the context.
    fn of(req: ToolRequest) -> (Original, Arc<ToolCall>, RunContext) {
        let ToolRequest {
            call,
            ctx,
            mut extensions,
            step_calls,
        } = req;
        let tool = Arc::new(call);
        let seen = match extensions.remove::<ObservableInput>() {
            Some(ObservableInput(arguments)) => Arc::new(ToolCall {
                id: tool.id.clone(),
                name: tool.name.clone(),
                arguments,
            }),
            None => Arc::clone(&tool),
        };
        let original = Original {
            tool,
            seen: Arc::clone(&seen),
            extensions,
            step_calls,
        };
        (original, seen, ctx)
    }

    /// The call as it came into the layer, for a call that waits for a decision.
    fn call(&self) -> &ToolCall {
        &self.tool
    }

    /// The request for the tool once the hooks are done with `call`: the tool's own call if
    /// they left the one they saw as it was, else their rewrite (which the tool checks again:
    /// it is no longer [`Checked`]).
    fn into_request(self, call: Arc<ToolCall>, ctx: RunContext) -> ToolRequest {
        let Original {
            tool,
            seen,
            mut extensions,
            step_calls,
        } = self;
        let call = if Arc::ptr_eq(&call, &seen) {
            drop((call, seen));
            tool
        } else {
            drop((seen, tool));
            extensions.remove::<Checked>();
            call
        };
        let call = Arc::try_unwrap(call).unwrap_or_else(|c| (*c).clone());
        ToolRequest {
            call,
            ctx,
            extensions,
            step_calls,
        }
    }

    /// [`into_request`](Self::into_request), for a call whose after-hooks still need `call`.
    fn request(&self, call: &Arc<ToolCall>, ctx: &RunContext) -> ToolRequest {
        let mut extensions = self.extensions.clone();
        let call = if Arc::ptr_eq(call, &self.seen) {
            (*self.tool).clone()
        } else {
            extensions.remove::<Checked>();
            (**call).clone()
        };
        ToolRequest {
            call,
            ctx: ctx.clone(),
            extensions,
            step_calls: self.step_calls,
        }
    }
}

impl<S: Clone> HookTool<S> {
    /// Gives back what the service `poll_ready` readied reserved (it is dropped, replaced by a
    /// clone) and returns a clone to ready later, for a call that first awaits something else.
    ///
    /// NOTE: a PreToolUse hook or an approval awaited before the call must not wait with a
    /// readied service: a hook sharing its capacity would wait for it forever, and an approval
    /// may take minutes.
    fn release(&mut self) -> S {
        let inner = self.inner.clone();
        self.inner = inner.clone();
        inner
    }
}

/// The rest of a call whose PreToolUse hooks or approval must be awaited: the hook `pending`
/// (at index `i` of the PreToolUse hooks) and those after it, the approval, then the call on
/// `inner` (readied then), then the after-hooks.
async fn run<S>(
    set: Arc<HookSetInner>,
    inner: S,
    (original, mut call): (Original, Arc<ToolCall>),
    ctx: tower_agent_core::context::RunContext,
    mut pre: PreState,
    pending: Option<(usize, super::HookFuture<PreToolUse>)>,
) -> Result<ToolOutput, BoxError>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
{
    // PreToolUse: deny > ask > allow; rewrites chain.
    let rest = match pending {
        Some((i, decision)) => {
            if let Some(exit) = pre.apply(decision.await, &mut call) {
                return pre.exit(exit, &call);
            }
            i + 1
        }
        None => set.before_tool_use.len(),
    };
    for (matcher, f) in &set.before_tool_use[rest..] {
        if !matcher.matches(&call) {
            continue;
        }
        let decision = f(Arc::clone(&call), ctx.clone()).await;
        if let Some(exit) = pre.apply(decision, &mut call) {
            return pre.exit(exit, &call);
        }
    }
    let gate = pre.gate(&set, &call, &ctx);
    settle(set, inner, (original, call), ctx, pre, gate).await
}

/// The rest of a call once its PreToolUse hooks have run and `gate` says what the permission
/// checks make of it: the refusal, the deferral or the approval, then the call on `inner`
/// (readied then), then the after-hooks.
async fn settle<S>(
    set: Arc<HookSetInner>,
    inner: S,
    (original, mut call): (Original, Arc<ToolCall>),
    ctx: tower_agent_core::context::RunContext,
    pre: PreState,
    mut gate: Gate,
) -> Result<ToolOutput, BoxError>
where
    S: Service<ToolRequest, Response = ToolOutput>,
    S::Error: Into<BoxError>,
{
    if let Gate::Refuse(text) = gate {
        return Ok(pre.refusal(text, &call));
    }
    let PreState {
        mut contexts,
        mut deferred,
        ..
    } = pre;
    // A person approved this very call (an answer to an interrupted run): its asks and its
    // deferral are settled.
    if (deferred || matches!(gate, Gate::Ask { .. }))
        && original
            .extensions
            .get::<tower_agent_core::agent::Approved>()
            .is_some()
    {
        (deferred, gate) = (false, Gate::Run);
    }
    if deferred && set.defer_approvals {
        let reason = "a PreToolUse hook deferred the call".to_owned();
        return Err(waiting(original.call(), reason));
    }
    if deferred {
        // Not known (a call started before the answer was whole): as the only one.
        let calls = original.step_calls.unwrap_or(1);
        if calls <= 1 {
            return Err(Deferred {
                call: (*call).clone(),
            }
            .into());
        }
        ctx.warn(format!(
            "a PreToolUse hook deferred `{}`, but its step makes {calls} tool calls: the \
             deferral is ignored and the call goes through the normal permission flow",
            call.name
        ));
    }
    if let Gate::Ask { reason, rule } = gate {
        match approve(&set, &mut call, (reason, rule), &ctx, &mut contexts).await {
            Approved::Yes => {}
            Approved::No(why) => {
                let mut output = ToolOutput::error(call.id.clone(), why);
                add_contexts(&mut output, &contexts);
                return Ok(output);
            }
            Approved::Interrupt(why) => return Err(Abort::new(why).into()),
            Approved::Pending(reason) => return Err(waiting(original.call(), reason)),
        }
    }

    let wants_after = set.after_tool_use.iter().any(|(m, _)| m.matches(&call))
        || set.on_tool_failure.iter().any(|(m, _)| m.matches(&call));
    if !wants_after && contexts.is_empty() {
        return inner
            .oneshot(original.into_request(call, ctx))
            .await
            .map_err(Into::into);
    }
    let started = set.times_tool_calls.then(Instant::now);
    let result = inner
        .oneshot(original.request(&call, &ctx))
        .await
        .map_err(Into::into);
    after(&set, call, ctx, contexts, timed(result, started)).await
}

/// The [`ToolOutput::metadata`] key under which the hook layer records how long a call took,
/// in whole milliseconds, for its PostToolUse and PostToolUseFailure hooks (the command hooks'
/// `duration_ms`). Set only on the calls such a hook matches, and only in a set of hooks that
/// reads it (command hooks of those events); a tool's own value is kept.
pub const DURATION_MS: &str = "tower_agent.duration_ms";

/// `result` with the time since `started` recorded ([`DURATION_MS`]), when the set times its
/// calls ([`Hooks::time_tool_calls`](super::Hooks::time_tool_calls)).
fn timed(
    mut result: Result<ToolOutput, BoxError>,
    started: Option<Instant>,
) -> Result<ToolOutput, BoxError> {
    if let (Some(started), Ok(output)) = (started, &mut result)
        && !output.metadata.contains_key(DURATION_MS)
    {
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        output.metadata.insert(DURATION_MS.into(), ms.into());
    }
    result
}

/// What the approval path decided.
enum Approved {
    Yes,
    /// Denied: why (for the model).
    No(String),
    /// Denied, and the run ends.
    Interrupt(String),
    /// Waits for a person's decision, saved with the thread (the deferring policy): why.
    Pending(String),
}

/// The error of a call that waits for a decision: the call as the model made it.
fn waiting(original: &ToolCall, reason: String) -> BoxError {
    tower_agent_core::agent::PendingApproval::new(original.clone(), reason).into()
}

/// The approval path of a call some hook or permission rule asked about: `(reason, rule)`,
/// the reason the [`Approval`](super::Approval) service is given and, when a rule asks, the
/// text of its refusal. A hook's ask with nobody to ask (no service, no deferring policy) is
/// refused at once with its reason alone, as Claude Code refuses it headless (measured
/// against 2.1.328: `tests/reference`, `permission_ask_headless`). Otherwise the
/// PermissionRequest hooks (a `Deny` gives the model its message alone), then (no decision)
/// a `permission_prompt` notification and the service; without one, the rule's text. A
/// service that fails denies on its own: only then do the PermissionDenied hooks run, whose
/// `Retry` adds a note to `contexts`.
async fn approve(
    set: &HookSetInner,
    call: &mut Arc<ToolCall>,
    (reason, rule): (String, Option<String>),
    ctx: &RunContext,
    contexts: &mut Vec<String>,
) -> Approved {
    let Some(approval) = &set.approval else {
        if !set.defer_approvals && rule.is_none() {
            return Approved::No(reason);
        }
        return match ask_hooks(set, call, ctx).await {
            Some(decided) => decided,
            None if set.defer_approvals => {
                notify_prompt(set, call, &reason, ctx);
                Approved::Pending(reason)
            }
            None => Approved::No(rule.unwrap_or(reason)),
        };
    };
    if let Some(decided) = ask_hooks(set, call, ctx).await {
        return decided;
    }
    notify_prompt(set, call, &reason, ctx);
    let request = ApprovalRequest {
        call: (**call).clone(),
        reason,
        ctx: ctx.clone(),
    };
    let denied = match approval.clone().oneshot(request).await {
        Ok(ApprovalDecision::Allow) => return Approved::Yes,
        // The user's answer: not a denial of the path's own.
        Ok(ApprovalDecision::Deny(why)) => return Approved::No(format!("denied: {why}")),
        Err(e) => format!("denied: approval failed: {}", error::chain(&*e)),
    };
    let why: Arc<str> = denied.as_str().into();
    for (matcher, f) in &set.on_permission_denied {
        if !matcher.matches(call) {
            continue;
        }
        if f(Arc::clone(call), Arc::clone(&why), ctx.clone()).await == PermissionDenied::Retry {
            contexts.push(format!(
                "The call to `{}` was denied by the permission check, not by the user; you may \
                 retry it.",
                call.name
            ));
            break;
        }
    }
    Approved::No(denied)
}

/// The PermissionRequest hooks' decision, if one decides: the first `Deny` (its message
/// alone for the model), else an `Allow` (its `updated_input` replaces the arguments).
async fn ask_hooks(
    set: &HookSetInner,
    call: &mut Arc<ToolCall>,
    ctx: &RunContext,
) -> Option<Approved> {
    let mut allowed = false;
    for (matcher, f) in &set.on_permission_request {
        if !matcher.matches(call) {
            continue;
        }
        match f(Arc::clone(call), ctx.clone()).await {
            PermissionRequest::NoDecision => {}
            PermissionRequest::Allow { updated_input } => {
                allowed = true;
                if let Some(arguments) = updated_input {
                    *call = Arc::new(ToolCall {
                        arguments,
                        ..(**call).clone()
                    });
                }
            }
            PermissionRequest::Deny { message, interrupt } => {
                return Some(if interrupt {
                    Approved::Interrupt(message)
                } else {
                    Approved::No(message)
                });
            }
        }
    }
    allowed.then_some(Approved::Yes)
}

/// The `permission_prompt` notification of a call about to wait for a person.
fn notify_prompt(set: &HookSetInner, call: &ToolCall, reason: &str, ctx: &RunContext) {
    set.notify(
        &Notification::new(
            NOTIFY_PERMISSION_PROMPT,
            format!("Permission needed to use {}: {reason}", call.name),
            Some("Permission needed".to_owned()),
        ),
        ctx,
    );
}

/// PostToolUse or PostToolUseFailure over the call's `result`; `contexts` so far are added.
async fn after(
    set: &HookSetInner,
    call: Arc<ToolCall>,
    ctx: tower_agent_core::context::RunContext,
    mut contexts: Vec<String>,
    result: Result<ToolOutput, BoxError>,
) -> Result<ToolOutput, BoxError> {
    match result {
        Ok(output) if !output.is_error => {
            // Every hook sees the output the hooks before it left, shared: no copy unless a
            // hook keeps its `Arc` past its decision.
            let mut seen = Arc::new(output);
            for (matcher, f) in &set.after_tool_use {
                if !matcher.matches(&call) {
                    continue;
                }
                let decision = f(Arc::clone(&call), Arc::clone(&seen), ctx.clone()).await;
                if let Some(reason) = apply_post(decision, &mut seen, &mut contexts) {
                    return Err(Abort::new(reason).into());
                }
            }
            let mut output = Arc::try_unwrap(seen).unwrap_or_else(|kept| (*kept).clone());
            add_contexts(&mut output, &contexts);
            Ok(output)
        }
        Ok(mut output) => {
            let failure = Arc::new(ToolFailure {
                error: output.content.clone(),
                output: Some(output.clone()),
            });
            failure_hooks(set, &call, failure, &ctx, &mut contexts).await?;
            add_contexts(&mut output, &contexts);
            Ok(output)
        }
        Err(err) if Abort::find(&*err).is_some() => Err(err),
        Err(err) => {
            // The error output the loop would make of it.
            let mut output = ToolOutput::failed(call.id.clone(), &call.name, &*err);
            let failure = Arc::new(ToolFailure {
                error: output.content.clone(),
                output: None,
            });
            failure_hooks(set, &call, failure, &ctx, &mut contexts).await?;
            if contexts.is_empty() {
                return Err(err);
            }
            // Context must travel with the error: it goes as that output.
            add_contexts(&mut output, &contexts);
            Ok(output)
        }
    }
}

async fn failure_hooks(
    set: &HookSetInner,
    call: &Arc<ToolCall>,
    failure: Arc<ToolFailure>,
    ctx: &tower_agent_core::context::RunContext,
    contexts: &mut Vec<String>,
) -> Result<(), BoxError> {
    for (matcher, f) in &set.on_tool_failure {
        if !matcher.matches(call) {
            continue;
        }
        match f(Arc::clone(call), Arc::clone(&failure), ctx.clone()).await {
            PostToolUseFailure::Keep => {}
            PostToolUseFailure::AddContext(text) => contexts.push(text),
            PostToolUseFailure::Abort(reason) => return Err(Abort::new(reason).into()),
        }
    }
    Ok(())
}

/// What the PreToolUse hooks decided so far.
#[derive(Default)]
struct PreState {
    asks: Vec<String>,
    contexts: Vec<String>,
    /// A hook deferred the call (deny still wins).
    deferred: bool,
    /// A hook allowed the call (it then needs no allow rule).
    allowed: bool,
}

/// What becomes of a call once its PreToolUse hooks have run and the permission checks
/// ([`Hooks::permission_rules`](super::Hooks::permission_rules)) have seen it.
enum Gate {
    /// It goes on (to the deferral, if a hook deferred it).
    Run,
    /// A deny rule refuses it, with this text.
    Refuse(String),
    /// It goes the approval path: the reason, and the refusal text of the rule that asks
    /// (`None`: only hooks asked).
    Ask {
        reason: String,
        rule: Option<String>,
    },
}

/// What the model is told of a call a PreToolUse hook denied, in Claude Code's words
/// (`PreToolUse:Bash hook error: <reason>`, measured against 2.1.328: `tests/reference`).
pub(crate) fn denial(tool: &str, reason: &str) -> String {
    format!("PreToolUse:{tool} hook error: {reason}")
}

/// How the PreToolUse chain ends early.
enum PreExit {
    Deny(String),
    /// A denial the hook worded itself ([`PreToolUse::Refuse`]).
    Refuse(ToolOutput),
    Abort(String),
}

impl PreState {
    /// What the permission checks make of the call the hooks let through (Claude Code's
    /// order: deny rules, then ask rules and hooks' asks, then calls no rule allows unless a
    /// hook allowed them).
    fn gate(&self, set: &HookSetInner, call: &ToolCall, ctx: &RunContext) -> Gate {
        let asked = (!self.asks.is_empty()).then(|| self.asks.join("; "));
        let rule = match set.permission(call, ctx) {
            Permission::Deny(text) => return Gate::Refuse(text),
            Permission::Ask(text) => Some(text),
            Permission::NotAllowed(text) if !self.allowed || asked.is_some() => Some(text),
            Permission::NotAllowed(_) | Permission::Allow | Permission::NoRule => None,
        };
        match (asked, rule) {
            (None, None) => Gate::Run,
            (Some(reason), rule) => Gate::Ask { reason, rule },
            (None, Some(text)) => Gate::Ask {
                reason: text.clone(),
                rule: Some(text),
            },
        }
    }

    /// A call a deny rule refused: its text, with the contexts so far.
    fn refusal(&self, text: String, call: &ToolCall) -> ToolOutput {
        let mut output = ToolOutput::error(call.id.clone(), text);
        add_contexts(&mut output, &self.contexts);
        output
    }

    /// What a chain that ended early answers: a denial (with the contexts so far) or an abort.
    fn exit(&self, exit: PreExit, call: &ToolCall) -> Result<ToolOutput, BoxError> {
        match exit {
            PreExit::Deny(reason) => {
                let mut output = ToolOutput::error(call.id.clone(), denial(&call.name, &reason));
                add_contexts(&mut output, &self.contexts);
                Ok(output)
            }
            PreExit::Refuse(output) => {
                let mut output = ToolOutput {
                    call_id: call.id.clone(),
                    ..output
                };
                add_contexts(&mut output, &self.contexts);
                Ok(output)
            }
            PreExit::Abort(reason) => Err(Abort::new(reason).into()),
        }
    }

    /// Applies one decision (rewrites go to `call`); `Some` ends the chain.
    fn apply(&mut self, decision: PreToolUse, call: &mut Arc<ToolCall>) -> Option<PreExit> {
        match decision {
            PreToolUse::Continue => None,
            PreToolUse::Allow => {
                self.allowed = true;
                None
            }
            PreToolUse::Deny(reason) => Some(PreExit::Deny(reason)),
            PreToolUse::Refuse(output) => Some(PreExit::Refuse(output)),
            PreToolUse::Abort(reason) => Some(PreExit::Abort(reason)),
            PreToolUse::Ask(reason) => {
                self.asks.push(reason);
                None
            }
            PreToolUse::Defer => {
                self.deferred = true;
                None
            }
            PreToolUse::AddContext(text) => {
                self.contexts.push(text);
                None
            }
            PreToolUse::Rewrite(arguments) => {
                *call = Arc::new(ToolCall {
                    arguments,
                    ..(**call).clone()
                });
                None
            }
            PreToolUse::Many(decisions) => decisions
                .into_iter()
                .find_map(|decision| self.apply(decision, call)),
        }
    }
}

/// Applies one PostToolUse decision; `Some(reason)` aborts the run.
fn apply_post(
    decision: PostToolUse,
    output: &mut Arc<ToolOutput>,
    contexts: &mut Vec<String>,
) -> Option<String> {
    match decision {
        PostToolUse::Keep => None,
        PostToolUse::Replace(new) => {
            let call_id = output.call_id.clone();
            *output = Arc::new(ToolOutput { call_id, ..new });
            None
        }
        PostToolUse::AddContext(text) => {
            contexts.push(text);
            None
        }
        PostToolUse::Abort(reason) => Some(reason),
        PostToolUse::Many(decisions) => decisions
            .into_iter()
            .find_map(|decision| apply_post(decision, output, contexts)),
    }
}
