//! Other tools' hook configurations: Gemini CLI (`.gemini/settings.json`) and Codex
//! (`hooks.json`), mapped onto this crate's events.

use std::{borrow::Cow, path::Path, sync::Arc};

use serde_json::{Map, Value, json};

use crate::{
    config::{self, Config, ConfigError, HookEvent, SourceContext},
    dialect::{Dialect, SEQUENTIAL_GROUP, gemini_tool},
    process,
    reply::{Reply, Stdout},
};
use tower_agent_core::context::RunContext;
use tower_agent_core::message::{ToolCall, ToolOutput};

mod codex;

pub(crate) use self::codex::{CodexRun, codex_input, codex_verdict, load_codex};

/// Gemini CLI events and ours.
const GEMINI: &[(&str, HookEvent)] = &[
    ("BeforeTool", HookEvent::PreToolUse),
    ("AfterTool", HookEvent::PostToolUse),
    ("BeforeAgent", HookEvent::UserPromptSubmit),
    ("AfterAgent", HookEvent::Stop),
    ("BeforeModel", HookEvent::BeforeModel),
    ("AfterModel", HookEvent::AfterModel),
    ("SessionStart", HookEvent::SessionStart),
    ("SessionEnd", HookEvent::SessionEnd),
    ("Notification", HookEvent::Notification),
    ("PreCompress", HookEvent::PreCompact),
];

/// The fields of Gemini CLI 0.61.0's inputs beyond the common ones (`session_id`,
/// `transcript_path`, `cwd`, `hook_event_name`, `timestamp`), for the events it shares with
/// this crate (measured: `hook-vectors/vectors-gemini`); the others (Notification,
/// BeforeModel, AfterModel) keep this crate's fields.
const GEMINI_FIELDS: &[(HookEvent, &[&str])] = &[
    (HookEvent::SessionStart, &["source"]),
    (HookEvent::UserPromptSubmit, &["prompt"]),
    (HookEvent::PreToolUse, &["tool_name", "tool_input"]),
    (
        HookEvent::PostToolUse,
        &["tool_name", "tool_input", "tool_response"],
    ),
    (
        HookEvent::Stop,
        &["prompt", "prompt_response", "stop_hook_active"],
    ),
    (HookEvent::SessionEnd, &["reason"]),
    (HookEvent::PreCompact, &["trigger"]),
];

/// A Gemini CLI handler's verdict as Gemini CLI acts on it: plain stdout is context for no
/// event; a BeforeTool denial is worded as Gemini CLI words it ([`gemini_refusal`]); an
/// AfterTool block's reason replaces the call's result, and its contexts are appended to the
/// result, each in `<hook_context>` tags (measured: `hook-vectors/vectors-gemini`).
pub(crate) fn gemini_verdict(event: HookEvent, verdict: &mut process::Verdict) {
    if verdict.plain_stdout {
        verdict.contexts.clear();
    }
    match event {
        HookEvent::PreToolUse => verdict.refusal = Some(gemini_refusal),
        HookEvent::PostToolUse => {
            // As an error (measured).
            verdict.replace_output = verdict.block.take().map(|reason| (reason, true));
            verdict.context_in_result = Some(gemini_in_result);
        }
        _ => {}
    }
}

/// What the model is told of a call a Gemini CLI BeforeTool hook denied, as Gemini CLI 0.61.0
/// tells it (measured: `hook-vectors/vectors-gemini`): an error, `Tool execution blocked:
/// <reason>`.
pub(crate) fn gemini_refusal(call: &ToolCall, reason: &str) -> ToolOutput {
    ToolOutput::error(call.id.clone(), format!("Tool execution blocked: {reason}"))
}

/// A result with a Gemini CLI AfterTool hook's `context` appended, as Gemini CLI appends it
/// (measured: `hook-vectors/vectors-gemini`): after a blank line, in `<hook_context>` tags.
pub(crate) fn gemini_in_result(result: &mut String, context: &str) {
    result.push_str("\n\n<hook_context>");
    result.push_str(context);
    result.push_str("</hook_context>");
}

