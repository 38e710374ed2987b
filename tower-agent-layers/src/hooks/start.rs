//! [`HookStartLayer`]: the CwdChanged, SessionStart and UserPromptSubmit hooks of a
//! [`HookSet`] as a layer of the agent's start stack, and the run's Notification observer.

use std::{
    fmt,
    path::PathBuf,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt};

use super::{
    CwdChanged, CwdChangedInput, HookSet, HookSetInner, NOTIFY_WARNING, Notification,
    SessionStartInput, future::HookStartFuture, resume,
};
use tower_agent_core::{
    agent::start::RunStart,
    context::{RunContext, data::Persisted},
    error::BoxError,
};

/// The SessionStart and UserPromptSubmit hooks of a [`HookSet`] as a layer of the start stack
/// ([`AgentBuilder::start_layer`](tower_agent_core::agent::AgentBuilder::start_layer);
/// [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks) installs it outermost). See
/// [`agent::start`](tower_agent_core::agent::start).
///
/// CwdChanged hooks run first, when the run's directory is not the one the thread's previous
/// run had (the layer keeps it in the thread's data, key `tower_agent.cwd`); then
/// SessionStart hooks run (matched on the start's source), then the setup stages' work at the
/// session's start ([`Setup::at_session_start`](tower_agent_core::agent::Setup::at_session_start), with
/// the hooks it fires — the `tower_agent::builtins::memory::Memory` stage's
/// InstructionsLoaded), then — for a start with a prompt —
/// UserPromptSubmit hooks, with the merge rules of the [hooks docs](crate::hooks): a
/// block refuses the run ([`RunStart::block`]; the inner service is not called); a rewrite
/// replaces the prompt; contexts go to the start's
/// [`system_context`](RunStart::system_context) (SessionStart) and
/// [`prompt_context`](RunStart::prompt_context) (UserPromptSubmit). The layer also makes the
/// set's Notification hooks observe the run's warnings
/// ([`RunContext::on_warning`](tower_agent_core::context::RunContext::on_warning)).
///
/// Readiness: `poll_ready` passes the inner service's through. With hooks to await, the readied
/// inner service is dropped and the call goes to a fresh clone readied after the hooks.
#[derive(Clone)]
pub struct HookStartLayer {
    set: HookSet,
}

impl HookStartLayer {
    /// The layer of `set`'s start hooks.
    pub fn new(set: HookSet) -> Self {
        HookStartLayer { set }
    }
}

impl fmt::Debug for HookStartLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStartLayer")
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Layer<S> for HookStartLayer {
    type Service = HookStart<S>;

    fn layer(&self, inner: S) -> HookStart<S> {
        HookStart {
            inner,
            set: self.set.clone(),
        }
    }
}

/// The service of [`HookStartLayer`].
#[derive(Clone)]
pub struct HookStart<S> {
    inner: S,
    set: HookSet,
}

impl<S: fmt::Debug> fmt::Debug for HookStart<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookStart")
            .field("inner", &self.inner)
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Service<RunStart> for HookStart<S>
where
    S: Service<RunStart, Response = RunStart> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = RunStart;
    type Error = BoxError;
    type Future = HookStartFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, start: RunStart) -> Self::Future {
        observe_warnings(&self.set.inner, &start.ctx);
        let hooks = &self.set.inner;
        let prompted = start.prompt.is_some();
        if hooks.on_session_start_for.is_empty()
            && hooks.on_cwd_changed.is_empty()
            && hooks.on_file_changed.is_empty()
            && (hooks.on_setup.is_empty() || start.setup.is_none())
            && (hooks.on_directory_added.is_empty() || start.ctx.directories().is_empty())
            && ((hooks.on_user_prompt.is_empty() && hooks.on_prompt_expansion.is_empty())
                || !prompted)
        {
            return HookStartFuture::call(self.inner.call(start));
        }
        let inner = self.inner.clone();
        drop(std::mem::replace(&mut self.inner, inner.clone()));
        let set = Arc::clone(&self.set.inner);
        HookStartFuture::hooks(async move {
            let start = match prompt_hooks(&set, start).await {
                Ok(start) => start,
                Err(blocked) => return Ok(blocked),
            };
            let start = inner.oneshot(start).await.map_err(Into::into)?;
            Ok(expansion_hooks(&set, start).await)
        })
    }
}

