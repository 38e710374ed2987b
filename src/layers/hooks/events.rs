//! The event list, written once.
//!
//! One table, [`hook_events!`] below, names every event: its settings name, where it fires,
//! what a hook can do there, the default timeout of a command handler, which protocol fields it
//! has, and the Rust registration methods of [`Hooks`]. From it come the [`HookEvent`] enum
//! (the names settings files use), the registration methods and the storage of a compiled
//! [`HookSet`](super::HookSet), and the events' table in the docs (`hook_table!`, shown in
//! the [`HookEvent`] docs and the [hooks guide](crate::guide::hooks), and linked from the
//! [command hooks' docs](crate::command#events): one table for Rust and command hooks).
//!
//! Adding an event is one entry here, its typed input and output next to where it fires, the
//! firing point (a layer), and its translation for command hooks in `command::events`.

// The table writes an observer that returns nothing as `-> observe ()`.
#![allow(clippy::unused_unit)]

use std::{fmt, path::PathBuf, sync::Arc, time::Duration};

use super::failure::{self, Failed, Policy};
use super::{
    BeforeModel, DirectoryAdded, DirectoryAddedInput, FileChanged, FileChangedInput, HookFuture,
    HookResult, Hooks, InstructionsInput, MessageDisplay, MessageDisplayInput, Notification,
    PermissionDenied, PermissionRequest, PostCompactInput, PostToolBatch, PostToolUse,
    PostToolUseFailure, PreCompact, PreCompactInput, PreToolUse, SessionStart, SessionStartInput,
    Setup, Stop, StopFailureInput, StopInput, SubagentStart, SubagentStartInput, Task, TaskInput,
    ToolBatch, ToolFailure, UserPrompt, state,
};
use crate::{
    agent::{
        AgentResponse,
        start::{PromptExpansion, SetupTrigger},
    },
    context::RunContext,
    layers::matcher::ToolMatcher,
    message::{ToolCall, ToolOutput},
    model::{ModelRequest, ModelResponse},
};

/// The type of a stored hook: a deciding hook answers a future of its decision; an observer
/// answers at once.
macro_rules! hook_fn {
    (decide [$($ty:ty),*] $out:ty) => {
        dyn Fn($($ty),*) -> HookFuture<$out> + Send + Sync
    };
    (observe [$($ty:ty),*] $out:ty) => {
        dyn Fn($($ty),*) -> $out + Send + Sync
    };
}

/// The type of a stored TaskCreated / TaskCompleted hook.
pub(crate) type TaskFn = hook_fn!(decide [TaskInput, RunContext] Task);

/// The type of a stored Stop / SubagentStop hook.
pub(crate) type StopFn = hook_fn!(decide [StopInput, RunContext] Stop);

/// A slot of compiled hooks: with their matchers where the registration takes one.
macro_rules! hook_slot {
    ([$m:ident] $f:ty) => { Vec<(ToolMatcher, Arc<$f>)> };
    ([] $f:ty) => { Vec<Arc<$f>> };
}

