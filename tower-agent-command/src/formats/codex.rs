//! Codex's hooks (`hooks.json`, the `[hooks]` of `config.toml`): Claude Code's format, and
//! the inputs and answers of Codex 0.169.0 — measured against Codex itself
//! (`hook-vectors/vectors-codex`, `tests/reference/codex.rs`) and read from the JSON schemas
//! of its hook inputs, which its program carries.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Dialect, only_known_events, with_source};
use crate::{
    config::{self, Config, ConfigError, HookEvent},
    handler::Handler,
    process::Verdict,
    reply::{Reply, Stdout},
};
use tower_agent_core::message::{ToolCall, ToolOutput};

/// Loads a Codex `hooks.json`, or the inline `[hooks]` tables of a Codex `config.toml` (a
/// path ending in `.toml`): Claude Code's shape (`{"hooks": {event: [groups]}}`; in TOML
/// `[[hooks.PreToolUse]]` is a group and `[[hooks.PreToolUse.hooks]]` one of its handlers),
/// events by Claude Code's names; unknown events are skipped with a warning. In a
/// `config.toml` every other key is Codex's own configuration and is not read, nor is
/// `[hooks.state]` (Codex's record of which hooks were trusted, not an event).
pub(crate) fn load_codex(
    path: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let file = path.display().to_string();
    let hooks = if path.extension().is_some_and(|e| e == "toml") {
        let text = config::read_text(path)?;
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| ConfigError::new(&file, "", format!("invalid TOML: {e}")))?;
        let mut hooks = match table.get("hooks") {
            None => serde_json::Map::new(),
            Some(toml::Value::Table(hooks)) => match serde_json::to_value(hooks) {
                Ok(Value::Object(hooks)) => hooks,
                _ => {
                    return Err(ConfigError::new(
                        &file,
                        "hooks",
                        "must be a table of events",
                    ));
                }
            },
            Some(_) => {
                return Err(ConfigError::new(
                    &file,
                    "hooks",
                    "must be a table of events",
                ));
            }
        };
        hooks.remove("state");
        Value::Object(hooks)
    } else {
        let value = config::read_json(path)?;
        if let Value::Object(root) = &value
            && let Some(k) = root
                .keys()
                .find(|k| !matches!(k.as_str(), "hooks" | "description"))
        {
            out.warn(format!(
                "{file}: `{k}` is not a Codex hooks.json field; ignored"
            ));
        }
        value.get("hooks").cloned().unwrap_or(Value::Null)
    };
    let hooks = json!({ "hooks": only_codex_events(hooks, &file, out) });
    let before: Vec<usize> = out.events.iter().map(Vec::len).collect();
    with_source(out, Dialect::Codex, |out| {
        let hooks = only_known_events(&hooks, &file, out).into_owned();
        config::load_settings(&hooks, &file, project_dir, out)
    })?;
    stop_run_ids(out, &before, &file);
    Ok(())
}

/// Gives the Stop handlers just loaded from `file` their Codex run ids, `stop:<n>:<file>`:
/// Codex numbers a file's handlers in its order of events, Stop's last (measured: with 6 and
/// 10 handlers of other events, the second Stop handler is `stop:7` and `stop:11`).
/// `before`: each event's number of handlers before the file was loaded.
fn stop_run_ids(out: &mut Config, before: &[usize], file: &str) {
    let stop = HookEvent::Stop.index();
    let others: usize = (out.events.iter().zip(before).enumerate())
        .filter(|(event, _)| *event != stop)
        .map(|(_, (entries, before))| entries.len() - before)
        .sum();
    for (n, entry) in out.events[stop][before[stop]..].iter_mut().enumerate() {
        if let Some(handler) = std::sync::Arc::get_mut(&mut entry.handler) {
            handler.extras.run_id = Some(format!("stop:{}:{file}", others + n).into());
        }
    }
}