/// Setup, CwdChanged, SessionStart, the setup stages' work at the session's start
/// ([`Setup::at_session_start`](tower_agent_core::agent::Setup::at_session_start): InstructionsLoaded),
/// DirectoryAdded, then UserPromptSubmit: the start they shaped, or `Err` with it refused. The watched files' status is taken once CwdChanged hooks
/// answered.
async fn prompt_hooks(set: &HookSetInner, mut start: RunStart) -> Result<RunStart, RunStart> {
    if let Some(trigger) = start.setup {
        let contexts = set.setup(trigger, &start.ctx).await;
        start.system_context.extend(contexts);
    }
    let watch = if set.on_cwd_changed.is_empty() {
        Vec::new()
    } else {
        cwd_changed(set, &start.ctx).await
    };
    set.watch(&start.ctx, watch);
    let mut input = SessionStartInput::new(start.source, start.model.clone());
    if let Some(history) = start.history.take().filter(|_| set.starts_resumed()) {
        input.resumed = resume::resumed(&start.ctx, &history);
    }
    match set.session_start(input, &start.ctx).await {
        // After the prompt, before UserPromptSubmit's (as Claude Code places them).
        Ok(contexts) => start.prompt_context.extend(contexts),
        Err(reason) => return Err(start.block(reason)),
    }
    // The setup stages' work at the session's start (the memory files: InstructionsLoaded),
    // and the hooks it fired, before UserPromptSubmit, as in Claude Code.
    start.session_start_work().await;
    set.directories_added(&start.ctx).await;
    let Some(prompt) = start.prompt.take() else {
        return Ok(start);
    };
    match set.user_prompt(prompt, &start.ctx).await {
        Ok((prompt, contexts)) => {
            start.prompt = Some(prompt);
            start.prompt_context.extend(contexts);
            Ok(start)
        }
        Err(reason) => Err(start.block(reason)),
    }
}

/// The working directory of a thread's last run that a start hook layer with CwdChanged hooks
/// saw.
#[derive(serde::Serialize, serde::Deserialize)]
struct LastCwd(PathBuf);

impl Persisted for LastCwd {
    const KEY: &'static str = "tower_agent.cwd";
}

/// UserPromptExpansion, on a start an inner layer expanded: the start, refused if a hook
/// blocked, with the hooks' contexts after the prompt and their rewrites.
async fn expansion_hooks(set: &HookSetInner, mut start: RunStart) -> RunStart {
    let (Some(expansion), Some(prompt), None) = (&start.expansion, &start.prompt, &start.blocked)
    else {
        return start;
    };
    if set.on_prompt_expansion.is_empty() {
        return start;
    }
    let expansion = Arc::new(expansion.clone());
    match set
        .prompt_expansion(expansion, prompt.clone(), &start.ctx)
        .await
    {
        Ok((prompt, contexts)) => {
            start.prompt = Some(prompt);
            start.prompt_context.extend(contexts);
            start
        }
        Err(reason) => start.block(reason),
    }
}

/// Fires the CwdChanged hooks if the run's directory is not the thread's last run's, and
/// keeps the run's in the thread's data (saved with the thread); the paths the last hook that
/// answered [`CwdChanged::Watch`] gave.
pub(super) async fn cwd_changed(set: &HookSetInner, ctx: &RunContext) -> Vec<PathBuf> {
    let new_cwd = ctx.cwd();
    let last = ctx.persisted::<LastCwd>().unwrap_or_else(|err| {
        ctx.warn(format!(
            "the thread's `{}` data is not a path: {err}",
            LastCwd::KEY
        ));
        None
    });
    let Some(LastCwd(old_cwd)) = last else {
        persist_cwd(ctx, new_cwd);
        return Vec::new();
    };
    if old_cwd == new_cwd {
        return Vec::new();
    }
    persist_cwd(ctx, new_cwd.clone());
    let input = CwdChangedInput { old_cwd, new_cwd };
    let mut watch = Vec::new();
    for f in &set.on_cwd_changed {
        if let CwdChanged::Watch(paths) = f(input.clone(), ctx.clone()).await {
            watch = paths;
        }
    }
    watch
}

/// Whether the run's directory is not the one kept in the thread's data (a tool moved it
/// during a step: [`RunContext::set_cwd`]).
pub(super) fn cwd_moved(ctx: &RunContext) -> bool {
    match ctx.persisted::<LastCwd>() {
        Ok(Some(LastCwd(last))) => last != ctx.cwd(),
        _ => false,
    }
}

fn persist_cwd(ctx: &RunContext, cwd: PathBuf) {
    if let Err(err) = ctx.persist(&LastCwd(cwd)) {
        ctx.warn(format!(
            "the run's directory could not be kept in the thread: {err}"
        ));
    }
}

/// The set's Notification hooks of type `warning` observe the run's warnings.
fn observe_warnings(set: &Arc<HookSetInner>, ctx: &RunContext) {
    if set
        .on_notify
        .iter()
        .any(|(m, _)| m.matches_name(NOTIFY_WARNING))
    {
        let observers = Arc::clone(set);
        ctx.on_warning(move |message, ctx| {
            observers.notify(&Notification::new(NOTIFY_WARNING, message, None), ctx);
        });
    }
}