/// The input a Gemini CLI handler gets, from the one a Claude Code handler gets: Gemini CLI
/// 0.61.0's fields ([`GEMINI_FIELDS`], measured: `hook-vectors/vectors-gemini`) —
/// `hook_event_name` its event name, a `timestamp`, the crate's `Bash` as `run_shell_command`,
/// AfterTool's `tool_response` `{llmContent, returnDisplay}` (a `Bash` call's output as one
/// text, stdout then stderr), AfterAgent's `prompt` (the run's, `prompt`) and
/// `prompt_response`, SessionEnd's `reason` `exit`; none of Claude Code's own (`prompt_id`,
/// `permission_mode`, `tool_use_id`, `effort`, …).
pub(crate) fn gemini_input(
    event: HookEvent,
    mut map: Map<String, Value>,
    prompt: Option<&str>,
) -> Map<String, Value> {
    if let Some(name) = gemini_name(event) {
        map.insert("hook_event_name".into(), name.into());
    }
    map.insert(
        "timestamp".into(),
        tower_agent_core::context::timestamp().into(),
    );
    if let Some(Value::String(tool)) = map.get_mut("tool_name") {
        *tool = gemini_tool(tool).to_owned();
    }
    match event {
        HookEvent::PostToolUse => {
            if let Some(response) = map.remove("tool_response") {
                let text = response_text(response);
                map.insert(
                    "tool_response".into(),
                    json!({ "llmContent": text, "returnDisplay": text }),
                );
            }
        }
        HookEvent::Stop => {
            let last = map
                .get("last_assistant_message")
                .cloned()
                .unwrap_or_default();
            map.insert("prompt_response".into(), last);
            map.insert("prompt".into(), prompt.unwrap_or_default().into());
        }
        HookEvent::SessionEnd => {
            map.insert("reason".into(), "exit".into());
        }
        _ => {}
    }
    if let Some((_, fields)) = GEMINI_FIELDS.iter().find(|(e, _)| *e == event) {
        const COMMON: &[&str] = &[
            "session_id",
            "transcript_path",
            "cwd",
            "hook_event_name",
            "timestamp",
        ];
        map.retain(|k, _| COMMON.contains(&k.as_str()) || fields.contains(&k.as_str()));
    }
    map
}

/// The answers of a run's AfterAgent inputs so far: what Gemini CLI's `prompt_response` joins.
struct TurnAnswers(Vec<String>);

/// A Stop input's `last_assistant_message` as Gemini CLI's `prompt_response` (which
/// [`gemini_input`] makes of it): every answer of the turn so far — those the run's earlier
/// AfterAgent hooks saw (an AfterAgent block sends the model back to work) and this one —
/// joined by newlines (measured: `hook-vectors/vectors-gemini`, `exit_2_stop`). The run
/// (`ctx`) keeps them.
pub(crate) fn gemini_turn(ctx: &RunContext, input: &mut Map<String, Value>) {
    let Some(Value::String(last)) = input.get_mut("last_assistant_message") else {
        return;
    };
    ctx.with_data(|data| {
        if data.get::<TurnAnswers>().is_none() {
            data.insert(TurnAnswers(Vec::new()));
        }
        let answers = &mut data.get_mut::<TurnAnswers>().expect("inserted").0;
        if !last.is_empty() {
            answers.push(last.clone());
        }
        *last = answers.join("\n");
    });
}

/// A tool's response as one text: a string as it is; a `Bash` response's stdout, then its
/// stderr; anything else its JSON text.
fn response_text(response: Value) -> String {
    match response {
        Value::String(s) => s,
        Value::Object(o) if o.get("stdout").is_some_and(Value::is_string) => {
            let part = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or_default();
            match (part("stdout"), part("stderr")) {
                (out, "") => out.to_owned(),
                ("", err) => err.to_owned(),
                (out, err) => format!("{out}\n{err}"),
            }
        }
        other => other.to_string(),
    }
}

