//! PreCompact and PostCompact of a compaction, and SessionStart with source `compact` after it:
//! fired by the model hook layer for the summarize layer's compactions (trigger `auto`), and
//! by [`Agent::compact`](tower_agent_core::Agent::compact) for the caller's (trigger `manual`).

use super::{
    HookFuture, HookResult, HookSetInner, PostCompactInput, SessionSource, SessionStartInput,
    failure::Failed,
};
use tower_agent_core::{agent::PreCompactInput, context::RunContext};

/// What a PreCompact hook answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PreCompact {
    /// Let the compaction happen.
    #[default]
    Continue,
    /// Block it, with a reason: the thread stays as it is.
    Block(String),
}

impl HookResult<PreCompact> for PreCompact {
    fn into_hook_future(self) -> HookFuture<PreCompact> {
        HookFuture::ready(self)
    }
}

impl Failed for PreCompact {
    fn failed(reason: String, block: bool) -> Option<Self> {
        Some(if block {
            PreCompact::Block(reason)
        } else {
            PreCompact::Continue
        })
    }
}

impl HookSetInner {
    /// The PreCompact hooks matching the trigger, in order: the first block's reason.
    pub(super) async fn pre_compact(
        &self,
        input: PreCompactInput,
        ctx: &RunContext,
    ) -> Result<(), String> {
        for (m, f) in &self.on_pre_compact {
            if !m.matches_name(input.trigger) {
                continue;
            }
            if let PreCompact::Block(reason) = f(input.clone(), ctx.clone()).await {
                return Err(reason);
            }
        }
        Ok(())
    }

    /// SessionStart with source `compact`, then PostCompact (Claude Code's order, measured:
    /// vector `compact_manual`): the SessionStart contexts, in order. A block is not possible
    /// here: a warning.
    pub(super) async fn compacted(
        &self,
        input: &PostCompactInput,
        model: Option<String>,
        ctx: &RunContext,
    ) -> Vec<String> {
        let start = SessionStartInput::new(SessionSource::Compact, model);
        let contexts = match self.session_start(start, ctx).await {
            Ok(contexts) => contexts,
            Err(reason) => {
                ctx.warn(format!(
                    "a SessionStart hook (source compact) cannot block: {reason}"
                ));
                Vec::new()
            }
        };
        for (m, f) in &self.on_post_compact {
            if m.matches_name(input.trigger) {
                f(input, ctx);
            }
        }
        contexts
    }
}
