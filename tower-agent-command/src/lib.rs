//! Command hooks: external hook scripts, compatible with the Claude Code hooks protocol, plus
//! persistent hook processes.
//!
//! [`CommandHooks`] reads settings files (the `hooks` section of a Claude Code
//! `settings.json`, unchanged) and hooks directories, and turns them into callbacks of the
//! [`Hooks`] registry: **one callback per event**, which runs every matching handler of that
//! event **in parallel** and merges their answers **in configuration order** (not in the order
//! they finish, so the outcome is deterministic).
//!
//! ```text
//! settings.json ─┐
//! hooks dir ─────┼─► CommandHooks ──into_hooks()──► Hooks ──compile()──► AgentBuilder::hooks
//! settings JSON ─┘        └──pre_compact()──► SummarizeLayer::on_compact
//! ```
//!
//! # Example
//!
//! A PreToolUse hook that blocks `rm -rf` with exit code 2; the model sees its stderr.
//!
//! ```
//! # #[cfg(unix)] {
//! use serde_json::json;
//! use tower_agent_core::{Agent, BoxError, model::ScriptedModel, tool::tool_fn};
//! use tower_agent_command::CommandHooks;
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let script = dir.path().join("block-rm.sh");
//! std::fs::write(&script, r#"#!/bin/sh
//! if grep -q 'rm -rf'; then echo "rm -rf is not allowed here" >&2; exit 2; fi
//! "#)?;
//! # use std::os::unix::fs::PermissionsExt;
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
//!
//! let hooks = CommandHooks::builder()
//!     .settings_json(
//!         json!({ "hooks": { "PreToolUse": [{
//!             "matcher": "bash",
//!             "hooks": [{ "type": "command", "command": script, "timeout": 10 }]
//!         }]}}),
//!         "inline settings",
//!     )
//!     .project_dir(dir.path())
//!     // Transcripts (`transcript_path`) go here instead of the per-project default.
//!     .transcripts_dir(dir.path().join("transcripts"))
//!     .build()?;
//!
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("bash", json!({ "command": "rm -rf /" })).text("OK."))
//!     .tool(tool_fn("bash", "Runs a command", json!({"type": "object"}), |_, _| async {
//!         Ok("ran")
//!     }))
//!     .hooks(hooks.into_hooks().compile()?)
//!     .build();
//! let resp = agent.run("clean up").await?;
//! // Exit 2, in Claude Code's words: the hook's command in brackets, then what it printed.
//! assert_eq!(
//!     resp.messages[2].text(),
//!     format!("PreToolUse:bash hook error: [{}]: rm -rf is not allowed here", script.display())
//! );
//! # Ok(())
//! # }
//! # main().unwrap();
//! # }
//! ```
//!
//! # Configuration
//!
//! [`CommandHooks::builder`] takes, in order (later sources add to earlier ones; nothing is
//! replaced): settings files ([`settings_file`](CommandHooksBuilder::settings_file)), settings
//! values ([`settings_json`](CommandHooksBuilder::settings_json)), hooks directories
//! ([`hooks_dir`](CommandHooksBuilder::hooks_dir)), plugin folders
//! ([`plugin_dir`](CommandHooksBuilder::plugin_dir), [below](#plugins)) and other tools'
//! files ([`gemini_settings_file`](CommandHooksBuilder::gemini_settings_file),
//! [`codex_hooks_file`](CommandHooksBuilder::codex_hooks_file), [below](#other-formats)). A
//! settings value is an object whose `hooks` maps each event to matcher groups:
//!
//! ```json
//! { "hooks": { "PreToolUse": [ { "matcher": "Bash|Write",
//!       "hooks": [ { "type": "command", "command": "$CLAUDE_PROJECT_DIR/hooks/check.sh",
//!                    "timeout": 30, "failClosed": true } ] } ] },
//!   "disableAllHooks": false }
//! ```
//!
//! | Handler field | Meaning |
//! |---|---|
//! | `type` | `"command"`, `"http"` ([below](#http-hooks)), `"mcp_tool"` ([below](#mcp-tool-hooks)), `"prompt"` or `"agent"` ([below](#prompt-and-agent-hooks)); any other type is an error |
//! | `command` | run with `sh -c` in the run's working directory ([below](#working-directory-and-project-directory)), with `CLAUDE_PROJECT_DIR` naming the project directory; with `args`, the executable itself (no shell; `${CLAUDE_PROJECT_DIR}` is replaced by the project directory in it and in each argument) |
//! | `args` | argument list (exec form) |
//! | `shell` | `"sh"` (default) or `"bash"`; others are skipped with a warning |
//! | `timeout` | seconds, a positive number; default 600 (30 for UserPromptSubmit, 10 for MessageDisplay; SessionEnd handlers share one budget of 1.5 s, raised to their longest `timeout`, at most [60 s](SESSION_END_MAX_BUDGET); `CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS` overrides it) for `command`, `http` and `mcp_tool`, 30 for `prompt`, 60 for `agent`. A timed-out handler is killed and renders no decision |
//! | `failClosed` | `true`: a timeout, crash, non-zero exit other than 2, invalid JSON or missing executable **denies** (PreToolUse) or **blocks** (other events) instead of being ignored |
//! | `persistent` | `true`: one long-lived process answers every event ([below](#persistent-hooks)) |
//! | `async` / `asyncRewake` | `command` only: run in the background, never waited for; decisions (`decision`, `permissionDecision`, `continue`, exit 2) have no effect. When it exits, its `additionalContext` and `systemMessage` are queued as reminders of the run ([`RunContext::remind`](tower_agent_core::context::RunContext::remind)): the model sees them after the tool results of the step during which it finished. `asyncRewake` (implies `async`): an exit 2 also queues its stderr (its stdout if stderr is empty) as a reminder. Without a run (SessionEnd, Notification) the answer is only logged |
//! | `once` | ignored: Claude Code honours it only for hooks in skill frontmatter, and this crate loads no hooks from skills |
//! | `url`, `headers`, `allowedEnvVars` | `http` handlers ([below](#http-hooks)) |
//! | `server`, `tool`, `input` | `mcp_tool` handlers ([below](#mcp-tool-hooks)) |
//! | `prompt`, `model`, `continueOnBlock` | `prompt` and `agent` handlers ([below](#prompt-and-agent-hooks)) |
//! | `if` | one permission rule (`"Bash(git *)"`, `"Edit(*.ts)"`): the handler runs only for tool calls it matches ([below](#if-conditions)) |
//! | `sha256` | the trusted hash of the script the command runs ([below](#trusted-hashes)) |
//! | `name` | a name for [`disabledHooks`](#disabling-hooks-by-name) (Gemini CLI names its hooks) |
//! | others (`statusMessage` …) | ignored |
//!
//! A bad configuration is a [`ConfigError`] naming the file and the JSON path in it, e.g.
//! `settings.json: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds`.
//! An unknown event name is an error; a protocol event this crate does not fire (listed
//! [below](#events-not-fired)) is skipped with a warning. `disableAllHooks: true` in
//! any source disables every hook. A handler defined twice for one event (same command, args,
//! timeout, mode, `if` rule and `sha256`) runs once: at the place of its first definition,
//! under the matchers of every definition, fail-closed if any definition is — unless the two
//! come from different plugins, or one from a plugin and one from settings: a plugin's copy
//! stays separate (hooks.md § "Hook handler fields").
//!
//! **Hooks directories.** Each executable file of the directory (sorted by name; hidden and
//! non-executable files skipped) is run once at build time with the environment variable
//! `TOWER_AGENT_HOOK_ACTION=describe` and must print what it handles, e.g.
//! `{"events": ["PreToolUse", "Stop"], "matcher": "bash"}` (optional `timeout`, `failClosed`,
//! `persistent`). It is then run like an exec-form handler (with
//! `TOWER_AGENT_HOOK_ACTION=run`). A describe that fails, times out (10 s) or prints anything
//! else is a [`ConfigError`] naming the file. Once the describe step has exited, what it left
//! running is killed and its output is read for at most 100 ms more, so a process it started
//! that keeps its stdout open (`setsid … &`) cannot hold up `build()`.
//!
//! ## HTTP hooks
//!
//! (Feature `http-hooks`, on by default; without it `http` handlers are skipped with a
//! warning.) The input JSON is POSTed to `url` (http or https) with
//! `Content-Type: application/json` and the `headers` of the handler. In a header value,
//! `$NAME` and `${NAME}` are replaced by the environment variable `NAME` if it is listed in
//! `allowedEnvVars`, else by nothing (an unset variable is empty too); a value that is not a
//! valid header once replaced is a non-blocking error. The variables are those a command
//! handler would get: `CLAUDE_PROJECT_DIR` and `TOWER_AGENT_PROJECT_DIR` name the project
//! directory, a plugin's handlers see its `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`, a
//! session's [`CLAUDE_ENV_FILE`](#claude_env_file) exports count; other names are read from
//! this process's environment. Redirects are not followed. The answer:
//!
//! - **2xx, empty body**: as exit 0 with no output;
//! - **2xx, a JSON object**: as exit 0 with that JSON on stdout (so a deny blocks, a
//!   `decision: "block"` blocks, and so on, exactly as for a command);
//! - **2xx with any other body, any other status, a connection failure**: a non-blocking
//!   error (reported; the action goes on — unless `failClosed`);
//! - **timeout**: cancelled, no decision, the action goes on (unless `failClosed`).
//!
//! An HTTP answer cannot block through its status alone. `http` handlers do not run on
//! SessionStart (as in Claude Code): skipped with a warning.
//!
//! ## MCP tool hooks
//!
//! (Feature `mcp`; without it `mcp_tool` handlers are skipped with a warning.) An `mcp_tool`
//! handler calls the tool `tool` (the server's own name for it, not `mcp__<server>__<tool>`)
//! of the MCP server `server` of the [`McpServers`](tower_agent_mcp::client::McpServers) given to
//! [`CommandHooksBuilder::mcp`] — usually the set the agent registers, so the connection is
//! shared. Without that set, `mcp_tool` handlers are skipped with a warning. They run on
//! every event. `server` and `tool` (non-empty strings) are required; `input` (an object) is
//! the tool's arguments, in whose strings — in nested objects and arrays too — `${path}` is
//! replaced by the value of the hook's input at `path` (dot-separated keys, array indexes as
//! numbers: `${tool_input.file_path}`, `${session_id}`, `${tool_input.edits.0.path}`): a
//! string as is, another value as its JSON text, and a path the input does not have (the
//! reference does not say) as the empty string. The substituted strings of one call may
//! total **1 MiB**; past that the handler is a non-blocking error and the tool is not called.
//!
//! The tool's text content (as for an MCP tool call's output: text parts joined by
//! newlines, structured content as JSON when there is no text) is read like a command's
//! stdout on exit 0: a JSON object decides as a command's would (a PreToolUse
//! `permissionDecision: "deny"` denies), plain text is context where plain stdout is
//! (UserPromptSubmit, SessionStart). As the reference says, the hook **never connects** a
//! server: a server that is not connected (not yet, connecting, lost), an unknown server
//! name, an error of the call and a result with `isError: true` are non-blocking errors
//! (reported; the action goes on — unless `failClosed`). Past its `timeout` (default 600 s,
//! 30 s on UserPromptSubmit) the call is cancelled and renders no decision. The answer's
//! size is bounded by the MCP client's message limit (see [`mcp::client`](tower_agent_mcp::client)).
//!
//! ## MCP elicitation
//!
//! (Feature `mcp`.) [`CommandHooks::elicitation_layer`] is a tower [`Layer`](tower::Layer)
//! over the [`Elicitation`](tower_agent_mcp::client::Elicitation) service given to
//! [`McpServersBuilder::elicitation`](tower_agent_mcp::client::McpServersBuilder::elicitation).
//! For each `elicitation/create` request of a server:
//!
//! 1. **Elicitation** hooks whose matcher matches the server's name run first. A hook's
//!    `hookSpecificOutput.action` answers in the user's place and the wrapped service is not
//!    called: `accept` (with `content`, an object, sent to the server), `decline` or
//!    `cancel`. Exit 2 (its JSON ignored), `decision: "block"` or a failed fail-closed
//!    handler **declines**. With several answers the most cautious wins (cancel, then
//!    decline, then accept with the first accept's content); a `content` that is not an
//!    object declines. No answer: the wrapped service (the user) is asked.
//! 2. **ElicitationResult** hooks then see the user's answer (`action`, `content`); an
//!    `action` overrides it (with `content` for `accept`), exit 2 declines. They do not run
//!    when an Elicitation hook answered.
//!
//! `systemMessage` and `continue` are ignored, as in the reference. Their inputs have the
//! common fields of the run whose tool call the server was serving
//! ([`ElicitationRequest::ctx`](tower_agent_mcp::client::ElicitationRequest::ctx)); with no call in
//! flight, those of a fresh context. Without an elicitation service of your own, wrap one
//! that declines everything (`service_fn(|_| async { Ok(ElicitationResponse::Decline) })`):
//! hooks can still accept.
//!
//! ## Prompt and agent hooks
//!
//! They need a model service: [`CommandHooksBuilder::model`] (without one they are skipped
//! with a warning). A `prompt` handler makes one model call: a system message asking for a
//! single JSON object `{"ok": true}` or `{"ok": false, "reason": "…"}` (optionally
//! `"impossible": true`), and the `prompt` as the user message, with `$ARGUMENTS` replaced by
//! the input JSON (no `$ARGUMENTS`: the input is appended after a blank line; `\$` is a
//! literal `$`). `model` sets the request's model name. An `agent` handler runs a subagent
//! ([`Agent`](tower_agent_core::Agent)) on the same model service with the read-only file tools `ls`,
//! `read_file`, `glob` and `grep` rooted at the project directory, for **at most 50 turns**,
//! and reads its final answer the same way. The answer (a JSON object alone, in a code fence
//! or in text) becomes the JSON output a command would print:
//!
//! | Event | `ok: false` |
//! |---|---|
//! | Stop, SubagentStop | block: the agent goes on with the reason (a prompt's `impossible: true`: it stops) |
//! | PreToolUse | `prompt`: the call is denied and the run ends (`continue: false`) with the reason; with `continueOnBlock: true`, and always for `agent`: denied with the reason, the run goes on |
//! | PostToolUse | `prompt`: the run ends with the reason; with `continueOnBlock: true`, and for `agent`: the reason is added next to the result |
//! | UserPromptSubmit | block (the run ends `Blocked`) |
//! | PostToolUseFailure | the reason is added next to the error |
//!
//! `ok: true` decides nothing (the normal flow goes on: it is not an allow). An answer with no
//! boolean `ok`, a failed model call or a timeout is a non-blocking error. They run on the
//! events above only; elsewhere they are skipped with a warning, as Claude Code does not run
//! them there.
//!
//! ## `if` conditions
//!
//! `if` holds one [permission rule](https://code.claude.com/docs/en/permissions), tested
//! against the tool call **before anything is serialized or spawned**: a call no rule
//! matches does not even reach the event's callback, so a filtered hook that does not match
//! costs a rule test, not a process (see `benches/command_hooks.rs`, `if_no_match`). It is
//! evaluated on tool events only (PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest,
//! PermissionDenied); a handler
//! with `if` on another event never runs (skipped at load, with a warning).
//!
//! | Rule | Matches |
//! |---|---|
//! | `Bash`, `Bash(*)` | every call of `Bash` (also this crate's `bash` / `execute` shell tools) |
//! | `Bash(git *)`, `Bash(git:*)` | a command starting with `git` then a space, or `git` alone (not `gitk`); `*` anywhere matches any text, `Bash(npm run build)` is exact |
//! | `Read(path)`, `Edit(path)` | a file tool's path (`file_path`, `notebook_path` or `path`): `Read` covers `Read`, `Grep`, `Glob`, `read_file`, `grep`, `glob`, `ls`; `Edit` covers `Edit`, `Write`, `MultiEdit`, `NotebookEdit`, `write_file`, `edit_file` |
//! | `mcp__server`, `mcp__server__*`, `mcp__server__tool`, `mcp__*` | the tools of a server, by glob, or one tool |
//! | `WebFetch(domain:example.com)` | the URL's host; `*.example.com` is any subdomain (not the domain), other `*` stay within a label |
//! | `Agent(Explore)` | the `subagent_type` |
//! | `Tool(param:value)` | a top-level scalar input field equal to `value` (`*` wildcards); an absent field never matches |
//! | `Tool` | every call of that tool (a `*` in the name is a wildcard over the whole name) |
//!
//! **Bash commands** are split as the reference documents: on `&&`, `||`, `;`, `|`, `|&`,
//! `&` and newlines, in subshells, and inside `$(…)`, `<(…)` and backticks (their commands
//! are checked too); leading `VAR=value` assignments and the wrappers `timeout`, `time`,
//! `nice`, `nohup`, `stdbuf`, `command`, `builtin`, `noglob` and bare `xargs` are stripped;
//! redirections are not part of a command. The hook runs when **any** subcommand matches. It
//! also runs (fails open) when the command cannot be parsed (unbalanced quotes or
//! parentheses, here-documents, `case`), when a command name is itself an expansion
//! (`$CMD …`), and — for patterns that name more than a command, such as `Bash(git push *)`
//! — when the command holds `$(…)`, backticks or `$VAR`.
//!
//! **Paths** follow gitignore rules, anchored: `//path` at the filesystem root, `~/path` at
//! the home directory, `/path` and `./path` (and any pattern with a `/` inside) at the
//! project directory; a pattern without `/` (`*.ts`, `.env`) matches at any depth under the
//! project; `*` stays within a segment, `**` crosses them; `src/**` matches only the
//! project's `src`; a pattern matching a directory matches what is under it. A relative path
//! in the input resolves against the project directory, `.` and `..` lexically. A rule that
//! cannot be parsed is a [`ConfigError`]; a specifier this crate does not understand
//! (`WebSearch(…)`) loads with a warning and matches on the tool name alone.
//!
//! # Permission rules
//!
//! The `permissions` of every settings source are read and merged as Claude Code merges them
//! (each list is the union of the sources'; nothing of one source undoes another's):
//!
//! ```json
//! { "permissions": { "allow": ["Bash(git *)", "Read"], "ask": ["Bash(git push *)"],
//!                    "deny": ["Bash(rm *)", "Read(./.env)"] } }
//! ```
//!
//! Each rule is written as an [`if` rule](#if-conditions); one that cannot be parsed is a
//! [`ConfigError`] naming the file and the path (`settings.json: permissions.deny[1]: …`).
//! Other keys of `permissions` (`defaultMode`, `additionalDirectories` …) are not read. The
//! builder adds what Claude Code's command line gives:
//! [`allowed_tools`](CommandHooksBuilder::allowed_tools) (`--allowedTools`, allow rules),
//! [`disallowed_tools`](CommandHooksBuilder::disallowed_tools) (`--disallowedTools`, deny
//! rules) and [`ask_unless_allowed`](CommandHooksBuilder::ask_unless_allowed), Claude Code's
//! default mode, in which a call no allow rule covers is asked about. **Without that opt-in a
//! call no rule speaks of runs**, as it did before this crate read rules (a library's tools
//! are not Claude Code's, and an agent given no rules must keep working); deny and ask rules
//! act either way.
//!
//! The rules act in the tool hook layer, through
//! [`Hooks::permission_rules`](tower_agent_layers::hooks::Hooks::permission_rules), in Claude
//! Code's order (measured against 2.1.328 by the differential suite, `tests/reference`):
//!
//! 1. the PreToolUse hooks run first (a hook's deny refuses the call at once);
//! 2. a **deny** rule (any subcommand of a Bash command matching, as for `if`) refuses the
//!    call: the model sees `Permission to use Bash with command <command> has been denied.`
//!    (`Permission to use <tool> has been denied.` for other tools); no PermissionRequest
//!    hook runs, and nothing — a hook's allow, an allow rule, an approval — overrides it;
//! 3. an **ask** rule, even over a hook's allow or an allow rule, goes the approval path:
//!    PermissionRequest hooks (their input without `permission_suggestions`), then the
//!    [`Approval`](tower_agent_layers::hooks::Approval) service; nobody deciding, it is refused with
//!    `Claude requested permissions to use Bash, but you haven't granted it yet.`;
//! 4. an **allow** rule runs the call without asking. It covers a Bash command only when
//!    every subcommand matches, with no expansion (`$(…)`, `$VAR`) and no output redirection
//!    but to `/dev/null`, and a command that cannot be analysed is not covered (an allow
//!    rule fails closed where an `if` rule fails open); a specifier this crate does not
//!    understand allows nothing;
//! 5. with [`ask_unless_allowed`](CommandHooksBuilder::ask_unless_allowed), any other call
//!    that no PreToolUse hook allowed goes the approval path, its PermissionRequest input
//!    carrying Claude Code's `permission_suggestions`. Nobody deciding, a shell command
//!    redirecting its output into the project is refused with `Output redirection to
//!    '<file>' needs approval. The path is inside the working directories for this session
//!    ('<project>'), and Claude Code asks before a shell command creates, changes or removes
//!    files there.` (suggesting `addDirectories`), another shell command with `This command
//!    requires approval` (suggesting `addRules` of the command), another tool with step 3's
//!    text.
//!
//! A PermissionRequest hook's `allow` runs the call (with its `updatedInput`, if any); its
//! `deny` gives the model its `message` alone, and `interrupt: true` ends the run. Claude
//! Code's own classifier of shell commands (the read-only ones it runs without a rule) is not
//! copied: the rules allow only what they name.
//!
//! # Plugins
//!
//! [`plugin_dir`](CommandHooksBuilder::plugin_dir) loads a Claude Code plugin folder:
//! `.claude-plugin/plugin.json` (optional; its `name` names the plugin, else the folder does;
//! its `hooks` field adds hook files — paths starting with `./`, inside the plugin — or inline
//! configuration) and `hooks/hooks.json`. Each of its handlers gets, in its environment and
//! substituted wherever `${…}` appears in its command and arguments:
//!
//! - `CLAUDE_PLUGIN_ROOT`: the plugin folder (absolute);
//! - `CLAUDE_PLUGIN_DATA`: the plugin's data directory, `<data root>/<id>` where `<id>` is the
//!   plugin name with characters outside `a-z A-Z 0-9 _ -` replaced by `-`, created when the
//!   plugin is loaded; the data root is
//!   [`plugin_data_dir`](CommandHooksBuilder::plugin_data_dir), by default
//!   `$XDG_STATE_HOME/tower-agent/plugins/data` (else `~/.local/state/tower-agent/plugins/data`);
//! - `CLAUDE_PROJECT_DIR`, as for every handler.
//!
//! # Other formats
//!
//! - **Gemini CLI** ([`gemini_settings_file`](CommandHooksBuilder::gemini_settings_file)): the
//!   `hooks` of `.gemini/settings.json`. Events: `BeforeTool` → PreToolUse, `AfterTool` →
//!   PostToolUse, `BeforeAgent` → UserPromptSubmit, `AfterAgent` → Stop, `BeforeModel`,
//!   `AfterModel`, `SessionStart`, `SessionEnd`, `Notification`, `PreCompress` → PreCompact;
//!   `BeforeToolSelection` (and any other) is skipped with a warning. `timeout` is in
//!   milliseconds (default 60,000); a group with `"sequential": true` runs its handlers one
//!   after another, in order (others run in parallel, as every Claude Code handler);
//!   `hooksConfig.enabled: false` loads none; `hooksConfig.disabled` lists names to skip. Its
//!   handlers are run as Gemini CLI 0.61.0 runs them, measured against it (the vectors
//!   recorded from it, `hook-vectors/vectors-gemini`, played through this crate by
//!   `tests/reference/gemini.rs`): their input has Gemini's fields only — `hook_event_name`
//!   under Gemini's name, a `timestamp`, the crate's `Bash` as Gemini's shell tool
//!   `run_shell_command` (which their matchers name), AfterTool's `tool_response` as
//!   `{llmContent, returnDisplay}`, AfterAgent's `prompt` (the run's) and `prompt_response`,
//!   SessionEnd's `reason` `exit`; no `prompt_id`, `permission_mode`, `tool_use_id` or
//!   `CLAUDE_ENV_FILE`. Their answers are read as Gemini reads them: JSON decides whatever the
//!   exit code (stderr's when stdout is empty), plain text with exit 2 denies with stderr;
//!   `decision: "deny"` (or `"block"`) blocks — a BeforeTool block refuses the call with
//!   Gemini's words, `Tool execution blocked: <reason>` (an error: a
//!   [`PreToolUse::Refuse`](tower_agent_layers::hooks::PreToolUse::Refuse)), an AfterTool block's
//!   `reason` replaces the tool's output, as an error —, `decision: "allow"` allows a tool call,
//!   `hookSpecificOutput.tool_input` is merged into the call's arguments,
//!   `hookSpecificOutput.tool_output` replaces the output; Claude Code's
//!   `permissionDecision`, `updatedInput` and `updatedToolOutput` are not read, nor
//!   BeforeTool's and AfterAgent's `additionalContext`, and plain stdout is context for no
//!   event; AfterTool's `additionalContext` is appended to the call's result
//!   (`\n\n<hook_context>…</hook_context>`), as Gemini CLI appends it; `continue`,
//!   `stopReason` and `systemMessage` as for Claude Code. `llm_request` / `llm_response` keep
//!   this crate's shapes ([below](#events)), not Gemini's. **Kept on purpose** (listed with
//!   their reasons in `tests/reference/gemini.rs`): Claude Code's handler fields (`if`,
//!   `onFailure`, `async`, `asyncRewake`) and a matcher's `,` list work as in Claude Code's
//!   files (Gemini CLI ignores them); the shell tool is Claude Code's `Bash`; BeforeAgent's
//!   and SessionStart's `additionalContext` reach the model as the crate's hook contexts
//!   after the prompt (Gemini CLI: user text in `<hook_context>` tags, SessionStart's written
//!   into the prompt, which BeforeAgent and AfterAgent then see) — the crate keeps a hook's
//!   words apart from the user's, for every hook set; an AfterAgent block goes on with the
//!   reason as the hooks' feedback, where Gemini CLI makes it a new prompt and fires
//!   BeforeAgent again. AfterAgent's `prompt_response` is every answer of the turn so far,
//!   one per line (the answers the run's earlier AfterAgent hooks saw, and this one), as
//!   Gemini CLI joins them.
//! - **Codex** ([`codex_hooks_file`](CommandHooksBuilder::codex_hooks_file)): a `hooks.json`
//!   (`~/.codex/hooks.json`, `<repo>/.codex/hooks.json`) in Claude Code's shape and protocol;
//!   fields other than `hooks` and `description` at its root are ignored with a warning, and
//!   events this crate does not know are skipped with a warning (not an error). A path ending
//!   in `.toml` is a Codex `config.toml`: its inline `[hooks]` tables are read
//!   (`[[hooks.PreToolUse]]` is a matcher group, `[[hooks.PreToolUse.hooks]]` one of its
//!   handlers, as in the JSON file), `[hooks.state]` and the rest of the file are not.
//!
//!   Its handlers are run as Codex 0.169.0 runs them, measured against Codex itself (the
//!   vectors recorded from it, `hook-vectors/vectors-codex`, played through this crate by
//!   `tests/reference/codex.rs`) and its input schemas:
//!   - **Events**: SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest,
//!     PostToolUse, PreCompact, PostCompact, SubagentStart, SubagentStop, Stop and
//!     SessionEnd. Claude Code's other events in a Codex file are skipped with a warning, as
//!     Codex ignores them.
//!   - **Inputs**: Codex's fields only — `turn_id` (the prompt's id: one per prompt, where
//!     Claude Code's hooks get `prompt_id`), `model` (the agent's
//!     [`ModelSettings::model`](tower_agent_core::model::ModelSettings::model)) and `permission_mode` on
//!     every event but SessionEnd (whose `reason` is always `other`) and PreCompact /
//!     PostCompact (no `permission_mode`); no `effort`, `duration_ms`, `background_tasks`,
//!     `session_crons` or `outcome`. A `Bash` call's `tool_input` is `{command}` and its
//!     `tool_response` the output as one string (stdout, then stderr), as Codex's shell gives
//!     them. Neither `CLAUDE_PROJECT_DIR` nor `CLAUDE_ENV_FILE` is set
//!     (`TOWER_AGENT_PROJECT_DIR` is).
//!   - **Answers**: JSON counts only with exit 0; exit 2 blocks UserPromptSubmit,
//!     PreToolUse, PostToolUse and Stop with stderr as the reason, whatever the JSON says.
//!     A PreToolUse deny refuses the call with Codex's words, not as an error (a
//!     [`PreToolUse::Refuse`](tower_agent_layers::hooks::PreToolUse::Refuse)): `Command blocked
//!     by PreToolUse hook: <reason>. Command: <command>` for a `Bash` call, `Tool call
//!     blocked by PreToolUse hook: <reason>. Tool: <tool>` for another tool.
//!     PreToolUse's `continue: false` is ignored, `permissionDecision` `ask` or `defer` lets
//!     the call run, and `updatedInput` rewrites the call only together with `allow` (alone
//!     it is ignored, logged). A PostToolUse block (exit 2, `decision: "block"`, or
//!     `continue: false` with its `stopReason`) replaces the call's result with its reason,
//!     and the turn goes on; its `updatedToolOutput` is ignored, and its `additionalContext`
//!     too with `suppressOutput: true`. A Stop block's reason reaches the model as Codex's
//!     `<hook_prompt hook_run_id="stop:<n>:<file>">…</hook_prompt>` (`<n>` counting the file's
//!     handlers, Stop's last, as Codex does); Stop's `additionalContext` is ignored. Plain
//!     stdout that starts with `{` and is not JSON adds nothing.
//!   - **Kept on purpose**: Claude Code's handler fields (`if`, `onFailure`, `asyncRewake`)
//!     and a matcher's `,` list work in a Codex file as in Claude Code's, where Codex ignores
//!     them (a hook written for Codex has none); the `Bash` tool's output has Claude Code's
//!     trimmed last newline; a call's contexts follow the step's results, as for every hook
//!     set (Codex sends them as developer messages before the call's output, which a
//!     provider such as Anthropic's cannot take: a call's results must come right after
//!     it).
//!
//! # Disabling hooks by name
//!
//! Beyond `disableAllHooks`, one hook or one plugin's hooks can be turned off: the settings
//! keys `"disabledHooks": ["<command>", …]` (a hook's command as written, or as run after
//! substitution, or its `name`) and `"disabledPlugins": ["<plugin name>", …]` (the
//! `plugin.json` name), in any source, or the builder's
//! [`disable_hook`](CommandHooksBuilder::disable_hook) and
//! [`disable_plugin`](CommandHooksBuilder::disable_plugin). They apply after every source is
//! loaded, whatever the order.
//!
//! # Disable one hook, and fail closed, in one product
//!
//! Claude Code can make a hook fail closed (`"onFailure": "block"`) but cannot disable one
//! hook; Codex can disable one hook (trust by hash) but has no fail-closed hooks. Both work
//! here, together:
//!
//! | Setting | Where | Effect |
//! |---|---|---|
//! | `"onFailure": "block"` (Claude Code) or `"failClosed": true` | a `command` or `http` handler | a hook that cannot start, times out, exits with an unexpected code or answers garbage blocks what it guards (PreToolUse: the call is denied; UserPromptSubmit: the prompt is blocked …); an unknown `onFailure` value is read as `"block"`, with a warning |
//! | `"disabledHooks": [...]` | any settings source, or [`disable_hook`](CommandHooksBuilder::disable_hook) | these hooks (by command as written or as run, or by `name`) never run |
//! | `"disabledPlugins": [...]` | any settings source, or [`disable_plugin`](CommandHooksBuilder::disable_plugin) | a plugin's hooks never run |
//! | `"disableAllHooks": true` | any settings source | no command hook runs |
//! | `"sha256"` on a handler, [`trust`](CommandHooksBuilder::trust) | a handler, the builder | the hook runs only while its script has that hash (see below) |
//!
//! A disable is a union over every source: a hook disabled by the user's settings cannot be
//! turned back on by a project's settings (`"disabledHooks": []`, `"disableAllHooks": false`
//! or the same hook defined again there change nothing), whatever the order the sources are
//! given in. A disabled fail-closed hook does not run, so it blocks nothing: disabling is the
//! user's decision to drop a guard.
//!
//! # Trusted hashes
//!
//! A handler with `"sha256": "<64 hex digits>"` (or every handler running a script given to
//! [`trust`](CommandHooksBuilder::trust)) runs only while the SHA-256 of **its script file**
//! is that hash. The script is found without running anything: the program of an exec-form
//! handler; for shell form, the first word of the command split as the shell would (quotes
//! removed, `$CLAUDE_PROJECT_DIR` and the plugin variables expanded, leading assignments
//! skipped); after an interpreter (`sh`, `bash`, `zsh`, `dash`, `python`, `python3`, `node`,
//! `ruby`, `perl`, `deno`, `bun`, `env`), its first argument not starting with `-`. A relative
//! path resolves against the project directory at build time, and before every spawn against
//! the directory the handler runs in (its input's `cwd`: the file it would run); a bare
//! program name is looked up in `PATH`. The whole file is hashed, at build time (a mismatch
//! is listed in [`CommandHooks::warnings`]) and again before every spawn (a mismatch skips
//! the handler and is reported with [`RunContext::warn`](tower_agent_core::context::RunContext::warn)). A pinned command
//! whose script cannot be found is skipped with a warning.
//!
//! # Events
//!
//! Every event — what a settings matcher is compared with, the fields of its input and what
//! a command hook's answer does there — is a row of the crate's one table of events, in the
//! [`HookEvent`] docs (linked from the end of the hooks guide (`tower_agent::guide::hooks`, "Every event")).
//! The table is made from the list of events the crate is built from, so no event can be
//! missing from it. The command hooks of an event become one callback of the [`Hooks`]
//! registry, the one in the table's "Rust hook" column; PreCompact's are that callback for
//! [`Agent::compact`](tower_agent_core::Agent::compact) (trigger `manual`) and
//! [`CommandHooks::pre_compact`], for
//! [`SummarizeLayer::on_compact`](tower_agent_layers::summarize::SummarizeLayer::on_compact)
//! (`auto`), and Elicitation's and ElicitationResult's [`CommandHooks::elicitation_layer`]
//! (feature `mcp`).
//! Settings may also name events by the aliases `tool-call-start` (PreToolUse),
//! `tool-call-end` (PostToolUse), `agent-start` (SessionStart), `step-start` (BeforeModel) and
//! `agent-stop` (Stop).
//!
//! ## Settings that change during a run
//!
//! The callbacks of the registry call the hooks as their settings files are now. After each
//! step's tool calls (where the watched files of FileChanged are compared, before PostToolBatch),
//! the step hook layer asks whether a settings file of the hooks changed (its digest); for each
//! one that did, the **ConfigChange** hooks fire with the run's `session_id`, `prompt_id` and
//! `cwd` (no `permission_mode`), `source` and `file_path`, as Claude Code fires them while the
//! command that changed the file runs (measured: vector `config_change`). Unless one blocks
//! (a `policy_settings` change cannot be blocked), the hooks are read again from the files and
//! used from then on — by every agent built with this registry, as Claude Code uses the new
//! settings for the rest of its session; a block, or settings that no longer load, keep the
//! hooks as they were, with a warning. The callbacks themselves are those registered when the
//! registry was made: an event with no handler then, a matcher no handler had, or permission
//! rules where there were none, take effect only in a registry made after
//! ([`CommandHooks::reload`], then [`register`](CommandHooks::register) again).
//!
//! ## Events not fired
//!
//! Some protocol events have nothing in an agent loop of this crate that corresponds to them
//! (a command-line client's launch modes, its worktrees, agent teams, file watchers). Their
//! settings load unchanged, and each of their handlers is skipped with one warning.
//! [`HookEvent::NOT_FIRED`] lists them with the reason, and so do the last rows of the table
//! in the [`HookEvent`] docs, where every event this crate fires is placed too.
//!
//! ## `CLAUDE_ENV_FILE`
//!
//! Each time SessionStart hooks fire, their one-shot handlers get `CLAUDE_ENV_FILE`: the path
//! of a fresh empty file in a private temporary directory (mode 0700). Once they answered,
//! the file is read (never run by a shell) and removed: each `export NAME=value` line (also
//! `declare -x NAME=value` and `NAME=value`; single and double quotes; `$NAME`/`${NAME}`
//! expanded from earlier lines, the session's earlier exports, then this process's
//! environment) sets a variable of the session ([`SessionEnv`](tower_agent_core::agent::SessionEnv)).
//! Those variables are in the environment of every later one-shot command hook of the run
//! and of every command of the [`execute`](tower_agent_builtins::filesystem) tool. Lines with a
//! command substitution (`$(…)`, backticks) or anything else not understood are skipped with
//! a warning ([`RunContext::warn`](tower_agent_core::context::RunContext::warn)). Persistent handlers
//! (shared by every run) and other events' handlers don't get `CLAUDE_ENV_FILE`.
//!
//! Messages, tools and responses in `llm_request` / `llm_response` use this crate's serde
//! forms ([`Message`](tower_agent_core::message::Message), [`ToolSpec`](tower_agent_core::message::ToolSpec),
//! [`Usage`](tower_agent_core::message::Usage), [`StopReason`](tower_agent_core::message::StopReason)); `settings` is
//! `{model, temperature, max_tokens, stream}`.
//!
//! Every input has `session_id`, `transcript_path`, `cwd` and `hook_event_name` (the protocol
//! name, also for aliases); every input after the prompt (all but SessionStart, Setup and
//! InstructionsLoaded) `prompt_id` (the run's id,
//! [`RunContext::run_id`](tower_agent_core::context::RunContext::run_id): a run is one prompt, and every
//! hook it leads to carries it); and all but SessionStart, Setup, SessionEnd, MessageDisplay,
//! InstructionsLoaded, CwdChanged, PreModelSwitch and PostModelSwitch `permission_mode`
//! (`"default"`, or what [`permission_mode`](CommandHooksBuilder::permission_mode) sets;
//! reported only). These are the fields Claude Code 2.1.328 sends, measured against it by the
//! differential suite (`tests/reference`), which also lists the differences kept on purpose.
//!
//! **`transcript_path`** is the session's JSONL transcript, in Claude Code's line shape
//! (`type`, `message.content[]` with `text`, `tool_use`, `tool_result` blocks, `uuid`,
//! `parentUuid`, `sessionId`, `timestamp`, `cwd`). Unlike Claude Code's, whose file may lag,
//! it is complete whenever a hook runs: it exists before the first hook of a run, and holds
//! every message of the session up to that moment — on Stop and SubagentStop the assistant
//! message being stopped on, on PostToolUse and PostToolUseFailure the result of that call
//! (see [`agent::transcript`](tower_agent_core::agent::transcript)). Agents built with command hooks
//! keep transcripts by default, so `transcript_path` is never empty: in
//! [`transcripts_dir`](CommandHooksBuilder::transcripts_dir) if set, else in
//! `$XDG_STATE_HOME/tower-agent/projects/{project}/` (`~/.local/state/…` without
//! `XDG_STATE_HOME`; `{project}` is the project directory escaped as thread ids are, so each
//! project has its own), else `""` when neither variable is set or the hooks were built
//! [`without_transcripts`](CommandHooksBuilder::without_transcripts).
//! [`AgentBuilder::transcripts`](tower_agent_core::agent::AgentBuilder::transcripts) wins over both. A
//! file is `{session id}.jsonl`; a subagent's is `{session id}/subagents/agent-{id}.jsonl`,
//! the `agent_transcript_path` of SubagentStop.
//!
//! **Stop cap.** As Claude Code's client does, once Stop hooks have kept a run from ending 8
//! times in a row (by `decision: "block"`, exit 2 or `additionalContext`, all counted alike)
//! with no step in between in which the model made a tool call, the next block is
//! overridden: the run ends and a warning says so (an
//! [`AgentEvent::Warning`](tower_agent_core::agent::AgentEvent::Warning), and a Notification). A step
//! with a tool call resets the count, so a "keep going until done" loop whose model works
//! each iteration runs to its end (bounded by
//! [`max_steps`](tower_agent_core::agent::AgentBuilder::max_steps)). `stop_hook_active` is `true` once
//! a Stop hook has kept the run going, for the rest of the run. SubagentStop blocks are
//! counted per subagent call, by the same rule. Raise or lower it with
//! [`stop_cap`](CommandHooksBuilder::stop_cap) (or [`Hooks::stop_cap`]).
//!
//! ## Working directory and project directory
//!
//! As in Claude Code's hooks reference (a command hook runs in the session's current
//! directory, with `CLAUDE_PROJECT_DIR` set to the project root so that a settings file can
//! name its scripts `"$CLAUDE_PROJECT_DIR"/.claude/hooks/…` wherever the session is), the
//! two are kept apart:
//!
//! - **Working directory**: a command handler runs in the directory its input's `cwd`
//!   names: the run's working directory when the agent has one of its own (one that differs
//!   from the process's current directory when the hooks were built, set with
//!   [`AgentBuilder::cwd`](tower_agent_core::agent::AgentBuilder::cwd) or the request's `cwd`), else
//!   the project directory. A persistent handler is started once, shared by every run: in
//!   the project directory.
//! - **Project directory** ([`project_dir`](CommandHooksBuilder::project_dir); default: the
//!   directory holding the `.claude` of the first project settings file read —
//!   `<dir>/.claude/settings.json` or `settings.local.json`, not the user's
//!   `~/.claude/settings.json` — whatever the process's current directory; without one, the
//!   current directory): what `CLAUDE_PROJECT_DIR` and `TOWER_AGENT_PROJECT_DIR` hold for
//!   every handler, whatever its working directory (shell form, exec form, persistent, a
//!   plugin's); what `${CLAUDE_PROJECT_DIR}` is replaced by in exec form; what the variable
//!   is in an `http` handler's headers; the root of an `agent` handler's file tools; what
//!   `if` path rules and relative paths of [`trust`](CommandHooksBuilder::trust) anchor at.
//! - A plugin's handlers also get `CLAUDE_PLUGIN_ROOT` (the plugin folder) and
//!   `CLAUDE_PLUGIN_DATA` ([above](#plugins)), whatever their working directory.
//! - `transcript_path` is the run's transcript file ([above](#events)), wherever the
//!   handler runs.
//!
//! ## Hooks whose script is missing
//!
//! A guard whose script cannot be found does not guard: each call fails (exit 127) and —
//! unless the handler is `failClosed` (`"onFailure": "block"`) — what it guards goes through.
//! So [`build`](CommandHooksBuilder::build) looks for the script each `command` handler names
//! (without running anything: `"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh`,
//! `bash "${CLAUDE_PLUGIN_ROOT}/x.sh"`, `python3 hooks/check.py`, `~/bin/x.sh`; relative
//! paths from the project directory; a bare program name such as `jq` or `echo`, inline
//! code such as `python3 -c …`, and a word with another variable are never checked) and
//! lists each one that does not exist, or that is run directly and is not executable, in
//! [`CommandHooks::warnings`], logged at `WARN`: `settings.json: hooks.PreToolUse[0].hooks[0]:
//! hook `…`: its script `/…/guard.sh` does not exist: …`. It is a warning, not an error, as
//! in Claude Code (a user's hook may name a script only some projects have, or one a
//! SessionStart hook writes): check the warnings when you build, and make a guard that must
//! hold `failClosed`. At run time a hook that cannot run is reported as any failing hook is,
//! with [`RunContext::warn`](tower_agent_core::context::RunContext::warn) (a `tracing` warning, an
//! [`AgentEvent::Warning`](tower_agent_core::agent::AgentEvent::Warning), and the run's
//! [`AgentResponse::warnings`](tower_agent_core::AgentResponse::warnings), so the server's
//! `POST …/runs` answer lists it) and as a `tracing` error naming the command.
//!
//! # Answers
//!
//! - **Exit 0**: stdout is parsed as JSON if it starts with `{` (after trimming). Plain stdout
//!   is context for UserPromptSubmit and SessionStart and ignored elsewhere (logged at debug).
//!   Stdout that starts with `{` but is not valid JSON is reported and read as plain text, as
//!   Claude Code reads it (a `failClosed` handler fails).
//! - **Exit 2**: block (what a block does is the event's: see the [table](HookEvent); it is ignored
//!   on PermissionRequest, PermissionDenied and Notification). Its reason is the JSON's own
//!   blocking decision's (`decision: "block"` + `reason`, or `permissionDecision: "deny"` +
//!   `permissionDecisionReason`) when stdout makes one, else stderr. The JSON is still read,
//!   but nothing overrides the block (not even `permissionDecision: "allow"`). Stderr as the
//!   reason of a PreToolUse, PostToolUse or Stop shell command reads as Claude Code's:
//!   `[<command>]: <stderr>`.
//! - **Any other exit** with a JSON object on stdout: the JSON alone decides, and it is not an
//!   error (nor a failure of a `failClosed` handler). Without one, or a crash, a timeout or a
//!   missing executable: a non-blocking error, reported with
//!   [`RunContext::warn`](tower_agent_core::context::RunContext::warn) as `… failed with non-blocking
//!   status code N: <first line of stderr>` (a missing executable also as a `tracing` error
//!   naming the command); the action goes on — unless the handler is `failClosed`: then a
//!   shell command's exit or timeout blocks with Claude Code's words, `[<command>]: failed;
//!   blocking because onFailure is "block"` and its stderr on the next line (`timed out` for
//!   a timeout). Plain stdout of a non-zero exit is never context.
//! - **JSON**: `continue: false` + `stopReason` ends the run ([below](#ending-the-run));
//!   `systemMessage` is reported with `RunContext::warn`; `decision: "block"` + `reason`
//!   blocks (legacy `decision: "approve"` on PreToolUse allows); `hookSpecificOutput` holds
//!   `permissionDecision` (`allow` | `deny` | `ask` | `defer`),
//!   `permissionDecisionReason`, `updatedInput` (**replaces** the whole input; an object,
//!   [else](#limits) the call is denied), `additionalContext`, `updatedToolOutput` (for a tool
//!   with a structured response, [`TOOL_RESPONSE`]: an object of its fields, each of the type
//!   the tool gives it, else ignored with a warning — it becomes the response, and the model
//!   sees the field that held the text before, Bash's `stdout`; for another tool a string is
//!   the new output text, anything else its JSON text), and `llm_request` /
//!   `llm_response`, `decision` (PermissionRequest) and `retry` (PermissionDenied). A
//!   `hookSpecificOutput` whose `hookEventName` names another event is ignored.
//!   `suppressOutput` is accepted and has no effect (as in Claude Code: a hook's stdout is
//!   never shown). Strings are cut to 10,000 characters.
//!
//! **Merging**, in configuration order: deny > ask > allow (the reasons of the winning kind
//! joined with `; `); each `updatedInput` applied in order (so the last one wins, and an
//! `ask` is asked about the rewritten input); every context kept, in order; the first
//! `continue: false` wins over everything. A PreToolUse `ask` goes to the registry's
//! [`Approval`](tower_agent_layers::hooks::Approval) service (none: refused with its reason alone).
//!
//! ## Ending the run
//!
//! `continue: false` ends the run with its `stopReason`:
//! - tool events: the call is denied and the tool path fails with an
//!   [`Abort`](tower_agent_core::error::Abort): the run ends
//!   [`Outcome::Aborted`](tower_agent_core::agent::Outcome::Aborted) with the stop reason, once the
//!   step's other calls are done;
//! - UserPromptSubmit and SessionStart: the run ends
//!   [`Outcome::Blocked`](tower_agent_core::agent::Outcome::Blocked) with the stop reason;
//! - Stop / SubagentStop: the agent finishes (it was about to), and the reason is reported
//!   with `RunContext::warn`;
//! - BeforeModel / AfterModel: as a block (the answer is the reason, with no tool calls, so the
//!   agent stops unless a Stop hook continues it); PreCompact: the compaction is vetoed.
//!
//! # Execution
//!
//! All matching handlers of an event run in parallel, each with its own timeout. A handler
//! runs in its own process group, with a unique `TOWER_AGENT_SCOPE` in its environment: when it
//! times out, or when the run is dropped or cancelled while it runs, it is killed (`SIGKILL`)
//! with everything it started and reaped; when it exits, whatever it left running is killed
//! too. On Linux "everything it started" includes processes that left its process group
//! (`setsid`, double forks): this process becomes a child subreaper on the first command it
//! supervises; [the `execute` docs](tower_agent_builtins::filesystem#commands) say exactly what is
//! found. Elsewhere on Unix only the process group is killed.
//!
//! Once a one-shot handler has exited, its answer is what it wrote: its stdout and stderr are
//! read for at most 100 ms more (after what it left running was killed), then used as they
//! are — a process it started that still holds its stdout (`setsid sleep 1000 &`) can neither
//! delay the answer nor turn a `deny` into a timeout.
//!
//! # Persistent hooks
//!
//! A handler with `"persistent": true` is started once, on the first event it handles, with
//! `TOWER_AGENT_HOOK_ACTION=serve`, and kept: it is shared by every event it handles and every
//! run of this `CommandHooks` (and of the hooks and agents made from it). Each event is one
//! line on its stdin; it answers one line per event on stdout, in any order:
//!
//! ```text
//! → {"id": 7, "input": {"session_id": "…", "hook_event_name": "PreToolUse", "tool_name": "bash", …}}
//! ← {"id": 7, "exit": 0, "output": {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "…"}}, "stderr": ""}
//! ```
//!
//! `exit` (default 0), `output` (the JSON object a one-shot hook would print, or a string for
//! plain stdout; default nothing) and `stderr` (default empty) mean what they mean for a
//! one-shot hook. Events are multiplexed by `id`: several may be in flight at once. A process
//! that exits before answering is restarted once for that event (and reported); one that
//! overruns an event's timeout is killed (presumed hung) and the next event starts a new
//! one. When the last clone of the `CommandHooks` and of every hook set and agent made from it
//! is dropped (a run's [`RunContext`](tower_agent_core::context::RunContext) holds its agent's hooks too,
//! so a kept model request keeps them), its stdin is closed; it then has one second to exit
//! before it is killed with everything it started (as above). Its stderr is read to its end,
//! whatever it holds, and logged at debug level. A handler in Python:
//!
//! ```python
//! #!/usr/bin/env python3
//! import json, sys
//!
//! for line in sys.stdin:                      # one event per line, until stdin closes
//!     event = json.loads(line)
//!     hook_input = event["input"]
//!     answer = {"id": event["id"], "exit": 0}
//!     command = hook_input.get("tool_input", {}).get("command", "")
//!     if "rm -rf" in command:
//!         answer["exit"] = 2
//!         answer["stderr"] = "rm -rf is blocked"
//!     print(json.dumps(answer), flush=True)   # one answer per line, flushed
//! ```
//!
//! (`examples/hooks/persistent_hook.py` is a complete one.)
//!
//! What a persistent process prints is data, never a reason to kill it or to drop an answer:
//! - stdout and stderr are read one line at a time as **bytes**; bytes that are not UTF-8 are
//!   decoded lossily (as U+FFFD). A line that is not JSON, has no numeric `id` or answers no
//!   pending event is logged and ignored; the answers after it count.
//! - **A line is at most 1 MiB** (1,048,576 bytes, as much as a one-shot hook's whole
//!   output), on stdout and on stderr: the first 1 MiB is kept and the rest is read and
//!   dropped while streaming, so a line without end costs 1 MiB of memory, not its size. An
//!   over-long stdout line that starts like an answer (`{"id": N`) fails event `N` at once
//!   (reported; a `failClosed` handler then denies or blocks, as for any failure); any other
//!   over-long line is ignored with a warning.
//!
//! # Limits
//!
//! Every input from outside is bounded; nothing a hook prints, nor any settings content, can
//! panic, grow memory without bound or turn a deny into an allow:
//!
//! | What | Limit | Beyond it |
//! |---|---|---|
//! | a line of a persistent hook (stdout, stderr) | 1 MiB | the rest of the line is dropped while read ([above](#persistent-hooks)) |
//! | a string of an answer (`reason`, `additionalContext` …) | 10,000 characters | cut, with a `... (truncated N characters)` note |
//! | a settings file | a regular file of at most 4 MiB of UTF-8 JSON | a [`ConfigError`] (a FIFO is refused before it is opened, so `build()` cannot block on it) |
//! | a matcher regex | 256 KiB compiled, 250 levels of nesting (see [`ToolMatcher`](tower_agent_layers::matcher::ToolMatcher)) | a [`ConfigError`], at once |
//! | a `CLAUDE_ENV_FILE` | 256 KiB (a regular file) and 1,000 variables | a larger file is ignored whole; variables past 1,000 are ignored; both with a warning |
//! | the body of an `http` hook's answer | 1 MiB (1,048,576 bytes), read chunk by chunk (a `Content-Length` over it fails before the body is read) | a non-blocking error; nothing more is read |
//! | the turns of an `agent` hook's subagent | 50 model calls | a non-blocking error |
//! | the arguments of an `mcp_tool` hook once `${path}` is substituted | 1 MiB of string text | a non-blocking error; the tool is not called |
//! | a `prompt` / `agent` hook's answer | the model service's own response limit; its reason is cut at 10,000 characters like any answer string | — |
//! | an `if` rule | 1,000 bytes | a [`ConfigError`] |
//! | a Bash command analysed by an `if` rule | 10,000 bytes, 32 levels of `$(…)` / backticks / subshells | the hook runs (fail-open, as for an unparseable command) |
//! | a file path or URL tested by an `if` rule | 4,096 bytes | the hook runs (fail-open) |
//! | `plugin.json`, a plugin's or Gemini's or Codex's hooks file | a regular file of at most 4 MiB of UTF-8 JSON, as a settings file | a [`ConfigError`] |
//! | a script hashed for a `sha256` pin | a regular file of at most 16 MiB | counts as changed: the handler is skipped with a warning |
//!
//! A PreToolUse `updatedInput` that is not a JSON object (a string, an array, a number …) is
//! the **hook's** fault: the call is denied with a reason naming the hook (*hook `check.sh`
//! answered an updatedInput that is not a JSON object (a string)*), also reported with
//! [`RunContext::warn`](tower_agent_core::context::RunContext::warn) — the model is not told its
//! arguments were bad, and the tool never sees the bad input.
// No function of the library over 100 lines (the threshold in clippy.toml; the lint is
// pedantic, so it is turned on here, for the library only; CI denies warnings).
#![warn(clippy::too_many_lines)]

