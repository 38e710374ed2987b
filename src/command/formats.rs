//! Other tools' hook configurations: Gemini CLI (`.gemini/settings.json`) and Codex
//! (`hooks.json`), mapped onto this crate's events.

use std::{borrow::Cow, path::Path, sync::Arc};

use serde_json::{Map, Value, json};

use super::{
    config::{self, Config, ConfigError, HookEvent},
    plugin::SourceContext,
    process::{Reply, Stdout},
};

mod codex;

pub(crate) use self::codex::{CodexRun, codex_input, codex_verdict, load_codex};

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
            return codex::output(event, reply);
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
