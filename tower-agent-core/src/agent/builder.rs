//! [`AgentBuilder`].

use std::{fmt, path::PathBuf, sync::Arc};

use tokio_util::sync::CancellationToken;

use tower::{
    Layer, Service, ServiceExt,
    layer::util::{Identity, Stack},
};

use super::{
    Agent, Inner, LoopHooks, Prepare, Setup,
    describe::{AgentStacks, layers_of, name_of},
    hook_list::HookList,
    hooks::HookLayers,
    start::{Begin, BoxStartService, RunStart, StartLayerFn},
    step::{BoxStepService, Proceed, StepControl, StepEnd, StepLayerFn},
};
use crate::{
    error::BoxError,
    message::{ToolOutput, ToolSpec},
    model::{BoxModelService, ModelRequest, ModelResponse, ModelSettings},
    store::{MemoryStore, ThreadStore},
    tool::{BoxToolService, Tool, ToolRequest, ToolRouter},
};

/// The default step limit: 25 model calls.
pub const DEFAULT_MAX_STEPS: u32 = 25;

/// Marks an [`AgentBuilder`] that has no model yet; [`build`](AgentBuilder::build) needs one.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoModel;

/// Builds an [`Agent`]. See [`Agent::builder`].
///
/// `M` is the model (or [`NoModel`]); `L` is the tool layer stack, grown by
/// [`tool_layer`](Self::tool_layer) in [`ServiceBuilder`](tower::ServiceBuilder) order: the
/// first layer added is the outermost.
#[must_use]
pub struct AgentBuilder<M, L = Identity> {
    model: M,
    tool_layer: L,
    parts: Parts,
}

/// What the builder collects besides the model and the tool layers.
/// The names of what was added, for [`Agent::describe`].
#[derive(Default)]
struct Names {
    model: Option<String>,
    start: Vec<String>,
    step: Vec<String>,
    setup: Vec<String>,
    prepare: Vec<String>,
}

struct Parts {
    tools: ToolRouter,
    setups: Vec<Arc<dyn Setup>>,
    prepares: Vec<Arc<dyn Prepare>>,
    system_prompt: Option<String>,
    max_steps: u32,
    max_concurrent_tools: Option<usize>,
    eager_tools: bool,
    settings: ModelSettings,
    store: Option<Arc<dyn ThreadStore>>,
    cwd: Option<PathBuf>,
    shutdown: CancellationToken,
    /// The hook sets whose layers the builder places ([`AgentBuilder::hooks`]), the first
    /// outermost, with their names.
    hook_layers: Vec<(String, Arc<dyn HookLayers>)>,
    /// Every registration's loop points, in order, with their names.
    loop_hooks: Vec<(String, Arc<dyn LoopHooks>)>,
    /// What [`Agent::describe`] shows of what was added (the rest is read at build).
    names: Names,
    /// Whether a tool layer was added (see [`Inner::send_checks`](super::Inner)).
    tool_layers: bool,
    /// The step layers, the first added outermost.
    step_layers: Vec<Arc<StepLayerFn>>,
    /// The start layers, the first added outermost.
    start_layers: Vec<Arc<StartLayerFn>>,
    transcripts: Option<PathBuf>,
    name: Option<Arc<str>>,
}

impl AgentBuilder<NoModel> {
    pub(crate) fn new() -> Self {
        AgentBuilder {
            model: NoModel,
            tool_layer: Identity::new(),
            parts: Parts {
                tools: ToolRouter::new(),
                setups: Vec::new(),
                prepares: Vec::new(),
                system_prompt: None,
                max_steps: DEFAULT_MAX_STEPS,
                max_concurrent_tools: None,
                eager_tools: false,
                settings: ModelSettings::default(),
                store: None,
                cwd: None,
                shutdown: CancellationToken::new(),
                hook_layers: Vec::new(),
                loop_hooks: Vec::new(),
                names: Names::default(),
                tool_layers: false,
                step_layers: Vec::new(),
                start_layers: Vec::new(),
                transcripts: None,
                name: None,
            },
        }
    }
}

