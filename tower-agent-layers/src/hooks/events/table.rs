//! The events' data: a row per [`HookEvent`](super::HookEvent), in the enum's order, from
//! which come [`HookEvent`](super::HookEvent)'s methods and the events' table in the docs
//! (`events.md`, checked against these rows by a test).

/// What the crate knows of an event: its row of [`EVENTS`].
///
/// The last three fields are the command hooks' columns of the docs' table, read only where
/// the table is written (the test that checks `events.md`).
#[derive(Debug, Clone, Copy)]
pub(super) struct EventInfo {
    /// The protocol name: the variant's name.
    pub(super) name: &'static str,
    /// Where it fires: the level of the agent whose layer fires it, and when.
    pub(super) fires: &'static str,
    /// What a hook decides there.
    pub(super) can: &'static str,
    /// The registration methods of [`Hooks`](super::super::Hooks).
    pub(super) methods: &'static [&'static str],
    /// The timeout of a command handler that sets none, in milliseconds.
    pub(super) timeout_ms: u64,
    /// The input has `tool_name` / `tool_input`: `if` rules apply.
    pub(super) tool_input: bool,
    /// Settings matchers apply.
    pub(super) has_matcher: bool,
    /// A command hook's plain (not JSON) stdout is context.
    pub(super) stdout_context: bool,
    /// What a settings matcher is compared with; `—` for none.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) matcher_on: &'static str,
    /// The fields of a command hook's input JSON besides the common ones.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) input: &'static str,
    /// What a command hook's answer does.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) answer: &'static str,
}