// # Modules
//
// The modules are layered: each imports only from the layers below it (`bash .ci/module-graph`
// checks that no two import each other). From the bottom:
//
// 1. plain data, importing no other module: `error` (`ConfigError`), `reply` (what a handler
//    answered: `Reply`, `Stdout`, `Failure`; where its problems go: `Report`), `dialect`
//    (`Dialect`), `rule` (permission rules and `if` conditions), `env_file`, `future`;
// 2. the handler kinds, each on `reply`: `http`, `mcp`, `prompt`, `wasm`;
// 3. `exec` (`Exec`: how a handler is started, naming the kinds); on it `spawn` (a process
//    handler's run, `Dirs`) and `trust` (`Pin`); `persistent` on `spawn`;
// 4. `handler` (`Handler`, `Extras`, `Entry`: a configured handler, its pin, rule, dialect and
//    persistent process); `permissions` (`Rules`, on `rule`);
// 5. `process` (one handler run of any kind and its `Verdict`), on `handler` and the kinds;
// 6. `config` (the parsed `Config` and its `SourceContext`; settings files, hooks
//    directories), on everything above;
// 7. the other sources, on `config`: `formats` (Gemini CLI, Codex, and their answers, also on
//    `process`), `plugin` (on `formats`), `scripts`;
// 8. the runtime: `events` (the callbacks and `Live`), `elicit` on it, `builder` (on `events`
//    and the sources), `reload` (on `builder`); the crate root (`CommandHooks`) on all.
//
// Where a lower layer needs an upper one, the upper one passes a function down: `events::Live`
// builds the hooks again with a `Rebuild` the crate root makes from the builder.

