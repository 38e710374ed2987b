//! [`HookAgentLayer`]: the prompt-level hooks (SessionStart, UserPromptSubmit) as a tower
//! layer on the agent service.

use std::{
    fmt,
    task::{Context, Poll},
};

use tower::{Layer, Service, ServiceExt};

use super::{HookSet, SessionSource, SessionStartInput, future::HookAgentFuture};
use crate::{
    agent::{AgentEvent, AgentRequest, AgentResponse, LoopHooks, Outcome},
    context::RunContext,
};

/// The SessionStart and UserPromptSubmit hooks of a [`HookSet`] as a layer on any agent
/// service (`Service<AgentRequest, Response = AgentResponse>`), so they can sit anywhere in a
/// `ServiceBuilder` stack around the [`Agent`](crate::Agent): outside a cache, inside an
/// authorization layer. See [`HookSet::agent_layer`].
///
/// Before the inner service is called, SessionStart hooks run, then UserPromptSubmit hooks,
/// with the merge rules of the [hooks docs](crate::layers::hooks): a block answers at once
/// with [`Outcome::Blocked`] (the inner service is not called, nothing is saved; the request's
/// event channel gets `AgentStart` and `AgentStop`); a rewrite replaces the request's prompt;
/// contexts go to the request's
/// [`system_context`](AgentRequest::system_context) (SessionStart) and
/// [`prompt_context`](AgentRequest::prompt_context) (UserPromptSubmit).
///
/// The hooks see a [`RunContext`] made from the request (its thread id as session id, or a
/// fresh one; its directory, extensions, cancellation token and event channel), whose run id
/// is not the run's: the run has not started yet. Its `transcript_path` is the thread's
/// transcript when the request names a thread and the hooks have a transcripts directory
/// ([`Hooks::transcripts_dir`](super::Hooks::transcripts_dir), which command hooks set);
/// otherwise there is none.
///
/// Readiness: `poll_ready` passes the inner service's through. With prompt hooks to run, the
/// readied inner service is dropped (releasing what it reserved, such as a
/// `ConcurrencyLimit` permit) and the call goes to a fresh clone readied after the hooks, so
/// no readied service is held while they run.
#[derive(Clone)]
pub struct HookAgentLayer {
    set: HookSet,
}

impl HookAgentLayer {
    /// The layer of `set`'s prompt-level hooks.
    pub fn new(set: HookSet) -> Self {
        HookAgentLayer { set }
    }
}

impl fmt::Debug for HookAgentLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookAgentLayer")
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Layer<S> for HookAgentLayer {
    type Service = HookAgent<S>;

    fn layer(&self, inner: S) -> HookAgent<S> {
        HookAgent {
            inner,
            set: self.set.clone(),
        }
    }
}

/// The service of [`HookAgentLayer`].
#[derive(Clone)]
pub struct HookAgent<S> {
    inner: S,
    set: HookSet,
}

impl<S: fmt::Debug> fmt::Debug for HookAgent<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookAgent")
            .field("inner", &self.inner)
            .field("set", &self.set)
            .finish()
    }
}

impl<S> Service<AgentRequest> for HookAgent<S>
where
    S: Service<AgentRequest, Response = AgentResponse> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = AgentResponse;
    type Error = S::Error;
    type Future = HookAgentFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: AgentRequest) -> Self::Future {
        let hooks = &self.set.inner;
        if hooks.session_start.is_empty() && hooks.prompt.is_empty() {
            return HookAgentFuture::call(self.inner.call(req));
        }
        // The call comes after the hooks: release what readiness reserved (a concurrency
        // permit, a buffer slot) by dropping the readied service, and call a fresh clone,
        // readied then.
        let inner = self.inner.clone();
        drop(std::mem::replace(&mut self.inner, inner.clone()));
        let set = self.set.clone();
        HookAgentFuture::hooks(async move {
            let ctx = context_of(&req, set.inner.transcripts.as_deref());
            // NOTE: outside the loop the store is not known: every run counts as a startup.
            let input = SessionStartInput::new(SessionSource::Startup, None);
            let started = match set.session_start(input, &ctx).await {
                Ok(contexts) => {
                    req.system_context.extend(contexts);
                    let prompt = std::mem::take(&mut req.prompt);
                    set.user_prompt(prompt, &ctx).await
                }
                Err(reason) => Err(reason),
            };
            match started {
                Ok((prompt, contexts)) => {
                    req.prompt = prompt;
                    req.prompt_context.extend(contexts);
                    inner.oneshot(req).await
                }
                Err(reason) => Ok(blocked(&ctx, reason)),
            }
        })
    }
}

/// The context the prompt hooks see: made from the request. With a thread id and a
/// transcripts directory (command hooks set one), its transcript is the thread's file, created
/// if missing, which the run then appends to (an agent built with the same hooks keeps its
/// transcripts there, unless its builder names another directory); a request without a thread
/// id has no session yet, so its hooks see no transcript.
fn context_of(req: &AgentRequest, transcripts: Option<&std::path::Path>) -> RunContext {
    let mut builder = RunContext::builder().extensions(req.extensions.clone());
    if let Some(id) = &req.thread_id {
        builder = builder.session_id(id.clone());
    }
    if let Some(cwd) = &req.cwd {
        builder = builder.cwd(cwd.clone());
    }
    if let Some(token) = &req.cancellation {
        builder = builder.cancellation(token.clone());
    }
    if let Some(tx) = &req.events {
        builder = builder.events(tx.clone());
    }
    if let (Some(_), Some(dir)) = (&req.thread_id, transcripts) {
        builder = builder.transcript_dir(dir);
    }
    let ctx = builder.build();
    if let Some(transcript) = ctx.transcript() {
        transcript.touch();
    }
    ctx
}

/// The answer to a blocked request: the run never started.
fn blocked(ctx: &RunContext, reason: String) -> AgentResponse {
    let response =
        AgentResponse::new(ctx.session_id(), Outcome::Blocked { reason }).with_run_id(ctx.run_id());
    ctx.emit_with(|| AgentEvent::AgentStart {
        thread_id: response.thread_id.clone(),
        run_id: response.run_id.clone(),
    });
    ctx.emit_with(|| AgentEvent::AgentStop {
        outcome: response.outcome.clone(),
        text: String::new(),
        steps: 0,
        usage: response.usage,
    });
    response
}
