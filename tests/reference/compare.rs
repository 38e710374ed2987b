//! The differences tower-agent keeps on purpose ([`KEPT`], the Claude Code guide page lists
//! them) and those it has yet to fix ([`OPEN`]).

use hook_vectors::compare::{Known, known};

/// Differences tower-agent keeps on purpose, each with its reason (the Claude Code guide page
/// lists them).
pub(crate) const KEPT: &[Known] = &[
    known(
        "*",
        "SessionStart",
        "model",
        "an addition: the hooks reference lists `model` in SessionStart's input; 2.1.328 \
         and 2.1.332 headless do not send it. A script written for either reads what it expects.",
    ),
    known(
        "*",
        "SessionEnd",
        "outcome",
        "an addition: the run's outcome, which a library's caller has and a terminal does not.",
    ),
    known(
        "*",
        "*",
        "pricing",
        "the crate has no price list: `pricing` is \"default\" and the estimate \
         (`estimated_cache_write_usd`, of the model-switch events and of a resumed \
         SessionStart) 0, where Claude Code prices the models it knows from its catalog.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<order>",
        "a run is one `claude -p` on the thread: a thread's next run is a resumed session \
         (SessionEnd, then SessionStart) where the SDK's session goes on; and a switch is seen \
         at the first model call that names the other model (after UserPromptSubmit), as a \
         library has no set-model call between prompts.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<fired>",
        "the same: the first run's SessionEnd and the second's SessionStart.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "prompt_id",
        "the same: the switch happens within the second prompt's run, so it carries that \
         prompt's id where Claude Code's set-model between prompts carries the first's.",
    ),
    known(
        "model_switch_sdk",
        "*",
        "<requests>",
        "the same: one request fewer — Claude Code answers set_model without a model call.",
    ),
    known(
        "compact_manual",
        "*",
        "<order>",
        "a run is one `claude -p` on the thread (as in `model_switch_sdk`): the first prompt's \
         run ends (SessionEnd) before the compaction (`Agent::compact`, between runs), and the \
         next prompt's run is a resumed session, where Claude Code's session goes on around \
         `/compact`. Within the compaction the order is Claude Code's: PreCompact, SessionStart \
         `compact`, PostCompact.",
    ),
    known(
        "compact_manual",
        "SessionEnd",
        "<fired>",
        "the same: the first run's SessionEnd.",
    ),
    known(
        "compact_manual",
        "SessionStart",
        "<fired>",
        "the same: the second run's SessionStart (`resume`).",
    ),
    known(
        "compact_manual",
        "SessionEnd",
        "prompt_id",
        "the same: the first run's SessionEnd carries its prompt's id, where Claude Code's one \
         SessionEnd carries the last prompt's.",
    ),
    known(
        "compact_manual",
        "SubagentStop",
        "<fired>",
        "Claude Code writes its summary in a forked agent whose end fires SubagentStop \
         (`agent_type` empty, `last_assistant_message` the summary); the crate's summary is one \
         call of the agent's model, not a subagent: its hooks are PreCompact and PostCompact \
         (`compact_summary`).",
    ),
    known(
        "compact_manual_instructions",
        "*",
        "<order>",
        "as in `compact_manual`",
    ),
    known(
        "compact_manual_instructions",
        "SessionEnd",
        "<fired>",
        "as in `compact_manual`",
    ),
    known(
        "compact_manual_instructions",
        "SessionStart",
        "<fired>",
        "as in `compact_manual`",
    ),
    known(
        "compact_manual_instructions",
        "SessionEnd",
        "prompt_id",
        "as in `compact_manual`",
    ),
    known(
        "compact_manual_instructions",
        "SubagentStop",
        "<fired>",
        "as in `compact_manual`",
    ),
    known(
        "parallel_calls",
        "*",
        "<order>",
        "the calls of one answer run concurrently in tower-agent (their hooks too); Claude Code \
         runs Bash calls one after the other. Each call's hooks see the same inputs.",
    ),
    known(
        "*",
        "Notification",
        "<fired>",
        "a library has no screen: what Claude Code shows the user (a hook's `systemMessage`, a \
         failing hook's error) reaches Notification hooks, the crate's observers of what a \
         person would see.",
    ),
    known(
        "stop_failure_bad_request",
        "MessageDisplay",
        "<fired>",
        "a failed model call is no assistant message in a library: the error goes to the caller \
         (and to StopFailure hooks), where Claude Code displays it as its last message and runs \
         MessageDisplay hooks on that text.",
    ),
    known(
        "stop_failure_authentication",
        "MessageDisplay",
        "<fired>",
        "the same",
    ),
    known(
        "stop_failure_bad_request",
        "*",
        "<requests>",
        "Claude Code sent the request that failed with a 400 six times; the crate's retry \
         policy does not retry an invalid request (it would fail the same way).",
    ),
    known(
        "continue_false_pre_tool_use",
        "PostToolUse",
        "<fired>",
        "a PreToolUse `continue: false` stops the run before the call in tower-agent; Claude \
         Code 2.1.328 and 2.1.332 still run the call (and its PostToolUse hooks), then stop. A hook that \
         says stop is not followed by the call it was asked about.",
    ),
    known(
        "continue_false_pre_tool_use",
        "*",
        "<ran>",
        "the same: the command did not run",
    ),
    known(
        "project_dir_from_subdirectory",
        "*",
        "$project_dir",
        "the caller names the project (`CommandHooks::builder().project_dir`), and the suite's \
         host names the directory holding `.claude/`; Claude Code sets `$CLAUDE_PROJECT_DIR` to \
         the directory it was started in, a subdirectory here. A caller that wants Claude \
         Code's value passes the run's directory.",
    ),
    known(
        "file_changed",
        "*",
        "<order>",
        "the crate looks at the watched files between steps (after a step's tool calls, before \
         PostToolBatch; no watcher thread runs), where Claude Code's watcher fires as the file \
         changes, while the command that changed it still runs (before PostToolUse).",
    ),
    known(
        "config_change",
        "*",
        "<order>",
        "as for FileChanged (`file_changed`): the crate looks at the hooks' settings files \
         between steps (after a step's tool calls, before PostToolBatch), where Claude Code's \
         watcher fires ConfigChange as the file changes, while the command that changed it \
         still runs (before PostToolUse). The hooks of the new settings are used from there on, \
         as in Claude Code (PostToolBatch of the step, then the rest of the run).",
    ),
    known(
        "subagent",
        "PostToolUse",
        "tool_response",
        "the `Agent` tool's `tool_response` holds what the crate knows — status, prompt, \
         agentId, agentType, content (with the harness note of the tools used), resolvedModel, \
         totalDurationMs, totalTokens and usage's token counts (of the last answer), \
         totalToolUseCount, toolsUsed, toolStats — and not Claude Code's harness internals \
         (`harnessNoteCount`, `harnessTailCount`, `harnessSectionHash`), the raw API fields of \
         its `usage` (`service_tier`, `cache_creation`, `server_tool_use`, …), nor \
         `canContinueAgent: true`: a subagent's conversation ends with its call (no \
         SendMessage tool), so the crate says `false`. (Claude Code's note of the tools used \
         leaves out those its conversation named before; a tool does not see its caller's \
         conversation, so the crate's names every tool the subagent called.)",
    ),
    known("subagent_bash", "PostToolUse", "tool_response", "the same"),
    known(
        "subagent_stop_block",
        "PostToolUse",
        "tool_response",
        "the same",
    ),
    known(
        "subagent",
        "PostToolBatch",
        "tool_calls",
        "the `Agent` tool's result is the subagent's answer: Claude Code frames it in text of \
         its own (a `[Subagent hand-back]` warning that it is model output, a hint to continue \
         the agent with SendMessage, its usage) as a list of text blocks. A host that wants a \
         frame adds it (a PostToolUse hook's `updatedToolOutput`, a tool layer).",
    ),
    known("subagent_bash", "PostToolBatch", "tool_calls", "the same"),
    known(
        "subagent_stop_block",
        "PostToolBatch",
        "tool_calls",
        "the same",
    ),
    known(
        "mcp_elicitation_accept",
        "PostToolUse",
        "tool_response",
        "JSON objects keep their keys sorted in the crate (serde_json's map, without its \
         `preserve_order`): an Elicitation hook's `content` reaches the MCP server with the \
         same fields and values in another order, and this server writes it back as text in \
         the order it got. The object the server receives is the same.",
    ),
    known(
        "mcp_elicitation_accept",
        "PostToolBatch",
        "tool_calls",
        "the same",
    ),
    known("mcp_elicitation_accept", "*", "<requests>", "the same"),
];

/// Differences found and not fixed yet: each says what has to change. The list only shrinks.
pub(crate) const OPEN: &[Known] = &[
    known(
        "slash_command_shell",
        "PreSkillShellCommand",
        "<fired>",
        "Claude Code 2.1.332 runs the shell commands of a command file (`!` and a command in \
         backquotes, allowed by its `allowed-tools`) as it expands the file, firing \
         PreSkillShellCommand before each (after UserPromptExpansion; `tool_name` Bash, \
         `tool_input.command`, `invoked_by`); `SlashCommands` runs none yet (the event is in \
         `HookEvent::NOT_FIRED`). To change: run them under the command's `allowed-tools`, \
         supervised and capped like `execute`, with the hook before each.",
    ),
    known(
        "slash_command_shell",
        "*",
        "<requests>",
        "the same: Claude Code puts the command's output where the `!` command was \
         (`State: hk-shell-ran`); tower-agent keeps the text as written.",
    ),
];
