//! The start level: layers that see a run start, before its prompt enters the thread.
//!
//! Once the thread is loaded and the run's context made, the loop calls the agent's start
//! stack with a [`RunStart`]: the context, whether the session starts or resumes, the prompt
//! and the contexts the caller gave. Each layer may add context for the system message
//! ([`system_context`](RunStart::system_context)), rewrite the prompt or add context after it
//! ([`prompt_context`](RunStart::prompt_context)), or refuse the run
//! ([`block`](RunStart::block)); the start the stack answers is the one the run takes. The
//! innermost service answers the start as it got it. Layers added with
//! [`AgentBuilder::start_layer`](super::AgentBuilder::start_layer) wrap it, the first added
//! outermost; the SessionStart and UserPromptSubmit hooks of a
//! `HookSet` are one such layer
//! (`HookSet::start_layer`, installed outermost
//! by [`AgentBuilder::hooks`](super::AgentBuilder::hooks)).
//!
//! An agent without start layers calls no service.
//!
//! # Example
//!
//! A layer that refuses prompts over 1,000 bytes and tells the model the date:
//!
//! ```
//! use tower::ServiceExt;
//! use tower_agent_core::{Agent, BoxError, agent::{Outcome, start::RunStart}, model::ScriptedModel};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tower_agent_core::Error> {
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().text("hi").recording())
//!     .start_layer(tower::layer::layer_fn(|inner: tower_agent_core::agent::start::BoxStartService| {
//!         tower::service_fn(move |mut start: RunStart| {
//!             let inner = inner.clone();
//!             async move {
//!                 if start.prompt.as_ref().is_some_and(|p| p.len() > 1_000) {
//!                     return Ok::<_, BoxError>(start.block("the prompt is too long"));
//!                 }
//!                 start.system_context.push("Today is 2026-11-26.".into());
//!                 inner.oneshot(start).await
//!             }
//!         })
//!     }))
//!     .build();
//! let resp = agent.run("x".repeat(2_000)).await?;
//! assert_eq!(resp.outcome, Outcome::Blocked { reason: "the prompt is too long".into() });
//! assert!(agent.run("hello").await?.outcome.is_finished());
//! # Ok(())
//! # }
//! ```

use std::task::{Context, Poll};

use tower::{Service, util::BoxCloneSyncService};

use super::hooks::SessionSource;
use crate::{context::RunContext, error::BoxError};

/// A run starting, for the start stack.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunStart {
    /// The run's context.
    pub ctx: RunContext,
    /// Whether the session starts (a new thread) or resumes (a thread with history).
    pub source: SessionSource,
    /// The model the agent's settings name.
    pub model: Option<String>,
    /// The prompt, which enters the thread once the run starts; `None` for a run without one
    /// (a recovery, an answer to approvals).
    pub prompt: Option<String>,
    /// Contexts for the run's system message, in order (every model call of the run sees
    /// them; not saved in the thread).
    pub system_context: Vec<String>,
    /// Contexts added after the prompt, in order, as one [hook
    /// context](crate::message::Message::hook_context) message (saved in the thread): the
    /// SessionStart hooks', then the UserPromptSubmit hooks', as Claude Code places them.
    pub prompt_context: Vec<String>,
    /// Why a layer refused the run: it ends
    /// [`Outcome::Blocked`](crate::agent::Outcome::Blocked) before the prompt enters the
    /// thread.
    pub blocked: Option<String>,
    /// The setup the request asked for ([`AgentRequest::setup`](crate::AgentRequest::setup)):
    /// Setup hooks fire.
    pub setup: Option<SetupTrigger>,
    /// The expansion a layer made of the prompt ([`expand`](Self::expand)): UserPromptExpansion
    /// hooks see it on the way out.
    pub expansion: Option<PromptExpansion>,
    /// The conversation a resumed run goes on with (the thread as loaded, shared: cloning it
    /// is a reference count): what a layer that reports on a resumed session reads (the
    /// hooks' SessionStart `context_tokens` count it). `None` for a new thread.
    pub history: Option<crate::message::Messages>,
    /// The tools the agent was built with ([`AgentBuilder::tool`](crate::agent::AgentBuilder::tool)),
    /// shared: what a layer reporting the session's tools at its start reads (an AGENT-HOOKS
    /// `agent_startup`'s `tools_registered`). Setup stages add theirs after the start stack.
    pub tools: std::sync::Arc<Vec<crate::message::ToolSpec>>,
}

