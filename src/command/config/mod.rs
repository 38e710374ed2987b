//! Configuration: settings files and hooks directories, read into handlers per event.

mod dir;
mod error;
mod handler;
mod settings;

use std::{fmt, time::Duration};

pub use self::error::ConfigError;
pub(crate) use self::{
    dir::load_dir,
    handler::{Config, Dialect, Entry, Exec, Extras, Handler},
    settings::{is_not_fired, load_file, load_settings, read_json, read_text},
};

/// The events command hooks can handle, by their protocol names.
///
/// [`HookEvent::parse`] also accepts the Gemini CLI names `BeforeModel` / `AfterModel` (which
/// are the names here) and the short aliases `agent-start` (SessionStart),
/// `step-start` (BeforeModel), `tool-call-start` (PreToolUse), `tool-call-end` (PostToolUse)
/// and `agent-stop` (Stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HookEvent {
    /// Before a tool call: allow, deny, ask, rewrite the input.
    PreToolUse,
    /// After a tool call that succeeded: add context, replace the output.
    PostToolUse,
    /// After a tool call that failed: add context.
    PostToolUseFailure,
    /// Before the prompt enters the thread: block, add context.
    UserPromptSubmit,
    /// When the agent is about to finish: make it go on.
    Stop,
    /// When a subagent is about to finish: send it back to work.
    SubagentStop,
    /// Once per run, before anything else: add context, stop the run.
    SessionStart,
    /// Once per run, after it ended: observe.
    SessionEnd,
    /// Before the summarize layer compacts the history: veto.
    PreCompact,
    /// Each warning of a run: observe.
    Notification,
    /// Before each model call: replace the request, or answer in the model's place.
    BeforeModel,
    /// After each model call: replace the response.
    AfterModel,
    /// A subagent is about to run: add context to its conversation.
    SubagentStart,
    /// `write_todos` adds a todo: block it.
    TaskCreated,
    /// `write_todos` marks a todo done: block it.
    TaskCompleted,
    /// The run ends on a model error: observe.
    StopFailure,
    /// A memory file was loaded: observe.
    InstructionsLoaded,
    /// An assistant message with text is complete: replace what is displayed.
    MessageDisplay,
    /// The history was compacted: observe.
    PostCompact,
    /// When a call needs approval (a PreToolUse `ask`), before the
    /// [`Approval`](crate::layers::hooks::Approval) service: allow or deny in its place.
    PermissionRequest,
    /// When the approval path denies a call on its own (no approval service, or it failed):
    /// observe, or tell the model it may retry.
    PermissionDenied,
    /// After every call of a step resolved, before the next model call: add context, stop the
    /// loop.
    PostToolBatch,
    /// An MCP server asks the user for input during a tool call, before the
    /// [`Elicitation`](crate::mcp::client::Elicitation) service: answer in its place, or
    /// decline. Fired by [`CommandHooks::elicitation_layer`](super::CommandHooks::elicitation_layer)
    /// (feature `mcp`).
    Elicitation,
    /// After the user answered an MCP elicitation: override the answer, or decline. Fired by
    /// [`CommandHooks::elicitation_layer`](super::CommandHooks::elicitation_layer) (feature
    /// `mcp`).
    ElicitationResult,
}

/// Protocol events this crate does not fire: configuring them is not an error (settings
/// files written for Claude Code load unchanged); their handlers are skipped with a warning.
const NOT_FIRED: &[&str] = &[
    "Setup",
    "UserPromptExpansion",
    "TeammateIdle",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
];

impl HookEvent {
    /// Every event, in the order of this enum.
    pub const ALL: [HookEvent; 24] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
        HookEvent::BeforeModel,
        HookEvent::AfterModel,
        HookEvent::SubagentStart,
        HookEvent::TaskCreated,
        HookEvent::TaskCompleted,
        HookEvent::StopFailure,
        HookEvent::InstructionsLoaded,
        HookEvent::MessageDisplay,
        HookEvent::PostCompact,
        HookEvent::PermissionRequest,
        HookEvent::PermissionDenied,
        HookEvent::PostToolBatch,
        HookEvent::Elicitation,
        HookEvent::ElicitationResult,
    ];

    /// The protocol name (`hook_event_name` in a hook's input).
    pub const fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
            HookEvent::BeforeModel => "BeforeModel",
            HookEvent::AfterModel => "AfterModel",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::TaskCreated => "TaskCreated",
            HookEvent::TaskCompleted => "TaskCompleted",
            HookEvent::StopFailure => "StopFailure",
            HookEvent::InstructionsLoaded => "InstructionsLoaded",
            HookEvent::MessageDisplay => "MessageDisplay",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PermissionDenied => "PermissionDenied",
            HookEvent::PostToolBatch => "PostToolBatch",
            HookEvent::Elicitation => "Elicitation",
            HookEvent::ElicitationResult => "ElicitationResult",
        }
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

    /// The timeout of a `command`, `http` or `mcp_tool` handler that sets none, as in the
    /// Claude Code hooks reference: 30 s for UserPromptSubmit, 10 s for MessageDisplay, 1.5 s for SessionEnd
    /// (whose handlers share one budget, see
    /// [`SESSION_END_MAX_BUDGET`](super::SESSION_END_MAX_BUDGET)), else 600 s.
    pub const fn default_timeout(self) -> Duration {
        match self {
            HookEvent::UserPromptSubmit => Duration::from_secs(30),
            HookEvent::MessageDisplay => Duration::from_secs(10),
            HookEvent::SessionEnd => Duration::from_millis(1500),
            _ => Duration::from_secs(600),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The events whose input has `tool_name` / `tool_input`, where `if` rules apply.
    pub(crate) fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
                | HookEvent::PermissionDenied
        )
    }

    /// Whether matchers apply (tool events, SubagentStop, SessionStart, SessionEnd,
    /// PreCompact, Notification); others ignore them, as in the protocol.
    pub(crate) fn has_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::BeforeModel
                | HookEvent::AfterModel
                | HookEvent::TaskCreated
                | HookEvent::TaskCompleted
                | HookEvent::MessageDisplay
                | HookEvent::PostToolBatch
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