/// The events, in the order of [`HookEvent`](super::HookEvent): `EVENTS[event as usize]`.
pub(super) static EVENTS: [EventInfo; 32] = [
    EventInfo {
        name: "PreToolUse",
        fires: "tool: before the call",
        can: "allow, deny, ask, defer, rewrite the arguments, add context, abort the run",
        methods: &["before_tool_use"],
        timeout_ms: 600_000,
        tool_input: true,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`tool_name`",
        input: "`tool_name`, `tool_input`, `tool_use_id`",
        answer: "deny (exit 2 / `deny`), `defer` (see [`PreToolUse::Defer`](crate::hooks::PreToolUse::Defer); reason, `updatedInput` and `additionalContext` of a defer are ignored), ask, allow, `updatedInput`, `additionalContext`; deny > defer > ask > allow",
    },
    EventInfo {
        name: "PostToolUse",
        fires: "tool: after a call that succeeded",
        can: "replace the output, add context next to it, abort the run",
        methods: &["after_tool_use"],
        timeout_ms: 600_000,
        tool_input: true,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`tool_name`",
        input: "`tool_name`, `tool_input`, `tool_use_id`, `tool_response` (what the tool put under `tower_agent::command::TOOL_RESPONSE` in its output's metadata, else the output: its JSON if it holds a JSON object or array, else its text), `duration_ms` (how long the call took)",
        answer: "`updatedToolOutput`, `additionalContext`; a block adds its reason as context",
    },
    EventInfo {
        name: "PostToolUseFailure",
        fires: "tool: after a call that failed",
        can: "add context next to the error, abort the run",
        methods: &["on_tool_failure"],
        timeout_ms: 600_000,
        tool_input: true,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`tool_name`",
        input: "`tool_name`, `tool_input`, `tool_use_id`, `error`, `is_interrupt`, `duration_ms` (when the call returned an error output)",
        answer: "`additionalContext`; a block adds its reason as context",
    },
    EventInfo {
        name: "UserPromptSubmit",
        fires: "start: before the prompt enters the thread",
        can: "block (the run ends `Blocked`), add context, rewrite the prompt",
        methods: &["on_user_prompt"],
        timeout_ms: 30_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: true,
        matcher_on: "—",
        input: "`prompt`",
        answer: "block (the run ends `Blocked`), context (`additionalContext` or plain stdout)",
    },
    EventInfo {
        name: "Stop",
        fires: "step: the model answered without tool calls",
        can: "finish, or continue with feedback",
        methods: &["on_stop"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`stop_hook_active`, `last_assistant_message`, `background_tasks` and `session_crons` (both `[]`: a run has none)",
        answer: "block = the agent continues with the reason as feedback; `additionalContext` too",
    },
    EventInfo {
        name: "SubagentStop",
        fires: "tool: inside a subagent's call, as it finishes",
        can: "send the subagent back to work",
        methods: &["on_subagent_stop"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "the subagent's name",
        input: "as Stop (with `effort`, `background_tasks`, `session_crons`), and `agent_type` (its name; Claude Code's `Agent` tool: the `subagent_type`), `agent_id` (as for SubagentStart), `agent_transcript_path` (its transcript, `<session>/subagents/agent-<id>.jsonl`; `\"\"` without transcripts)",
        answer: "as Stop, for the subagent: a block sends it back to work with the reason as a user message, followed by a [hook context](tower_agent_core::message::Message::hook_context) in Claude Code's words (`SubagentStop hook blocking error from command: \"<command>\": <reason>`)",
    },
    EventInfo {
        name: "SessionStart",
        fires: "start: `startup`, `resume`; model: `compact`, on the answer of a compacted request",
        can: "add context (after the prompt, before UserPromptSubmit's; after the summary at `compact`), block (the run ends `Blocked`)",
        methods: &["on_session_start_for"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: true,
        matcher_on: "`source`",
        input: "`source`: `startup` (new thread), `resume` (the thread was in the store), `compact` (right after a compaction); `model` (when the agent's settings name one); at `resume`, when the thread keeps its last answer's time, `seconds_since_last_response`, `context_tokens`, `prompt_cache_likely_expired` (the last answer older than the cache's 5 minutes), `estimated_cache_write_usd` (0): see [`ResumedSession`](tower_agent_core::agent::ResumedSession)",
        answer: "context (`additionalContext` or plain stdout): after the prompt at `startup`/`resume` (a [hook context](tower_agent_core::message::Message::hook_context) message, saved in the thread), after the summary at `compact`; `CLAUDE_ENV_FILE` (`tower_agent::command`)",
    },
    EventInfo {
        name: "SessionEnd",
        fires: "run end: the loop, as the run ends (also a run whose future is dropped)",
        can: "observe; reason: [`session_end_reason`](tower_agent_core::agent::session_end_reason)",
        methods: &["on_session_end"],
        timeout_ms: 1_500,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`reason`",
        input: "`reason` (`other`, as Claude Code run headless says: see [`session_end_reason`](tower_agent_core::agent::session_end_reason)), `outcome` (the run's [`Outcome`](tower_agent_core::agent::Outcome) as JSON)",
        answer: "observe (started in the background; the run does not wait); also fires for a run whose future is dropped; the handlers share one budget of 1.5 s",
    },
    EventInfo {
        name: "PreCompact",
        fires: "model: in the summarize layer, before it compacts (`auto`); [`Agent::compact`](tower_agent_core::Agent::compact), before it asks for the summary (`manual`)",
        can: "veto the compaction ([`SummarizeLayer::on_compact`](crate::summarize::SummarizeLayer::on_compact) for `auto`)",
        methods: &["on_pre_compact"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`trigger` (`auto`, `manual`)",
        input: "`trigger`, `custom_instructions` (`auto`: empty; `manual`: the caller's instructions, or `null`); `auto` also: `tokens`, `threshold`, `summarized_messages`, `kept_messages`",
        answer: "veto the compaction (block); for `auto`, command hooks reach it through `tower_agent::command::CommandHooks::pre_compact`, given to [`SummarizeLayer::on_compact`](crate::summarize::SummarizeLayer::on_compact)",
    },
    EventInfo {
        name: "Notification",
        fires: "start: an observer set for the run; called where a warning or a permission prompt is raised",
        can: "observe, by `notification_type` (`warning`, `permission_prompt`)",
        methods: &["on_notify"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`notification_type`: `permission_prompt` (the [`Approval`](crate::hooks::Approval) service is about to be asked) or `warning` (each [`RunContext::warn`](tower_agent_core::context::RunContext::warn); no documented type fits)",
        input: "`message`, `title` (for `permission_prompt`: `Permission needed`), `notification_type`",
        answer: "observe (background); exit code, stderr, `systemMessage` and `continue` are ignored",
    },
    EventInfo {
        name: "BeforeModel",
        fires: "model: before each call",
        can: "modify the request, or answer without calling the model",
        methods: &["before_model"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`llm_request`: `{messages, tools, settings}`",
        answer: "`hookSpecificOutput.llm_request` replaces the parts it has; a block answers the call with the reason as the assistant's text (the model is not called)",
    },
    EventInfo {
        name: "AfterModel",
        fires: "model: after each call",
        can: "modify or replace the response",
        methods: &["after_model"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`llm_response`: `{message, usage, stop_reason}`",
        answer: "`hookSpecificOutput.llm_response` replaces the parts it has; a block replaces the answer with the reason as text",
    },
    EventInfo {
        name: "SubagentStart",
        fires: "tool: inside a subagent's call, before it runs",
        can: "add context to the subagent's conversation",
        methods: &["on_subagent_start"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`agent_type`",
        input: "`agent_type` (the subagent's tool name; Claude Code's `Agent` tool: the `subagent_type`), `agent_id` (`agent-<call id>`; Claude Code's `Agent` tool: a random `a…` id), no `permission_mode`",
        answer: "context (`additionalContext`, in Claude Code's words: `SubagentStart hook additional context: <text>`) after the subagent's prompt (a [hook context](tower_agent_core::message::Message::hook_context) message of its first request); cannot block (a block is reported)",
    },
    EventInfo {
        name: "TaskCreated",
        fires: "tool: inside `write_todos`, for each todo it adds",
        can: "block the call with feedback (the list is left unchanged)",
        methods: &["on_task_created"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`task_id`, `task_subject` (a new todo of a `write_todos` call)",
        answer: "block (exit 2 / `decision: \"block\"`): the call fails with the reason, the list is unchanged; `continue: false` is ignored",
    },
    EventInfo {
        name: "TaskCompleted",
        fires: "tool: inside `write_todos`, for each todo it marks done",
        can: "block the call with feedback (the list is left unchanged)",
        methods: &["on_task_completed"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`task_id`, `task_subject` (a todo that becomes `done`)",
        answer: "block (exit 2 / `decision: \"block\"`; `continue: false` too, with its stop reason): as TaskCreated",
    },
    EventInfo {
        name: "StopFailure",
        fires: "run end: the run ends on a model error",
        can: "observe; the matcher picks error types",
        methods: &["on_stop_failure"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`error`",
        input: "`error` (`rate_limit`, `overloaded`, `authentication_failed`, `billing_error`, `invalid_request`, `model_not_found`, `server_error`, `max_output_tokens`, `unknown`: from the provider's error, [`StopFailureInput::from_model_error`](crate::hooks::StopFailureInput::from_model_error)), `error_details` (a request too long: its status and body; not sent for other provider errors), `last_assistant_message` (`API Error: <status> <message>`), `effort`",
        answer: "observe (background; output and exit code ignored; the run's SessionEnd hooks wait for them); fires when a model call fails after its retries (not for an [`Abort`](tower_agent_core::error::Abort)); Stop does not run",
    },
    EventInfo {
        name: "InstructionsLoaded",
        fires: "start: a memory file was loaded as the session starts (the memory built-in), after SessionStart, before UserPromptSubmit",
        can: "observe; the matcher picks load reasons",
        methods: &["on_instructions_loaded"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`load_reason`",
        input: "`file_path`, `memory_type` (`Project` under the run's cwd, else `User`), `load_reason` (`session_start`): each file the `tower_agent::builtins::memory::Memory` stage loads",
        answer: "observe (output and exit code ignored); the run waits for the hooks before UserPromptSubmit, as Claude Code does",
    },
    EventInfo {
        name: "MessageDisplay",
        fires: "model: each complete assistant message with text",
        can: "replace the text of the [`MessageDisplay`](tower_agent_core::agent::AgentEvent::MessageDisplay) event (display only)",
        methods: &["on_message_display"],
        timeout_ms: 10_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`turn_id` (the run), `message_id`, `index` (0), `final` (true), `delta` (the whole text): once per assistant message with text",
        answer: "`displayContent` replaces the text of the [`MessageDisplay`](tower_agent_core::agent::AgentEvent::MessageDisplay) event (last one wins); the history keeps the original",
    },
    EventInfo {
        name: "PostCompact",
        fires: "model: on the answer of a compacted request (`auto`); [`Agent::compact`](tower_agent_core::Agent::compact), after the summary (`manual`); after SessionStart `compact`",
        can: "observe the compaction (its summary); the matcher picks the trigger",
        methods: &["on_post_compact"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`trigger`",
        input: "`trigger` (`auto`, `manual`), `compact_summary`",
        answer: "observe (background)",
    },
    EventInfo {
        name: "PermissionRequest",
        fires: "tool: a call needs approval, before the [`Approval`](crate::hooks::Approval) service",
        can: "allow (maybe with new arguments) or deny in the service's place",
        methods: &["on_permission_request"],
        timeout_ms: 600_000,
        tool_input: true,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`tool_name`",
        input: "`tool_name`, `tool_input` (no `tool_use_id`), `permission_suggestions` (a call no permission rule allows: Claude Code's suggestions), `effort`",
        answer: "`hookSpecificOutput.decision`: `behavior: \"allow\"` (+ `updatedInput`) runs the call, `\"deny\"` (+ `message`, the model's text) denies it (`interrupt`: the run ends `Aborted`); no decision: the approval service decides. Exit 2 is ignored (stderr discarded); `continue: false` denies and interrupts",
    },
    EventInfo {
        name: "PermissionDenied",
        fires: "tool: the approval path denied a call on its own",
        can: "tell the model it may retry",
        methods: &["on_permission_denied"],
        timeout_ms: 600_000,
        tool_input: true,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`tool_name`",
        input: "`tool_name`, `tool_input`, `tool_use_id`, `reason`",
        answer: "`hookSpecificOutput.retry: true` tells the model it may retry. Exit 2 is ignored",
    },
    EventInfo {
        name: "PostToolBatch",
        fires: "step: after every call of a step resolved, before the next model call",
        can: "add context before the next model call, stop the loop",
        methods: &["on_post_tool_batch"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`tool_calls`: `[{tool_name, tool_input, tool_use_id, tool_response}]` (`tool_response`: the text the model gets)",
        answer: "`additionalContext` before the next model call; `decision: \"block\"`, `continue: false` or exit 2 stops the loop ([`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked)), the reason kept in the conversation",
    },
    EventInfo {
        name: "Elicitation",
        fires: "tool: an MCP server asks for input during a call (command hooks' elicitation layer)",
        can: "answer in the user's place, or decline",
        methods: &[],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "the MCP server's name",
        input: "`mcp_server_name`, `message`, `mode` (`form` / `url`), `requested_schema` (form), `url` and `elicitation_id` (URL mode)",
        answer: "`hookSpecificOutput.action` (`accept` + `content`, `decline`, `cancel`) answers in the user's place; exit 2 declines (MCP elicitation (`tower_agent::command`); feature `mcp`)",
    },
    EventInfo {
        name: "ElicitationResult",
        fires: "tool: after the user answered an MCP elicitation (command hooks' elicitation layer)",
        can: "override the answer, or decline",
        methods: &[],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "the MCP server's name",
        input: "`mcp_server_name`, `action`, `content` (if any), `mode`, `elicitation_id` (URL mode)",
        answer: "`hookSpecificOutput.action` / `content` override the user's answer; exit 2 declines",
    },
    EventInfo {
        name: "CwdChanged",
        fires: "start: a run of a thread whose previous run had another working directory, before SessionStart; step: the end of a step whose tool moved the run's directory ([`RunContext::set_cwd`](tower_agent_core::context::RunContext::set_cwd), e.g. a `cd` in the Claude Code `Bash` (`tower_agent::builtins::claude_code`)), before FileChanged and PostToolBatch",
        can: "observe; command hooks may export variables through `CLAUDE_ENV_FILE`",
        methods: &["on_cwd_changed"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: false,
        stdout_context: false,
        matcher_on: "—",
        input: "`old_cwd`, `new_cwd`",
        answer: "observe (a block or `continue: false` is reported, not obeyed); `hookSpecificOutput.watchPaths` replaces the files FileChanged watches; `CLAUDE_ENV_FILE` (`tower_agent::command`)",
    },
    EventInfo {
        name: "PreModelSwitch",
        fires: "model: before a call whose model is not the one the thread's previous call used",
        can: "allow the switch, or block it (the call keeps the previous model); a command hook that times out blocks",
        methods: &["on_pre_model_switch"],
        timeout_ms: 30_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "the new model's name",
        input: "`from_model`, `to_model`, `requested_model`, `source` (`sdk`: a call naming another model), `context_tokens`, `prompt_cache_warm`, `cache_ttl` (`5m`), `estimated_cache_write_usd` (0), `pricing` (`default`): see [`ModelSwitchInput`](crate::hooks::ModelSwitchInput)",
        answer: "a block — exit 2, `decision: \"block\"`, `continue: false`, `permissionDecision` `deny` or `ask` (no one to ask at a model call), a fail-closed failure or a timeout — keeps the previous model for the call (a warning gives the reason)",
    },
    EventInfo {
        name: "PostModelSwitch",
        fires: "model: after a call that switched the thread's model answered",
        can: "observe; add context",
        methods: &["on_post_model_switch"],
        timeout_ms: 30_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: true,
        matcher_on: "the new model's name",
        input: "`from_model`, `to_model`, `requested_model`, `source` (`sdk`: a call naming another model), `context_tokens`, `prompt_cache_warm`, `cache_ttl` (`5m`), `estimated_cache_write_usd` (0), `pricing` (`default`): see [`ModelSwitchInput`](crate::hooks::ModelSwitchInput)",
        answer: "context (`additionalContext` or plain stdout), queued as a reminder; a block is reported (the switch is made)",
    },
    EventInfo {
        name: "Setup",
        fires: "start: a run whose request asks for setup ([`AgentRequest::setup`](tower_agent_core::AgentRequest::setup)), before CwdChanged and SessionStart",
        can: "add context (the run's system prompt); cannot block",
        methods: &["on_setup"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`trigger`",
        input: "`trigger` (`init`, `maintenance`)",
        answer: "nothing for the model (Claude Code discards Setup's JSON fields and stdout); `CLAUDE_ENV_FILE` (`tower_agent::command`); cannot block (a block, `continue: false` or a fail-closed failure is reported)",
    },
    EventInfo {
        name: "DirectoryAdded",
        fires: "start: each directory of the request ([`AgentRequest::add_dir`](tower_agent_core::AgentRequest::add_dir)) the thread did not have, after SessionStart",
        can: "observe",
        methods: &["on_directory_added"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`source`",
        input: "`directory`, `source` (`slash_command`)",
        answer: "observe (a block or `continue: false` is reported)",
    },
    EventInfo {
        name: "UserPromptExpansion",
        fires: "start: an inner start layer expanded the prompt ([`RunStart::expand`](tower_agent_core::agent::start::RunStart::expand), e.g. `tower_agent::builtins::commands::SlashCommands`), on the way out",
        can: "block (the run ends `Blocked`), add context after the prompt, rewrite the expanded prompt",
        methods: &["on_prompt_expansion"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: true,
        matcher_on: "the command's name",
        input: "`expansion_type` (`slash_command`, `mcp_prompt`), `command_name`, `command_args`, `command_source`, `prompt` (the expanded prompt)",
        answer: "as UserPromptSubmit: block (the run ends `Blocked`), context after the prompt (`additionalContext` or plain stdout)",
    },
    EventInfo {
        name: "FileChanged",
        fires: "step: after a step's tool calls, for each watched file that changed since the run started or the last check",
        can: "observe; replace the watch list (`watchPaths`)",
        methods: &["on_file_changed"],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "the file's name",
        input: "`file_path`, `event` (`change`, `add`, `unlink`)",
        answer: "observe (a block is reported); `hookSpecificOutput.watchPaths` replaces the watched files; `CLAUDE_ENV_FILE` (`tower_agent::command`)",
    },
    EventInfo {
        name: "ConfigChange",
        fires: "step: after a step's tool calls, for each settings file of the command hooks that changed (the hooks of the files as they are now are used from there on); `tower_agent::command::CommandHooks::reload`: a settings file changed",
        can: "block the change (the configuration stays as it was), except `policy_settings`",
        methods: &[],
        timeout_ms: 600_000,
        tool_input: false,
        has_matcher: true,
        stdout_context: false,
        matcher_on: "`source`",
        input: "`source` (`user_settings`, `project_settings`, `local_settings`, `policy_settings`), `file_path`; during a run, the run's `session_id`, `prompt_id` and `cwd`; from a reload, a fresh `session_id`, `cwd` the project directory",
        answer: "a block (exit 2, `decision: \"block\"`, `continue: false`, a fail-closed failure) keeps the configuration as it was, except for `policy_settings`",
    },
];

#[cfg(test)]
mod tests {
    use super::{EVENTS, EventInfo};
    use crate::hooks::HookEvent;

    /// A row of the docs' table for registration methods of no settings event.
    struct RustRow {
        label: &'static str,
        fires: &'static str,
        can: &'static str,
        methods: &'static [&'static str],
    }

    /// The rows of the registration methods of no settings event.
    const RUST_ONLY: [RustRow; 2] = [
        RustRow {
            label: "step start",
            fires: "model: before each model call",
            can: "observe",
            methods: &["before_step"],
        },
        RustRow {
            label: "step end",
            fires: "step: after each step's tool calls",
            can: "observe; `should_continue` returning `false` ends the run (`Blocked`) before the next model call",
            methods: &["after_step", "should_continue"],
        },
    ];

    /// The links to the registration methods of a row.
    fn links(methods: &[&str]) -> String {
        let link = |m: &&str| format!("[`{m}`](crate::hooks::Hooks::{m}) ");
        methods.iter().map(link).collect()
    }

    /// The events' table, as Markdown: what `events.md` holds.
    fn markdown() -> String {
        let mut table = String::from(
            "| Event | Fires | Rust hook | Can | Matcher on | Input fields of a command hook (besides the common ones) | A command hook's answer |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for EventInfo {
            name,
            fires,
            can,
            methods,
            matcher_on,
            input,
            answer,
            ..
        } in &EVENTS
        {
            let methods = links(methods);
            table += &format!(
                "| {name} | {fires} | {methods} | {can} | {matcher_on} | {input} | {answer} |\n"
            );
        }
        for RustRow {
            label,
            fires,
            can,
            methods,
        } in &RUST_ONLY
        {
            let methods = links(methods);
            table +=
                &format!("| {label} (Rust only) | {fires} | {methods} | {can} | — | — | — |\n");
        }
        for (name, reason) in HookEvent::NOT_FIRED {
            table += &format!("| {name} | not fired: {reason} | | | | | |\n");
        }
        table
    }

    /// `events.md` is the table these rows make; `BLESS=1` rewrites it.
    #[test]
    fn events_md_is_the_table_of_the_rows() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/hooks/events/events.md");
        let table = markdown();
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(path, &table).expect("write events.md");
        }
        let file = std::fs::read_to_string(path).expect("read events.md");
        assert!(
            file == table,
            "{path} is not the table of the events' rows: run `BLESS=1 cargo test -p tower-agent-layers --lib events_md` and review the diff"
        );
    }

    /// Each row is its event's, in the enum's order.
    #[test]
    fn the_rows_are_in_the_order_of_the_enum() {
        assert_eq!(EVENTS.len(), HookEvent::ALL.len());
        for (event, row) in HookEvent::ALL.into_iter().zip(&EVENTS) {
            assert_eq!(format!("{event:?}"), row.name);
            assert_eq!(EVENTS[event.index()].name, row.name);
        }
    }
}
