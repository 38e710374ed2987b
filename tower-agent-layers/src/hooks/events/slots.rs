//! Where a compiled [`HookSet`](super::super::HookSet) keeps its hooks: a slot per
//! registration method of [`Hooks`].

use std::sync::Arc;

use super::{CwdChanged, CwdChangedInput, ModelSwitchInput, PostModelSwitch, PreModelSwitch};
use crate::hooks::{
    BeforeModel, DirectoryAdded, DirectoryAddedInput, FileChanged, FileChangedInput, HookFuture,
    InstructionsInput, MessageDisplay, MessageDisplayInput, Notification, PermissionDenied,
    PermissionRequest, PostCompactInput, PostToolBatch, PostToolUse, PostToolUseFailure,
    PreCompact, PreCompactInput, PreToolUse, SessionStart, SessionStartInput, Setup, Stop,
    StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskInput, ToolBatch,
    ToolFailure, UserPrompt,
};
use crate::matcher::ToolMatcher;
use tower_agent_core::{
    agent::{
        AgentResponse,
        start::{PromptExpansion, SetupTrigger},
    },
    context::RunContext,
    message::{ToolCall, ToolOutput},
    model::{ModelRequest, ModelResponse},
};

/// A stored deciding hook of one argument: it answers a future of its decision.
pub(crate) type Decide1<A, D> = dyn Fn(A) -> HookFuture<D> + Send + Sync;

/// A stored deciding hook of two arguments.
pub(crate) type Decide2<A, B, D> = dyn Fn(A, B) -> HookFuture<D> + Send + Sync;

/// A stored deciding hook of three arguments.
pub(crate) type Decide3<A, B, C, D> = dyn Fn(A, B, C) -> HookFuture<D> + Send + Sync;

/// A stored observer of an event's input: it answers nothing, at once.
pub(crate) type Observe<T> = dyn Fn(&T, &RunContext) + Send + Sync;

/// A stored observer of a step (its number), answering at once.
pub(crate) type ObserveStep<T> = dyn Fn(u32, &RunContext) -> T + Send + Sync;

/// The type of a stored TaskCreated / TaskCompleted hook.
pub(crate) type TaskFn = Decide2<TaskInput, RunContext, Task>;

/// The type of a stored Stop / SubagentStop hook.
pub(crate) type StopFn = Decide2<StopInput, RunContext, Stop>;

/// A slot of hooks registered with a matcher.
pub(crate) type Matched<H> = Vec<(ToolMatcher, Arc<H>)>;

/// A slot of hooks registered without one.
pub(crate) type All<H> = Vec<Arc<H>>;

