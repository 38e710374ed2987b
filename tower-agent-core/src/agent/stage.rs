//! Pre-stages: [`Setup`] (before-agent, once per run) and [`Prepare`] (modify-request, before
//! every model call).

use std::{
    fmt,
    future::Future,
    sync::{Arc, Mutex},
};

use futures_util::future::BoxFuture;

use crate::{
    context::RunContext,
    error::BoxError,
    message::{ToolOutput, ToolSpec},
    model::ModelRequest,
    tool::{Tool, ToolRequest, ToolRouter},
};

/// A before-agent stage: runs once at the start of every run, in registration order, before
/// the first model call. It may register tools, add context to the system prompt of the run,
/// and put per-run data into the run's data
/// ([`RunContext::with_data`](crate::context::RunContext::with_data)).
///
/// Implemented for closures `Fn(SetupContext) -> impl Future<Output = ()>` (or
/// `Result<(), E>`). A failing setup stage ends the run with an
/// [`Error`](crate::Error) for which `is_setup()` is true.
///
/// # Example
///
/// ```
/// use serde_json::json;
/// use tower_agent_core::{Agent, BoxError, agent::SetupContext, model::ScriptedModel, tool::tool_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::Error> {
/// let agent = Agent::builder()
///     .model(ScriptedModel::new().tool_call("today", json!({})).text("It is Monday."))
///     .setup(|cx: SetupContext| async move {
///         assert_eq!(cx.prompt(), "What day is it?");
///         cx.add_context("The user is in Lisbon.");
///         cx.add_tool(tool_fn("today", "The weekday", json!({"type": "object"}), |_, _| async {
///             Ok("Monday")
///         }));
///     })
///     .build();
/// let resp = agent.run("What day is it?").await?;
/// assert_eq!(resp.text, "It is Monday.");
/// # Ok(())
/// # }
/// ```
pub trait Setup: Send + Sync + 'static {
    /// Runs the stage.
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>>;

    /// The stage's work at the session's start, if it has any (the default has none): run
    /// once per run, before [`setup`](Self::setup) — after the run's SessionStart hooks and
    /// before its UserPromptSubmit hooks when the agent has hooks (their start layer runs it,
    /// then waits for the hooks the work fired), else right after the start stack. Claude Code
    /// loads its instructions then: the `Memory` stage
    /// reads its files here, so InstructionsLoaded hooks run in Claude Code's order.
    ///
    /// The work sees no prompt (a UserPromptSubmit hook may still rewrite it, or refuse the
    /// run: then `setup` does not run) and cannot add tools or context: it keeps what it found
    /// in the run's data ([`RunContext::with_data`](crate::context::RunContext::with_data))
    /// for `setup` and the prepare stage.
    fn at_session_start<'a>(&'a self, ctx: &'a RunContext) -> Option<BoxFuture<'a, ()>> {
        let _ = ctx;
        None
    }
}

/// The setup stages of a run whose session-start work ([`Setup::at_session_start`]) has not
/// run yet: in the run's data from the start of the run until it runs.
pub(crate) struct SessionStartWork(pub(crate) Arc<[Arc<dyn Setup>]>);

/// Runs the session-start work of the run's setup stages, if it has not run yet (once per
/// run), then waits for the hooks it fired ([`settle_hooks`](super::hooks::settle_hooks)).
pub(super) async fn session_start_work(ctx: &RunContext) {
    let Some(SessionStartWork(stages)) = ctx.with_data(|d| d.remove::<SessionStartWork>()) else {
        return;
    };
    for stage in stages.iter() {
        if let Some(work) = stage.at_session_start(ctx) {
            work.await;
        }
    }
    super::hooks::settle_hooks(ctx).await;
}

