//! The events of hooks: [`HookEvent`], the registration methods of [`Hooks`](super::Hooks),
//! and the inputs and answers of CwdChanged and of the model switches.
//!
//! Each event has a row of data (`table.rs`): its settings name, where it fires, what a hook
//! can do there, the default timeout of a command handler, which protocol fields it has, the
//! Rust registration methods, and the command hooks' columns. [`HookEvent`]'s methods read
//! it, and the events' table in the docs (`events.md`, shown in the [`HookEvent`] docs, and
//! linked from tower-agent's hooks guide, `tower_agent::guide::hooks`, and from the command
//! hooks' docs, `tower_agent::command`: one table for Rust and command hooks) is made from it;
//! a test fails when the file and the rows differ (`BLESS=1` rewrites the file).
//!
//! Adding an event is a variant of [`HookEvent`] and its row, its registration method
//! (`register.rs`) and slot (`slots.rs`, with the levels whose layer fires it), its typed input
//! and output next to where it fires, the firing point (a layer), and its translation for
//! command hooks in tower-agent's `command::events`.

mod register;
mod slots;
mod table;

use std::{fmt, path::PathBuf, time::Duration};

pub(crate) use self::slots::{HookSlots, StopFn, TaskFn};
use self::table::{EVENTS, EventInfo};
use super::failure::Failed;
use super::{HookFuture, HookResult};

/// The events of hooks, by the names settings files use (`hook_event_name` in a
/// command hook's input).
///
/// [`HookEvent::parse`] also accepts the Gemini CLI names `BeforeModel` /
/// `AfterModel` (which are the names here) and the short aliases `agent-start`
/// (SessionStart), `step-start` (BeforeModel), `tool-call-start` (PreToolUse),
/// `tool-call-end` (PostToolUse) and `agent-stop` (Stop).
///
#[doc = include_str!("events.md")]
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
    /// Before a compaction of the history: veto.
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
    /// When a call needs approval (a permission rule asks, a call no rule allows, or a
    /// PreToolUse `ask` with someone to ask), before the
    /// [`Approval`](crate::hooks::Approval) service: allow or deny in its place.
    PermissionRequest,
    /// When the approval path denies a call on its own (the approval service failed):
    /// observe, or tell the model it may retry.
    PermissionDenied,
    /// After every call of a step resolved, before the next model call: add context, stop
    /// the loop.
    PostToolBatch,
    /// An MCP server asks the user for input during a tool call, before the
    /// `tower_agent::mcp::client::Elicitation` service: answer in its place, or
    /// decline. Fired by
    /// `tower_agent::command::CommandHooks::elicitation_layer`
    /// (feature `mcp`).
    Elicitation,
    /// After the user answered an MCP elicitation: override the answer, or decline. Fired
    /// by `tower_agent::command::CommandHooks::elicitation_layer`
    /// (feature `mcp`).
    ElicitationResult,
    /// The run's working directory is not the one the thread's previous run had, or a tool
    /// moved it: observe.
    CwdChanged,
    /// PreModelSwitch: a model call names another model than the thread's previous call.
    PreModelSwitch,
    /// PostModelSwitch: a model call answered with another model than the thread's
    /// previous call.
    PostModelSwitch,
    /// Setup: the run's request asks to set the project up or to maintain it.
    Setup,
    /// DirectoryAdded: the run was given a directory its thread did not have.
    DirectoryAdded,
    /// UserPromptExpansion: a layer of the start stack expanded the prompt (a slash
    /// command).
    UserPromptExpansion,
    /// FileChanged: a watched file changed.
    FileChanged,
    /// ConfigChange: a settings file of command hooks changed.
    ConfigChange,
}