/// One registration method of [`Hooks`].
macro_rules! hook_method {
    (decide [$(#[doc = $doc:literal])*] $method:ident [$($matcher:ident)?]
        [$($arg:ident : $ty:ty),*] $out:ty) => {
        $(#[doc = $doc])*
        pub fn $method<F, R, M>(self, $($matcher: impl Into<ToolMatcher>,)? f: F) -> Hooks<state::Added>
        where
            F: Fn($($ty),*) -> R + Send + Sync + 'static,
            R: HookResult<$out, M>,
        {
            let f = Arc::new(f);
            let matcher = hook_method!(@matcher $($matcher)?);
            self.push(stringify!($method), matcher, Arc::new(move |slots: &mut HookSlots, m: &ToolMatcher, policy: &Arc<Policy>| {
                let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
                let g: Arc<hook_fn!(decide [$($ty),*] $out)> = Arc::new(move |$($arg: $ty),*| {
                    failure::guard(&policy, || f($($arg),*).into_hook_future())
                });
                slots.$method.push(hook_method!(@item [$($matcher)?] m g));
            }))
        }
    };
    (observe [$(#[doc = $doc:literal])*] $method:ident [$($matcher:ident)?]
        [$($arg:ident : $ty:ty),*] $out:ty) => {
        $(#[doc = $doc])*
        pub fn $method<F>(self, $($matcher: impl Into<ToolMatcher>,)? f: F) -> Hooks<state::Added>
        where
            F: Fn($($ty),*) -> $out + Send + Sync + 'static,
        {
            let f = Arc::new(f);
            let matcher = hook_method!(@matcher $($matcher)?);
            self.push(stringify!($method), matcher, Arc::new(move |slots: &mut HookSlots, m: &ToolMatcher, policy: &Arc<Policy>| {
                let (f, policy) = (Arc::clone(&f), Arc::clone(policy));
                let g: Arc<hook_fn!(observe [$($ty),*] $out)> = Arc::new(move |$($arg: $ty),*| {
                    failure::guard_sync(&policy, || f($($arg),*))
                });
                slots.$method.push(hook_method!(@item [$($matcher)?] m g));
            }))
        }
    };
    (@matcher $matcher:ident) => { $matcher.into() };
    (@matcher) => { ToolMatcher::all() };
    (@item [$matcher:ident] $m:ident $f:ident) => { ($m.clone(), $f) };
    (@item [] $m:ident $f:ident) => {{ let _ = $m; $f }};
}

/// The table. Each event: its doc line; `levels` (the stacks whose hook layer fires it:
/// `start`, `step`, `model`, `tool`; `builtin` for the built-in tools, `end` for the run's
/// end), `fires` (the level, and when), `can` (what a hook decides there), `timeout` (of a
/// command handler that sets none, ms), `tool_input` (the input has `tool_name`/`tool_input`:
/// `if` rules apply), `matcher` (settings matchers apply), `stdout_context` (a command hook's
/// plain stdout is context); for command hooks, `matcher_on` (what a settings matcher is
/// compared with; `—` for none), `input` (the fields of the input JSON besides the common
/// ones) and `answer` (what a command hook's answer does); then its Rust registration methods, each
/// `fn name(matcher?; args) -> kind Output`. The `rust` section: registration methods of no
/// settings event; the `not_fired` section: protocol events this crate does not fire.
macro_rules! hook_events {
    (
        events {
            $(
                $(#[doc = $edoc:literal])*
                $Event:ident {
                    levels: [$($level:ident),*],
                    fires: $fires:literal,
                    can: $can:literal,
                    timeout: $timeout:expr,
                    tool_input: $tool_input:literal,
                    matcher: $has_matcher:literal,
                    stdout_context: $stdout_context:literal,
                    matcher_on: $matcher_on:literal,
                    input: $input:literal,
                    answer: $answer:literal,
                    $(
                        $(#[doc = $doc:literal])*
                        fn $method:ident($($matcher:ident)? ; $($arg:ident : $ty:ty),*) -> $kind:ident $out:ty;
                    )*
                }
            )*
        }
        rust {
            $(
                $rlabel:literal {
                    levels: [$($rlevel:ident),*],
                    fires: $rfires:literal,
                    can: $rcan:literal,
                    $(
                        $(#[doc = $rdoc:literal])*
                        fn $rmethod:ident($($rmatcher:ident)? ; $($rarg:ident : $rty:ty),*) -> $rkind:ident $rout:ty;
                    )*
                }
            )*
        }
        not_fired {
            $( $nname:ident: $nreason:literal, )*
        }
    ) => {
        /// The events' table, as Markdown, for the docs.
        macro_rules! hook_table {
            () => {
                concat!(
                    "| Event | Fires | Rust hook | Can | Matcher on | Input fields of a command hook (besides the common ones) | A command hook's answer |\n",
                    "|---|---|---|---|---|---|---|\n",
                    $(
                        "| ", stringify!($Event), " | ", $fires, " | ",
                        $( "[`", stringify!($method), "`](crate::layers::hooks::Hooks::", stringify!($method), ") ", )*
                        " | ", $can, " | ", $matcher_on, " | ", $input, " | ", $answer, " |\n",
                    )*
                    $(
                        "| ", $rlabel, " (Rust only) | ", $rfires, " | ",
                        $( "[`", stringify!($rmethod), "`](crate::layers::hooks::Hooks::", stringify!($rmethod), ") ", )*
                        " | ", $rcan, " | — | — | — |\n",
                    )*
                    $(
                        "| ", stringify!($nname), " | not fired: ", $nreason, " | | | | | |\n",
                    )*
                )
            };
        }
        pub(crate) use hook_table;

        /// The events of hooks, by the names settings files use (`hook_event_name` in a
        /// command hook's input).
        ///
        /// [`HookEvent::parse`] also accepts the Gemini CLI names `BeforeModel` /
        /// `AfterModel` (which are the names here) and the short aliases `agent-start`
        /// (SessionStart), `step-start` (BeforeModel), `tool-call-start` (PreToolUse),
        /// `tool-call-end` (PostToolUse) and `agent-stop` (Stop).
        ///
        #[doc = hook_table!()]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum HookEvent {
            $( $(#[doc = $edoc])* $Event, )*
        }

        impl HookEvent {
            /// Every event, in the order of this enum.
            pub const ALL: [HookEvent; [$(HookEvent::$Event),*].len()] = [$(HookEvent::$Event),*];

            /// The protocol events this crate does not fire, each with the reason: settings
            /// that configure them load (files written for Claude Code load unchanged), and
            /// their handlers are skipped with a warning.
            pub const NOT_FIRED: &'static [(&'static str, &'static str)] =
                &[$( (stringify!($nname), $nreason), )*];

            /// The protocol name (`hook_event_name` in a hook's input).
            pub const fn name(self) -> &'static str {
                match self { $( HookEvent::$Event => stringify!($Event), )* }
            }

            /// Where the event fires: the level of the agent whose layer fires it, and when.
            pub const fn fires(self) -> &'static str {
                match self { $( HookEvent::$Event => $fires, )* }
            }

            /// What a hook of this event can do.
            pub const fn can(self) -> &'static str {
                match self { $( HookEvent::$Event => $can, )* }
            }

            /// The names of the [`Hooks`] methods that register a Rust hook for this event.
            pub const fn methods(self) -> &'static [&'static str] {
                match self { $( HookEvent::$Event => &[$(stringify!($method)),*], )* }
            }

            /// The timeout of a `command`, `http` or `mcp_tool` handler that sets none, as in
            /// the Claude Code hooks reference: 30 s for UserPromptSubmit, 10 s for
            /// MessageDisplay, 1.5 s for SessionEnd (whose handlers share one budget, see
            /// [`SESSION_END_MAX_BUDGET`](crate::command::SESSION_END_MAX_BUDGET)), else 600 s.
            pub const fn default_timeout(self) -> Duration {
                match self { $( HookEvent::$Event => Duration::from_millis($timeout), )* }
            }

            /// The events whose input has `tool_name` / `tool_input`, where `if` rules apply.
            pub(crate) const fn is_tool_event(self) -> bool {
                match self { $( HookEvent::$Event => $tool_input, )* }
            }

            /// Whether a command hook's plain (not JSON) stdout is added to the context, as in
            /// the hooks reference (SessionStart, UserPromptSubmit); elsewhere it goes to the
            /// debug log.
            pub const fn stdout_is_context(self) -> bool {
                match self { $( HookEvent::$Event => $stdout_context, )* }
            }

            /// Whether settings matchers apply; other events ignore them, as in the protocol.
            pub const fn has_matcher(self) -> bool {
                match self { $( HookEvent::$Event => $has_matcher, )* }
            }
        }


        /// A compiled [`HookSet`](super::HookSet)'s hooks, a slot per registration method,
        /// each in the resolved order.
        #[derive(Default)]
        pub(crate) struct HookSlots {
            $( $( pub(crate) $method: hook_slot!([$($matcher)?] hook_fn!($kind [$($ty),*] $out)), )* )*
            $( $( pub(crate) $rmethod: hook_slot!([$($rmatcher)?] hook_fn!($rkind [$($rty),*] $rout)), )* )*
        }

        impl HookSlots {
            /// Whether any hook fires at `level` (`start`, `step`, `model`, `tool`,
            /// `builtin`, `end`): the agent leaves out a level's layer that has none.
            pub(crate) fn any_at(&self, level: &str) -> bool {
                $( ([$(stringify!($level)),*].contains(&level) && (false $(|| !self.$method.is_empty())*)) || )*
                $( ([$(stringify!($rlevel)),*].contains(&level) && (false $(|| !self.$rmethod.is_empty())*)) || )*
                false
            }
        }

        /// The registration methods, one per row of the table.
        impl<S> Hooks<S> {
            $( $( hook_method!($kind [$(#[doc = $doc])*] $method [$($matcher)?] [$($arg : $ty),*] $out); )* )*
            $( $( hook_method!($rkind [$(#[doc = $rdoc])*] $rmethod [$($rmatcher)?] [$($rarg : $rty),*] $rout); )* )*
        }
    };
}

hook_events! {
    events {
        /// Before a tool call: allow, deny, ask, rewrite the input.
        PreToolUse {
            levels: [tool],
            fires: "tool: before the call",
            can: "allow, deny, ask, defer, rewrite the arguments, add context, abort the run",
            timeout: 600_000, tool_input: true, matcher: true, stdout_context: false,
            matcher_on: "`tool_name`",
            input: "`tool_name`, `tool_input`, `tool_use_id`",
            answer: "deny (exit 2 / `deny`), `defer` (see [`PreToolUse::Defer`](crate::layers::hooks::PreToolUse::Defer); reason, `updatedInput` and `additionalContext` of a defer are ignored), ask, allow, `updatedInput`, `additionalContext`; deny > defer > ask > allow",
            /// PreToolUse: before each matching tool call.
            fn before_tool_use(matcher; call: Arc<ToolCall>, ctx: RunContext) -> decide PreToolUse;
        }
        /// After a tool call that succeeded: add context, replace the output.
        PostToolUse {
            levels: [tool],
            fires: "tool: after a call that succeeded",
            can: "replace the output, add context next to it, abort the run",
            timeout: 600_000, tool_input: true, matcher: true, stdout_context: false,
            matcher_on: "`tool_name`",
            input: "`tool_name`, `tool_input`, `tool_use_id`, `tool_response` (what the tool put under [`command::TOOL_RESPONSE`](crate::command::TOOL_RESPONSE) in its output's metadata, else the output: its JSON if it holds a JSON object or array, else its text), `duration_ms` (how long the call took)",
            answer: "`updatedToolOutput`, `additionalContext`; a block adds its reason as context",
            /// PostToolUse: after each matching tool call that succeeded (its output is not
            /// an error).
            fn after_tool_use(matcher; call: Arc<ToolCall>, output: Arc<ToolOutput>, ctx: RunContext) -> decide PostToolUse;
        }
        /// After a tool call that failed: add context.
        PostToolUseFailure {
            levels: [tool],
            fires: "tool: after a call that failed",
            can: "add context next to the error, abort the run",
            timeout: 600_000, tool_input: true, matcher: true, stdout_context: false,
            matcher_on: "`tool_name`",
            input: "`tool_name`, `tool_input`, `tool_use_id`, `error`, `is_interrupt`, `duration_ms` (when the call returned an error output)",
            answer: "`additionalContext`; a block adds its reason as context",
            /// PostToolUseFailure: after each matching tool call that failed or returned an
            /// error output.
            fn on_tool_failure(matcher; call: Arc<ToolCall>, failure: Arc<ToolFailure>, ctx: RunContext) -> decide PostToolUseFailure;
        }
        /// Before the prompt enters the thread: block, add context.
        UserPromptSubmit {
            levels: [start],
            fires: "start: before the prompt enters the thread",
            can: "block (the run ends `Blocked`), add context, rewrite the prompt",
            timeout: 30_000, tool_input: false, matcher: false, stdout_context: true,
            matcher_on: "—",
            input: "`prompt`",
            answer: "block (the run ends `Blocked`), context (`additionalContext` or plain stdout)",
            /// UserPromptSubmit: before the prompt enters the thread.
            fn on_user_prompt(; prompt: Arc<str>, ctx: RunContext) -> decide UserPrompt;
        }
        /// When the agent is about to finish: make it go on.
        Stop {
            levels: [step],
            fires: "step: the model answered without tool calls",
            can: "finish, or continue with feedback",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`stop_hook_active`, `last_assistant_message`, `background_tasks` and `session_crons` (both `[]`: a run has none)",
            answer: "block = the agent continues with the reason as feedback; `additionalContext` too",
            /// Stop: when the agent is about to finish (the model answered without tool
            /// calls).
            fn on_stop(; input: StopInput, ctx: RunContext) -> decide Stop;
        }
        /// When a subagent is about to finish: send it back to work.
        SubagentStop {
            levels: [builtin],
            fires: "tool: inside a subagent's call, as it finishes",
            can: "send the subagent back to work",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "the subagent's name",
            input: "as Stop (with `effort`, `background_tasks`, `session_crons`), and `agent_type` (its name; Claude Code's `Agent` tool: the `subagent_type`), `agent_id` (as for SubagentStart), `agent_transcript_path` (its transcript, `<session>/subagents/agent-<id>.jsonl`; `\"\"` without transcripts)",
            answer: "as Stop, for the subagent: a block sends it back to work with the reason as a user message, followed by a [hook context](crate::message::Message::hook_context) in Claude Code's words (`SubagentStop hook blocking error from command: \"<command>\": <reason>`)",
            /// SubagentStop: when a subagent ([`Agent::into_tool`](crate::Agent::into_tool),
            /// [`AgentTool`](crate::builtins::claude_code::AgentTool)) run by this agent
            /// finishes; the matcher picks subagents by tool name (by type for `AgentTool`).
            fn on_subagent_stop(matcher; input: StopInput, ctx: RunContext) -> decide Stop;
        }
        /// Once per run, before anything else: add context, stop the run.
        SessionStart {
            levels: [start, model],
            fires: "start: `startup`, `resume`; model: `compact`, on the answer of a compacted request",
            can: "add context (after the prompt, before UserPromptSubmit's; after the summary at `compact`), block (the run ends `Blocked`)",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: true,
            matcher_on: "`source`",
            input: "`source`: `startup` (new thread), `resume` (the thread was in the store), `compact` (right after a compaction); `model` (when the agent's settings name one); at `resume`, when the thread keeps its last answer's time, `seconds_since_last_response`, `context_tokens`, `prompt_cache_likely_expired` (the last answer older than the cache's 5 minutes), `estimated_cache_write_usd` (0): see [`ResumedSession`](crate::agent::ResumedSession)",
            answer: "context (`additionalContext` or plain stdout): after the prompt at `startup`/`resume` (a [hook context](crate::message::Message::hook_context) message, saved in the thread), after the summary at `compact`; [`CLAUDE_ENV_FILE`](crate::command#claude_env_file)",
            /// SessionStart for the sources `matcher` matches (`startup`, `resume`, `compact`;
            /// `"*"` for all), with the [`SessionStartInput`] (at `resume`, its
            /// [`resumed`](SessionStartInput::resumed) fields: the model hook layer keeps the
            /// time of the thread's last answer in the thread's data, key
            /// `tower_agent.last_response`, when its set has a SessionStart or model-switch
            /// hook). At `startup`/`resume` the contexts follow the prompt, before the
            /// UserPromptSubmit hooks' (one [hook context](crate::message::Message::hook_context)
            /// message, saved in the thread, as Claude Code places them); at `compact` (right after a
            /// compaction) they are added to the history after the summary, and a block is
            /// ignored (with a warning). [`on_session_start`](Self::on_session_start) is the
            /// short form for `startup|resume`.
            fn on_session_start_for(matcher; input: SessionStartInput, ctx: RunContext) -> decide SessionStart;
        }
        /// Once per run, after it ended: observe.
        SessionEnd {
            levels: [end],
            fires: "run end: the loop, as the run ends (also a run whose future is dropped)",
            can: "observe; reason: [`session_end_reason`](crate::agent::session_end_reason)",
            timeout: 1_500, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`reason`",
            input: "`reason` (`other`, as Claude Code run headless says: see [`session_end_reason`](crate::agent::session_end_reason)), `outcome` (the run's [`Outcome`](crate::agent::Outcome) as JSON)",
            answer: "observe (started in the background; the run does not wait); also fires for a run whose future is dropped; the handlers share one budget of 1.5 s",
            /// SessionEnd: once per run, after it ended (observe only).
            fn on_session_end(; response: &AgentResponse, ctx: &RunContext) -> observe ();
        }
        /// Before a compaction of the history: veto.
        PreCompact {
            levels: [model],
            fires: "model: in the summarize layer, before it compacts (`auto`); [`Agent::compact`](crate::Agent::compact), before it asks for the summary (`manual`)",
            can: "veto the compaction ([`SummarizeLayer::on_compact`](crate::layers::summarize::SummarizeLayer::on_compact) for `auto`)",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`trigger` (`auto`, `manual`)",
            input: "`trigger`, `custom_instructions` (`auto`: empty; `manual`: the caller's instructions, or `null`); `auto` also: `tokens`, `threshold`, `summarized_messages`, `kept_messages`",
            answer: "veto the compaction (block); for `auto`, command hooks reach it through [`CommandHooks::pre_compact`](crate::command::CommandHooks::pre_compact), given to [`SummarizeLayer::on_compact`](crate::layers::summarize::SummarizeLayer::on_compact)",
            /// PreCompact of a compaction the caller asked for
            /// ([`Agent::compact`](crate::Agent::compact), trigger `manual`): a
            /// [`PreCompact::Block`] leaves the thread as it is. The matcher is compared with
            /// the trigger. (The summarize layer's compactions, trigger `auto`, ask its
            /// [`on_compact`](crate::layers::summarize::SummarizeLayer::on_compact) instead.)
            fn on_pre_compact(matcher; input: PreCompactInput, ctx: RunContext) -> decide PreCompact;
        }
        /// Each warning of a run: observe.
        Notification {
            levels: [start],
            fires: "start: an observer set for the run; called where a warning or a permission prompt is raised",
            can: "observe, by `notification_type` (`warning`, `permission_prompt`)",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`notification_type`: `permission_prompt` (the [`Approval`](crate::layers::hooks::Approval) service is about to be asked) or `warning` (each [`RunContext::warn`](crate::context::RunContext::warn); no documented type fits)",
            input: "`message`, `title` (for `permission_prompt`: `Permission needed`), `notification_type`",
            answer: "observe (background); exit code, stderr, `systemMessage` and `continue` are ignored",
            /// Notification, every type: the matcher picks by `notification_type` —
            /// `permission_prompt` (the [`Approval`](super::Approval) service is about to be
            /// asked, with the message and the title `Permission needed`) or `warning` (each
            /// [`RunContext::warn`]). Observe only; called on the task that notifies: keep it
            /// short. [`on_notification`](Self::on_notification) is the short form for
            /// warnings.
            fn on_notify(matcher; notification: &Notification, ctx: &RunContext) -> observe ();
        }
        /// Before each model call: replace the request, or answer in the model's place.
        BeforeModel {
            levels: [model],
            fires: "model: before each call",
            can: "modify the request, or answer without calling the model",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`llm_request`: `{messages, tools, settings}`",
            answer: "`hookSpecificOutput.llm_request` replaces the parts it has; a block answers the call with the reason as the assistant's text (the model is not called)",
            /// Before each model call: modify the request or answer in the model's place.
            fn before_model(; request: ModelRequest) -> decide BeforeModel;
        }
        /// After each model call: replace the response.
        AfterModel {
            levels: [model],
            fires: "model: after each call",
            can: "modify or replace the response",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`llm_response`: `{message, usage, stop_reason}`",
            answer: "`hookSpecificOutput.llm_response` replaces the parts it has; a block replaces the answer with the reason as text",
            /// After each model call: modify or replace the response.
            fn after_model(; response: ModelResponse, ctx: RunContext) -> decide ModelResponse;
        }
        /// A subagent is about to run: add context to its conversation.
        SubagentStart {
            levels: [builtin],
            fires: "tool: inside a subagent's call, before it runs",
            can: "add context to the subagent's conversation",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`agent_type`",
            input: "`agent_type` (the subagent's tool name; Claude Code's `Agent` tool: the `subagent_type`), `agent_id` (`agent-<call id>`; Claude Code's `Agent` tool: a random `a…` id), no `permission_mode`",
            answer: "context (`additionalContext`, in Claude Code's words: `SubagentStart hook additional context: <text>`) after the subagent's prompt (a [hook context](crate::message::Message::hook_context) message of its first request); cannot block (a block is reported)",
            /// SubagentStart: a subagent ([`Agent::into_tool`](crate::Agent::into_tool),
            /// [`AgentTool`](crate::builtins::claude_code::AgentTool)) of this agent is about
            /// to run; the matcher picks subagents by name (by type for `AgentTool`). Contexts
            /// follow the subagent's prompt (one hook context message); it cannot be blocked.
            fn on_subagent_start(matcher; input: SubagentStartInput, ctx: RunContext) -> decide SubagentStart;
        }
        /// `write_todos` adds a todo: block it.
        TaskCreated {
            levels: [builtin],
            fires: "tool: inside `write_todos`, for each todo it adds",
            can: "block the call with feedback (the list is left unchanged)",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`task_id`, `task_subject` (a new todo of a `write_todos` call)",
            answer: "block (exit 2 / `decision: \"block\"`): the call fails with the reason, the list is unchanged; `continue: false` is ignored",
            /// TaskCreated: a `write_todos` call adds a todo; [`Task::Block`] fails the call
            /// (the list is left unchanged) with feedback for the model.
            fn on_task_created(; input: TaskInput, ctx: RunContext) -> decide Task;
        }
        /// `write_todos` marks a todo done: block it.
        TaskCompleted {
            levels: [builtin],
            fires: "tool: inside `write_todos`, for each todo it marks done",
            can: "block the call with feedback (the list is left unchanged)",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`task_id`, `task_subject` (a todo that becomes `done`)",
            answer: "block (exit 2 / `decision: \"block\"`; `continue: false` too, with its stop reason): as TaskCreated",
            /// TaskCompleted: a `write_todos` call marks a todo done; [`Task::Block`] fails
            /// the call (the list is left unchanged) with feedback for the model.
            fn on_task_completed(; input: TaskInput, ctx: RunContext) -> decide Task;
        }
        /// The run ends on a model error: observe.
        StopFailure {
            levels: [end],
            fires: "run end: the run ends on a model error",
            can: "observe; the matcher picks error types",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`error`",
            input: "`error` (`rate_limit`, `overloaded`, `authentication_failed`, `billing_error`, `invalid_request`, `model_not_found`, `server_error`, `max_output_tokens`, `unknown`: from the provider's error, [`StopFailureInput::from_model_error`](crate::layers::hooks::StopFailureInput::from_model_error)), `error_details` (a request too long: its status and body; not sent for other provider errors), `last_assistant_message` (`API Error: <status> <message>`), `effort`",
            answer: "observe (background; output and exit code ignored; the run's SessionEnd hooks wait for them); fires when a model call fails after its retries (not for an [`Abort`](crate::error::Abort)); Stop does not run",
            /// StopFailure: the run ends on a model error (observe only); the matcher picks
            /// error types ([`StopFailureInput::error`]).
            fn on_stop_failure(matcher; input: &StopFailureInput, ctx: &RunContext) -> observe ();
        }
        /// A memory file was loaded: observe.
        InstructionsLoaded {
            levels: [builtin],
            fires: "start: a memory file was loaded as the session starts (the memory built-in), after SessionStart, before UserPromptSubmit",
            can: "observe; the matcher picks load reasons",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`load_reason`",
            input: "`file_path`, `memory_type` (`Project` under the run's cwd, else `User`), `load_reason` (`session_start`): each file the [`Memory`](crate::builtins::memory::Memory) stage loads",
            answer: "observe (output and exit code ignored); the run waits for the hooks before UserPromptSubmit, as Claude Code does",
            /// InstructionsLoaded: a [`Memory`](crate::builtins::memory::Memory) file was
            /// loaded (observe only) as the session starts, after SessionStart and before
            /// UserPromptSubmit ([`Setup::at_session_start`](crate::agent::Setup::at_session_start));
            /// the matcher is compared with the load reason.
            fn on_instructions_loaded(matcher; input: &InstructionsInput, ctx: &RunContext) -> observe ();
        }
        /// An assistant message with text is complete: replace what is displayed.
        MessageDisplay {
            levels: [model],
            fires: "model: each complete assistant message with text",
            can: "replace the text of the [`MessageDisplay`](crate::agent::AgentEvent::MessageDisplay) event (display only)",
            timeout: 10_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`turn_id` (the run), `message_id`, `index` (0), `final` (true), `delta` (the whole text): once per assistant message with text",
            answer: "`displayContent` replaces the text of the [`MessageDisplay`](crate::agent::AgentEvent::MessageDisplay) event (last one wins); the history keeps the original",
            /// MessageDisplay: each complete assistant message with text; a
            /// [`MessageDisplay::Replace`] changes what the
            /// [`AgentEvent::MessageDisplay`](crate::agent::AgentEvent::MessageDisplay) event
            /// shows (replacements chain in order), never the history.
            fn on_message_display(; input: MessageDisplayInput, ctx: RunContext) -> decide MessageDisplay;
        }
        /// The history was compacted: observe.
        PostCompact {
            levels: [model],
            fires: "model: on the answer of a compacted request (`auto`); [`Agent::compact`](crate::Agent::compact), after the summary (`manual`); after SessionStart `compact`",
            can: "observe the compaction (its summary); the matcher picks the trigger",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`trigger`",
            input: "`trigger` (`auto`, `manual`), `compact_summary`",
            answer: "observe (background)",
            /// PostCompact: the history was compacted (observe only); the matcher is compared
            /// with the trigger (`auto`, `manual`).
            fn on_post_compact(matcher; input: &PostCompactInput, ctx: &RunContext) -> observe ();
        }
        /// When a call needs approval (a permission rule asks, a call no rule allows, or a
        /// PreToolUse `ask` with someone to ask), before the
        /// [`Approval`](crate::layers::hooks::Approval) service: allow or deny in its place.
        PermissionRequest {
            levels: [tool],
            fires: "tool: a call needs approval, before the [`Approval`](crate::layers::hooks::Approval) service",
            can: "allow (maybe with new arguments) or deny in the service's place",
            timeout: 600_000, tool_input: true, matcher: true, stdout_context: false,
            matcher_on: "`tool_name`",
            input: "`tool_name`, `tool_input` (no `tool_use_id`), `permission_suggestions` (a call no permission rule allows: Claude Code's suggestions), `effort`",
            answer: "`hookSpecificOutput.decision`: `behavior: \"allow\"` (+ `updatedInput`) runs the call, `\"deny\"` (+ `message`, the model's text) denies it (`interrupt`: the run ends `Aborted`); no decision: the approval service decides. Exit 2 is ignored (stderr discarded); `continue: false` denies and interrupts",
            /// PermissionRequest: a matching call needs approval (a
            /// [permission rule](super::Hooks::permission_rules) asks, or a PreToolUse hook
            /// answered [`PreToolUse::Ask`] and there is an [`Approval`](super::Approval)
            /// service or the deferring policy); decide in place of the service. See the [module docs](crate::layers::hooks#order-and-merge-rules).
            fn on_permission_request(matcher; call: Arc<ToolCall>, ctx: RunContext) -> decide PermissionRequest;
        }
        /// When the approval path denies a call on its own (the approval service failed):
        /// observe, or tell the model it may retry.
        PermissionDenied {
            levels: [tool],
            fires: "tool: the approval path denied a call on its own",
            can: "tell the model it may retry",
            timeout: 600_000, tool_input: true, matcher: true, stdout_context: false,
            matcher_on: "`tool_name`",
            input: "`tool_name`, `tool_input`, `tool_use_id`, `reason`",
            answer: "`hookSpecificOutput.retry: true` tells the model it may retry. Exit 2 is ignored",
            /// PermissionDenied: the approval path denied a matching call on its own (the
            /// [`Approval`](super::Approval) service failed) with `reason`. Not called when a
            /// PreToolUse or PermissionRequest hook or a permission rule denies, when nobody
            /// is there to ask (as Claude Code `-p`), nor when the approval service answers
            /// `Deny`.
            fn on_permission_denied(matcher; call: Arc<ToolCall>, reason: Arc<str>, ctx: RunContext) -> decide PermissionDenied;
        }
        /// After every call of a step resolved, before the next model call: add context, stop
        /// the loop.
        PostToolBatch {
            levels: [step],
            fires: "step: after every call of a step resolved, before the next model call",
            can: "add context before the next model call, stop the loop",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`tool_calls`: `[{tool_name, tool_input, tool_use_id, tool_response}]` (`tool_response`: the text the model gets)",
            answer: "`additionalContext` before the next model call; `decision: \"block\"`, `continue: false` or exit 2 stops the loop ([`Outcome::Blocked`](crate::agent::Outcome::Blocked)), the reason kept in the conversation",
            /// PostToolBatch: once per step with tool calls, after all of them resolved,
            /// before the next model call.
            fn on_post_tool_batch(; batch: Arc<ToolBatch>, ctx: RunContext) -> decide PostToolBatch;
        }
        /// An MCP server asks the user for input during a tool call, before the
        /// [`Elicitation`](crate::mcp::client::Elicitation) service: answer in its place, or
        /// decline. Fired by
        /// [`CommandHooks::elicitation_layer`](crate::command::CommandHooks::elicitation_layer)
        /// (feature `mcp`).
        Elicitation {
            levels: [tool],
            fires: "tool: an MCP server asks for input during a call (command hooks' elicitation layer)",
            can: "answer in the user's place, or decline",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "the MCP server's name",
            input: "`mcp_server_name`, `message`, `mode` (`form` / `url`), `requested_schema` (form), `url` and `elicitation_id` (URL mode)",
            answer: "`hookSpecificOutput.action` (`accept` + `content`, `decline`, `cancel`) answers in the user's place; exit 2 declines ([MCP elicitation](crate::command#mcp-elicitation); feature `mcp`)",
        }
        /// After the user answered an MCP elicitation: override the answer, or decline. Fired
        /// by [`CommandHooks::elicitation_layer`](crate::command::CommandHooks::elicitation_layer)
        /// (feature `mcp`).
        ElicitationResult {
            levels: [tool],
            fires: "tool: after the user answered an MCP elicitation (command hooks' elicitation layer)",
            can: "override the answer, or decline",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "the MCP server's name",
            input: "`mcp_server_name`, `action`, `content` (if any), `mode`, `elicitation_id` (URL mode)",
            answer: "`hookSpecificOutput.action` / `content` override the user's answer; exit 2 declines",
        }
        /// The run's working directory is not the one the thread's previous run had, or a tool
        /// moved it: observe.
        CwdChanged {
            levels: [start, step],
            fires: "start: a run of a thread whose previous run had another working directory, before SessionStart; step: the end of a step whose tool moved the run's directory ([`RunContext::set_cwd`](crate::context::RunContext::set_cwd), e.g. a `cd` in the [Claude Code `Bash`](crate::builtins::claude_code)), before FileChanged and PostToolBatch",
            can: "observe; command hooks may export variables through `CLAUDE_ENV_FILE`",
            timeout: 600_000, tool_input: false, matcher: false, stdout_context: false,
            matcher_on: "—",
            input: "`old_cwd`, `new_cwd`",
            answer: "observe (a block or `continue: false` is reported, not obeyed); `hookSpecificOutput.watchPaths` replaces the files FileChanged watches; [`CLAUDE_ENV_FILE`](crate::command#claude_env_file)",
            /// CwdChanged: the run's working directory ([`RunContext::cwd`]) is not the one
            /// the thread's previous run had, or a tool moved it during a step
            /// ([`RunContext::set_cwd`]). The start hook layer keeps the directory in the
            /// thread's data (key `tower_agent.cwd`) when its set has a CwdChanged hook, so
            /// the first run it sees of a thread fires nothing. Awaited before SessionStart,
            /// or at the end of the step that moved it (before FileChanged and PostToolBatch).
            fn on_cwd_changed(; input: CwdChangedInput, ctx: RunContext) -> decide CwdChanged;
        }
        /// PreModelSwitch: a model call names another model than the thread's previous call.
        PreModelSwitch {
            levels: [model],
            fires: "model: before a call whose model is not the one the thread's previous call used",
            can: "allow the switch, or block it (the call keeps the previous model); a command hook that times out blocks",
            timeout: 30_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "the new model's name",
            input: "`from_model`, `to_model`, `requested_model`, `source` (`sdk`: a call naming another model), `context_tokens`, `prompt_cache_warm`, `cache_ttl` (`5m`), `estimated_cache_write_usd` (0), `pricing` (`default`): see [`ModelSwitchInput`](crate::layers::hooks::ModelSwitchInput)",
            answer: "a block — exit 2, `decision: \"block\"`, `continue: false`, `permissionDecision` `deny` or `ask` (no one to ask at a model call), a fail-closed failure or a timeout — keeps the previous model for the call (a warning gives the reason)",
            /// PreModelSwitch: the request about to go to the model (after the BeforeModel
            /// hooks) names another model ([`ModelSettings::model`](crate::model::ModelSettings::model))
            /// than the thread's previous model call. The model hook layer keeps the model of
            /// each call in the thread's data (key `tower_agent.model`) when its set has a
            /// PreModelSwitch or PostModelSwitch hook, so the first call it sees of a thread
            /// fires nothing, nor does a request that names no model. The matcher matches the
            /// new model's name. A [`PreModelSwitch::Block`] sends the call with the previous
            /// model (a warning gives the reason); the thread keeps its model.
            fn on_pre_model_switch(matcher; input: ModelSwitchInput, ctx: RunContext) -> decide PreModelSwitch;
        }
        /// PostModelSwitch: a model call answered with another model than the thread's
        /// previous call.
        PostModelSwitch {
            levels: [model],
            fires: "model: after a call that switched the thread's model answered",
            can: "observe; add context",
            timeout: 30_000, tool_input: false, matcher: true, stdout_context: true,
            matcher_on: "the new model's name",
            input: "`from_model`, `to_model`, `requested_model`, `source` (`sdk`: a call naming another model), `context_tokens`, `prompt_cache_warm`, `cache_ttl` (`5m`), `estimated_cache_write_usd` (0), `pricing` (`default`): see [`ModelSwitchInput`](crate::layers::hooks::ModelSwitchInput)",
            answer: "context (`additionalContext` or plain stdout), queued as a reminder; a block is reported (the switch is made)",
            /// PostModelSwitch: a call whose model was switched (PreModelSwitch let it) answered;
            /// the thread's model is now the new one. Contexts are queued as reminders
            /// ([`RunContext::remind`]): they join the history after the step's tool results.
            fn on_post_model_switch(matcher; input: ModelSwitchInput, ctx: RunContext) -> decide PostModelSwitch;
        }
        /// Setup: the run's request asks to set the project up or to maintain it.
        Setup {
            levels: [start],
            fires: "start: a run whose request asks for setup ([`AgentRequest::setup`](crate::AgentRequest::setup)), before CwdChanged and SessionStart",
            can: "add context (the run's system prompt); cannot block",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`trigger`",
            input: "`trigger` (`init`, `maintenance`)",
            answer: "nothing for the model (Claude Code discards Setup's JSON fields and stdout); [`CLAUDE_ENV_FILE`](crate::command#claude_env_file); cannot block (a block, `continue: false` or a fail-closed failure is reported)",
            /// Setup: the run's request asks for setup
            /// ([`AgentRequest::setup`](crate::AgentRequest::setup)); the matcher is compared
            /// with the trigger (`init`, `maintenance`). Awaited first, before CwdChanged and
            /// SessionStart; contexts join the run's system prompt. It cannot block: a
            /// fail-closed hook that fails is a warning.
            fn on_setup(matcher; trigger: SetupTrigger, ctx: RunContext) -> decide Setup;
        }
        /// DirectoryAdded: the run was given a directory its thread did not have.
        DirectoryAdded {
            levels: [start],
            fires: "start: each directory of the request ([`AgentRequest::add_dir`](crate::AgentRequest::add_dir)) the thread did not have, after SessionStart",
            can: "observe",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`source`",
            input: "`directory`, `source` (`slash_command`)",
            answer: "observe (a block or `continue: false` is reported)",
            /// DirectoryAdded: a directory of the run
            /// ([`RunContext::directories`](crate::context::RunContext::directories)) that
            /// the thread's earlier runs did not have (the start hook layer keeps them in the
            /// thread's data, key `tower_agent.directories`, when its set has a DirectoryAdded
            /// hook). The matcher is compared with the source (`slash_command`: the request
            /// gave it, as `/add-dir` does). Awaited after SessionStart, before
            /// UserPromptSubmit.
            fn on_directory_added(matcher; input: DirectoryAddedInput, ctx: RunContext) -> decide DirectoryAdded;
        }
        /// UserPromptExpansion: a layer of the start stack expanded the prompt (a slash
        /// command).
        UserPromptExpansion {
            levels: [start],
            fires: "start: an inner start layer expanded the prompt ([`RunStart::expand`](crate::agent::start::RunStart::expand), e.g. [`SlashCommands`](crate::builtins::commands::SlashCommands)), on the way out",
            can: "block (the run ends `Blocked`), add context after the prompt, rewrite the expanded prompt",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: true,
            matcher_on: "the command's name",
            input: "`expansion_type` (`slash_command`, `mcp_prompt`), `command_name`, `command_args`, `command_source`, `prompt` (the expanded prompt)",
            answer: "as UserPromptSubmit: block (the run ends `Blocked`), context after the prompt (`additionalContext` or plain stdout)",
            /// UserPromptExpansion: a layer inside the start hook layer expanded the prompt
            /// ([`RunStart::expand`](crate::agent::start::RunStart::expand)); the hooks see
            /// the expansion as the start comes back out, after UserPromptSubmit saw the typed
            /// prompt. The matcher is compared with the command's name. The merge rules are
            /// UserPromptSubmit's: the first `Block` ends the run `Blocked`, contexts follow
            /// the prompt, rewrites replace the expanded prompt.
            fn on_prompt_expansion(matcher; expansion: Arc<PromptExpansion>, ctx: RunContext) -> decide UserPrompt;
        }
        /// FileChanged: a watched file changed.
        FileChanged {
            levels: [start, step],
            fires: "step: after a step's tool calls, for each watched file that changed since the run started or the last check",
            can: "observe; replace the watch list (`watchPaths`)",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "the file's name",
            input: "`file_path`, `event` (`change`, `add`, `unlink`)",
            answer: "observe (a block is reported); `hookSpecificOutput.watchPaths` replaces the watched files; [`CLAUDE_ENV_FILE`](crate::command#claude_env_file)",
            /// FileChanged: a watched file was changed, created or removed. The watch list is
            /// the file names of the hooks' exact matchers (`.envrc|.env`, relative to the
            /// run's directory) and the paths CwdChanged and FileChanged hooks answer
            /// ([`FileChanged::Watch`]); the start hook layer takes the files' status
            /// (`stat`) as the run starts, and the step hook layer compares after each step's
            /// tool calls, before the next model call. The matcher is compared with the file's
            /// name. See [`MAX_WATCHED`](crate::layers::hooks::MAX_WATCHED).
            fn on_file_changed(matcher; input: FileChangedInput, ctx: RunContext) -> decide FileChanged;
        }
        /// ConfigChange: a settings file of command hooks changed.
        ConfigChange {
            levels: [step],
            fires: "step: after a step's tool calls, for each settings file of the command hooks that changed (the hooks of the files as they are now are used from there on); [`CommandHooks::reload`](crate::command::CommandHooks::reload): a settings file changed",
            can: "block the change (the configuration stays as it was), except `policy_settings`",
            timeout: 600_000, tool_input: false, matcher: true, stdout_context: false,
            matcher_on: "`source`",
            input: "`source` (`user_settings`, `project_settings`, `local_settings`, `policy_settings`), `file_path`; during a run, the run's `session_id`, `prompt_id` and `cwd`; from a reload, a fresh `session_id`, `cwd` the project directory",
            answer: "a block (exit 2, `decision: \"block\"`, `continue: false`, a fail-closed failure) keeps the configuration as it was, except for `policy_settings`",
        }
    }
    rust {
        "step start" {
            levels: [model],
            fires: "model: before each model call",
            can: "observe",
            /// Before each step (observe only).
            fn before_step(; step: u32, ctx: &RunContext) -> observe ();
        }
        "step end" {
            levels: [step],
            fires: "step: after each step's tool calls",
            can: "observe; `should_continue` returning `false` ends the run (`Blocked`) before the next model call",
            /// After each step's tool calls (observe only).
            fn after_step(; step: u32, ctx: &RunContext) -> observe ();
            /// After each step with tool calls: `false` ends the run
            /// ([`Outcome::Blocked`](crate::agent::Outcome::Blocked)) before the next model
            /// call.
            fn should_continue(; step: u32, ctx: &RunContext) -> observe bool;
        }
    }
    not_fired {
        TeammateIdle: "Claude Code's agent teams; a library run has no teammates",
        WorktreeCreate: "the client's git worktrees; a library creates none",
        WorktreeRemove: "the client's git worktrees; a library creates none",
    }
}

/// What a CwdChanged hook gets: the thread's previous working directory and the run's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CwdChangedInput {
    /// The working directory of the thread's previous run.
    pub old_cwd: PathBuf,
    /// This run's ([`RunContext::cwd`]).
    pub new_cwd: PathBuf,
}

/// What a CwdChanged hook answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CwdChanged {
    /// Go on.
    #[default]
    Continue,
    /// Watch these files for FileChanged hooks (the protocol's `watchPaths`; relative paths
    /// are taken from the run's directory), replacing the paths hooks answered before.
    Watch(Vec<PathBuf>),
}

impl HookResult<CwdChanged> for CwdChanged {
    fn into_hook_future(self) -> HookFuture<CwdChanged> {
        HookFuture::ready(self)
    }
}

impl Failed for CwdChanged {
    fn failed(_: String, _: bool) -> Option<Self> {
        Some(CwdChanged::Continue)
    }
}

/// What a PreModelSwitch or PostModelSwitch hook gets: Claude Code's fields for a switch
/// (2.1.251+; measured against 2.1.328 in `tests/reference`).
///
/// In a library a switch is a model call that names another model than the thread's previous
/// call ([`ModelSettings::model`](crate::model::ModelSettings::model)): someone asked for it,
/// in code, as the SDK's `set_model` does, so its [`source`](Self::source) is
/// [`SwitchSource::Sdk`] and [`requested_model`](Self::requested_model) is the model named.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModelSwitchInput {
    /// The model of the thread's previous model call (`from_model`).
    pub from_model: String,
    /// The model this call names (`to_model`); hooks match on it, a `[1m]` suffix ignored.
    pub to_model: String,
    /// The model asked for (`requested_model`): `None` for a switch nobody asked for.
    pub requested_model: Option<String>,
    /// Who switched (`source`).
    pub source: SwitchSource,
    /// The size of the conversation the new model is given, in tokens (`context_tokens`; the
    /// crate's estimate, four bytes of text a token).
    pub context_tokens: u64,
    /// Whether the thread's last model answer came less than [`cache_ttl`](Self::cache_ttl)
    /// ago, so a provider's prompt cache may still hold the conversation
    /// (`prompt_cache_warm`; see [`prompt_cache_warm`](crate::agent::prompt_cache_warm)).
    pub prompt_cache_warm: bool,
    /// How long a prompt cache lives (`cache_ttl`): `"5m"`, the providers' default.
    pub cache_ttl: String,
    /// What writing the conversation to the new model's cache would cost (`estimated_cache_write_usd`):
    /// `0` — the crate has no price list.
    pub estimated_cache_write_usd: f64,
    /// Where the price came from (`pricing`): `"default"` (no price list; Claude Code says
    /// `"catalog"` for the models it knows, `"configured"` for prices a user set).
    pub pricing: String,
}

/// Who switched the model: the `source` of a [`ModelSwitchInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SwitchSource {
    /// The `/model` command (`"command"`).
    Command,
    /// The model picker (`"picker"`).
    Picker,
    /// Code: the SDK's set-model call, or a request naming another model (`"sdk"`).
    Sdk,
    /// The product by itself, a fallback (`"auto"`; PostModelSwitch only).
    Auto,
    /// A resumed session restoring its model (`"resume"`; PostModelSwitch only).
    Resume,
}

impl SwitchSource {
    /// The protocol's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            SwitchSource::Command => "command",
            SwitchSource::Picker => "picker",
            SwitchSource::Sdk => "sdk",
            SwitchSource::Auto => "auto",
            SwitchSource::Resume => "resume",
        }
    }
}

impl ModelSwitchInput {
    /// A switch from `from_model` to `to_model`, asked for in code ([`SwitchSource::Sdk`]),
    /// with an empty context and a cold cache.
    pub fn new(from_model: impl Into<String>, to_model: impl Into<String>) -> Self {
        let to_model = to_model.into();
        ModelSwitchInput {
            from_model: from_model.into(),
            requested_model: Some(to_model.clone()),
            to_model,
            source: SwitchSource::Sdk,
            context_tokens: 0,
            prompt_cache_warm: false,
            cache_ttl: "5m".into(),
            estimated_cache_write_usd: 0.0,
            pricing: "default".into(),
        }
    }

    /// The target's canonical name, which hooks match on: [`to_model`](Self::to_model)
    /// without a `[1m]` suffix (the long-context variant of the same model).
    pub fn canonical_to_model(&self) -> &str {
        self.to_model.strip_suffix("[1m]").unwrap_or(&self.to_model)
    }
}

/// What a PreModelSwitch hook decides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PreModelSwitch {
    /// Let the call go to the new model.
    #[default]
    Allow,
    /// Keep the previous model for this call; the reason is a warning of the run.
    Block(String),
}

impl HookResult<PreModelSwitch> for PreModelSwitch {
    fn into_hook_future(self) -> HookFuture<PreModelSwitch> {
        HookFuture::ready(self)
    }
}

/// What a PostModelSwitch hook answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PostModelSwitch {
    /// Nothing to add.
    #[default]
    Continue,
    /// Context for the model, queued as a reminder ([`RunContext::remind`]).
    AddContext(String),
}

impl HookResult<PostModelSwitch> for PostModelSwitch {
    fn into_hook_future(self) -> HookFuture<PostModelSwitch> {
        HookFuture::ready(self)
    }
}

impl HookEvent {
    /// Whether a command handler of this event that times out blocks, fail-closed or not:
    /// PreModelSwitch (a switch no hook allowed in time does not happen).
    pub const fn timeout_blocks(self) -> bool {
        matches!(self, HookEvent::PreModelSwitch)
    }

    /// The event of a protocol name or an alias (see the type docs).
    pub fn parse(name: &str) -> Option<HookEvent> {
        let alias = match name {
            "agent-start" => Some(HookEvent::SessionStart),
            "step-start" => Some(HookEvent::BeforeModel),
            "tool-call-start" => Some(HookEvent::PreToolUse),
            "tool-call-end" => Some(HookEvent::PostToolUse),
            "agent-stop" => Some(HookEvent::Stop),
            _ => None,
        };
        alias.or_else(|| Self::ALL.into_iter().find(|e| e.name() == name))
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
            super::NOTIFY_WARNING,
            move |n: &Notification, ctx: &RunContext| f(&n.message, ctx),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::HookEvent;

    /// The cells of a row of a Markdown table, trimmed.
    fn cells(row: &str) -> Vec<&str> {
        let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
        inner.split('|').map(str::trim).collect()
    }

    /// The one table of events has, for each event, the command hooks' columns (what the
    /// command hooks' docs link to instead of a table of their own), and each row is whole.
    #[test]
    fn every_event_has_a_row_with_the_command_hooks_columns() {
        let rows: Vec<Vec<&str>> = hook_table!().lines().skip(2).map(cells).collect();
        for row in &rows {
            assert_eq!(row.len(), 7, "a row of 7 cells: {row:?}");
        }
        for event in HookEvent::ALL {
            let row = rows.iter().find(|r| r[0] == event.name());
            let row = row.unwrap_or_else(|| panic!("{event}: no row"));
            let (on, input, answer) = (row[4], row[5], row[6]);
            assert!(!input.is_empty() && !answer.is_empty(), "{event}: {row:?}");
            assert_eq!(
                on == "—",
                !event.has_matcher(),
                "{event}: matcher on `{on}`"
            );
        }
        for (name, _) in HookEvent::NOT_FIRED {
            assert!(rows.iter().any(|r| r[0] == *name), "{name}: no row");
        }
    }

    /// The command hooks' docs link to that table and keep no table of events of their own
    /// (one written by hand lacked 8 of the events).
    #[test]
    fn the_command_hooks_docs_link_to_the_one_table() {
        let docs = include_str!("../../command/mod.rs");
        let start = docs.find("//! # Events\n").expect("an Events section");
        let end = start + docs[start..].find("//! ## ").expect("a next section");
        let section = &docs[start..end];
        assert!(
            !section.lines().any(|l| l.starts_with("//! |")),
            "{section}"
        );
        assert!(section.contains("[`HookEvent`]"), "{section}");
    }
}
