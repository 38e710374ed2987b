//! [`LoopHooks`]: what the loop asks of agent-level hooks.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::AgentResponse;
use crate::{context::RunContext, model::BoxModelService, tool::BoxToolService};

/// What a Stop / SubagentStop hook sees.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StopInput {
    /// The agent's last answer.
    pub last_assistant_message: String,
    /// Whether the agent is already continuing because of a stop hook.
    pub stop_hook_active: bool,
    /// For SubagentStop: the subagent's (tool) name.
    pub agent_name: Option<String>,
    /// For SubagentStop: the subagent's own JSONL transcript (nested under its parent's, in
    /// `subagents/`), if the calling run keeps a transcript.
    pub agent_transcript_path: Option<std::path::PathBuf>,
}

impl StopInput {
    /// The input of a Stop hook (`agent_name` is `None`).
    pub fn new(last_assistant_message: impl Into<String>, stop_hook_active: bool) -> Self {
        StopInput {
            last_assistant_message: last_assistant_message.into(),
            stop_hook_active,
            agent_name: None,
            agent_transcript_path: None,
        }
    }
}

/// Agent-level hooks: what must happen inside the loop, at points no tower layer around the
/// agent, the model or the tools can reach. The loop owns this trait; the callback registry
/// ([`HookSet`](crate::layers::hooks::HookSet)) implements it, and
/// [`AgentBuilder::hooks`](super::AgentBuilder::hooks) takes any implementation.
///
/// Every method has a default that does nothing (or lets the run go on), so an
/// implementation names only the points it uses. Synchronous methods are called on the loop's
/// task: keep them short.
pub trait LoopHooks: Send + Sync + 'static {
    /// Once per run, before [`session_start`](Self::session_start): set up per-run data
    /// (observers of [`RunContext::warn`], data for subagents).
    fn run_start(&self, ctx: &RunContext) {
        let _ = ctx;
    }

    /// SessionStart: `Err(reason)` blocks the run before its prompt enters the thread, else
    /// the contexts to add to the run's system prompt, in order.
    fn session_start<'a>(
        &'a self,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        let _ = ctx;
        Box::pin(async { Ok(Vec::new()) })
    }

    /// UserPromptSubmit: `Err(reason)` blocks the run (the prompt never enters the thread),
    /// else the prompt (maybe rewritten) and contexts to add after it, in order.
    fn user_prompt<'a>(
        &'a self,
        prompt: String,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(String, Vec<String>), String>> {
        let _ = ctx;
        Box::pin(async { Ok((prompt, Vec::new())) })
    }

    /// A step starts (`ctx` is at that step).
    fn before_step(&self, step: u32, ctx: &RunContext) {
        let _ = (step, ctx);
    }

    /// A step ended (its results are in the history).
    fn after_step(&self, step: u32, ctx: &RunContext) {
        let _ = (step, ctx);
    }

    /// After a step with tool calls: `false` ends the run
    /// ([`Outcome::Blocked`](super::Outcome::Blocked)).
    fn should_continue(&self, step: u32, ctx: &RunContext) -> bool {
        let _ = (step, ctx);
        true
    }

    /// Whether any Stop hook (`subagent: None`) or SubagentStop hook for that subagent name
    /// would run: when `false`, [`stop`](Self::stop) is not called.
    fn has_stop(&self, subagent: Option<&str>) -> bool {
        let _ = subagent;
        false
    }

    /// Stop / SubagentStop (`input.agent_name` set): `Some(feedback)` sends the agent back to
    /// work with `feedback` as a user message, `None` lets it finish.
    fn stop<'a>(&'a self, input: StopInput, ctx: &'a RunContext) -> BoxFuture<'a, Option<String>> {
        let _ = (input, ctx);
        Box::pin(async { None })
    }

    /// How many times in a row [`stop`](Self::stop) may send the agent back to work; the next
    /// attempt is overridden and the run finishes with a warning (Claude Code's rule: 8).
    fn stop_cap(&self) -> u32 {
        8
    }

    /// Where the agent keeps transcripts when its builder names no directory
    /// ([`AgentBuilder::transcripts`](super::AgentBuilder::transcripts) wins): command hooks
    /// give a per-project default, so their `transcript_path` is never empty.
    fn transcripts_dir(&self) -> Option<&std::path::Path> {
        None
    }

    /// The run ended with `response` (before its `AgentStop` event).
    fn session_end(&self, response: &AgentResponse, ctx: &RunContext) {
        let _ = (response, ctx);
    }

    /// Wraps the agent's model stack (outermost), once, when the agent is built.
    fn wrap_model(&self, model: BoxModelService) -> BoxModelService {
        model
    }

    /// Wraps a run's tool stack (outermost), once per run.
    fn wrap_tools(&self, tools: BoxToolService) -> BoxToolService {
        tools
    }
}

/// The loop hooks of the run that runs a tool, for subagents' SubagentStop hooks.
pub(crate) struct ParentHooks(pub(crate) Arc<dyn LoopHooks>);