impl RunStart {
    /// The start of a run at `ctx`, from `source`, with `prompt`.
    pub fn new(ctx: RunContext, source: SessionSource, prompt: Option<String>) -> Self {
        RunStart {
            ctx,
            source,
            model: None,
            prompt,
            system_context: Vec::new(),
            prompt_context: Vec::new(),
            blocked: None,
            setup: None,
            expansion: None,
            history: None,
            tools: std::sync::Arc::default(),
        }
    }

    /// This start with its prompt replaced by `expanded`, the expansion recorded in
    /// [`expansion`](Self::expansion) (the typed prompt is
    /// [`PromptExpansion::prompt`]): what a layer that expands slash commands answers, such as
    /// `SlashCommands`.
    #[must_use]
    pub fn expand(mut self, expansion: PromptExpansion, expanded: impl Into<String>) -> Self {
        self.prompt = Some(expanded.into());
        self.expansion = Some(expansion);
        self
    }

    /// This start refused with `reason` (see [`blocked`](Self::blocked)).
    #[must_use]
    pub fn block(mut self, reason: impl Into<String>) -> Self {
        self.blocked = Some(reason.into());
        self
    }

    /// Runs the session-start work of the agent's setup stages
    /// ([`Setup::at_session_start`](super::Setup::at_session_start): the memory files are read
    /// there), then waits for the hook work it fired ([`RunHooks::wait_for`](super::RunHooks::wait_for)).
    ///
    /// The work runs once per run: the first call runs it, later calls (and the loop, which
    /// runs it after the start stack if no layer did) do nothing. A layer of the start stack
    /// calls it at the point of its own work where the session's instructions must be
    /// loaded: the hooks' start layer calls it after the SessionStart hooks and before the
    /// UserPromptSubmit hooks, as Claude Code loads them. A layer that refuses the run need
    /// not call it.
    pub async fn session_start_work(&self) {
        super::stage::session_start_work(&self.ctx).await;
    }
}

/// Why a run asks for setup ([`AgentRequest::setup`](crate::AgentRequest::setup)): the
/// `trigger` of a Setup hook's input, which its matcher is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SetupTrigger {
    /// `"init"`: the project is set up for the first time (Claude Code's `--init`).
    Init,
    /// `"maintenance"`: periodic upkeep (Claude Code's `--maintenance`).
    Maintenance,
}

impl SetupTrigger {
    /// The protocol value: `init` or `maintenance`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SetupTrigger::Init => "init",
            SetupTrigger::Maintenance => "maintenance",
        }
    }
}

/// What kind of command a prompt expanded from (`expansion_type` in a UserPromptExpansion
/// hook's input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExpansionKind {
    /// `"slash_command"`: a `/name args` prompt whose command file gave the text.
    SlashCommand,
    /// `"mcp_prompt"`: an MCP server's prompt gave the text.
    McpPrompt,
}

impl ExpansionKind {
    /// The protocol value: `slash_command` or `mcp_prompt`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ExpansionKind::SlashCommand => "slash_command",
            ExpansionKind::McpPrompt => "mcp_prompt",
        }
    }
}

/// A prompt that a layer of the start stack expanded ([`RunStart::expand`]): what a
/// UserPromptExpansion hook sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptExpansion {
    /// What kind of command it was.
    pub kind: ExpansionKind,
    /// The command's name (`review` for `/review src`; the UserPromptExpansion matcher is
    /// compared with it).
    pub name: String,
    /// What followed the name (`src`).
    pub args: String,
    /// Where the command came from (`project`, `user`, a plugin's name, an MCP server's).
    pub source: String,
    /// The prompt as typed (`/review src`).
    pub prompt: String,
}

impl PromptExpansion {
    /// An expansion of `kind` of the command `name` with `args`, from `source`, of the typed
    /// `prompt`.
    pub fn new(
        kind: ExpansionKind,
        name: impl Into<String>,
        args: impl Into<String>,
        source: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        PromptExpansion {
            kind,
            name: name.into(),
            args: args.into(),
            source: source.into(),
            prompt: prompt.into(),
        }
    }
}

/// The agent's start stack, boxed.
pub type BoxStartService = BoxCloneSyncService<RunStart, RunStart, BoxError>;

/// The innermost service of a start stack: the start as it got it, at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Begin;

impl Service<RunStart> for Begin {
    type Response = RunStart;
    type Error = BoxError;
    type Future = std::future::Ready<Result<RunStart, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, start: RunStart) -> Self::Future {
        std::future::ready(Ok(start))
    }
}

/// A layer of the start stack, as the agent keeps it.
pub(crate) type StartLayerFn = dyn Fn(BoxStartService) -> BoxStartService + Send + Sync;
