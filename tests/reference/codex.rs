//! tower-agent reading Codex's hooks file, measured against Codex itself: the vectors
//! recorded from Codex 0.169.0 (`hook-vectors/vectors-codex/`, what Codex did with Claude
//! Code's scenarios) played through tower-agent configured as the Codex adapter configures
//! Codex — the scenario's hooks in a Codex `hooks.json` (each command's `$CLAUDE_PROJECT_DIR`
//! replaced by the project's path, as `adapters/codex.mjs` writes it), read with
//! [`codex_hooks_file`](tower_agent::command::CommandHooksBuilder::codex_hooks_file), every
//! call allowed (`bypassPermissions`: the adapter bypasses Codex's approvals and sandbox).
//!
//! Differences kept on purpose are in [`KEPT`], those not fixed yet in [`OPEN`].

use std::path::Path;

use hook_vectors::{
    Error, Host, Job, KnownDifferences, Observed,
    compare::{Known, known},
};
use serde_json::{Value, json};
use tower_agent::command::CommandHooks;

/// The Codex version the vectors are recorded from (`.ci/reference-agents codex` pins it).
const VERSION: &str = "0.169.0";

/// Differences tower-agent keeps on purpose when it reads Codex's hooks, each with its
/// reason (the command module's docs list them, section "Codex").
pub(crate) const KEPT: &[Known] = &[
    known(
        "if_rules",
        "*",
        "<fired>",
        "the crate honours Claude Code's handler fields in a Codex file — `if` here; Codex \
         0.169.0 ignores them (an `if` handler always runs). A hook written for Codex has no \
         such field, so it runs as in Codex.",
    ),
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
    known(
        "async_rewake",
        "*",
        "<requests>",
        "the same: `asyncRewake` (Codex waits for such a hook as for any other, and its exit 2 \
         replaces the result)",
    ),
    known(
        "matcher_forms",
        "PreToolUse",
        "<fired>",
        "a matcher's `,` list is Claude Code's list in the crate; Codex 0.169.0 reads `Bash,Read` \
         as one regular expression, which matches no tool.",
    ),
    known(
        "if_rules",
        "PostToolUse",
        "tool_response",
        "the crate's `Bash` is Claude Code's, which trims the output's last newline: an output \
         of one empty line is \"\" in its response, and Codex's `tool_response` (its raw \
         output) is \"\\n\".",
    ),
    known(
        "additional_context",
        "*",
        "<requests>",
        "Codex sends a call's hook contexts (PreToolUse's and PostToolUse's \
         `additionalContext`) as developer messages before the call's output; the crate's loop \
         places every hook set's after the step's results, as Claude Code does: a provider \
         such as Anthropic's takes a call's results only right after the call, so nothing can \
         go between them, and the model reads the same text one message later.",
    ),
];

/// Differences found and not fixed yet: each says what has to change.
pub(crate) const OPEN: &[Known] = &[];

/// tower-agent with the scenario's hooks in a Codex `hooks.json`.
struct TowerAgentAsCodex;

impl Host for TowerAgentAsCodex {
    async fn play(&self, job: &Job) -> Result<(), Error> {
        let file = codex_hooks(job);
        let hooks = CommandHooks::builder()
            .codex_hooks_file(file)
            .permission_mode("bypassPermissions")
            .project_dir(&job.project)
            .transcripts_dir(job.root.join("transcripts"));
        crate::agent_run::play(job, hooks).await;
        Ok(())
    }
}

/// Writes the job's hooks as the Codex adapter does: `<home>/.codex/hooks.json`, each
/// command's `$CLAUDE_PROJECT_DIR` replaced by the project's path.
fn codex_hooks(job: &Job) -> std::path::PathBuf {
    let settings: Value = serde_json::from_slice(&std::fs::read(&job.settings).unwrap()).unwrap();
    let project = job.project.to_str().unwrap();
    let mut hooks = settings["hooks"].clone();
    for groups in hooks
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        for group in groups.as_array_mut().into_iter().flatten() {
            for handler in group["hooks"].as_array_mut().into_iter().flatten() {
                if let Some(Value::String(command)) = handler.get_mut("command") {
                    *command = command.replace("$CLAUDE_PROJECT_DIR", project);
                }
            }
        }
    }
    let dir = job.home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hooks.json");
    std::fs::write(&file, json!({ "hooks": hooks }).to_string()).unwrap();
    file
}

/// The shell tool's results in the model's requests as the output alone: the tools are not
/// the hooks' — Codex's `exec_command` frames its output (`Chunk ID: …`, `Wall time: …`,
/// `Process exited with code N`, `Original token count: …`, `Output:` and the raw output),
/// the crate's Claude Code `Bash` gives the output with its last newline trimmed, and says
/// `(Bash completed with no output)` for none. What hooks change in a result (a block's
/// reason, a context) is compared as it is.
fn shell_outputs(observed: &mut Observed) {
    const HEADER: &str = "Chunk ID: <id>\nWall time: <n> seconds\nProcess exited with code ";
    for request in observed.requests.iter_mut() {
        for item in request.as_array_mut().into_iter().flatten() {
            let Some(Value::String(content)) = item.get_mut("content") else {
                continue;
            };
            let output = match content.strip_prefix(HEADER) {
                Some(rest) => rest.split_once("\nOutput:\n").map_or("", |(_, out)| out),
                None if content == "(Bash completed with no output)" => "",
                None => continue,
            };
            *content = output.trim_end_matches('\n').to_owned();
        }
    }
}

/// tower-agent, reading Codex's hooks file, does what Codex does in every vector recorded
/// from Codex, but for the differences it keeps on purpose ([`KEPT`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tower_agent_does_what_codex_does() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hook-vectors/vectors-codex");
    let vectors = crate::played_from(&dir);
    for (name, vector) in &vectors {
        let from = vector.recorded_from.as_ref().expect("recorded");
        assert_eq!(from["version"], VERSION, "{name}");
    }
    let known = KnownDifferences {
        kept: KEPT.to_vec(),
        open: OPEN.to_vec(),
    };
    let program = format!("Codex {VERSION}");
    crate::differential(&program, vectors, &TowerAgentAsCodex, known, shell_outputs).await;
}
