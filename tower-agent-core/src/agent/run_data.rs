//! What the loop keeps in a run's data about the run itself, for the layers that report it:
//! [`RunModel`], [`RunEffort`], [`RunPrompt`].

use std::sync::Arc;

use crate::{context::RunContext, model::ReasoningEffort};

/// The model the agent's settings name ([`ModelSettings::model`](crate::model::ModelSettings::model)),
/// kept in a run's data from the moment its context is made: for a layer or a hook that
/// reports it (tower-agent's command hooks give it to Codex hooks as `model`). Absent when the
/// settings name no model (the provider's default is used).
///
/// # Example
///
/// ```
/// use tower_agent_core::{Agent, agent::RunModel, model::{ModelResponse, ModelSettings, ScriptedModel}};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower_agent_core::Error> {
/// let agent = Agent::builder()
///     .model(ScriptedModel::from_fn(|req| {
///         let model = RunModel::of(&req.ctx).unwrap_or_default();
///         Ok(ModelResponse::text(format!("I am {model}")))
///     }))
///     .settings(ModelSettings::default().model("small-1"))
///     .build();
/// assert_eq!(agent.run("who are you?").await?.text, "I am small-1");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunModel(Arc<str>);

impl RunModel {
    /// `model`, to keep in a run's data (what the loop does; a test of a layer can too).
    pub fn new(model: impl Into<Arc<str>>) -> Self {
        RunModel(model.into())
    }

    /// The model of the run of `ctx`, if its agent's settings name one.
    pub fn of(ctx: &RunContext) -> Option<Arc<str>> {
        ctx.with_data(|d| d.get::<RunModel>().map(|m| Arc::clone(&m.0)))
    }
}

/// How hard the agent asks its model to think
/// ([`ModelSettings::reasoning_effort`](crate::model::ModelSettings::reasoning_effort)), kept in
/// a run's data from the moment its context is made: for a layer or a hook that reports it
/// (tower-agent's command hooks give it to Claude Code hooks as `effort: {"level": …}`).
/// Absent when the settings set none.
///
/// ```
/// use tower_agent_core::{agent::RunEffort, context::RunContext, model::ReasoningEffort};
///
/// let ctx = RunContext::new();
/// assert_eq!(RunEffort::of(&ctx), None);
/// // What the loop does as a run starts (a test of a layer can do the same):
/// ctx.with_data(|d| d.insert(RunEffort::new(ReasoningEffort::High)));
/// assert_eq!(RunEffort::of(&ctx), Some(ReasoningEffort::High));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEffort(ReasoningEffort);

impl RunEffort {
    /// `effort`, to keep in a run's data.
    pub fn new(effort: ReasoningEffort) -> Self {
        RunEffort(effort)
    }

    /// The effort of the run of `ctx`, if its agent's settings set one.
    pub fn of(ctx: &RunContext) -> Option<ReasoningEffort> {
        ctx.with_data(|d| d.get::<RunEffort>().map(|e| e.0.clone()))
    }
}

/// The run's prompt as its request gave it ([`AgentRequest::prompt`](super::AgentRequest::prompt),
/// before any layer of the start stack rewrote it), kept in a run's data from the start of
/// the run: for a layer or a hook that reports it (tower-agent's command hooks give it to
/// Gemini CLI's AfterAgent hooks as `prompt`). Absent for a run without a prompt (a
/// recovery, an answer to approvals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPrompt(Arc<str>);

impl RunPrompt {
    /// `prompt`, to keep in a run's data.
    pub fn new(prompt: impl Into<Arc<str>>) -> Self {
        RunPrompt(prompt.into())
    }

    /// The prompt of the run of `ctx`, if it has one.
    pub fn of(ctx: &RunContext) -> Option<Arc<str>> {
        ctx.with_data(|d| d.get::<RunPrompt>().map(|p| Arc::clone(&p.0)))
    }
}