impl HookEvent {
    /// Every event, in the order of this enum.
    pub const ALL: [HookEvent; 32] = [
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
        HookEvent::CwdChanged,
        HookEvent::PreModelSwitch,
        HookEvent::PostModelSwitch,
        HookEvent::Setup,
        HookEvent::DirectoryAdded,
        HookEvent::UserPromptExpansion,
        HookEvent::FileChanged,
        HookEvent::ConfigChange,
    ];

    /// The protocol events this crate does not fire, each with the reason: settings
    /// that configure them load (files written for Claude Code load unchanged), and
    /// their handlers are skipped with a warning.
    pub const NOT_FIRED: &'static [(&'static str, &'static str)] = &[
        (
            "TeammateIdle",
            "Claude Code's agent teams; a library run has no teammates",
        ),
        (
            "WorktreeCreate",
            "the client's git worktrees; a library creates none",
        ),
        (
            "WorktreeRemove",
            "the client's git worktrees; a library creates none",
        ),
        (
            "PreSkillShellCommand",
            "Claude Code (2.1.332) fires it before a shell command embedded in a skill or a \
             command file runs as the file is expanded; tower-agent's command files and skills \
             run no shell command",
        ),
    ];

    /// The event's row of data.
    const fn info(self) -> &'static EventInfo {
        &EVENTS[self as usize]
    }

    /// The protocol name (`hook_event_name` in a hook's input).
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Where the event fires: the level of the agent whose layer fires it, and when.
    pub const fn fires(self) -> &'static str {
        self.info().fires
    }

    /// What a hook of this event can do.
    pub const fn can(self) -> &'static str {
        self.info().can
    }

    /// The names of the [`Hooks`](super::Hooks) methods that register a Rust hook for this event.
    pub const fn methods(self) -> &'static [&'static str] {
        self.info().methods
    }

    /// The timeout of a `command`, `http` or `mcp_tool` handler that sets none, as in
    /// the Claude Code hooks reference: 30 s for UserPromptSubmit, 10 s for
    /// MessageDisplay, 1.5 s for SessionEnd (whose handlers share one budget, see
    /// `tower_agent::command::SESSION_END_MAX_BUDGET`), else 600 s.
    pub const fn default_timeout(self) -> Duration {
        Duration::from_millis(self.info().timeout_ms)
    }

    /// Whether the event's input has `tool_name` / `tool_input` (PreToolUse, PostToolUse,
    /// PostToolUseFailure, PermissionRequest, PermissionDenied): the events where a command
    /// handler's `if` rule applies.
    pub const fn is_tool_event(self) -> bool {
        self.info().tool_input
    }

    /// Whether a command hook's plain (not JSON) stdout is added to the context, as in
    /// the hooks reference (SessionStart, UserPromptSubmit); elsewhere it goes to the
    /// debug log.
    pub const fn stdout_is_context(self) -> bool {
        self.info().stdout_context
    }

    /// Whether settings matchers apply; other events ignore them, as in the protocol.
    pub const fn has_matcher(self) -> bool {
        self.info().has_matcher
    }
}

/// What a CwdChanged hook gets: the thread's previous working directory and the run's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CwdChangedInput {
    /// The working directory of the thread's previous run.
    pub old_cwd: PathBuf,
    /// This run's ([`RunContext::cwd`](tower_agent_core::context::RunContext::cwd)).
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
/// call ([`ModelSettings::model`](tower_agent_core::model::ModelSettings::model)): someone asked for it,
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
    /// (`prompt_cache_warm`; see [`prompt_cache_warm`](tower_agent_core::agent::prompt_cache_warm)).
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
    /// Context for the model, queued as a reminder ([`RunContext::remind`](tower_agent_core::context::RunContext::remind)).
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

    /// The event's position in [`ALL`](Self::ALL) (`HookEvent::ALL[e.index()] == e`): a dense
    /// index, always below `ALL.len()`, for a table with a slot per event.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
        let rows: Vec<Vec<&str>> = include_str!("events.md")
            .lines()
            .skip(2)
            .map(cells)
            .collect();
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
}
