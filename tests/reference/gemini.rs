//! tower-agent reading Gemini CLI's settings, measured against Gemini CLI itself: the vectors
//! recorded from Gemini CLI 0.61.0 (`hook-vectors/vectors-gemini/`, what it did with Claude
//! Code's scenarios) played through tower-agent configured as the Gemini adapter configures
//! Gemini — the scenario's hooks translated into a Gemini `settings.json` as
//! `adapters/gemini.mjs` writes it (Gemini's event names, `timeout` in milliseconds), read
//! with [`gemini_settings_file`](tower_agent::command::CommandHooksBuilder::gemini_settings_file),
//! every call allowed (the adapter runs Gemini in `yolo` mode), `Bash` in the tool matchers
//! renamed to Gemini's shell tool, `run_shell_command` (a Gemini CLI handler sees the crate's
//! `Bash` under that name).
//!
//! Differences kept on purpose are in [`KEPT`], those not fixed yet in [`OPEN`].

use std::path::Path;

use hook_vectors::{
    Error, Host, Job, KnownDifferences, Observed,
    compare::{Known, known},
};
use serde_json::{Map, Value, json};
use tower_agent::command::CommandHooks;

/// The Gemini CLI version the vectors are recorded from (`.ci/reference-agents gemini`).
const VERSION: &str = "0.61.0";

