//! The two faces a [`HookSet`] shows the agent's builder: the points only the loop fires
//! ([`LoopHooks`]) and the layers the builder places ([`HookLayers`]).

use super::*;

/// The loop side of the registry: SessionStart, UserPromptSubmit, step observers,
/// should_continue, Stop / SubagentStop, SessionEnd and Notification run inside the loop
/// through this; the model and tool hooks wrap the stacks.
impl LoopHooks for HookSet {
    fn has_subagent_stop(&self, name: &str) -> bool {
        self.inner
            .on_subagent_stop
            .iter()
            .any(|(m, _)| m.matches_name(name))
    }

    fn subagent_stop<'a>(
        &'a self,
        input: StopInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Option<StopFeedback>> {
        Box::pin(async move {
            let name = input.agent_name.clone().unwrap_or_default();
            self.inner.stop(Some(&name), input, ctx).await
        })
    }

    fn stop_cap(&self) -> u32 {
        self.inner.stop_cap
    }

    fn transcripts_dir(&self) -> Option<&std::path::Path> {
        self.inner.transcripts.as_deref()
    }

    fn session_end(&self, response: &AgentResponse, ctx: &RunContext) {
        self.inner
            .on_session_end
            .iter()
            .for_each(|f| f(response, ctx));
    }

    fn stop_failure(&self, input: &StopFailureInput, ctx: &RunContext) {
        for (m, f) in &self.inner.on_stop_failure {
            if m.matches_name(input.error) {
                f(input, ctx);
            }
        }
    }

    fn has_subagent_start(&self, agent_type: &str) -> bool {
        self.inner
            .on_subagent_start
            .iter()
            .any(|(m, _)| m.matches_name(agent_type))
    }

    fn subagent_start<'a>(
        &'a self,
        input: SubagentStartInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let mut contexts = Vec::new();
            for (m, f) in &self.inner.on_subagent_start {
                if m.matches_name(&input.agent_type)
                    && let SubagentStart::AddContext(text) = f(input.clone(), ctx.clone()).await
                {
                    contexts.push(text);
                }
            }
            contexts
        })
    }

    fn has_task(&self, event: TaskEvent) -> bool {
        !self.inner.task_hooks(event).is_empty()
    }

    fn task<'a>(
        &'a self,
        input: TaskInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            for f in self.inner.task_hooks(input.event) {
                if let Task::Block(reason) = f(input.clone(), ctx.clone()).await {
                    return Err(reason);
                }
            }
            Ok(())
        })
    }

    fn instructions_loaded(&self, input: &InstructionsInput, ctx: &RunContext) {
        for (m, f) in &self.inner.on_instructions_loaded {
            if m.matches_name(input.load_reason) {
                f(input, ctx);
            }
        }
    }

    fn pre_compact<'a>(
        &'a self,
        input: tower_agent_core::agent::PreCompactInput,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.inner.pre_compact(input, ctx))
    }

    fn compacted<'a>(
        &'a self,
        input: PostCompactInput,
        model: Option<String>,
        ctx: &'a RunContext,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move { self.inner.compacted(&input, model, ctx).await })
    }
}

/// The set's layers, which [`AgentBuilder::hooks`](tower_agent_core::agent::AgentBuilder::hooks) places
/// outermost at each level: [`HookModel`] (model), [`HookTool`] (tool), and the start and
/// step layers when the set has hooks there (see [`HookLayers`] for the positions).
impl HookLayers for HookSet {
    fn wrap_model(
        &self,
        model: tower_agent_core::model::BoxModelService,
    ) -> tower_agent_core::model::BoxModelService {
        tower_agent_core::model::BoxModelService::new(HookModel::new(model, self))
    }

    fn wrap_tools(
        &self,
        tools: tower_agent_core::tool::BoxToolService,
    ) -> tower_agent_core::tool::BoxToolService {
        tower_agent_core::tool::BoxToolService::new(HookTool::new(tools, self))
    }

    fn wrap_start(&self, start: BoxStartService) -> Option<BoxStartService> {
        self.inner
            .any_at("start")
            .then(|| BoxStartService::new(self.start_layer().layer(start)))
    }

    fn wrap_step(&self, step: BoxStepService) -> Option<BoxStepService> {
        (self.inner.any_at("step") || !self.inner.settings.is_empty())
            .then(|| BoxStepService::new(self.step_layer().layer(step)))
    }
}
