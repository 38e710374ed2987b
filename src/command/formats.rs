//! Other tools' hook configurations: Gemini CLI (`.gemini/settings.json`) and Codex
//! (`hooks.json`), mapped onto this crate's events.

use std::{borrow::Cow, path::Path, sync::Arc};

use serde_json::{Map, Value, json};

use super::{
    config::{self, Config, ConfigError, HookEvent},
    plugin::SourceContext,
    process::{Reply, Stdout, Verdict},
};

/// The format a handler's configuration was written in: what its input names and what its
/// answers mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) enum Dialect {
    /// Claude Code (and hooks directories).
    #[default]
    Claude,
    /// Gemini CLI: its event names in the input, its output fields mapped.
    Gemini,
    /// Codex: Claude Code's protocol.
    Codex,
}

/// The field the Gemini CLI loader gives each handler of a `"sequential": true` group: the
/// group's id. Read from Gemini CLI sources only (see `config::settings::extras`).
pub(crate) const SEQUENTIAL_GROUP: &str = "__tower_agent_sequential_group";

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
    with_source(out, Dialect::Codex, |out| {
        let hooks = only_known_events(&hooks, &file, out).into_owned();
        config::load_settings(&hooks, &file, project_dir, out)
    })
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

/// The events Codex 0.169.0 fires, and the fields of each one's input: the `properties` of
/// its `<event>.command.input` JSON schemas (`additionalProperties: false`), which the
/// `codex` program carries. Every input also has `session_id`, `transcript_path`, `cwd` and
/// `hook_event_name`; `agent_id` and `agent_type` are kept where a subagent's run has them.
const CODEX: &[(HookEvent, &[&str])] = &[
    (HookEvent::SessionStart, &["model", "permission_mode", "source"]),
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
pub(crate) fn codex_fires(event: HookEvent) -> bool {
    CODEX.iter().any(|(e, _)| *e == event)
}

/// What the run tells a Codex hook beyond the event's own fields.
pub(crate) struct CodexRun<'a> {
    /// The run's model ([`ModelSettings::model`](crate::model::ModelSettings::model)).
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
fn codex_output(event: HookEvent, mut reply: Reply) -> Reply {
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

/// A Codex handler's verdict as Codex acts on it: a PostToolUse block's reason replaces the
/// call's result (where Claude Code's goes next to it).
pub(crate) fn codex_verdict(event: HookEvent, verdict: &mut Verdict) {
    if event == HookEvent::PostToolUse {
        verdict.replace_output = verdict.block.take();
    }
}

/// Applies [`codex_output`]'s rules to a JSON answer; whether it changed.
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

impl Dialect {
    /// The input a handler of this dialect gets: for Gemini, `hook_event_name` is its event
    /// name, `timestamp` is added, AfterTool's `tool_response` is `{llmContent,
    /// returnDisplay}` and AfterAgent has `prompt_response`.
    pub(crate) fn input<'a>(self, event: HookEvent, input: &'a str) -> Cow<'a, str> {
        if self != Dialect::Gemini {
            return Cow::Borrowed(input);
        }
        let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(input) else {
            return Cow::Borrowed(input);
        };
        if let Some(name) = gemini_name(event) {
            map.insert("hook_event_name".into(), name.into());
        }
        map.insert("timestamp".into(), crate::context::timestamp().into());
        match event {
            HookEvent::PostToolUse => {
                if let Some(response) = map.remove("tool_response") {
                    let text = match response {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
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
                map.entry("prompt").or_insert_with(|| "".into());
            }
            _ => {}
        }
        Cow::Owned(Value::Object(map).to_string())
    }

    /// A Gemini answer in Claude Code's terms: `decision: "deny"` is a block (on AfterTool,
    /// its reason replaces the tool's output), `decision: "allow"` on BeforeTool allows,
    /// `hookSpecificOutput.tool_input` is merged into the call's arguments
    /// (`updatedInput`), `hookSpecificOutput.tool_output` replaces the output.
    pub(crate) fn output(self, event: HookEvent, input: &str, mut reply: Reply) -> Reply {
        if self == Dialect::Codex {
            return codex_output(event, reply);
        }
        if self != Dialect::Gemini || reply.code != Some(0) {
            return reply;
        }
        let Stdout::Text(text) = &reply.stdout else {
            return reply;
        };
        let Ok(Value::Object(mut out)) = serde_json::from_str::<Value>(text.trim()) else {
            return reply;
        };
        let mut specific = match out.remove("hookSpecificOutput") {
            Some(Value::Object(s)) => s,
            _ => Map::new(),
        };
        specific.insert("hookEventName".into(), event.name().into());
        let decision = out
            .get("decision")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let reason = out.get("reason").cloned().unwrap_or_default();
        match (event, decision.as_deref()) {
            (HookEvent::PostToolUse, Some("deny" | "block")) => {
                out.remove("decision");
                specific.insert("updatedToolOutput".into(), reason);
            }
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
        let r = g.output(
            HookEvent::PostToolUse,
            input,
            reply(r#"{"decision": "deny", "reason": "hidden"}"#),
        );
        assert_eq!(
            text(&r)["hookSpecificOutput"]["updatedToolOutput"],
            "hidden"
        );
        assert!(text(&r).get("decision").is_none());
        let same = Dialect::Claude.output(
            HookEvent::PreToolUse,
            input,
            reply("{\"decision\": \"deny\"}"),
        );
        assert_eq!(text(&same)["decision"], "deny");
    }
}
