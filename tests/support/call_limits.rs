//! [`CallLimitsLayer`]: at most so many model calls and tool calls (in all, and per tool) in one
//! run.
//!
//! One layer type for both paths: [`CallLimits<S>`] is a `Service<ModelRequest>` over a model
//! and a `Service<ToolRequest>` over tools, so one configured layer goes on both stacks and
//! its limits read as one policy. The counts live in the run's data
//! ([`RunContext::with_data`](tower_agent::context::RunContext::with_data)), keyed by the layer's
//! instance: every run starts from zero, the clones of one layer (the copy on the model
//! stack, the copies on the tool stack) count together, and two layers built separately count
//! apart.
//!
//! | Limit | Counts | Over the limit |
//! |---|---|---|
//! | [`max_model_calls(n)`](CallLimitsLayer::max_model_calls) | model calls through the layer | the run ends with [`Outcome::Aborted`](tower_agent::agent::Outcome::Aborted) (`model call limit reached: …`) |
//! | [`max_tool_calls(n)`](CallLimitsLayer::max_tool_calls) | tool calls of any tool | [`OnLimit`] |
//! | [`max_calls_of(tool, n)`](CallLimitsLayer::max_calls_of) | calls of one tool | [`OnLimit`] |
//!
//! A tool call over a limit is not run, and does not count. With [`OnLimit::Deny`] (the
//! default) the model gets an error output and the run goes on, so it can answer with what it
//! has; with [`OnLimit::EndRun`] the layer returns an [`Abort`], the other calls of the step
//! finish and the run ends with `Outcome::Aborted`. A model call cannot be denied — the model's
//! answer is what moves the run on, and a made-up answer would end the run as `Finished` — so
//! over the model call limit the run always ends, whatever the `OnLimit`.
//!
//! The calls of one step start concurrently; checking and counting a call is one step under
//! the run state's lock, so exactly the limit runs. Which calls of a parallel batch get in is
//! the order the loop starts them (the order of the calls, in practice).
//!
//! Compared with LangChain's `ModelCallLimitMiddleware`/`ToolCallLimitMiddleware`: these are
//! their *run* limits; `Deny` is their `continue` and `EndRun` their `end`/`error`. There are
//! no thread limits, because a run's extensions are not saved with the thread; a limit over a
//! whole thread belongs with the thread store. Where the layer sits decides what counts: over
//! a retry layer it counts calls, under one it counts attempts.
//!
//! **Readiness.** `poll_ready` is the inner service's. An admitted call calls the service
//! `poll_ready` readied, at once. A refused call does not call it: that service is dropped
//! (giving back what it reserved, e.g. a `ConcurrencyLimit` permit) and an unready clone takes
//! its place, so the inner service must be `Clone`.
//!
//! This layer is written with the crate's public API only, outside the crate (an example):
//! copy it into your project, or take it as the pattern of a stateful layer of your own
//! (see the guide's "Write your own stateful layer"). `main.rs` of this example runs it.

#![allow(unreachable_pub, dead_code)]

use std::{
    collections::HashMap,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use tower_agent::{
    context::{InstanceId, RunContext},
    error::{Abort, BoxError},
    layers::schema::ToolSpecs,
    message::ToolOutput,
    model::{ModelRequest, ModelResponse},
    tool::ToolRequest,
};

/// What a tool call over a limit gets. See the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnLimit {
    /// The call is not run; the model gets an error output saying the limit is reached, and
    /// the run goes on.
    #[default]
    Deny,
    /// The call is not run; the layer returns an [`Abort`], which ends the run with
    /// [`Outcome::Aborted`](tower_agent::agent::Outcome::Aborted) after the step's other calls.
    EndRun,
}

#[derive(Debug, Clone, Default)]
struct Config {
    model_calls: Option<u32>,
    tool_calls: Option<u32>,
    per_tool: Vec<(String, u32)>,
    on_limit: OnLimit,
}

impl Config {
    fn limits_tools(&self) -> bool {
        self.tool_calls.is_some() || !self.per_tool.is_empty()
    }
}

/// The calls one [`CallLimitsLayer`] counted in one run. See
/// [`CallLimitsLayer::counts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallCounts {
    /// Model calls (counted only when a model call limit is set).
    pub model_calls: u32,
    /// Tool calls that ran (counted only when a tool limit is set).
    pub tool_calls: u32,
    /// Calls that ran of each tool with a per-tool limit.
    pub per_tool: HashMap<String, u32>,
}