mod builder;
mod config;
mod dialect;
#[cfg(feature = "mcp")]
mod elicit;
mod env_file;
mod error;
mod events;
mod exec;
mod formats;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod future;
mod handler;
#[cfg(feature = "http-hooks")]
mod http;
#[cfg(feature = "mcp")]
mod mcp;
mod permissions;
mod persistent;
mod plugin;
mod process;
mod prompt;
mod reload;
mod reply;
mod rule;
mod scripts;
mod spawn;
mod trust;
#[cfg(feature = "wasm")]
mod wasm;

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

pub use self::builder::CommandHooksBuilder;
pub use self::config::HookEvent;
#[cfg(feature = "mcp")]
pub use self::elicit::{ElicitationHooks, ElicitationHooksLayer};
pub use self::error::ConfigError;
use self::events::Inner;
pub use self::events::SESSION_END_MAX_BUDGET;
pub use self::reload::Reload;

/// The [`ToolOutput::metadata`](tower_agent_core::message::ToolOutput::metadata) key of the structured
/// response command hooks see as `tool_response` (defined with the messages).
pub use tower_agent_core::message::TOOL_RESPONSE;
use tower_agent_core::model::ModelRequest;
use tower_agent_layers::{
    hooks::{HookFuture, Hooks},
    summarize::{CompactDecision, CompactInfo},
};