impl<M, L> AgentBuilder<M, L> {
    /// The model: any model service, typically a [`ServiceBuilder`](tower::ServiceBuilder)
    /// stack over a provider (`timeout`, `retry`, trace, summarize …).
    pub fn model<S>(self, model: S) -> AgentBuilder<BoxModelService, L>
    where
        S: Service<ModelRequest, Response = ModelResponse> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        let mut parts = self.parts;
        parts.names.model = Some(name_of::<S>());
        AgentBuilder {
            model: BoxModelService::new(model.map_err(Into::into)),
            tool_layer: self.tool_layer,
            parts,
        }
    }

    /// Adds a tool (replacing one of the same name).
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.parts.tools.add_tool(tool);
        self
    }

    /// Adds every tool of `router`.
    pub fn tools(mut self, router: &ToolRouter) -> Self {
        self.parts.tools.merge(router);
        self
    }

    /// Adds a tool that is any tower service, described by `spec`.
    pub fn tool_service<S>(mut self, spec: ToolSpec, service: S) -> Self
    where
        S: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.parts.tools.add_service(spec, service);
        self
    }

    /// Adds a layer to the tool stack, inside the ones added before (like
    /// [`ServiceBuilder::layer`](tower::ServiceBuilder::layer)). A `ServiceBuilder` is itself
    /// a layer, so `.tool_layer(ServiceBuilder::new().layer(a).layer(b))` works as it is.
    ///
    /// The stack is applied to each run's [`ToolRouter`] when the run starts (after the setup
    /// stages registered their tools), so a stateful layer such as `ConcurrencyLimit` is per
    /// run. Share state across runs explicitly (e.g. `GlobalConcurrencyLimitLayer`).
    ///
    /// Each request carries the run's [`ToolChecks`](crate::tool::ToolChecks) in its
    /// extensions, so a layer can run a tool's [check](crate::tool::Tool::check) before it
    /// decides about the call (see [`tool::check`](crate::tool::check)).
    pub fn tool_layer<T>(mut self, layer: T) -> AgentBuilder<M, Stack<T, L>> {
        self.parts.tool_layers = true;
        AgentBuilder {
            model: self.model,
            tool_layer: Stack::new(layer, self.tool_layer),
            parts: self.parts,
        }
    }

    /// Adds a layer to the step stack, inside the ones added before: it sees how each step
    /// ended and decides whether the run goes on. See [`step`](crate::agent::step).
    pub fn step_layer<T>(mut self, layer: T) -> Self
    where
        T: Layer<BoxStepService> + Send + Sync + 'static,
        T::Service: Service<StepEnd, Response = StepControl> + Clone + Send + Sync + 'static,
        <T::Service as Service<StepEnd>>::Error: Into<BoxError>,
        <T::Service as Service<StepEnd>>::Future: Send + 'static,
    {
        self.parts.names.step.extend(layers_of::<T>());
        self.parts.step_layers.push(Arc::new(move |inner| {
            BoxStepService::new(layer.layer(inner).map_err(Into::into))
        }));
        self
    }

    /// Adds a layer to the start stack, inside the ones added before: it sees each run
    /// start, before its prompt enters the thread, and may add context, rewrite the prompt or
    /// refuse the run. See [`start`](crate::agent::start).
    pub fn start_layer<T>(mut self, layer: T) -> Self
    where
        T: Layer<BoxStartService> + Send + Sync + 'static,
        T::Service: Service<RunStart, Response = RunStart> + Clone + Send + Sync + 'static,
        <T::Service as Service<RunStart>>::Error: Into<BoxError>,
        <T::Service as Service<RunStart>>::Future: Send + 'static,
    {
        self.parts.names.start.extend(layers_of::<T>());
        self.parts.start_layers.push(Arc::new(move |inner| {
            BoxStartService::new(layer.layer(inner).map_err(Into::into))
        }));
        self
    }

    /// Adds a before-agent [`Setup`] stage (run once per run, in order).
    pub fn setup<S: Setup>(mut self, stage: S) -> Self {
        self.parts.names.setup.push(name_of::<S>());
        self.parts.setups.push(Arc::new(stage));
        self
    }

    /// Adds a modify-request [`Prepare`] stage (run before every model call, in order).
    pub fn prepare<P: Prepare>(mut self, stage: P) -> Self {
        self.parts.names.prepare.push(name_of::<P>());
        self.parts.prepares.push(Arc::new(stage));
        self
    }

    /// Adds a stage that is both [`Setup`] and [`Prepare`] (such as
    /// `Skills` or `Memory`): its setup
    /// runs once per run, its prepare before every model call.
    pub fn stage<T: Setup + Prepare + Clone>(self, stage: T) -> Self {
        self.setup(stage.clone()).prepare(stage)
    }

    /// The agent's name: `gen_ai.agent.name` of the `invoke_agent {name}` span of each run
    /// (see `layers::trace`).
    pub fn name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.parts.name = Some(name.into());
        self
    }

    /// The system prompt, the first message of a new thread.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.parts.system_prompt = Some(prompt.into());
        self
    }

    /// The most steps (model calls) a run may take; default 25. A run that reaches it ends
    /// with [`Outcome::MaxSteps`](super::Outcome::MaxSteps).
    pub fn max_steps(mut self, n: u32) -> Self {
        self.parts.max_steps = n;
        self
    }

    /// The most tool calls of one step that run at the same time; default: all of them.
    /// Results are appended in call order either way.
    ///
    /// # Panics
    ///
    /// Panics if `n` is 0.
    pub fn max_concurrent_tools(mut self, n: usize) -> Self {
        assert!(n > 0, "max_concurrent_tools must be at least 1");
        self.parts.max_concurrent_tools = Some(n);
        self
    }

    /// Eager tool dispatch: with a streaming model, each tool call starts through the tool
    /// stack (hooks, guards, approvals, journal) as soon as its arguments are complete in the
    /// stream, while the model still writes the rest; results still go back in call order.
    /// Off by default. See the streaming guide for what happens
    /// when the stream then fails or a layer changes the answer.
    ///
    /// ```
    /// use serde_json::json;
    /// use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower_agent_core::Error> {
    /// let echo = tool_fn("echo", "Echo", json!({"type": "object"}), |args, _| async move {
    ///     Ok::<_, BoxError>(args.to_string())
    /// });
    /// let model = ScriptedModel::new().tool_call("echo", json!({"a": 1})).text("done").streaming(8);
    /// let agent = Agent::builder().model(model).tool(echo).eager_tools().build();
    /// assert_eq!(agent.run("go").await?.text, "done");
    /// # Ok(())
    /// # }
    /// ```
    pub fn eager_tools(mut self) -> Self {
        self.parts.eager_tools = true;
        self
    }

    /// The model settings of every request (model name, temperature …).
    pub fn settings(mut self, settings: ModelSettings) -> Self {
        self.parts.settings = settings;
        self
    }

    /// Where threads are kept; default: a new [`MemoryStore`].
    pub fn store<S: ThreadStore>(mut self, store: S) -> Self {
        self.parts.store = Some(Arc::new(store));
        self
    }

    /// A graceful shutdown signal: once `token` is cancelled, every run of the agent ends
    /// after its current step (with [`Outcome::Cancelled`](super::Outcome::Cancelled)),
    /// saving its thread; tool calls in flight finish first. Cancel a run's own token
    /// ([`AgentRequest::cancellation`](super::AgentRequest::cancellation)) to stop it at once.
    pub fn shutdown_signal(mut self, token: CancellationToken) -> Self {
        self.parts.shutdown = token;
        self
    }

    /// Adds a hook set: its layers at the four levels, placed by the builder, and its loop
    /// points. Where each layer goes (outermost of its stack, the first set registered
    /// outermost of all) is in [`HookLayers`]; [`Agent::describe`] shows them in place.
    /// Several sets add up (none replaces another).
    ///
    /// `HookSet` (compiled `Hooks`, command and WebAssembly hooks) of the facade crate
    /// (`tower_agent::layers::hooks`) is such a set.
    pub fn hooks<H: HookLayers>(mut self, hooks: H) -> Self {
        let name = format!("{} (hooks)", name_of::<H>());
        let hooks = Arc::new(hooks);
        self.parts.hook_layers.push((name.clone(), hooks.clone()));
        self.parts.loop_hooks.push((name, hooks));
        self
    }

    /// Adds the loop points of `hooks` alone: what only the loop can fire (SessionEnd,
    /// StopFailure, SubagentStart/Stop, TaskCreated/Completed, InstructionsLoaded, and
    /// PreCompact/PostCompact of [`Agent::compact`]; see [`LoopHooks`]). Nothing is placed in
    /// the stacks: use it for a set whose layers you place yourself, or for a [`LoopHooks`]
    /// of your own. Registrations add up, asked in order.
    pub fn loop_hooks<H: LoopHooks>(mut self, hooks: H) -> Self {
        let name = name_of::<H>();
        self.parts.loop_hooks.push((name, Arc::new(hooks)));
        self
    }

    /// Keep a JSONL transcript of every session under `dir` (`{dir}/{session id}.jsonl`,
    /// the id percent-escaped: `a/b` is `a%2Fb.jsonl`, distinct from `a_b.jsonl`; see
    /// [`RunContext::transcript_path`](crate::context::RunContext::transcript_path)). Its
    /// path is `RunContext::transcript_path` (the `transcript_path` of command hooks); a
    /// subagent's ([`Agent::into_tool`](super::Agent::into_tool)) is
    /// `{dir}/{session id}/subagents/agent-{call id}.jsonl`.
    ///
    /// Without this, the agent keeps transcripts where its hooks say
    /// (`Hooks::transcripts_dir`): command
    /// hooks default to a per-project directory
    /// (`CommandHooksBuilder::transcripts_dir`).
    ///
    /// Each message is in the file before any hook that could read it runs (the assistant
    /// message before PreToolUse and Stop hooks, a tool result before its PostToolUse hooks
    /// …), one JSON line per message in Claude Code's shape (`type`, `message: {role,
    /// content}` with `text`, `tool_use` and `tool_result` blocks, `uuid`, `parentUuid`,
    /// `sessionId`, `timestamp`, `cwd`), written whole: a run cut off at any point leaves
    /// only whole lines. The [transcript docs](crate::agent::transcript) say exactly when
    /// each line is written.
    pub fn transcripts(mut self, dir: impl Into<PathBuf>) -> Self {
        self.parts.transcripts = Some(dir.into());
        self
    }

    /// The working directory of runs that don't name one; default: the process's current
    /// directory when the agent is built (read once then, not at every run).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.parts.cwd = Some(cwd.into());
        self
    }
}