/// What the run state holds for one layer: [`CallCounts`] without the map.
#[derive(Debug, Default)]
struct Counts {
    model_calls: u32,
    tool_calls: u32,
    /// Calls of the tools with a per-tool limit, by name (few: a linear scan beats hashing).
    per_tool: Vec<(String, u32)>,
}

impl CallCounts {
    /// Calls of `tool` that ran, if it has a per-tool limit (else 0).
    pub fn tool(&self, tool: &str) -> u32 {
        self.per_tool.get(tool).copied().unwrap_or(0)
    }
}

/// Limits the model and tool calls of a run. See the [module docs](self).
///
/// # Clone
///
/// Clones share the configuration and the instance id, so they count together: put clones
/// of one layer on the model and the tool stack. Configuring a clone copies the
/// configuration, not the id.
#[derive(Debug, Clone)]
#[must_use]
pub struct CallLimitsLayer {
    config: Arc<Config>,
    id: InstanceId,
}

impl CallLimitsLayer {
    /// No limits yet, [`OnLimit::Deny`], a fresh instance id.
    pub fn new() -> Self {
        CallLimitsLayer {
            config: Arc::default(),
            id: InstanceId::new(),
        }
    }

    /// At most `n` model calls per run.
    pub fn max_model_calls(mut self, n: u32) -> Self {
        Arc::make_mut(&mut self.config).model_calls = Some(n);
        self
    }

    /// At most `n` tool calls per run, of all tools together.
    pub fn max_tool_calls(mut self, n: u32) -> Self {
        Arc::make_mut(&mut self.config).tool_calls = Some(n);
        self
    }

    /// At most `n` calls of `tool` per run.
    pub fn max_calls_of(mut self, tool: impl Into<String>, n: u32) -> Self {
        let tool = tool.into();
        let per_tool = &mut Arc::make_mut(&mut self.config).per_tool;
        match per_tool.iter_mut().find(|(name, _)| *name == tool) {
            Some((_, max)) => *max = n,
            None => per_tool.push((tool, n)),
        }
        self
    }

    /// What a tool call over a limit gets (default [`OnLimit::Deny`]).
    pub fn on_limit(mut self, on_limit: OnLimit) -> Self {
        Arc::make_mut(&mut self.config).on_limit = on_limit;
        self
    }

    /// What this layer (and its clones) counted in the run of `ctx` so far.
    pub fn counts(&self, ctx: &RunContext) -> CallCounts {
        ctx.with_data(|data| {
            let Some(counts) = data.get_for::<Counts>(self.id) else {
                return CallCounts::default();
            };
            CallCounts {
                model_calls: counts.model_calls,
                tool_calls: counts.tool_calls,
                per_tool: counts.per_tool.iter().cloned().collect(),
            }
        })
    }
}

impl Default for CallLimitsLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for CallLimitsLayer {
    type Service = CallLimits<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLimits {
            inner,
            config: Arc::clone(&self.config),
            id: self.id,
        }
    }
}

/// The service of [`CallLimitsLayer`]: a model service over a model, a tool service over tools.
#[derive(Debug, Clone)]
pub struct CallLimits<S> {
    inner: S,
    config: Arc<Config>,
    id: InstanceId,
}

impl<S> CallLimits<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, consuming this one.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Runs `f` on the counts of layer `id` in the run of `ctx`, created empty on the first call
/// of the run.
fn with_counts<R>(ctx: &RunContext, id: InstanceId, f: impl FnOnce(&mut Counts) -> R) -> R {
    ctx.with_data(|data| f(data.get_or_default_for::<Counts>(id)))
}

/// Counts a model call, or says why it is over the limit.
fn admit_model(config: &Config, id: InstanceId, ctx: &RunContext) -> Result<(), String> {
    let Some(max) = config.model_calls else {
        return Ok(());
    };
    with_counts(ctx, id, |counts| {
        if counts.model_calls >= max {
            return Err(format!(
                "model call limit reached: at most {max} model calls per run"
            ));
        }
        counts.model_calls += 1;
        Ok(())
    })
}