/// External command hooks, loaded from configuration. See the
/// [module docs](crate).
///
/// # Clone
///
/// Clones share the configuration and the persistent processes.
#[derive(Clone)]
pub struct CommandHooks {
    inner: Arc<Inner>,
    /// The agents' default transcripts directory.
    transcripts: Option<PathBuf>,
    stop_cap: Option<u32>,
    /// How to build these hooks again ([`reload`](Self::reload)).
    reload: Arc<builder::Reloader>,
}

impl CommandHooks {
    /// A builder to load settings files, settings values and hooks directories.
    pub fn builder() -> CommandHooksBuilder {
        CommandHooksBuilder::default()
    }

    /// The hooks as a new registry: one callback per configured event.
    ///
    /// ```no_run
    /// # fn f(agent: tower_agent_core::agent::AgentBuilder<tower_agent_core::model::BoxModelService>) -> Result<(), Box<dyn std::error::Error>> {
    /// use tower_agent_command::CommandHooks;
    /// let hooks = CommandHooks::builder().settings_file(".claude/settings.json").build()?;
    /// let agent = agent.hooks(hooks.into_hooks().compile()?).build();
    /// # Ok(()) }
    /// ```
    pub fn into_hooks(self) -> Hooks {
        self.register(Hooks::new())
    }