/// The events of a Codex hooks file that Codex fires; the others (Claude Code's, which Codex
/// ignores) are dropped with a warning.
fn only_codex_events(mut hooks: Value, file: &str, out: &mut Config) -> Value {
    if let Value::Object(events) = &mut hooks {
        events.retain(|name, _| match HookEvent::parse(name) {
            Some(event) if !codex_fires(event) => {
                out.warn(format!(
                    "{file}: hooks.{name}: Codex does not fire `{name}`; its hooks are skipped"
                ));
                false
            }
            _ => true,
        });
    }
    hooks
}

/// The events Codex 0.169.0 fires, and the fields of each one's input: the `properties` of
/// its `<event>.command.input` JSON schemas (`additionalProperties: false`), which the
/// `codex` program carries. Every input also has `session_id`, `transcript_path`, `cwd` and
/// `hook_event_name`; `agent_id` and `agent_type` are kept where a subagent's run has them.
const CODEX: &[(HookEvent, &[&str])] = &[
    (
        HookEvent::SessionStart,
        &["model", "permission_mode", "source"],
    ),
    (HookEvent::SessionEnd, &["reason"]),
    (
        HookEvent::UserPromptSubmit,
        &["turn_id", "model", "permission_mode", "prompt"],
    ),
    (
        HookEvent::PreToolUse,
        &[
            "turn_id",
            "model",
            "permission_mode",
            "tool_name",
            "tool_input",
            "tool_use_id",
        ],
    ),
    (
        HookEvent::PermissionRequest,
        &[
            "turn_id",
            "model",
            "permission_mode",
            "tool_name",
            "tool_input",
        ],
    ),
    (
        HookEvent::PostToolUse,
        &[
            "turn_id",
            "model",
            "permission_mode",
            "tool_name",
            "tool_input",
            "tool_response",
            "tool_use_id",
        ],
    ),
    (HookEvent::PreCompact, &["turn_id", "model", "trigger"]),
    (HookEvent::PostCompact, &["turn_id", "model", "trigger"]),
    (
        HookEvent::SubagentStart,
        &["turn_id", "model", "permission_mode"],
    ),
    (
        HookEvent::SubagentStop,
        &[
            "turn_id",
            "model",
            "permission_mode",
            "agent_transcript_path",
            "last_assistant_message",
            "stop_hook_active",
        ],
    ),
    (
        HookEvent::Stop,
        &[
            "turn_id",
            "model",
            "permission_mode",
            "stop_hook_active",
            "last_assistant_message",
        ],
    ),
];

/// Whether Codex 0.169.0 fires `event` (a Codex hooks file's other events are skipped).
fn codex_fires(event: HookEvent) -> bool {
    CODEX.iter().any(|(e, _)| *e == event)
}

/// What the run tells a Codex hook beyond the event's own fields.
pub(crate) struct CodexRun<'a> {
    /// The run's model ([`ModelSettings::model`](tower_agent_core::model::ModelSettings::model)).
    pub(crate) model: Option<&'a str>,
    /// The permission mode the hooks were built with.
    pub(crate) permission_mode: &'a str,
}

/// The input a Codex hook gets, from the one a Claude Code hook gets: Codex's fields only
/// ([`CODEX`]), the prompt's id as `turn_id` (one per prompt, as Codex's turn), `model` and
/// `permission_mode` on every event that has them, SessionEnd's `reason` always `other`; a
/// `Bash` call's `tool_input` is `{command}` and its `tool_response` the output as one string
/// (stdout, then stderr), as Codex's shell tool gives them (measured:
/// `hook-vectors/vectors-codex`).
pub(crate) fn codex_input(
    event: HookEvent,
    mut input: Map<String, Value>,
    run: &CodexRun<'_>,
) -> Map<String, Value> {
    let fields = CODEX
        .iter()
        .find(|(e, _)| *e == event)
        .map_or(&[][..], |(_, f)| *f);
    if let Some(id) = input.remove("prompt_id") {
        input.insert("turn_id".into(), id);
    }
    if let Some(model) = run.model {
        input.entry("model").or_insert_with(|| model.into());
    }
    input
        .entry("permission_mode")
        .or_insert_with(|| run.permission_mode.into());
    if event == HookEvent::SessionEnd {
        input.insert("reason".into(), "other".into());
    }
    if input.get("tool_name").and_then(Value::as_str) == Some("Bash") {
        codex_shell(&mut input);
    }
    const COMMON: &[&str] = &[
        "session_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "agent_id",
        "agent_type",
    ];
    input.retain(|k, _| COMMON.contains(&k.as_str()) || fields.contains(&k.as_str()));
    input
}

