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
/// - observers (SessionEnd, StopFailure, InstructionsLoaded) and the run's end: every set, in
///   order;
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

    fn run_end<'a>(
        &'a self,
        response: &'a AgentResponse,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for hooks in &self.0 {
                hooks.run_end(response, ctx).await;
            }
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A set that sends every subagent back with `name`, prevents tasks when `blocks`, and
    /// counts what it was asked.
    struct Set {
        name: &'static str,
        blocks: bool,
        cap: u32,
        asked: std::sync::Mutex<Vec<&'static str>>,
    }

    impl Set {
        fn new(name: &'static str, blocks: bool, cap: u32) -> Arc<Set> {
            Arc::new(Set {
                name,
                blocks,
                cap,
                asked: std::sync::Mutex::new(Vec::new()),
            })
        }
    }

    impl LoopHooks for Set {
        fn has_subagent_stop(&self, _: &str) -> bool {
            true
        }
        fn subagent_stop<'a>(
            &'a self,
            _: StopInput,
            _: &'a RunContext,
        ) -> BoxFuture<'a, Option<StopFeedback>> {
            let mut feedback = StopFeedback::new(self.name);
            feedback.context.push(format!("{} context", self.name));
            Box::pin(async move { Some(feedback) })
        }
        fn stop_cap(&self) -> u32 {
            self.cap
        }
        fn has_task(&self, _: TaskEvent) -> bool {
            true
        }
        fn task<'a>(
            &'a self,
            _: TaskInput,
            _: &'a RunContext,
        ) -> BoxFuture<'a, Result<(), String>> {
            self.asked.lock().unwrap().push("task");
            let result = if self.blocks {
                Err(format!("{} says no", self.name))
            } else {
                Ok(())
            };
            Box::pin(async move { result })
        }
    }

    #[tokio::test]
    async fn answers_combine_in_the_order_registered() {
        let (a, b, c) = (
            Set::new("a", false, 8),
            Set::new("b", true, 3),
            Set::new("c", true, 5),
        );
        let list = HookList(vec![a.clone(), b.clone(), c.clone()]);
        let ctx = RunContext::new();
        // SubagentStop: every set's feedback, joined by a newline; contexts in order.
        let feedback = list
            .subagent_stop(StopInput::new("done", false), &ctx)
            .await
            .unwrap();
        assert_eq!(feedback.feedback, "a\nb\nc");
        assert_eq!(feedback.context, ["a context", "b context", "c context"]);
        // The smallest cap.
        assert_eq!(list.stop_cap(), 3);
        // A task: asked in order until one prevents it; later sets are not asked.
        let input = TaskInput::new(TaskEvent::Created, "1", "x");
        assert_eq!(list.task(input, &ctx).await, Err("b says no".to_owned()));
        assert_eq!(a.asked.lock().unwrap().len(), 1);
        assert_eq!(b.asked.lock().unwrap().len(), 1);
        assert!(c.asked.lock().unwrap().is_empty());
    }
}
