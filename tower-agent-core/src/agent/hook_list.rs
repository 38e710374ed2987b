//! [`HookList`]: the loop hooks of several registrations, asked in order.

use std::{path::Path, sync::Arc};

use futures_util::future::BoxFuture;

use super::{
    AgentResponse,
    hooks::{
        InstructionsInput, LoopHooks, PostCompactInput, PreCompactInput, StopFailureInput,
        StopFeedback, StopInput, SubagentStartInput, TaskEvent, TaskInput,
    },
};
use crate::context::RunContext;

/// The [`LoopHooks`] of an agent with more than one registration
/// ([`AgentBuilder::hooks`](super::AgentBuilder::hooks),
/// [`AgentBuilder::loop_hooks`](super::AgentBuilder::loop_hooks)): each is asked in the order
/// registered, and only where it says it has something to run. How answers combine:
///
/// - observers (SessionEnd, StopFailure, InstructionsLoaded): every set, in order;
/// - SubagentStop: every set that has a hook for the subagent; the feedbacks of those that
///   send it back are joined by a newline, their contexts kept in order;
/// - SubagentStart, and the SessionStart contexts after a compaction: every set's, in order;
/// - TaskCreated / TaskCompleted and PreCompact: in order, until one prevents it (later sets
///   are not asked);
/// - the stop cap is the smallest; the transcripts directory the first set's that names one.
pub(super) struct HookList(pub(super) Vec<Arc<dyn LoopHooks>>);

impl LoopHooks for HookList {
    fn has_subagent_stop(&self, name: &str) -> bool {
        self.0.iter().any(|h| h.has_subagent_stop(name))
    }

    fn subagent_stop<'a>(
        &'a self,
        input: StopInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Option<StopFeedback>> {
        Box::pin(async move {
            let name = input.agent_name.clone().unwrap_or_default();
            let mut combined: Option<StopFeedback> = None;
            for hooks in self.0.iter().filter(|h| h.has_subagent_stop(&name)) {
                let Some(next) = hooks.subagent_stop(input.clone(), ctx).await else {
                    continue;
                };
                combined = Some(match combined {
                    None => next,
                    Some(mut so_far) => {
                        so_far.feedback.push('\n');
                        so_far.feedback.push_str(&next.feedback);
                        so_far.context.extend(next.context);
                        so_far
                    }
                });
            }
            combined
        })
    }

    fn stop_cap(&self) -> u32 {
        self.0.iter().map(|h| h.stop_cap()).min().unwrap_or(8)
    }

    fn transcripts_dir(&self) -> Option<&Path> {
        self.0.iter().find_map(|h| h.transcripts_dir())
    }

    fn session_end(&self, response: &AgentResponse, ctx: &RunContext) {
        self.0.iter().for_each(|h| h.session_end(response, ctx));
    }

    fn stop_failure(&self, input: &StopFailureInput, ctx: &RunContext) {
        self.0.iter().for_each(|h| h.stop_failure(input, ctx));
    }

    fn has_subagent_start(&self, agent_type: &str) -> bool {
        self.0.iter().any(|h| h.has_subagent_start(agent_type))
    }

    fn subagent_start<'a>(
        &'a self,
        input: SubagentStartInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let mut contexts = Vec::new();
            for hooks in self
                .0
                .iter()
                .filter(|h| h.has_subagent_start(&input.agent_type))
            {
                contexts.extend(hooks.subagent_start(input.clone(), ctx).await);
            }
            contexts
        })
    }

    fn has_task(&self, event: TaskEvent) -> bool {
        self.0.iter().any(|h| h.has_task(event))
    }

    fn task<'a>(
        &'a self,
        input: TaskInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            for hooks in self.0.iter().filter(|h| h.has_task(input.event)) {
                hooks.task(input.clone(), ctx).await?;
            }
            Ok(())
        })
    }

    fn instructions_loaded(&self, input: &InstructionsInput, ctx: &RunContext) {
        self.0
            .iter()
            .for_each(|h| h.instructions_loaded(input, ctx));
    }

    fn pre_compact<'a>(
        &'a self,
        input: PreCompactInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            for hooks in &self.0 {
                hooks.pre_compact(input.clone(), ctx).await?;
            }
            Ok(())
        })
    }

    fn compacted<'a>(
        &'a self,
        input: PostCompactInput,
        model: Option<String>,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let mut contexts = Vec::new();
            for hooks in &self.0 {
                contexts.extend(hooks.compacted(input.clone(), model.clone(), ctx).await);
            }
            contexts
        })
    }
}
