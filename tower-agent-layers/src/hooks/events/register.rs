//! The registration methods of [`Hooks`], one per event (and per Rust-only point), each
//! written out; what they share is below them: building the stored hook under its failure
//! policy, and putting it into its slot.

use std::sync::Arc;

use super::slots::{All, Decide1, Decide2, Decide3, HookSlots, Matched, Observe, ObserveStep};
use super::{CwdChanged, CwdChangedInput, ModelSwitchInput, PostModelSwitch, PreModelSwitch};
use crate::hooks::failure::{self, Failed, Policy};
use crate::hooks::{
    BeforeModel, DirectoryAdded, DirectoryAddedInput, FileChanged, FileChangedInput, HookResult,
    Hooks, InstructionsInput, MessageDisplay, MessageDisplayInput, Notification, PermissionDenied,
    PermissionRequest, PostCompactInput, PostToolBatch, PostToolUse, PostToolUseFailure,
    PreCompact, PreCompactInput, PreToolUse, SessionStart, SessionStartInput, Setup, Stop,
    StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskInput, ToolBatch,
    ToolFailure, UserPrompt, state,
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

/// The registration methods, one per row of the table.
impl<S> Hooks<S> {
    /// PreToolUse: before each matching tool call.
    pub fn before_tool_use<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolCall>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PreToolUse, M>,
    {
        self.add_matched("before_tool_use", matcher.into(), decide2(f), |s| {
            &mut s.before_tool_use
        })
    }

    /// PostToolUse: after each matching tool call that succeeded (its output is not
    /// an error).
    pub fn after_tool_use<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolCall>, Arc<ToolOutput>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PostToolUse, M>,
    {
        self.add_matched("after_tool_use", matcher.into(), decide3(f), |s| {
            &mut s.after_tool_use
        })
    }

    /// PostToolUseFailure: after each matching tool call that failed or returned an
    /// error output.
    pub fn on_tool_failure<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolCall>, Arc<ToolFailure>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PostToolUseFailure, M>,
    {
        self.add_matched("on_tool_failure", matcher.into(), decide3(f), |s| {
            &mut s.on_tool_failure
        })
    }

    /// UserPromptSubmit: before the prompt enters the thread.
    pub fn on_user_prompt<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(Arc<str>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<UserPrompt, M>,
    {
        self.add("on_user_prompt", decide2(f), |s| &mut s.on_user_prompt)
    }

    /// Stop: when the agent is about to finish (the model answered without tool
    /// calls).
    pub fn on_stop<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(StopInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<Stop, M>,
    {
        self.add("on_stop", decide2(f), |s| &mut s.on_stop)
    }

    /// SubagentStop: when a subagent ([`Agent::into_tool`](tower_agent_core::Agent::into_tool),
    /// `tower_agent::builtins::claude_code::AgentTool`) run by this agent
    /// finishes; the matcher picks subagents by tool name (by type for `AgentTool`).
    pub fn on_subagent_stop<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(StopInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<Stop, M>,
    {
        self.add_matched("on_subagent_stop", matcher.into(), decide2(f), |s| {
            &mut s.on_subagent_stop
        })
    }

    /// SessionStart for the sources `matcher` matches (`startup`, `resume`, `compact`;
    /// `"*"` for all), with the [`SessionStartInput`] (at `resume`, its
    /// [`resumed`](SessionStartInput::resumed) fields: the model hook layer keeps the
    /// time of the thread's last answer in the thread's data, key
    /// `tower_agent.last_response`, when its set has a SessionStart or model-switch
    /// hook). At `startup`/`resume` the contexts follow the prompt, before the
    /// UserPromptSubmit hooks' (one [hook context](tower_agent_core::message::Message::hook_context)
    /// message, saved in the thread, as Claude Code places them); at `compact` (right after a
    /// compaction) they are added to the history after the summary, and a block is
    /// ignored (with a warning). [`on_session_start`](Self::on_session_start) is the
    /// short form for `startup|resume`.
    pub fn on_session_start_for<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(SessionStartInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<SessionStart, M>,
    {
        self.add_matched("on_session_start_for", matcher.into(), decide2(f), |s| {
            &mut s.on_session_start_for
        })
    }

    /// SessionEnd: once per run, after it ended (observe only).
    pub fn on_session_end<F>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(&AgentResponse, &RunContext) + Send + Sync + 'static,
    {
        self.add("on_session_end", observe(f), |s| &mut s.on_session_end)
    }

    /// PreCompact of a compaction the caller asked for
    /// ([`Agent::compact`](tower_agent_core::Agent::compact), trigger `manual`): a
    /// [`PreCompact::Block`] leaves the thread as it is. The matcher is compared with
    /// the trigger. (The summarize layer's compactions, trigger `auto`, ask its
    /// [`on_compact`](crate::summarize::SummarizeLayer::on_compact) instead.)
    pub fn on_pre_compact<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(PreCompactInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PreCompact, M>,
    {
        self.add_matched("on_pre_compact", matcher.into(), decide2(f), |s| {
            &mut s.on_pre_compact
        })
    }

    /// Notification, every type: the matcher picks by `notification_type` —
    /// `permission_prompt` (the [`Approval`](crate::hooks::Approval) service is about to be
    /// asked, with the message and the title `Permission needed`) or `warning` (each
    /// [`RunContext::warn`]). Observe only; called on the task that notifies: keep it
    /// short. [`on_notification`](Self::on_notification) is the short form for
    /// warnings.
    pub fn on_notify<F>(self, matcher: impl Into<ToolMatcher>, f: F) -> Hooks<state::Added>
    where
        F: Fn(&Notification, &RunContext) + Send + Sync + 'static,
    {
        self.add_matched("on_notify", matcher.into(), observe(f), |s| {
            &mut s.on_notify
        })
    }

    /// Before each model call: modify the request or answer in the model's place.
    pub fn before_model<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(ModelRequest) -> R + Send + Sync + 'static,
        R: HookResult<BeforeModel, M>,
    {
        self.add("before_model", decide1(f), |s| &mut s.before_model)
    }

    /// After each model call: modify or replace the response.
    pub fn after_model<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(ModelResponse, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<ModelResponse, M>,
    {
        self.add("after_model", decide2(f), |s| &mut s.after_model)
    }

    /// SubagentStart: a subagent ([`Agent::into_tool`](tower_agent_core::Agent::into_tool),
    /// `tower_agent::builtins::claude_code::AgentTool`) of this agent is about
    /// to run; the matcher picks subagents by name (by type for `AgentTool`). Contexts
    /// follow the subagent's prompt (one hook context message); it cannot be blocked.
    pub fn on_subagent_start<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(SubagentStartInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<SubagentStart, M>,
    {
        self.add_matched("on_subagent_start", matcher.into(), decide2(f), |s| {
            &mut s.on_subagent_start
        })
    }

    /// TaskCreated: a `write_todos` call adds a todo; [`Task::Block`] fails the call
    /// (the list is left unchanged) with feedback for the model.
    pub fn on_task_created<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(TaskInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<Task, M>,
    {
        self.add("on_task_created", decide2(f), |s| &mut s.on_task_created)
    }

    /// TaskCompleted: a `write_todos` call marks a todo done; [`Task::Block`] fails
    /// the call (the list is left unchanged) with feedback for the model.
    pub fn on_task_completed<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(TaskInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<Task, M>,
    {
        self.add("on_task_completed", decide2(f), |s| {
            &mut s.on_task_completed
        })
    }

    /// StopFailure: the run ends on a model error (observe only); the matcher picks
    /// error types ([`StopFailureInput::error`]).
    pub fn on_stop_failure<F>(self, matcher: impl Into<ToolMatcher>, f: F) -> Hooks<state::Added>
    where
        F: Fn(&StopFailureInput, &RunContext) + Send + Sync + 'static,
    {
        self.add_matched("on_stop_failure", matcher.into(), observe(f), |s| {
            &mut s.on_stop_failure
        })
    }

    /// InstructionsLoaded: a `tower_agent::builtins::memory::Memory` file was
    /// loaded (observe only) as the session starts, after SessionStart and before
    /// UserPromptSubmit ([`Setup::at_session_start`](tower_agent_core::agent::Setup::at_session_start));
    /// the matcher is compared with the load reason.
    pub fn on_instructions_loaded<F>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(&InstructionsInput, &RunContext) + Send + Sync + 'static,
    {
        self.add_matched("on_instructions_loaded", matcher.into(), observe(f), |s| {
            &mut s.on_instructions_loaded
        })
    }

    /// MessageDisplay: each complete assistant message with text; a
    /// [`MessageDisplay::Replace`] changes what the
    /// [`AgentEvent::MessageDisplay`](tower_agent_core::agent::AgentEvent::MessageDisplay) event
    /// shows (replacements chain in order), never the history.
    pub fn on_message_display<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(MessageDisplayInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<MessageDisplay, M>,
    {
        self.add("on_message_display", decide2(f), |s| {
            &mut s.on_message_display
        })
    }

    /// PostCompact: the history was compacted (observe only); the matcher is compared
    /// with the trigger (`auto`, `manual`).
    pub fn on_post_compact<F>(self, matcher: impl Into<ToolMatcher>, f: F) -> Hooks<state::Added>
    where
        F: Fn(&PostCompactInput, &RunContext) + Send + Sync + 'static,
    {
        self.add_matched("on_post_compact", matcher.into(), observe(f), |s| {
            &mut s.on_post_compact
        })
    }

    /// PermissionRequest: a matching call needs approval (a
    /// [permission rule](crate::hooks::Hooks::permission_rules) asks, or a PreToolUse hook
    /// answered [`PreToolUse::Ask`] and there is an [`Approval`](crate::hooks::Approval)
    /// service or the deferring policy); decide in place of the service. See the [module docs](crate::hooks#order-and-merge-rules).
    pub fn on_permission_request<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolCall>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PermissionRequest, M>,
    {
        self.add_matched("on_permission_request", matcher.into(), decide2(f), |s| {
            &mut s.on_permission_request
        })
    }

    /// PermissionDenied: the approval path denied a matching call on its own (the
    /// [`Approval`](crate::hooks::Approval) service failed) with `reason`. Not called when a
    /// PreToolUse or PermissionRequest hook or a permission rule denies, when nobody
    /// is there to ask (as Claude Code `-p`), nor when the approval service answers
    /// `Deny`.
    pub fn on_permission_denied<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolCall>, Arc<str>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PermissionDenied, M>,
    {
        self.add_matched("on_permission_denied", matcher.into(), decide3(f), |s| {
            &mut s.on_permission_denied
        })
    }

    /// PostToolBatch: once per step with tool calls, after all of them resolved,
    /// before the next model call.
    pub fn on_post_tool_batch<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(Arc<ToolBatch>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PostToolBatch, M>,
    {
        self.add("on_post_tool_batch", decide2(f), |s| {
            &mut s.on_post_tool_batch
        })
    }

    /// CwdChanged: the run's working directory ([`RunContext::cwd`]) is not the one
    /// the thread's previous run had, or a tool moved it during a step
    /// ([`RunContext::set_cwd`]). The start hook layer keeps the directory in the
    /// thread's data (key `tower_agent.cwd`) when its set has a CwdChanged hook, so
    /// the first run it sees of a thread fires nothing. Awaited before SessionStart,
    /// or at the end of the step that moved it (before FileChanged and PostToolBatch).
    pub fn on_cwd_changed<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(CwdChangedInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<CwdChanged, M>,
    {
        self.add("on_cwd_changed", decide2(f), |s| &mut s.on_cwd_changed)
    }

    /// PreModelSwitch: the request about to go to the model (after the BeforeModel
    /// hooks) names another model ([`ModelSettings::model`](tower_agent_core::model::ModelSettings::model))
    /// than the thread's previous model call. The model hook layer keeps the model of
    /// each call in the thread's data (key `tower_agent.model`) when its set has a
    /// PreModelSwitch or PostModelSwitch hook, so the first call it sees of a thread
    /// fires nothing, nor does a request that names no model. The matcher matches the
    /// new model's name. A [`PreModelSwitch::Block`] sends the call with the previous
    /// model (a warning gives the reason); the thread keeps its model.
    pub fn on_pre_model_switch<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(ModelSwitchInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PreModelSwitch, M>,
    {
        self.add_matched("on_pre_model_switch", matcher.into(), decide2(f), |s| {
            &mut s.on_pre_model_switch
        })
    }

    /// PostModelSwitch: a call whose model was switched (PreModelSwitch let it) answered;
    /// the thread's model is now the new one. Contexts are queued as reminders
    /// ([`RunContext::remind`]): they join the history after the step's tool results.
    pub fn on_post_model_switch<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(ModelSwitchInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<PostModelSwitch, M>,
    {
        self.add_matched("on_post_model_switch", matcher.into(), decide2(f), |s| {
            &mut s.on_post_model_switch
        })
    }

    /// Setup: the run's request asks for setup
    /// ([`AgentRequest::setup`](tower_agent_core::AgentRequest::setup)); the matcher is compared
    /// with the trigger (`init`, `maintenance`). Awaited first, before CwdChanged and
    /// SessionStart; contexts join the run's system prompt. It cannot block: a
    /// fail-closed hook that fails is a warning.
    pub fn on_setup<F, R, M>(self, matcher: impl Into<ToolMatcher>, f: F) -> Hooks<state::Added>
    where
        F: Fn(SetupTrigger, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<Setup, M>,
    {
        self.add_matched("on_setup", matcher.into(), decide2(f), |s| &mut s.on_setup)
    }

    /// DirectoryAdded: a directory of the run
    /// ([`RunContext::directories`](tower_agent_core::context::RunContext::directories)) that
    /// the thread's earlier runs did not have (the start hook layer keeps them in the
    /// thread's data, key `tower_agent.directories`, when its set has a DirectoryAdded
    /// hook). The matcher is compared with the source (`slash_command`: the request
    /// gave it, as `/add-dir` does). Awaited after SessionStart, before
    /// UserPromptSubmit.
    pub fn on_directory_added<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(DirectoryAddedInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<DirectoryAdded, M>,
    {
        self.add_matched("on_directory_added", matcher.into(), decide2(f), |s| {
            &mut s.on_directory_added
        })
    }

    /// UserPromptExpansion: a layer inside the start hook layer expanded the prompt
    /// ([`RunStart::expand`](tower_agent_core::agent::start::RunStart::expand)); the hooks see
    /// the expansion as the start comes back out, after UserPromptSubmit saw the typed
    /// prompt. The matcher is compared with the command's name. The merge rules are
    /// UserPromptSubmit's: the first `Block` ends the run `Blocked`, contexts follow
    /// the prompt, rewrites replace the expanded prompt.
    pub fn on_prompt_expansion<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(Arc<PromptExpansion>, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<UserPrompt, M>,
    {
        self.add_matched("on_prompt_expansion", matcher.into(), decide2(f), |s| {
            &mut s.on_prompt_expansion
        })
    }

    /// FileChanged: a watched file was changed, created or removed. The watch list is
    /// the file names of the hooks' exact matchers (`.envrc|.env`, relative to the
    /// run's directory) and the paths CwdChanged and FileChanged hooks answer
    /// ([`FileChanged::Watch`]); the start hook layer takes the files' status
    /// (`stat`) as the run starts, and the step hook layer compares after each step's
    /// tool calls, before the next model call. The matcher is compared with the file's
    /// name. See [`MAX_WATCHED`](crate::hooks::MAX_WATCHED).
    pub fn on_file_changed<F, R, M>(
        self,
        matcher: impl Into<ToolMatcher>,
        f: F,
    ) -> Hooks<state::Added>
    where
        F: Fn(FileChangedInput, RunContext) -> R + Send + Sync + 'static,
        R: HookResult<FileChanged, M>,
    {
        self.add_matched("on_file_changed", matcher.into(), decide2(f), |s| {
            &mut s.on_file_changed
        })
    }

    /// Before each step (observe only).
    pub fn before_step<F>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(u32, &RunContext) + Send + Sync + 'static,
    {
        self.add("before_step", observe_step(f), |s| &mut s.before_step)
    }

    /// After each step's tool calls (observe only).
    pub fn after_step<F>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(u32, &RunContext) + Send + Sync + 'static,
    {
        self.add("after_step", observe_step(f), |s| &mut s.after_step)
    }

    /// After each step with tool calls: `false` ends the run
    /// ([`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked)) before the next model
    /// call.
    pub fn should_continue<F>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(u32, &RunContext) -> bool + Send + Sync + 'static,
    {
        self.add("should_continue", observe_step(f), |s| {
            &mut s.should_continue
        })
    }
}

/// The short forms of a registration method of the table.
impl<S> Hooks<S> {
    /// SessionStart: once per run, before the setup stages (sources `startup` and `resume`;
    /// not after a compaction: this hook's context, after the run's prompt, is in the thread
    /// already). See [`on_session_start_for`](Self::on_session_start_for) for the source and the
    /// model.
    pub fn on_session_start<F, R, M>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(RunContext) -> R + Send + Sync + 'static,
        R: HookResult<SessionStart, M>,
    {
        self.on_session_start_for("startup|resume", move |_, ctx| f(ctx))
    }

    /// Notification: each warning of a run ([`RunContext::warn`]: a skipped skill, a failed
    /// summarization, a stop cap reached …), observe only. (The `warning` notifications of
    /// [`on_notify`](Self::on_notify).)
    pub fn on_notification<F>(self, f: F) -> Hooks<state::Added>
    where
        F: Fn(&str, &RunContext) + Send + Sync + 'static,
    {
        self.on_notify(
            crate::hooks::NOTIFY_WARNING,
            move |n: &Notification, ctx: &RunContext| f(&n.message, ctx),
        )
    }
}

// ===== what the registration methods share =====

/// How a registered hook becomes the stored hook of a compiled set: wrapped in its failure
/// policy (made once per compiled set).
type Make<H> = Box<dyn Fn(&Arc<Policy>) -> Arc<H> + Send + Sync>;

impl<S> Hooks<S> {
    /// Registers a hook with its matcher: once the set is compiled, `make` builds the stored
    /// hook under its failure policy, and `slot` is where it goes.
    fn add_matched<H: ?Sized + 'static>(
        self,
        method: &'static str,
        matcher: ToolMatcher,
        make: Make<H>,
        slot: fn(&mut HookSlots) -> &mut Matched<H>,
    ) -> Hooks<state::Added> {
        let install = move |slots: &mut HookSlots, m: &ToolMatcher, policy: &Arc<Policy>| {
            slot(slots).push((m.clone(), make(policy)));
        };
        self.push(method, matcher, Arc::new(install))
    }

    /// Registers a hook that takes no matcher (it fires for every occurrence of its event).
    fn add<H: ?Sized + 'static>(
        self,
        method: &'static str,
        make: Make<H>,
        slot: fn(&mut HookSlots) -> &mut All<H>,
    ) -> Hooks<state::Added> {
        let install = move |slots: &mut HookSlots, _: &ToolMatcher, policy: &Arc<Policy>| {
            slot(slots).push(make(policy));
        };
        self.push(method, ToolMatcher::all(), Arc::new(install))
    }
}

/// A deciding hook of one argument, as its slot stores it: called under its failure policy
/// ([`failure::guard`]).
fn decide1<A, D, F, R, M>(f: F) -> Make<Decide1<A, D>>
where
    A: 'static,
    D: Failed + 'static,
    F: Fn(A) -> R + Send + Sync + 'static,
    R: HookResult<D, M>,
{
    let f = Arc::new(f);
    Box::new(move |policy| {
        let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
        Arc::new(move |a: A| failure::guard(&policy, || f(a).into_hook_future()))
    })
}

/// A deciding hook of two arguments, as [`decide1`].
fn decide2<A, B, D, F, R, M>(f: F) -> Make<Decide2<A, B, D>>
where
    A: 'static,
    B: 'static,
    D: Failed + 'static,
    F: Fn(A, B) -> R + Send + Sync + 'static,
    R: HookResult<D, M>,
{
    let f = Arc::new(f);
    Box::new(move |policy| {
        let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
        Arc::new(move |a: A, b: B| failure::guard(&policy, || f(a, b).into_hook_future()))
    })
}

/// A deciding hook of three arguments, as [`decide1`].
fn decide3<A, B, C, D, F, R, M>(f: F) -> Make<Decide3<A, B, C, D>>
where
    A: 'static,
    B: 'static,
    C: 'static,
    D: Failed + 'static,
    F: Fn(A, B, C) -> R + Send + Sync + 'static,
    R: HookResult<D, M>,
{
    let f = Arc::new(f);
    Box::new(move |policy| {
        let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
        Arc::new(move |a: A, b: B, c: C| failure::guard(&policy, || f(a, b, c).into_hook_future()))
    })
}

/// An observer of an event's input, as its slot stores it: called under its failure policy
/// ([`failure::guard_sync`]).
fn observe<T, F>(f: F) -> Make<Observe<T>>
where
    T: 'static,
    F: Fn(&T, &RunContext) + Send + Sync + 'static,
{
    let f = Arc::new(f);
    Box::new(move |policy| {
        let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
        Arc::new(move |input: &T, ctx: &RunContext| failure::guard_sync(&policy, || f(input, ctx)))
    })
}

/// An observer of a step, as [`observe`].
fn observe_step<T, F>(f: F) -> Make<ObserveStep<T>>
where
    T: Failed + 'static,
    F: Fn(u32, &RunContext) -> T + Send + Sync + 'static,
{
    let f = Arc::new(f);
    Box::new(move |policy| {
        let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
        Arc::new(move |step: u32, ctx: &RunContext| failure::guard_sync(&policy, || f(step, ctx)))
    })
}