impl<L> AgentBuilder<BoxModelService, L>
where
    L: Layer<ToolRouter> + Send + Sync + 'static,
    L::Service: Service<ToolRequest, Response = ToolOutput> + Clone + Send + Sync + 'static,
    <L::Service as Service<ToolRequest>>::Error: Into<BoxError>,
    <L::Service as Service<ToolRequest>>::Future: Send + 'static,
{
    /// Builds the agent.
    pub fn build(self) -> Agent {
        let layer = self.tool_layer;
        let parts = self.parts;
        let tool_stack =
            move |router: ToolRouter| BoxToolService::new(layer.layer(router).map_err(Into::into));
        // Only a layer reads the checks: a set registered for its loop points alone does not.
        let send_checks = !parts.hook_layers.is_empty() || parts.tool_layers;
        let summarizer = self.model.clone();
        let mut stacks = AgentStacks {
            name: parts.name.as_deref().map(str::to_owned),
            model: parts.names.model.iter().cloned().collect(),
            tools: layers_of::<L>(),
            tool_names: parts.tools.specs().iter().map(|s| s.name.clone()).collect(),
            loop_hooks: parts.loop_hooks.iter().map(|(n, _)| n.clone()).collect(),
            setup: parts.names.setup,
            prepare: parts.names.prepare,
            ..AgentStacks::default()
        };
        // The first set registered is the outermost: wrap from the last.
        let mut model = self.model;
        for (name, set) in parts.hook_layers.iter().rev() {
            model = set.wrap_model(model);
            stacks.model.insert(0, name.clone());
            stacks.tools.insert(0, name.clone());
        }
        let step = level_stack(
            BoxStepService::new(Proceed),
            &parts.step_layers,
            &parts.hook_layers,
            |set, stack| set.wrap_step(stack),
        );
        let start = level_stack(
            BoxStartService::new(Begin),
            &parts.start_layers,
            &parts.hook_layers,
            |set, stack| set.wrap_start(stack),
        );
        stacks.step = placed(&parts.hook_layers, &step.1, parts.names.step);
        stacks.start = placed(&parts.hook_layers, &start.1, parts.names.start);
        let hooks: Option<Arc<dyn LoopHooks>> = match parts.loop_hooks.len() {
            0 => None,
            1 => parts.loop_hooks.into_iter().next().map(|(_, h)| h),
            _ => Some(Arc::new(HookList(
                parts.loop_hooks.into_iter().map(|(_, h)| h).collect(),
            ))),
        };
        // Explicit wins; else the hooks' default (command hooks: per project).
        let transcripts = parts.transcripts.or_else(|| {
            hooks
                .as_ref()
                .and_then(|h| h.transcripts_dir().map(PathBuf::from))
        });
        Agent {
            inner: Arc::new(Inner {
                model,
                summarizer,
                hooks,
                tool_hooks: parts.hook_layers.into_iter().map(|(_, h)| h).collect(),
                step: step.0,
                start: start.0,
                stacks,
                transcripts,
                name: parts.name,
                tools: parts.tools,
                tool_stack: Arc::new(tool_stack),
                send_checks,
                setups: parts.setups.into(),
                prepares: parts.prepares,
                system_prompt: parts.system_prompt,
                max_steps: parts.max_steps,
                max_concurrent_tools: parts.max_concurrent_tools,
                eager_tools: parts.eager_tools,
                settings: parts.settings,
                store: parts.store.unwrap_or_else(|| Arc::new(MemoryStore::new())),
                // Read once here: a run does not read the process's directory again (as
                // `RunContext::builder` would without one), even if it could not be read.
                cwd: Some(
                    parts
                        .cwd
                        .or_else(|| std::env::current_dir().ok())
                        .unwrap_or_else(|| std::path::PathBuf::from(".")),
                ),
                shutdown: parts.shutdown,
            }),
        }
    }
}