/// A compiled [`HookSet`](super::super::HookSet)'s hooks, a slot per registration method,
/// each in the resolved order.
#[derive(Default)]
pub(crate) struct HookSlots {
    /// [`before_tool_use`](Hooks::before_tool_use) (PreToolUse).
    pub(crate) before_tool_use: Matched<Decide2<Arc<ToolCall>, RunContext, PreToolUse>>,
    /// [`after_tool_use`](Hooks::after_tool_use) (PostToolUse).
    pub(crate) after_tool_use:
        Matched<Decide3<Arc<ToolCall>, Arc<ToolOutput>, RunContext, PostToolUse>>,
    /// [`on_tool_failure`](Hooks::on_tool_failure) (PostToolUseFailure).
    pub(crate) on_tool_failure:
        Matched<Decide3<Arc<ToolCall>, Arc<ToolFailure>, RunContext, PostToolUseFailure>>,
    /// [`on_user_prompt`](Hooks::on_user_prompt) (UserPromptSubmit).
    pub(crate) on_user_prompt: All<Decide2<Arc<str>, RunContext, UserPrompt>>,
    /// [`on_stop`](Hooks::on_stop) (Stop).
    pub(crate) on_stop: All<Decide2<StopInput, RunContext, Stop>>,
    /// [`on_subagent_stop`](Hooks::on_subagent_stop) (SubagentStop).
    pub(crate) on_subagent_stop: Matched<Decide2<StopInput, RunContext, Stop>>,
    /// [`on_session_start_for`](Hooks::on_session_start_for) (SessionStart).
    pub(crate) on_session_start_for: Matched<Decide2<SessionStartInput, RunContext, SessionStart>>,
    /// [`on_session_end`](Hooks::on_session_end) (SessionEnd).
    pub(crate) on_session_end: All<Observe<AgentResponse>>,
    /// [`on_pre_compact`](Hooks::on_pre_compact) (PreCompact).
    pub(crate) on_pre_compact: Matched<Decide2<PreCompactInput, RunContext, PreCompact>>,
    /// [`on_notify`](Hooks::on_notify) (Notification).
    pub(crate) on_notify: Matched<Observe<Notification>>,
    /// [`before_model`](Hooks::before_model) (BeforeModel).
    pub(crate) before_model: All<Decide1<ModelRequest, BeforeModel>>,
    /// [`after_model`](Hooks::after_model) (AfterModel).
    pub(crate) after_model: All<Decide2<ModelResponse, RunContext, ModelResponse>>,
    /// [`on_subagent_start`](Hooks::on_subagent_start) (SubagentStart).
    pub(crate) on_subagent_start: Matched<Decide2<SubagentStartInput, RunContext, SubagentStart>>,
    /// [`on_task_created`](Hooks::on_task_created) (TaskCreated).
    pub(crate) on_task_created: All<Decide2<TaskInput, RunContext, Task>>,
    /// [`on_task_completed`](Hooks::on_task_completed) (TaskCompleted).
    pub(crate) on_task_completed: All<Decide2<TaskInput, RunContext, Task>>,
    /// [`on_stop_failure`](Hooks::on_stop_failure) (StopFailure).
    pub(crate) on_stop_failure: Matched<Observe<StopFailureInput>>,
    /// [`on_instructions_loaded`](Hooks::on_instructions_loaded) (InstructionsLoaded).
    pub(crate) on_instructions_loaded: Matched<Observe<InstructionsInput>>,
    /// [`on_message_display`](Hooks::on_message_display) (MessageDisplay).
    pub(crate) on_message_display: All<Decide2<MessageDisplayInput, RunContext, MessageDisplay>>,
    /// [`on_post_compact`](Hooks::on_post_compact) (PostCompact).
    pub(crate) on_post_compact: Matched<Observe<PostCompactInput>>,
    /// [`on_permission_request`](Hooks::on_permission_request) (PermissionRequest).
    pub(crate) on_permission_request:
        Matched<Decide2<Arc<ToolCall>, RunContext, PermissionRequest>>,
    /// [`on_permission_denied`](Hooks::on_permission_denied) (PermissionDenied).
    pub(crate) on_permission_denied:
        Matched<Decide3<Arc<ToolCall>, Arc<str>, RunContext, PermissionDenied>>,
    /// [`on_post_tool_batch`](Hooks::on_post_tool_batch) (PostToolBatch).
    pub(crate) on_post_tool_batch: All<Decide2<Arc<ToolBatch>, RunContext, PostToolBatch>>,
    /// [`on_cwd_changed`](Hooks::on_cwd_changed) (CwdChanged).
    pub(crate) on_cwd_changed: All<Decide2<CwdChangedInput, RunContext, CwdChanged>>,
    /// [`on_pre_model_switch`](Hooks::on_pre_model_switch) (PreModelSwitch).
    pub(crate) on_pre_model_switch: Matched<Decide2<ModelSwitchInput, RunContext, PreModelSwitch>>,
    /// [`on_post_model_switch`](Hooks::on_post_model_switch) (PostModelSwitch).
    pub(crate) on_post_model_switch:
        Matched<Decide2<ModelSwitchInput, RunContext, PostModelSwitch>>,
    /// [`on_setup`](Hooks::on_setup) (Setup).
    pub(crate) on_setup: Matched<Decide2<SetupTrigger, RunContext, Setup>>,
    /// [`on_directory_added`](Hooks::on_directory_added) (DirectoryAdded).
    pub(crate) on_directory_added:
        Matched<Decide2<DirectoryAddedInput, RunContext, DirectoryAdded>>,
    /// [`on_prompt_expansion`](Hooks::on_prompt_expansion) (UserPromptExpansion).
    pub(crate) on_prompt_expansion: Matched<Decide2<Arc<PromptExpansion>, RunContext, UserPrompt>>,
    /// [`on_file_changed`](Hooks::on_file_changed) (FileChanged).
    pub(crate) on_file_changed: Matched<Decide2<FileChangedInput, RunContext, FileChanged>>,
    /// [`before_step`](Hooks::before_step) (step start).
    pub(crate) before_step: All<ObserveStep<()>>,
    /// [`after_step`](Hooks::after_step) (step end).
    pub(crate) after_step: All<ObserveStep<()>>,
    /// [`should_continue`](Hooks::should_continue) (step end).
    pub(crate) should_continue: All<ObserveStep<bool>>,
}

impl HookSlots {
    /// Whether any hook fires at `level` (`start`, `step`, `model`, `tool`, `builtin` for the
    /// built-in tools, `end` for the run's end): the agent leaves out a level's layer that has
    /// none.
    ///
    /// NOTE: a new registration method belongs to each level whose layer fires its event.
    pub(crate) fn any_at(&self, level: &str) -> bool {
        let counts: &[usize] = match level {
            "start" => &[
                self.on_user_prompt.len(),
                self.on_session_start_for.len(),
                self.on_notify.len(),
                self.on_cwd_changed.len(),
                self.on_setup.len(),
                self.on_directory_added.len(),
                self.on_prompt_expansion.len(),
                self.on_file_changed.len(),
            ],
            "step" => &[
                self.on_stop.len(),
                self.on_post_tool_batch.len(),
                self.on_cwd_changed.len(),
                self.on_file_changed.len(),
                self.after_step.len(),
                self.should_continue.len(),
            ],
            "model" => &[
                self.on_session_start_for.len(),
                self.on_pre_compact.len(),
                self.before_model.len(),
                self.after_model.len(),
                self.on_message_display.len(),
                self.on_post_compact.len(),
                self.on_pre_model_switch.len(),
                self.on_post_model_switch.len(),
                self.before_step.len(),
            ],
            "tool" => &[
                self.before_tool_use.len(),
                self.after_tool_use.len(),
                self.on_tool_failure.len(),
                self.on_permission_request.len(),
                self.on_permission_denied.len(),
            ],
            "builtin" => &[
                self.on_subagent_stop.len(),
                self.on_subagent_start.len(),
                self.on_task_created.len(),
                self.on_task_completed.len(),
                self.on_instructions_loaded.len(),
            ],
            "end" => &[self.on_session_end.len(), self.on_stop_failure.len()],
            _ => &[],
        };
        counts.iter().any(|&n| n > 0)
    }
}
