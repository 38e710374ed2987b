//! Setup and DirectoryAdded, fired by the start hook layer ([`HookStart`](super::HookStart)):
//! what a run's request asks of its environment.
//!
//! Setup fires when the request asks for it ([`AgentRequest::setup`](tower_agent_core::AgentRequest::setup)).
//! DirectoryAdded fires for each directory of the run
//! ([`RunContext::directories`]) that the thread's earlier runs did not have: the layer keeps
//! the thread's directories in its data (key `tower_agent.directories`, saved with the thread)
//! when its set has a DirectoryAdded hook.

use std::path::PathBuf;

use super::{HookFuture, HookResult, HookSetInner, failure::Failed};
use tower_agent_core::{
    agent::start::SetupTrigger,
    context::{RunContext, data::Persisted},
};

/// What a Setup hook answers. Setup cannot block the run (as in the protocol).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Setup {
    /// Nothing to add.
    #[default]
    Continue,
    /// Context for the run's system prompt.
    AddContext(String),
}

/// What a DirectoryAdded hook gets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectoryAddedInput {
    /// The directory, absolute when the run's directory is.
    pub directory: PathBuf,
    /// How it was added: `slash_command` (the request gave it, as Claude Code's `/add-dir`
    /// does).
    pub source: &'static str,
}

impl DirectoryAddedInput {
    /// `directory`, added by the request (`slash_command`).
    pub fn new(directory: impl Into<PathBuf>) -> Self {
        DirectoryAddedInput {
            directory: directory.into(),
            source: SOURCE,
        }
    }
}

/// What a DirectoryAdded hook answers: nothing to decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DirectoryAdded {
    /// Go on.
    #[default]
    Continue,
}

impl HookResult<Setup> for Setup {
    fn into_hook_future(self) -> HookFuture<Setup> {
        HookFuture::ready(self)
    }
}

impl HookResult<DirectoryAdded> for DirectoryAdded {
    fn into_hook_future(self) -> HookFuture<DirectoryAdded> {
        HookFuture::ready(self)
    }
}

impl Failed for Setup {
    fn failed(reason: String, block: bool) -> Option<Self> {
        if block {
            tracing::warn!("a fail-closed Setup hook failed; Setup cannot block: {reason}");
        }
        Some(Setup::Continue)
    }
}

impl Failed for DirectoryAdded {
    fn failed(_: String, _: bool) -> Option<Self> {
        Some(DirectoryAdded::Continue)
    }
}

/// The DirectoryAdded source of a directory a request gave.
const SOURCE: &str = "slash_command";

/// The directories a thread's runs were given, as a start hook layer with DirectoryAdded
/// hooks saw them.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Directories(Vec<PathBuf>);

impl Persisted for Directories {
    const KEY: &'static str = "tower_agent.directories";
}

impl HookSetInner {
    /// The Setup hooks matching `trigger`, in order: their contexts.
    pub(super) async fn setup(&self, trigger: SetupTrigger, ctx: &RunContext) -> Vec<String> {
        let mut contexts = Vec::new();
        for (m, f) in &self.on_setup {
            if !m.matches_name(trigger.as_str()) {
                continue;
            }
            if let Setup::AddContext(text) = f(trigger, ctx.clone()).await {
                contexts.push(text);
            }
        }
        contexts
    }

    /// The DirectoryAdded hooks, for each of the run's directories the thread did not have;
    /// the thread's list is updated first (a hook that fails does not fire again).
    pub(super) async fn directories_added(&self, ctx: &RunContext) {
        if self.on_directory_added.is_empty() || ctx.directories().is_empty() {
            return;
        }
        let known = ctx.persisted::<Directories>().unwrap_or_else(|err| {
            ctx.warn(format!(
                "the thread's `{}` data is not a list of paths: {err}",
                Directories::KEY
            ));
            None
        });
        let Directories(mut known) = known.unwrap_or_default();
        let added: Vec<PathBuf> = ctx
            .directories()
            .iter()
            .filter(|d| !known.contains(d))
            .cloned()
            .collect();
        if added.is_empty() {
            return;
        }
        known.extend(added.iter().cloned());
        if let Err(err) = ctx.persist(&Directories(known)) {
            ctx.warn(format!(
                "the run's directories could not be kept in the thread: {err}"
            ));
        }
        for directory in added {
            let input = DirectoryAddedInput::new(directory);
            for (m, f) in &self.on_directory_added {
                if m.matches_name(input.source) {
                    f(input.clone(), ctx.clone()).await;
                }
            }
        }
    }
}