/// Counts a tool call, or says why it is over a limit.
fn admit_tool(config: &Config, id: InstanceId, req: &ToolRequest) -> Result<(), String> {
    if !config.limits_tools() {
        return Ok(());
    }
    let name = req.call.name.as_str();
    let limit = config
        .per_tool
        .iter()
        .find(|(tool, _)| tool == name)
        .map(|(_, max)| *max);
    with_counts(&req.ctx, id, |counts| {
        if let Some(max) = config.tool_calls.filter(|max| counts.tool_calls >= *max) {
            return Err(format!(
                "tool call limit reached: at most {max} tool calls per run; do not call any more tools, answer with what you have"
            ));
        }
        if let Some(max) = limit {
            let of_tool = match counts.per_tool.iter_mut().find(|(tool, _)| tool == name) {
                Some((_, n)) => n,
                None => {
                    counts.per_tool.push((name.to_owned(), 0));
                    &mut counts.per_tool.last_mut().expect("pushed above").1
                }
            };
            if *of_tool >= max {
                return Err(format!(
                    "tool call limit reached: `{name}` may be called at most {max} times per run; do not call it again"
                ));
            }
            *of_tool += 1;
        }
        counts.tool_calls += 1;
        Ok(())
    })
}

impl<S> Service<ModelRequest> for CallLimits<S>
where
    S: Service<ModelRequest, Response = ModelResponse> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = ModelResponse;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future, ModelResponse>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        match admit_model(&self.config, self.id, &req.ctx) {
            Ok(()) => future::ResponseFuture::call(self.inner.call(req)),
            Err(reason) => {
                release(&mut self.inner);
                future::ResponseFuture::ready(Err(Abort::new(reason).into()))
            }
        }
    }
}

impl<S> Service<ToolRequest> for CallLimits<S>
where
    S: Service<ToolRequest, Response = ToolOutput> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = ToolOutput;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future, ToolOutput>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: ToolRequest) -> Self::Future {
        match admit_tool(&self.config, self.id, &req) {
            Ok(()) => future::ResponseFuture::call(self.inner.call(req)),
            Err(reason) => {
                release(&mut self.inner);
                future::ResponseFuture::ready(match self.config.on_limit {
                    OnLimit::Deny => Ok(ToolOutput::error(req.call.id, reason)),
                    OnLimit::EndRun => Err(Abort::new(reason).into()),
                })
            }
        }
    }
}

/// The layer is transparent to the tools' descriptions: the agent asks the tool stack for
/// them through [`ToolSpecs`].
impl<S: ToolSpecs> ToolSpecs for CallLimits<S> {
    fn tool_specs(&self) -> Arc<Vec<tower_agent::message::ToolSpec>> {
        self.inner.tool_specs()
    }
}

/// Drops the service `poll_ready` readied for a call that will not be made, giving back what
/// it reserved (e.g. a `ConcurrencyLimit` permit); an unready clone takes its place.
fn release<S: Clone>(inner: &mut S) {
    *inner = inner.clone();
}

/// The response future of [`CallLimits`].
pub mod future {
    use std::{
        future::Future,
        pin::Pin,
        task::{Context, Poll},
    };

    use pin_project_lite::pin_project;

    use super::*;

    pin_project! {
        /// The response future of [`CallLimits`](super::CallLimits): the inner call, or the
        /// answer to a call over a limit.
        pub struct ResponseFuture<F, T> {
            #[pin]
            kind: Kind<F, T>,
        }
    }

    pin_project! {
        #[project = KindProj]
        enum Kind<F, T> {
            Call { #[pin] fut: F },
            Ready { result: Option<Result<T, BoxError>> },
        }
    }

    impl<F, T> ResponseFuture<F, T> {
        pub(super) fn call(fut: F) -> Self {
            ResponseFuture {
                kind: Kind::Call { fut },
            }
        }

        pub(super) fn ready(result: Result<T, BoxError>) -> Self {
            ResponseFuture {
                kind: Kind::Ready {
                    result: Some(result),
                },
            }
        }
    }

    impl<F, T, E> Future for ResponseFuture<F, T>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        type Output = Result<T, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().kind.project() {
                KindProj::Call { fut } => fut.poll(cx).map_err(Into::into),
                KindProj::Ready { result } => Poll::Ready(
                    result
                        .take()
                        .expect("ResponseFuture polled after completion"),
                ),
            }
        }
    }

    impl<F, T> fmt::Debug for ResponseFuture<F, T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}