/// The names of a level's stack: the sets whose layer was placed (`placed[i]` for set `i`),
/// then the builder's layers.
fn placed(
    sets: &[(String, Arc<dyn HookLayers>)],
    placed: &[bool],
    layers: Vec<String>,
) -> Vec<String> {
    let hooks = sets
        .iter()
        .zip(placed)
        .filter(|(_, placed)| **placed)
        .map(|((name, _), _)| name.clone());
    hooks.chain(layers).collect()
}

/// A level's stack (start, step): `layers` (the first outermost) over `base`, under the sets'
/// layers (`wrap`; the first set outermost), and which sets placed one; `None` without any
/// layer (the loop then calls no stack at that level).
fn level_stack<S: Clone>(
    base: S,
    layers: &[Arc<dyn Fn(S) -> S + Send + Sync>],
    sets: &[(String, Arc<dyn HookLayers>)],
    wrap: impl Fn(&dyn HookLayers, S) -> Option<S>,
) -> (Option<S>, Vec<bool>) {
    let mut stack = layers.iter().rev().fold(base, |inner, layer| layer(inner));
    let mut placed = vec![false; sets.len()];
    for (i, (_, set)) in sets.iter().enumerate().rev() {
        if let Some(wrapped) = wrap(set.as_ref(), stack.clone()) {
            stack = wrapped;
            placed[i] = true;
        }
    }
    let any = !layers.is_empty() || placed.contains(&true);
    (any.then_some(stack), placed)
}

impl<M, L> fmt::Debug for AgentBuilder<M, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("tools", &self.parts.tools)
            .field(
                "tool_layer",
                &format_args!("{}", std::any::type_name::<L>()),
            )
            .field("setups", &self.parts.setups.len())
            .field("prepares", &self.parts.prepares.len())
            .field("system_prompt", &self.parts.system_prompt)
            .field("max_steps", &self.parts.max_steps)
            .field("max_concurrent_tools", &self.parts.max_concurrent_tools)
            .finish_non_exhaustive()
    }
}