/// A `Bash` call as Codex's shell tool shows it to hooks: `tool_input` `{command}`,
/// `tool_response` the output as one string.
fn codex_shell(input: &mut Map<String, Value>) {
    if let Some(Value::Object(args)) = input.get_mut("tool_input") {
        args.retain(|k, _| k == "command");
    }
    if let Some(Value::Object(response)) = input.get("tool_response") {
        let mut text = String::new();
        for part in ["stdout", "stderr"] {
            if let Some(part) = response.get(part).and_then(Value::as_str)
                && !part.is_empty()
            {
                text.push_str(part);
                if !part.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        input.insert("tool_response".into(), text.into());
    }
}

/// A Codex answer in Claude Code's terms, as Codex 0.169.0 acts on it (measured:
/// `hook-vectors/vectors-codex`):
///
/// - its JSON counts only with exit 0: a hook that exits otherwise is read by its exit code
///   and stderr alone (with exit 2, stderr is the reason even when the JSON gives one);
/// - PreToolUse: `continue` and `stopReason` are ignored; `permissionDecision` `ask` or
///   `defer` decides nothing (the call runs); `updatedInput` counts only together with
///   `allow` (without it the rewrite is dropped, logged, and the rest of the answer stands);
/// - PostToolUse: `updatedToolOutput` is ignored; `continue: false` blocks with `stopReason`
///   as the reason, and the turn goes on;
/// - Stop: `additionalContext` is ignored.
pub(super) fn output(event: HookEvent, mut reply: Reply) -> Reply {
    if reply.code == Some(2) && CODEX_EXIT_2_BLOCKS.contains(&event) {
        // Exit 2 blocks with stderr as it is, the reason a JSON `block` gives.
        let reason = reply.stderr.trim().to_owned();
        reply.code = Some(0);
        reply.stdout = Stdout::Json(json!({ "decision": "block", "reason": reason }));
        return reply;
    }
    if reply.code != Some(0) {
        reply.stdout = Stdout::Text(String::new());
        return reply;
    }
    if let Stdout::Text(text) = &mut reply.stdout
        && text.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(text.trim()).is_err()
    {
        // Not JSON, though it looks like it: Codex adds nothing of it.
        text.clear();
    }
    match &mut reply.stdout {
        Stdout::Json(Value::Object(out)) => {
            codex_answer(event, out);
        }
        Stdout::Json(_) => {}
        Stdout::Text(text) => {
            if let Ok(Value::Object(mut out)) = serde_json::from_str::<Value>(text.trim())
                && codex_answer(event, &mut out)
            {
                *text = Value::Object(out).to_string();
            }
        }
    }
    reply
}

/// The events whose exit 2 Codex reads as a block with stderr as the reason.
const CODEX_EXIT_2_BLOCKS: &[HookEvent] = &[
    HookEvent::UserPromptSubmit,
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::Stop,
];

/// A Codex handler's verdict as Codex acts on it: a PreToolUse denial is worded as Codex
/// words it ([`codex_refusal`]); a PostToolUse block's reason replaces the call's result
/// (where Claude Code's goes next to it); a Stop block's reason reaches the model as
/// `<hook_prompt hook_run_id="stop:<n>:<file>">reason</hook_prompt>` (the reason XML-escaped).
pub(crate) fn codex_verdict(event: HookEvent, handler: &Handler, verdict: &mut Verdict) {
    match event {
        HookEvent::PreToolUse => verdict.refusal = Some(codex_refusal),
        HookEvent::PostToolUse => {
            verdict.replace_output = verdict.block.take().map(|reason| (reason, false));
        }
        HookEvent::Stop => {
            if let (Some(reason), Some(id)) = (&mut verdict.block, &handler.extras.run_id) {
                *reason = hook_prompt(id, reason);
            }
        }
        _ => {}
    }
}

/// Codex's continuation prompt: `<hook_prompt hook_run_id="<id>">text</hook_prompt>`, the
/// text XML-escaped.
fn hook_prompt(id: &str, text: &str) -> String {
    let mut out = format!("<hook_prompt hook_run_id=\"{id}\">");
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out.push_str("</hook_prompt>");
    out
}

/// What the model is told of a call a Codex PreToolUse hook denied, as Codex 0.169.0 tells it
/// (its `hook_runtime.rs`; measured: `hook-vectors/vectors-codex`): a result, not an error —
/// `Command blocked by PreToolUse hook: <reason>. Command: <command>` for a shell call
/// (`Bash`, `apply_patch`) with a `command`, else `Tool call blocked by PreToolUse hook:
/// <reason>. Tool: <tool>`.
pub(crate) fn codex_refusal(call: &ToolCall, reason: &str) -> ToolOutput {
    let command = call.arguments.get("command").and_then(Value::as_str);
    let text = match command {
        Some(command) if matches!(call.name.as_str(), "Bash" | "apply_patch") => {
            format!("Command blocked by PreToolUse hook: {reason}. Command: {command}")
        }
        _ => format!(
            "Tool call blocked by PreToolUse hook: {reason}. Tool: {}",
            call.name
        ),
    };
    ToolOutput::text(call.id.clone(), text)
}

/// Applies [`output`]'s rules to a JSON answer; whether it changed.
fn codex_answer(event: HookEvent, out: &mut Map<String, Value>) -> bool {
    let mut changed = false;
    let mut specific = match out.remove("hookSpecificOutput") {
        Some(Value::Object(s)) => Some(s),
        Some(other) => {
            out.insert("hookSpecificOutput".into(), other);
            None
        }
        None => None,
    };
    match event {
        HookEvent::PreToolUse => {
            changed |= out.remove("continue").is_some();
            changed |= out.remove("stopReason").is_some();
            if let Some(s) = &mut specific {
                let decision = s.get("permissionDecision").and_then(Value::as_str);
                let allowed = decision == Some("allow");
                if matches!(decision, Some("ask" | "defer")) {
                    changed |= s.remove("permissionDecision").is_some();
                    changed |= s.remove("permissionDecisionReason").is_some();
                }
                if !allowed && s.contains_key("updatedInput") {
                    tracing::warn!(
                        "a Codex PreToolUse hook answered updatedInput without permissionDecision \"allow\": the rewrite is ignored, as in Codex"
                    );
                    changed |= s.remove("updatedInput").is_some();
                }
            }
        }
        HookEvent::PostToolUse => {
            if let Some(s) = &mut specific {
                changed |= s.remove("updatedToolOutput").is_some();
                if out.get("suppressOutput") == Some(&Value::Bool(true)) {
                    changed |= s.remove("additionalContext").is_some();
                }
            }
            if out.get("continue") == Some(&Value::Bool(false)) {
                let reason = out.remove("stopReason").unwrap_or_default();
                out.remove("continue");
                out.entry("decision").or_insert_with(|| "block".into());
                out.entry("reason").or_insert(reason);
                changed = true;
            }
        }
        HookEvent::Stop => {
            if let Some(s) = &mut specific {
                changed |= s.remove("additionalContext").is_some();
            }
        }
        _ => {}
    }
    if let Some(s) = specific {
        out.insert("hookSpecificOutput".into(), Value::Object(s));
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hostile Codex `config.toml` (4 MiB is allowed) nested 200,000 levels deep is a clear
    /// error, not a stack overflow.
    #[test]
    fn deeply_nested_toml_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let depth = 200_000;
        std::fs::write(
            &path,
            format!("a = {}{}\n", "[".repeat(depth), "]".repeat(depth)),
        )
        .unwrap();
        let mut config = Config::default();
        let err = load_codex(&path, dir.path(), &mut config).unwrap_err();
        assert!(err.to_string().contains("invalid TOML"), "{err}");
    }

    /// Every event Codex 0.169.0 fires gets exactly the fields of its input schema (and the
    /// common ones): Claude Code's own (`prompt_id`, `effort`, `duration_ms`, …) are gone, the
    /// prompt's id is `turn_id`, the run's model and permission mode are there where Codex
    /// sends them.
    #[test]
    fn every_codex_event_gets_exactly_its_schema_fields() {
        let claude_only = [
            "prompt_id",
            "effort",
            "duration_ms",
            "background_tasks",
            "session_crons",
            "outcome",
            "context_tokens",
            "seconds_since_last_response",
            "error",
        ];
        let run = CodexRun {
            model: Some("m"),
            permission_mode: "default",
        };
        for (event, fields) in CODEX {
            let mut input = Map::new();
            for k in ["session_id", "transcript_path", "cwd", "hook_event_name"] {
                input.insert(k.into(), json!("x"));
            }
            for k in claude_only.iter().chain(fields.iter()) {
                input.entry(*k).or_insert(json!("v"));
            }
            input.insert("prompt_id".into(), json!("p-1"));
            input.remove("model");
            input.remove("permission_mode");
            let out = codex_input(*event, input, &run);
            let mut keys: Vec<&str> = out.keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut want: Vec<&str> = ["session_id", "transcript_path", "cwd", "hook_event_name"]
                .into_iter()
                .chain(fields.iter().copied())
                .collect();
            want.sort_unstable();
            assert_eq!(keys, want, "{event}");
            if fields.contains(&"turn_id") {
                assert_eq!(out["turn_id"], "p-1", "{event}");
            }
            if fields.contains(&"model") {
                assert_eq!(out["model"], "m", "{event}");
            }
            if fields.contains(&"permission_mode") {
                assert_eq!(out["permission_mode"], "default", "{event}");
            }
        }
        let end = codex_input(HookEvent::SessionEnd, Map::new(), &run);
        assert_eq!(end["reason"], "other");
    }

    /// A `Bash` call as Codex's shell shows it; another tool's input and response as they are.
    #[test]
    fn bash_calls_look_like_codex_shell_calls() {
        let run = CodexRun {
            model: None,
            permission_mode: "default",
        };
        let bash = json!({
            "tool_name": "Bash",
            "tool_input": {"command": "ls", "description": "List", "timeout": 5},
            "tool_response": {"stdout": "a", "stderr": "b\n", "interrupted": false},
        });
        let Value::Object(bash) = bash else { panic!() };
        let out = codex_input(HookEvent::PostToolUse, bash, &run);
        assert_eq!(out["tool_input"], json!({"command": "ls"}));
        assert_eq!(out["tool_response"], "a\nb\n");
        assert!(!out.contains_key("model"));
        let other = json!({
            "tool_name": "lookup",
            "tool_input": {"q": 1, "description": "d"},
            "tool_response": {"stdout": "kept"},
        });
        let Value::Object(other) = other else {
            panic!()
        };
        let out = codex_input(HookEvent::PostToolUse, other, &run);
        assert_eq!(out["tool_input"], json!({"q": 1, "description": "d"}));
        assert_eq!(out["tool_response"], json!({"stdout": "kept"}));
    }

    fn answer(code: i32, stdout: &str, stderr: &str) -> Reply {
        Reply {
            code: Some(code),
            stdout: Stdout::Text(stdout.into()),
            stderr: stderr.into(),
        }
    }

    fn json_of(reply: &Reply) -> Value {
        match &reply.stdout {
            Stdout::Json(v) => v.clone(),
            Stdout::Text(t) if t.is_empty() => Value::Null,
            Stdout::Text(t) => serde_json::from_str(t).unwrap_or_else(|_| json!({"text": t})),
        }
    }

    /// Each rule of [`output`], as Codex 0.169.0 acts on an answer.
    #[test]
    fn answers_as_codex_reads_them() {
        use HookEvent::*;
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"r"}}"#;
        let cases: &[(HookEvent, Reply, Value)] = &[
            // JSON with exit 1 decides nothing.
            (PreToolUse, answer(1, deny, "e"), Value::Null),
            // Exit 2: stderr is the reason, whatever the JSON says.
            (
                PreToolUse,
                answer(2, deny, " why \n"),
                json!({"decision": "block", "reason": "why"}),
            ),
            (
                Stop,
                answer(2, "", "again"),
                json!({"decision": "block", "reason": "again"}),
            ),
            // ask and defer decide nothing; continue: false is ignored on PreToolUse.
            (
                PreToolUse,
                answer(
                    0,
                    r#"{"continue":false,"stopReason":"s","hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"r"}}"#,
                    "",
                ),
                json!({"hookSpecificOutput": {}}),
            ),
            (
                PreToolUse,
                answer(
                    0,
                    r#"{"hookSpecificOutput":{"permissionDecision":"defer"}}"#,
                    "",
                ),
                json!({"hookSpecificOutput": {}}),
            ),
            // updatedInput only with allow.
            (
                PreToolUse,
                answer(
                    0,
                    r#"{"hookSpecificOutput":{"updatedInput":{"command":"x"}}}"#,
                    "",
                ),
                json!({"hookSpecificOutput": {}}),
            ),
            (
                PreToolUse,
                answer(
                    0,
                    r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"x"}}}"#,
                    "",
                ),
                json!({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "x"}}}),
            ),
            // PostToolUse: continue: false blocks with stopReason; updatedToolOutput ignored;
            // suppressOutput drops the context.
            (
                PostToolUse,
                answer(0, r#"{"continue":false,"stopReason":"stopped"}"#, ""),
                json!({"decision": "block", "reason": "stopped"}),
            ),
            (
                PostToolUse,
                answer(
                    0,
                    r#"{"suppressOutput":true,"hookSpecificOutput":{"updatedToolOutput":"t","additionalContext":"c"}}"#,
                    "",
                ),
                json!({"suppressOutput": true, "hookSpecificOutput": {}}),
            ),
            // Stop's additionalContext is ignored.
            (
                Stop,
                answer(0, r#"{"hookSpecificOutput":{"additionalContext":"c"}}"#, ""),
                json!({"hookSpecificOutput": {}}),
            ),
            // Text that looks like JSON and is not adds nothing; other text stays.
            (UserPromptSubmit, answer(0, "{not json", ""), Value::Null),
            (
                UserPromptSubmit,
                answer(0, "plain", ""),
                json!({"text": "plain"}),
            ),
        ];
        for (event, reply, want) in cases {
            let reply = Reply {
                code: reply.code,
                stdout: match &reply.stdout {
                    Stdout::Text(t) => Stdout::Text(t.clone()),
                    Stdout::Json(v) => Stdout::Json(v.clone()),
                },
                stderr: reply.stderr.clone(),
            };
            let got = output(*event, reply);
            assert_eq!(&json_of(&got), want, "{event}");
        }
    }

    /// A denial in Codex's words: a shell call's with its command, another tool's with its
    /// name; a result, not an error.
    #[test]
    fn denials_in_codex_words() {
        let call = |name: &str, arguments: Value| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments,
        };
        let cases = [
            (
                call("Bash", json!({"command": "ls"})),
                "Command blocked by PreToolUse hook: no. Command: ls",
            ),
            (
                call("apply_patch", json!({"command": "patch"})),
                "Command blocked by PreToolUse hook: no. Command: patch",
            ),
            (
                call("Bash", json!({})),
                "Tool call blocked by PreToolUse hook: no. Tool: Bash",
            ),
            (
                call("Read", json!({"command": "x"})),
                "Tool call blocked by PreToolUse hook: no. Tool: Read",
            ),
        ];
        for (call, want) in cases {
            assert_eq!(codex_refusal(&call, "no"), ToolOutput::text("c", want));
        }
    }

    /// A Codex hooks file's events Codex does not fire are skipped, each with a warning; its
    /// own events load.
    #[test]
    fn events_codex_does_not_fire_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks.json");
        let handler = json!([{"hooks": [{"type": "command", "command": "true"}]}]);
        let hooks = json!({"hooks": {
            "PreToolUse": handler,
            "PostToolBatch": handler,
            "Notification": handler,
        }});
        std::fs::write(&path, hooks.to_string()).unwrap();
        let mut config = Config::default();
        load_codex(&path, dir.path(), &mut config).unwrap();
        let warnings = config.warnings.join("\n");
        for event in ["PostToolBatch", "Notification"] {
            assert!(
                warnings.contains(&format!("Codex does not fire `{event}`")),
                "{warnings}"
            );
            assert!(config.events[HookEvent::parse(event).unwrap().index()].is_empty());
        }
        assert_eq!(config.events[HookEvent::PreToolUse.index()].len(), 1);
    }

    /// A Stop handler's run id counts the file's handlers of every event Codex fires, Stop's
    /// last (measured: `vectors-codex` exit_2_stop `stop:7`, stop_continues_once `stop:11`),
    /// whatever order the file lists events in; a handler of an event Codex does not fire
    /// counts for nothing. The block's reason is wrapped, XML-escaped.
    #[test]
    fn stop_blocks_are_wrapped_in_their_run_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks.json");
        let one = |c: &str| json!([{"hooks": [{"type": "command", "command": c}]}]);
        let hooks = json!({"hooks": {
            "Stop": [{"hooks": [
                {"type": "command", "command": "first"},
                {"type": "command", "command": "second"},
            ]}],
            "PostToolBatch": one("batch"),
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "a"},
                {"type": "command", "command": "b"},
            ]}],
            "SessionEnd": one("end"),
            "UserPromptSubmit": one("prompt"),
        }});
        std::fs::write(&path, hooks.to_string()).unwrap();
        let mut config = Config::default();
        load_codex(&path, dir.path(), &mut config).unwrap();
        let file = path.display();
        let stops = &config.events[HookEvent::Stop.index()];
        let ids: Vec<_> = stops
            .iter()
            .map(|e| e.handler.extras.run_id.as_deref().unwrap().to_owned())
            .collect();
        assert_eq!(ids, [format!("stop:4:{file}"), format!("stop:5:{file}")]);
        let mut verdict = Verdict {
            block: Some("fix <this> & that".into()),
            ..Verdict::default()
        };
        codex_verdict(HookEvent::Stop, &stops[1].handler, &mut verdict);
        assert_eq!(
            verdict.block.unwrap(),
            format!(
                "<hook_prompt hook_run_id=\"stop:5:{file}\">fix &lt;this&gt; &amp; that</hook_prompt>"
            )
        );
        // Another event's block is not wrapped.
        let pre = &config.events[HookEvent::PreToolUse.index()][0].handler;
        let mut verdict = Verdict {
            block: Some("no".into()),
            ..Verdict::default()
        };
        codex_verdict(HookEvent::PreToolUse, pre, &mut verdict);
        assert_eq!(verdict.block.as_deref(), Some("no"));
    }
}