/// Keys of Gemini's `hooks` object that are settings, not events.
const GEMINI_SETTINGS: &[&str] = &["enabled", "disabled", "notifications"];

fn gemini_name(event: HookEvent) -> Option<&'static str> {
    GEMINI.iter().find(|(_, e)| *e == event).map(|(n, _)| *n)
}

/// Drops (with a warning) the events of a settings value that this crate does not know, so
/// that a file written for another tool version loads.
pub(crate) fn only_known_events<'a>(
    value: &'a Value,
    file: &str,
    out: &mut Config,
) -> Cow<'a, Value> {
    let Some(Value::Object(hooks)) = value.get("hooks") else {
        return Cow::Borrowed(value);
    };
    let unknown: Vec<&String> = hooks
        .keys()
        .filter(|k| HookEvent::parse(k).is_none() && config::not_fired(k).is_none())
        .collect();
    if unknown.is_empty() {
        return Cow::Borrowed(value);
    }
    let mut value = value.clone();
    let hooks = value
        .get_mut("hooks")
        .and_then(Value::as_object_mut)
        .expect("checked");
    for k in unknown {
        out.warn(format!(
            "{file}: hooks.{k}: unknown event `{k}`; its hooks are skipped"
        ));
        hooks.remove(k.as_str());
    }
    Cow::Owned(value)
}

fn with_source(
    out: &mut Config,
    dialect: Dialect,
    load: impl FnOnce(&mut Config) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    let saved = std::mem::replace(
        &mut out.source,
        SourceContext {
            plugin: None,
            env: Arc::default(),
            dialect,
        },
    );
    let result = load(out);
    out.source = saved;
    result
}

/// Loads the `hooks` of a Gemini CLI `settings.json`: its events mapped to ours
/// (`BeforeTool` → PreToolUse …), `timeout` in milliseconds, `name` usable in
/// `disabledHooks`, `hooksConfig.enabled: false` disabling them all and
/// `hooksConfig.disabled` naming hooks to skip. Unknown events (`BeforeToolSelection` …)
/// are skipped with a warning.
pub(crate) fn load_gemini(
    path: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let file = path.display().to_string();
    let value = config::read_json(path)?;
    let err = |at: &str, m: &str| ConfigError::new(&file, at, m);
    let Value::Object(root) = value else {
        return Err(err("", "settings must be a JSON object"));
    };
    let hooks = match root.get("hooks") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(h)) => h,
        Some(_) => return Err(err("hooks", "must be an object of events")),
    };
    let config = root.get("hooksConfig").and_then(Value::as_object);
    for c in config.into_iter().chain(Some(hooks)) {
        if c.get("enabled") == Some(&Value::Bool(false)) {
            out.warn(format!(
                "{file}: hooks are disabled (`enabled: false`); none loaded"
            ));
            return Ok(());
        }
        if let Some(Value::Array(names)) = c.get("disabled") {
            out.disabled_hooks
                .extend(names.iter().filter_map(Value::as_str).map(str::to_owned));
        }
    }
    let mut converted = Map::new();
    for (name, groups) in hooks {
        if GEMINI_SETTINGS.contains(&name.as_str()) {
            continue;
        }
        let Some((_, event)) = GEMINI.iter().find(|(n, _)| n == name) else {
            out.warn(format!(
                "{file}: hooks.{name}: the Gemini CLI event `{name}` has no equivalent here; its hooks are skipped"
            ));
            continue;
        };
        let Value::Array(groups) = groups else {
            return Err(err(
                &format!("hooks.{name}"),
                "must be an array of hook definitions",
            ));
        };
        let mut list = Vec::with_capacity(groups.len());
        for (g, group) in groups.iter().enumerate() {
            let Some(group) = group.as_object() else {
                return Err(err(&format!("hooks.{name}[{g}]"), "must be an object"));
            };
            let mut group = group.clone();
            let sequential = match group.remove("sequential") {
                None | Some(Value::Null | Value::Bool(false)) => None,
                Some(Value::Bool(true)) => {
                    out.next_sequential += 1;
                    Some(out.next_sequential)
                }
                Some(_) => {
                    return Err(err(
                        &format!("hooks.{name}[{g}].sequential"),
                        "must be true or false",
                    ));
                }
            };
            if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
                for (h, handler) in handlers.iter_mut().enumerate() {
                    let at = format!("hooks.{name}[{g}].hooks[{h}]");
                    let Some(handler) = handler.as_object_mut() else {
                        continue;
                    };
                    if let Some(id) = sequential {
                        handler.insert(SEQUENTIAL_GROUP.into(), json!(id));
                    }
                    match handler.get("timeout") {
                        None | Some(Value::Null) => {
                            handler.insert("timeout".into(), json!(60));
                        }
                        Some(Value::Number(ms)) => {
                            let ms = ms.as_f64().filter(|ms| *ms > 0.0 && ms.is_finite());
                            let Some(ms) = ms else {
                                return Err(err(
                                    &format!("{at}.timeout"),
                                    "must be a positive number of milliseconds",
                                ));
                            };
                            handler.insert("timeout".into(), json!(ms / 1000.0));
                        }
                        Some(_) => {
                            return Err(err(
                                &format!("{at}.timeout"),
                                "must be a positive number of milliseconds",
                            ));
                        }
                    }
                }
            }
            list.push(Value::Object(group));
        }
        converted.insert(event.name().to_owned(), Value::Array(list));
    }
    let settings = json!({ "hooks": converted });
    with_source(out, Dialect::Gemini, |out| {
        config::load_settings(&settings, &file, project_dir, out)
    })
}