    /// Adds the hooks to `hooks` (one callback per configured event, at the default priority),
    /// next to callbacks registered there. The hooks' default transcripts directory and
    /// stop cap are set on `hooks` unless it has its own.
    pub fn register<S>(self, hooks: Hooks<S>) -> Hooks {
        let mut hooks = hooks.into_open();
        if let (Some(dir), false) = (&self.transcripts, hooks.has_transcripts_dir()) {
            hooks = hooks.transcripts_dir(dir.clone());
        }
        if let (Some(cap), false) = (self.stop_cap, hooks.has_stop_cap()) {
            hooks = hooks.stop_cap(cap);
        }
        let reload = Arc::clone(&self.reload);
        let rebuild = Box::new(move || reload.builder.clone().build().map(|hooks| hooks.inner));
        let live = events::Live::new(Arc::clone(&self.inner), &self.reload.files, rebuild);
        events::register(&live, hooks)
    }

    /// Where agents built with these hooks keep transcripts when their builder names no
    /// directory (see the [module docs](crate#events)): `None` if no hook
    /// is configured, or transcripts are off.
    pub fn transcripts_dir(&self) -> Option<&Path> {
        self.transcripts.as_deref()
    }

    /// The PreCompact hooks as a callback for
    /// [`SummarizeLayer::on_compact`](tower_agent_layers::summarize::SummarizeLayer::on_compact):
    /// a block vetoes the compaction.
    pub fn pre_compact(
        &self,
    ) -> impl Fn(CompactInfo, ModelRequest) -> HookFuture<CompactDecision> + Clone + Send + Sync + 'static
    {
        events::pre_compact(&self.inner)
    }