/// Differences tower-agent keeps on purpose when it reads Gemini CLI's settings, each with its
/// reason (the command module's docs list them, section "Other formats").
pub(crate) const KEPT: &[Known] = &[
    known(
        "*",
        "PreCompress",
        "<fired>",
        "Gemini CLI 0.61.0 fires PreCompress (`trigger: auto`) before every model request, \
         though it compresses nothing; the crate fires it when it compacts.",
    ),
    known(
        "*",
        "Notification",
        "<fired>",
        "the crate's Notification hooks see what a person would (a hook's warning), as for \
         Claude Code's settings; Gemini CLI headless notifies no one.",
    ),
    known(
        "project_dir_from_subdirectory",
        "*",
        "$project_dir",
        "Gemini CLI sets `$CLAUDE_PROJECT_DIR` to the directory it runs in; the crate to the \
         project its caller names (as for Claude Code's settings).",
    ),
    known(
        "if_rules",
        "*",
        "<fired>",
        "the crate honours Claude Code's handler fields in a Gemini file — `if` here, \
         `onFailure`, `asyncRewake` below; Gemini CLI ignores them (every handler runs and is \
         waited for). A hook written for Gemini CLI has none.",
    ),
    known(
        "if_rules",
        "BeforeTool",
        "tool_input",
        "the same: other calls' hooks ran",
    ),
    known("if_rules", "AfterTool", "tool_input", "the same"),
    known("if_rules", "AfterTool", "tool_response", "the same"),
    known("if_rule_compound_command", "*", "<fired>", "the same: `if`"),
    known("on_failure_block", "*", "<fired>", "the same: `onFailure`"),
    known(
        "on_failure_block",
        "*",
        "<requests>",
        "the same: `onFailure`",
    ),
    known("on_failure_block", "*", "<ran>", "the same: `onFailure`"),
    known(
        "on_failure_block_timeout",
        "*",
        "<fired>",
        "the same: `onFailure`",
    ),
    known(
        "on_failure_block_timeout",
        "*",
        "<requests>",
        "the same: `onFailure`",
    ),
    known(
        "on_failure_block_timeout",
        "*",
        "<ran>",
        "the same: `onFailure`",
    ),
    known("async_rewake", "*", "<requests>", "the same: `asyncRewake`"),
    known(
        "matcher_forms",
        "BeforeTool",
        "<fired>",
        "a matcher's `,` list is Claude Code's list in the crate; Gemini CLI reads it as one \
         regular expression.",
    ),
    known(
        "tool_bash",
        "*",
        "<fired>",
        "the crate's shell tool is Claude Code's `Bash`: a command that exits non-zero is a \
         failed call (PostToolUseFailure, an event Gemini CLI has not), where Gemini's \
         `run_shell_command` answers it as a result with its exit code (AfterTool fires).",
    ),
    known(
        "tool_bash",
        "*",
        "<order>",
        "the same: the failed call's AfterTool",
    ),
    known(
        "tool_bash",
        "BeforeTool",
        "tool_input",
        "Gemini's shell tool fills in `description: \"\"` when the model leaves it out (its \
         schema); the crate's `Bash` is Claude Code's, whose input is the model's.",
    ),
    known(
        "tool_bash",
        "AfterTool",
        "tool_input",
        "the same, and the failed call's AfterTool",
    ),
    known(
        "tool_bash",
        "AfterTool",
        "tool_response",
        "the failed call's AfterTool",
    ),
    known(
        "tool_bash",
        "*",
        "<requests>",
        "the shell tools' own texts: Gemini's output of a failing command (`Exit Code: N`, \
         stdout and stderr in the order written, `(empty)`), Claude Code's `Bash`'s.",
    ),
    known(
        "failing_tool",
        "*",
        "<fired>",
        "as `tool_bash`: a failed call's AfterTool",
    ),
    known(
        "failing_tool",
        "*",
        "<requests>",
        "as `tool_bash`: the shell tools' own texts",
    ),
    known(
        "additional_context_more_events",
        "*",
        "<fired>",
        "as `tool_bash`: a failed call's AfterTool",
    ),
    known(
        "additional_context",
        "*",
        "<requests>",
        "Gemini CLI adds BeforeAgent's `additionalContext` to the prompt's message as user text \
         in `<hook_context>` tags; the crate's loop adds every hook set's prompt contexts at the \
         same point as a hook context (a system message where the provider takes one, else a \
         `<system-hook>` block), keeping a hook's words apart from the user's. The model reads \
         the same text in the same place. (AfterTool's context is appended to the result, as \
         in Gemini CLI.)",
    ),
    known(
        "suppress_output",
        "*",
        "<requests>",
        "the same: BeforeAgent's context",
    ),
    known(
        "additional_context_more_events",
        "*",
        "<requests>",
        "the same for SessionStart's context, which Gemini CLI puts in front of the first \
         prompt; and, as `tool_bash`, the failing command's own text",
    ),
    known(
        "additional_context_more_events",
        "BeforeAgent",
        "prompt",
        "Gemini CLI writes SessionStart's context into the prompt, so BeforeAgent's and \
         AfterAgent's `prompt` show it; the crate gives it as the run's context, and hooks see \
         the prompt as the user wrote it.",
    ),
    known(
        "additional_context_more_events",
        "AfterAgent",
        "prompt",
        "the same",
    ),
    known(
        "async_post_tool_use",
        "*",
        "<requests>",
        "the same as `asyncRewake`: the crate runs an `async` handler in the background, and \
         its context reaches the model at the next request; Gemini CLI waits for it and \
         appends its context to the call's result.",
    ),
    known(
        "exit_2_stop",
        "BeforeAgent",
        "<fired>",
        "an AfterAgent block re-prompts in Gemini CLI, which fires BeforeAgent again (its \
         prompt the block's reason); the crate's Stop block, for every hook set, goes on with \
         the reason as the hooks' feedback, not as a prompt: BeforeAgent (UserPromptSubmit) \
         hooks see only the prompts a caller gives.",
    ),
    known("stop_continues_once", "BeforeAgent", "<fired>", "the same"),
];

/// Differences found and not fixed yet: each says what has to change.
pub(crate) const OPEN: &[Known] = &[];

/// Claude Code's events and Gemini CLI's, as the adapter maps them.
const EVENTS: &[(&str, &str)] = &[
    ("SessionStart", "SessionStart"),
    ("UserPromptSubmit", "BeforeAgent"),
    ("PreToolUse", "BeforeTool"),
    ("PostToolUse", "AfterTool"),
    ("Stop", "AfterAgent"),
    ("SessionEnd", "SessionEnd"),
    ("PreCompact", "PreCompress"),
    ("Notification", "Notification"),
];

/// tower-agent with the scenario's hooks in a Gemini CLI `settings.json`.
struct TowerAgentAsGemini;

impl Host for TowerAgentAsGemini {
    async fn play(&self, job: &Job) -> Result<(), Error> {
        let file = gemini_settings(job);
        let hooks = CommandHooks::builder()
            .gemini_settings_file(file)
            .permission_mode("bypassPermissions")
            .project_dir(&job.project)
            .transcripts_dir(job.root.join("transcripts"));
        crate::agent_run::play(job, hooks).await;
        Ok(())
    }
}