/// A modify-request stage: runs before every model call, in registration order, over the
/// outgoing request. It may edit the messages (copy-on-write: the thread's history is not
/// changed), the tools and the settings.
///
/// Prepare stages are synchronous, as they run on every step; do asynchronous work in a setup
/// stage (and keep its result in the run state) or in a model layer. Implemented for closures
/// `Fn(&mut ModelRequest)` returning `()` or `Result<(), E>`. A failing prepare stage ends the
/// run with [`Outcome::Aborted`](crate::agent::Outcome::Aborted).
///
/// # Example
///
/// ```
/// use tower_agent_core::{Agent, model::{ModelRequest, ModelResponse, ScriptedModel}};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::Error> {
/// let agent = Agent::builder()
///     .model(ScriptedModel::from_fn(|req| {
///         Ok(ModelResponse::text(req.system().unwrap().text().into_owned()))
///     }))
///     .system_prompt("Be brief.")
///     .prepare(|req: &mut ModelRequest| req.append_system("Today is Monday."))
///     .build();
/// assert_eq!(agent.run("hi").await?.text, "Be brief.\n\nToday is Monday.");
/// # Ok(())
/// # }
/// ```
pub trait Prepare: Send + Sync + 'static {
    /// Edits the request.
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError>;
}

/// What a stage closure may return: `()` or `Result<(), E>`.
pub trait IntoStageResult {
    /// As a result.
    fn into_stage_result(self) -> Result<(), BoxError>;
}

impl IntoStageResult for () {
    fn into_stage_result(self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<E: Into<BoxError>> IntoStageResult for Result<(), E> {
    fn into_stage_result(self) -> Result<(), BoxError> {
        self.map_err(Into::into)
    }
}

impl<F, Fut> Setup for F
where
    F: Fn(SetupContext) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoStageResult,
{
    fn setup(&self, cx: SetupContext) -> BoxFuture<'_, Result<(), BoxError>> {
        let fut = self(cx);
        Box::pin(async move { fut.await.into_stage_result() })
    }
}

impl<F, R> Prepare for F
where
    F: Fn(&mut ModelRequest) -> R + Send + Sync + 'static,
    R: IntoStageResult,
{
    fn prepare(&self, req: &mut ModelRequest) -> Result<(), BoxError> {
        self(req).into_stage_result()
    }
}

/// What a [`Setup`] stage can do: see the run's context, register tools, add context.
///
/// Cloning shares the same registration.
#[derive(Clone)]
pub struct SetupContext {
    ctx: RunContext,
    prompt: Arc<str>,
    shared: Arc<Mutex<SetupShared>>,
}

struct SetupShared {
    tools: ToolRouter,
    added_tools: bool,
    context: Vec<String>,
}

impl SetupContext {
    pub(crate) fn new(ctx: RunContext, prompt: &str, tools: ToolRouter) -> Self {
        SetupContext {
            ctx,
            prompt: prompt.into(),
            shared: Arc::new(Mutex::new(SetupShared {
                tools,
                added_tools: false,
                context: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SetupShared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's context.
    pub fn ctx(&self) -> &RunContext {
        &self.ctx
    }

    /// The user's prompt of this run.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// Registers a tool for this run (replacing one of the same name).
    pub fn add_tool<T: Tool>(&self, tool: T) {
        let mut shared = self.lock();
        shared.tools.add_tool(tool);
        shared.added_tools = true;
    }

    /// Registers a tool that is any tower service, for this run.
    pub fn add_service<S>(&self, spec: ToolSpec, service: S)
    where
        S: tower::Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let mut shared = self.lock();
        shared.tools.add_service(spec, service);
        shared.added_tools = true;
    }

    /// Registers every tool (and prefix route, see [`ToolRouter::add_prefix_service`]) of
    /// `router` for this run; its tools win on a name clash.
    pub fn add_router(&self, router: &ToolRouter) {
        let mut shared = self.lock();
        shared.tools.merge(router);
        shared.added_tools = true;
    }

    /// Whether a tool of that name is registered (by the agent or an earlier stage).
    pub fn has_tool(&self, name: &str) -> bool {
        self.lock().tools.contains(name)
    }

    /// Adds text to the system prompt of every model call of this run (not persisted in the
    /// thread: setup runs again next run).
    pub fn add_context(&self, text: impl Into<String>) {
        self.lock().context.push(text.into());
    }

    /// The router with the tools registered, whether any were added, and the context text.
    pub(crate) fn finish(self) -> (ToolRouter, bool, Vec<String>) {
        let mut shared = self.lock();
        (
            std::mem::take(&mut shared.tools),
            shared.added_tools,
            std::mem::take(&mut shared.context),
        )
    }
}

impl fmt::Debug for SetupContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.lock();
        f.debug_struct("SetupContext")
            .field("ctx", &self.ctx)
            .field("tools", &shared.tools)
            .field("context", &shared.context)
            .finish()
    }
}