    /// What was skipped while loading (unsupported handler types, events this crate does not
    /// fire, `if` rules on other events, pinned scripts that changed …) and hooks that cannot
    /// run (their script does not exist or is not executable: see the
    /// [module docs](crate#hooks-whose-script-is-missing)), one message each, each
    /// also logged at `WARN` when the hooks were built.
    pub fn warnings(&self) -> &[String] {
        &self.inner.config.warnings
    }

    /// Whether a source set `disableAllHooks`.
    pub fn is_disabled(&self) -> bool {
        self.inner.config.disabled
    }

    /// The commands of `event`, in configuration order, after deduplication.
    pub fn commands(&self, event: HookEvent) -> Vec<&str> {
        self.inner
            .entries(event)
            .iter()
            .map(|e| e.handler.label.as_str())
            .collect()
    }

    /// The project directory: what `CLAUDE_PROJECT_DIR` names for every handler, and where
    /// handlers run when the agent has no working directory of its own (see the
    /// [module docs](crate#working-directory-and-project-directory)).
    pub fn project_dir(&self) -> &Path {
        &self.inner.project_dir
    }

    /// The `Elicitation` and `ElicitationResult` hooks as a layer over an MCP elicitation
    /// service (see the [module docs](crate#mcp-elicitation)):
    ///
    /// ```no_run
    /// # fn f(hooks: tower_agent_command::CommandHooks, user: tower_agent_mcp::client::Elicitation) {
    /// use tower::{Layer, util::BoxCloneSyncService};
    /// use tower_agent_mcp::client::McpServers;
    /// let mcp = McpServers::builder()
    ///     .elicitation(BoxCloneSyncService::new(hooks.elicitation_layer().layer(user)))
    ///     .build();
    /// # }
    /// ```
    #[cfg(feature = "mcp")]
    pub fn elicitation_layer(&self) -> ElicitationHooksLayer {
        ElicitationHooksLayer::new(Arc::clone(&self.inner))
    }
}

impl fmt::Debug for CommandHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut events = f.debug_map();
        for event in HookEvent::ALL {
            let entries = self.inner.entries(event);
            if !entries.is_empty() {
                events.entry(&event.name(), &self.commands(event));
            }
        }
        events.finish()
    }
}