// `Dialect` itself is plain data in `dialect`, below the handlers; what its answers mean is
// read here, with the formats.
impl Dialect {
    /// A Gemini answer in Claude Code's terms: JSON (stdout's, else stderr's) whatever the exit
    /// code; Claude Code's `permissionDecision`, `updatedInput` and `updatedToolOutput`, and
    /// BeforeTool's and AfterAgent's `additionalContext`, not read; `decision: "deny"` is a
    /// block (on AfterTool, its reason replaces the tool's output: [`gemini_verdict`]),
    /// `decision: "allow"` on BeforeTool allows,
    /// `hookSpecificOutput.tool_input` is merged into the call's arguments
    /// (`updatedInput`), `hookSpecificOutput.tool_output` replaces the output.
    pub(crate) fn output(self, event: HookEvent, input: &str, mut reply: Reply) -> Reply {
        if self == Dialect::Codex {
            return codex::output(event, reply);
        }
        if self != Dialect::Gemini {
            return reply;
        }
        // JSON decides whatever the exit code — stdout's, or stderr's when stdout is empty; the
        // exit code counts for plain text only (measured: `hook-vectors/vectors-gemini`).
        let text = match &reply.stdout {
            Stdout::Text(t) if !t.trim().is_empty() => t.trim(),
            Stdout::Text(_) => reply.stderr.trim(),
            Stdout::Json(_) => return reply,
        };
        let Ok(Value::Object(mut out)) = serde_json::from_str::<Value>(text) else {
            let blocks = matches!(
                event,
                HookEvent::UserPromptSubmit
                    | HookEvent::PreToolUse
                    | HookEvent::PostToolUse
                    | HookEvent::Stop
            );
            if reply.code == Some(2) && blocks {
                // Plain text with exit 2 denies, with stderr as it is for the reason.
                let reason = reply.stderr.trim().to_owned();
                reply.code = Some(0);
                reply.stdout = Stdout::Json(json!({ "decision": "block", "reason": reason }));
            }
            return reply;
        };
        reply.code = Some(0);
        let mut specific = match out.remove("hookSpecificOutput") {
            Some(Value::Object(s)) => s,
            _ => Map::new(),
        };
        // Claude Code's fields Gemini CLI does not read.
        for claude in [
            "permissionDecision",
            "permissionDecisionReason",
            "updatedInput",
            "updatedToolOutput",
        ] {
            specific.remove(claude);
        }
        if matches!(event, HookEvent::PreToolUse | HookEvent::Stop) {
            // Gemini CLI gives BeforeTool's and AfterAgent's `additionalContext` to no one.
            specific.remove("additionalContext");
        }
        specific.insert("hookEventName".into(), event.name().into());
        let decision = out
            .get("decision")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (event, decision.as_deref()) {
            (_, Some("deny" | "block")) => {
                out.insert("decision".into(), "block".into());
            }
            (HookEvent::PreToolUse, Some("allow")) => {
                out.remove("decision");
                specific.insert("permissionDecision".into(), "allow".into());
            }
            (_, Some(_)) => {
                out.remove("decision");
            }
            _ => {}
        }
        if event == HookEvent::PreToolUse
            && let Some(Value::Object(patch)) = specific.remove("tool_input")
        {
            let mut args = serde_json::from_str::<Value>(input)
                .ok()
                .and_then(|v| v.get("tool_input").cloned())
                .and_then(|v| match v {
                    Value::Object(m) => Some(m),
                    _ => None,
                })
                .unwrap_or_default();
            args.extend(patch);
            specific.insert("updatedInput".into(), Value::Object(args));
        }
        if event == HookEvent::PostToolUse
            && let Some(output) = specific.remove("tool_output")
        {
            specific.insert("updatedToolOutput".into(), output);
        }
        out.insert("hookSpecificOutput".into(), Value::Object(specific));
        reply.stdout = Stdout::Text(Value::Object(out).to_string());
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(stdout: &str) -> Reply {
        Reply {
            code: Some(0),
            stdout: Stdout::Text(stdout.into()),
            stderr: String::new(),
        }
    }

    fn text(r: &Reply) -> Value {
        match &r.stdout {
            Stdout::Text(t) => serde_json::from_str(t).unwrap(),
            Stdout::Json(v) => v.clone(),
        }
    }

    /// Every event Gemini CLI shares with the crate gets exactly Gemini's fields (and the
    /// common ones): the crate's `Bash` as `run_shell_command`, its output as one text,
    /// AfterAgent's `prompt` the run's, SessionEnd's `reason` `exit`.
    #[test]
    fn gemini_inputs_have_geminis_fields() {
        let claude_only = [
            "prompt_id",
            "permission_mode",
            "effort",
            "tool_use_id",
            "duration_ms",
        ];
        for (event, fields) in GEMINI_FIELDS {
            let mut input = Map::new();
            for k in ["session_id", "transcript_path", "cwd"] {
                input.insert(k.into(), json!("x"));
            }
            for k in claude_only.iter().chain(fields.iter()) {
                input.insert((*k).to_owned(), json!("v"));
            }
            input.insert("tool_name".into(), json!("Bash"));
            input.insert(
                "tool_response".into(),
                json!({"stdout": "o", "stderr": "e"}),
            );
            input.insert("last_assistant_message".into(), json!("done"));
            let out = gemini_input(*event, input, Some("the prompt"));
            let mut keys: Vec<&str> = out.keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut want: Vec<&str> = ["session_id", "transcript_path", "cwd", "hook_event_name"]
                .into_iter()
                .chain(["timestamp"])
                .chain(fields.iter().copied())
                .collect();
            want.sort_unstable();
            assert_eq!(keys, want, "{event}");
            assert_eq!(
                out["hook_event_name"],
                gemini_name(*event).unwrap(),
                "{event}"
            );
            if fields.contains(&"tool_name") {
                assert_eq!(out["tool_name"], "run_shell_command");
            }
        }
        let input = |pairs: Value| match pairs {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let after = gemini_input(
            HookEvent::PostToolUse,
            input(json!({"tool_response": {"stdout": "o", "stderr": "e"}})),
            None,
        );
        assert_eq!(
            after["tool_response"],
            json!({"llmContent": "o\ne", "returnDisplay": "o\ne"})
        );
        let stop = gemini_input(
            HookEvent::Stop,
            input(json!({"last_assistant_message": "done"})),
            Some("go"),
        );
        assert_eq!(
            (&stop["prompt"], &stop["prompt_response"]),
            (&json!("go"), &json!("done"))
        );
        let end = gemini_input(
            HookEvent::SessionEnd,
            input(json!({"reason": "other"})),
            None,
        );
        assert_eq!(end["reason"], "exit");
    }

    /// AfterAgent's `prompt_response` is every answer of the turn so far, one per line; a
    /// BeforeTool denial is Gemini's error text; an AfterTool context goes into the result.
    #[test]
    fn gemini_turns_refusals_and_contexts() {
        let ctx = RunContext::new();
        let stop = |last: &str| {
            let mut input = Map::new();
            input.insert("last_assistant_message".into(), json!(last));
            gemini_turn(&ctx, &mut input);
            let input = gemini_input(HookEvent::Stop, input, Some("go"));
            input["prompt_response"].clone()
        };
        assert_eq!(stop("first"), "first");
        assert_eq!(stop("second"), "first\nsecond");
        assert_eq!(stop(""), "first\nsecond");
        let call = ToolCall {
            id: "c".into(),
            name: "Bash".into(),
            arguments: json!({"command": "ls"}),
        };
        assert_eq!(
            gemini_refusal(&call, "no"),
            ToolOutput::error("c", "Tool execution blocked: no")
        );
        let mut result = "out".to_owned();
        gemini_in_result(&mut result, "ctx");
        assert_eq!(result, "out\n\n<hook_context>ctx</hook_context>");
    }

    #[test]
    fn gemini_answers_in_claude_terms() {
        let g = Dialect::Gemini;
        let input = r#"{"tool_input": {"a": 1, "b": 2}}"#;
        let r = g.output(
            HookEvent::PreToolUse,
            input,
            reply(r#"{"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"b": 3}}}"#),
        );
        assert_eq!(
            text(&r)["hookSpecificOutput"],
            json!({"hookEventName": "PreToolUse", "updatedInput": {"a": 1, "b": 3}})
        );
        let r = g.output(
            HookEvent::PreToolUse,
            input,
            reply(r#"{"decision": "deny", "reason": "no"}"#),
        );
        assert_eq!(text(&r)["decision"], "block");
        // AfterTool: a block (its reason then replaces the result: `gemini_verdict`).
        let r = g.output(
            HookEvent::PostToolUse,
            input,
            reply(r#"{"decision": "deny", "reason": "hidden"}"#),
        );
        assert_eq!(text(&r)["decision"], "block");
        // JSON decides whatever the exit code (stderr's when stdout is empty); Claude Code's
        // own fields are not read.
        let mut r = reply("");
        r.code = Some(1);
        r.stderr =
            r#"{"hookSpecificOutput": {"permissionDecision": "deny", "updatedInput": {}}}"#.into();
        let r = g.output(HookEvent::PreToolUse, input, r);
        assert_eq!(r.code, Some(0));
        assert_eq!(
            text(&r)["hookSpecificOutput"],
            json!({"hookEventName": "PreToolUse"})
        );
        // Plain text with exit 2 blocks, stderr as it is.
        let mut r = reply("");
        r.code = Some(2);
        r.stderr = "no\n".into();
        let r = g.output(HookEvent::PreToolUse, input, r);
        assert_eq!(text(&r), json!({"decision": "block", "reason": "no"}));
        let same = Dialect::Claude.output(
            HookEvent::PreToolUse,
            input,
            reply("{\"decision\": \"deny\"}"),
        );
        assert_eq!(text(&same)["decision"], "deny");
    }
}