/// Writes the job's hooks as the Gemini adapter does (`<home>/.gemini/settings.json`), but
/// for the shell tool's name.
fn gemini_settings(job: &Job) -> std::path::PathBuf {
    let settings: Value = serde_json::from_slice(&std::fs::read(&job.settings).unwrap()).unwrap();
    let mut hooks = Map::new();
    for (event, entries) in settings["hooks"].as_object().into_iter().flatten() {
        let Some((_, name)) = EVENTS.iter().find(|(claude, _)| claude == event) else {
            continue;
        };
        let mut entries = entries.clone();
        let tool = matches!(*name, "BeforeTool" | "AfterTool");
        for entry in entries.as_array_mut().into_iter().flatten() {
            if let Some(Value::String(matcher)) = entry.get_mut("matcher")
                && tool
            {
                *matcher = bash_to_shell(matcher);
            }
            for handler in entry["hooks"].as_array_mut().into_iter().flatten() {
                if let Some(seconds) = handler.get("timeout").and_then(Value::as_f64) {
                    handler["timeout"] = json!(seconds * 1000.0);
                }
            }
        }
        hooks.insert((*name).to_owned(), entries);
    }
    let dir = job.home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("settings.json");
    std::fs::write(&file, json!({ "hooks": hooks }).to_string()).unwrap();
    file
}

/// A matcher with the name `Bash` (a whole word) as Gemini's shell tool's, as the adapter
/// writes it.
fn bash_to_shell(matcher: &str) -> String {
    let mut out = String::new();
    let mut rest = matcher;
    while let Some(at) = rest.find("Bash") {
        let before = rest[..at].chars().next_back();
        let after = rest[at + 4..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if word(before) || word(after) {
            "Bash"
        } else {
            "run_shell_command"
        });
        rest = &rest[at + 4..];
    }
    out.push_str(rest);
    out
}

/// The shell tool's results as the output alone, in the hooks' inputs and the model's
/// requests: the tools are not the hooks' — Gemini CLI's `run_shell_command` frames its output
/// (`<untrusted_context>`, `Output: …`, `Process Group PGID: <pid>`), the crate's Claude Code
/// `Bash` gives the output as it is (`(Bash completed with no output)` for none).
fn shell_outputs(observed: &mut Observed) {
    for request in observed.requests.iter_mut() {
        for item in request.as_array_mut().into_iter().flatten() {
            if let Some(Value::String(content)) = item.get_mut("content") {
                *content = output_of(content);
            }
        }
    }
    for hook in observed.hooks.iter_mut() {
        let input = &mut hook["input"];
        if let Some(Value::String(content)) = input.pointer_mut("/tool_response/llmContent") {
            *content = output_of(content);
        }
    }
}

/// The output in a shell tool's result text, and the contexts hooks appended to it
/// (`<hook_context>…</hook_context>` after a blank line) as they are.
fn output_of(text: &str) -> String {
    match text.split_once("\n\n<hook_context>") {
        Some((result, contexts)) => format!("{}\n\n<hook_context>{contexts}", shell_output(result)),
        None => shell_output(text),
    }
}

/// The output in a shell tool's own result text.
fn shell_output(text: &str) -> String {
    let Some(body) = text
        .strip_prefix("<untrusted_context>\nOutput: ")
        .and_then(|t| t.strip_suffix("\n</untrusted_context>"))
    else {
        return match text {
            "(Bash completed with no output)" => String::new(),
            other => other.to_owned(),
        };
    };
    let body = match body.rsplit_once("\nProcess Group PGID: <pid>") {
        Some((output, _)) => output,
        None => body,
    };
    match body {
        "(empty)" => String::new(),
        output => output.trim_end_matches('\n').to_owned(),
    }
}

/// tower-agent, reading Gemini CLI's settings, does what Gemini CLI does in every vector
/// recorded from it, but for the differences it keeps on purpose ([`KEPT`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tower_agent_does_what_gemini_cli_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook-vectors/vectors-gemini");
    let vectors = crate::played_from(&dir);
    for (name, vector) in &vectors {
        let from = vector.recorded_from.as_ref().expect("recorded");
        assert_eq!(from["version"], VERSION, "{name}");
    }
    let known = KnownDifferences {
        kept: KEPT.to_vec(),
        open: OPEN.to_vec(),
    };
    let program = format!("Gemini CLI {VERSION}");
    crate::differential(&program, vectors, &TowerAgentAsGemini, known, shell_outputs).await;
}
