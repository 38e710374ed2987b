//! Settings: the `hooks` of a settings file or value parsed into handlers, and the files
//! read for it (and, for reloads, their digests and ConfigChange sources).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{
    ConfigError, HookEvent,
    parsed::{Config, Definition},
};
#[cfg(feature = "http-hooks")]
use crate::http::HttpHook;
#[cfg(feature = "mcp")]
use crate::mcp::McpHook;
use crate::{
    dialect::{Dialect, SEQUENTIAL_GROUP},
    exec::Exec,
    handler::{Extras, Matcher},
    prompt::{self, ModelHook, ModelKind},
    rule::Rule,
    trust::Pin,
};
use tower_agent_layers::matcher::ToolMatcher;

/// The largest settings file read: 4 MiB.
pub(crate) const MAX_SETTINGS: usize = 4 << 20;

/// The digest of a settings file; `None` if it cannot be read as one (missing, not a regular
/// file — a FIFO is never opened —, over the settings files' size limit).
pub(crate) fn digest(path: &Path) -> Option<[u8; 32]> {
    let bytes = tower_agent_os::bounded::read_regular(path, MAX_SETTINGS as u64).ok()?;
    Some(Sha256::digest(&bytes).into())
}

/// The ConfigChange `source` of a settings file, by where it is: `policy_settings` (a
/// `managed-settings.json`), `local_settings` (a `settings.local.json`), `user_settings`
/// (under the user's `~/.claude`), else `project_settings`.
pub(crate) fn source_of(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == "managed-settings.json" {
        return "policy_settings";
    }
    if name == "settings.local.json" {
        return "local_settings";
    }
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude"));
    match home {
        Some(dir) if path.starts_with(&dir) => "user_settings",
        _ => "project_settings",
    }
}

/// Reads a settings file: a regular file of at most [`MAX_SETTINGS`] bytes of UTF-8 JSON.
pub(crate) fn load_file(
    path: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let value = read_json(path)?;
    load_settings(&value, &path.display().to_string(), project_dir, out)
}

/// Why the protocol event `name` is not fired, if it is one this crate does not fire (its
/// hooks load with a warning).
pub(crate) fn not_fired(name: &str) -> Option<&'static str> {
    HookEvent::NOT_FIRED
        .iter()
        .find_map(|&(event, reason)| (event == name).then_some(reason))
}

/// Reads a JSON file: a regular file of at most [`MAX_SETTINGS`] bytes of UTF-8 JSON.
pub(crate) fn read_json(path: &Path) -> Result<Value, ConfigError> {
    let file = path.display().to_string();
    let text = read_text(path)?;
    serde_json::from_str(&text)
        .map_err(|e| ConfigError::new(&file, "", format!("invalid JSON: {e}")))
}

/// A configuration file's text: a regular file of at most 4 MiB of UTF-8.
pub(crate) fn read_text(path: &Path) -> Result<String, ConfigError> {
    let file = path.display().to_string();
    let fail = |why: String| ConfigError::new(&file, "", why);
    // A FIFO would block the open forever; a huge file is no settings file.
    let bytes =
        tower_agent_os::bounded::read_regular(path, MAX_SETTINGS as u64).map_err(|e| match e {
            tower_agent_os::bounded::ReadError::TooLarge(_) => {
                fail(format!("the file is {e}; not a settings file"))
            }
            e => fail(format!("cannot read the file: {e}")),
        })?;
    String::from_utf8(bytes).map_err(|e| fail(format!("cannot read the file: not UTF-8 ({e})")))
}

/// Reads the `hooks` and `disableAllHooks` keys of a settings value.
pub(crate) fn load_settings(
    value: &Value,
    file: &str,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let err = |path: &str, message: String| ConfigError::new(file, path, message);
    let Value::Object(root) = value else {
        return Err(err("", "settings must be a JSON object".into()));
    };
    if flag(root, "disableAllHooks").map_err(|m| err("disableAllHooks", m.into()))? {
        out.disabled = true;
    }
    for (key, list) in [
        ("disabledHooks", &mut out.disabled_hooks),
        ("disabledPlugins", &mut out.disabled_plugins),
    ] {
        list.extend(names(root, key).map_err(|m| err(key, m.into()))?);
    }
    super::permissions::load(root, file, out)?;
    let hooks = match root.get("hooks") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(hooks)) => hooks,
        Some(_) => {
            return Err(err(
                "hooks",
                "must be an object of events (\"PreToolUse\": [...])".into(),
            ));
        }
    };
    for (name, groups) in hooks {
        let path = format!("hooks.{name}");
        let Some(event) = HookEvent::parse(name) else {
            if let Some(reason) = not_fired(name) {
                out.warn(format!(
                    "{file}: {path}: the {name} event is not fired by tower-agent ({reason}); its hooks are skipped"
                ));
                continue;
            }
            let known: Vec<&str> = HookEvent::ALL.iter().map(|e| e.name()).collect();
            return Err(err(
                &path,
                format!("unknown hook event `{name}` (known: {})", known.join(", ")),
            ));
        };
        let Value::Array(groups) = groups else {
            return Err(err(&path, "must be an array of matcher groups".into()));
        };
        if cfg!(not(feature = "mcp"))
            && matches!(event, HookEvent::Elicitation | HookEvent::ElicitationResult)
        {
            out.warn(format!(
                "{file}: {path}: the {name} event needs the `mcp` feature of tower-agent; its hooks are skipped"
            ));
            continue;
        }
        for (g, group) in groups.iter().enumerate() {
            let path = format!("{path}[{g}]");
            let Value::Object(group) = group else {
                return Err(err(
                    &path,
                    "must be an object with `matcher` and `hooks`".into(),
                ));
            };
            let matcher = match group.get("matcher") {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) => compile_matcher(p, event == HookEvent::FileChanged)
                    .map_err(|m| err(&format!("{path}.matcher"), m))?,
                Some(_) => return Err(err(&format!("{path}.matcher"), "must be a string".into())),
            };
            let handlers = match group.get("hooks") {
                Some(Value::Array(handlers)) => handlers,
                None => return Err(err(&path, "missing `hooks` (an array of handlers)".into())),
                Some(_) => {
                    return Err(err(
                        &format!("{path}.hooks"),
                        "must be an array of handlers".into(),
                    ));
                }
            };
            for (h, handler) in handlers.iter().enumerate() {
                let path = format!("{path}.hooks[{h}]");
                if let Some(def) = parse_handler(event, handler, file, &path, out)? {
                    out.add(event, matcher.clone(), def, project_dir);
                }
            }
        }
    }
    Ok(())
}

/// `None` for "*", "" (all).
///
/// A FileChanged matcher (`literal`) is a list of file names separated by `|`
/// (`.envrc|.env`), as in the protocol: the names the hooks watch.
pub(super) fn compile_matcher(pattern: &str, literal: bool) -> Result<Option<Matcher>, String> {
    if pattern.trim().is_empty() || pattern.trim() == "*" {
        return Ok(None);
    }
    let matcher = if literal {
        ToolMatcher::exact(pattern.split('|').map(str::trim).filter(|s| !s.is_empty()))
    } else {
        ToolMatcher::protocol(pattern).map_err(|e| e.to_string())?
    };
    Ok(Some(Matcher {
        pattern: pattern.to_owned(),
        matcher,
    }))
}

/// One handler object of `event`; `None` when it is skipped (with a warning).
fn parse_handler(
    event: HookEvent,
    value: &Value,
    file: &str,
    path: &str,
    out: &mut Config,
) -> Result<Option<Definition>, ConfigError> {
    let err = |field: &str, message: &str| {
        let path = if field.is_empty() {
            path.to_owned()
        } else {
            format!("{path}.{field}")
        };
        ConfigError::new(file, path, message)
    };
    let Value::Object(h) = value else {
        return Err(err("", "must be an object with `type` and `command`"));
    };
    let kind = handler_type(h, &err)?;
    let extras = extras(h, file, path, out)?;
    let timeout = timeout(h, "timeout").map_err(|m| err("timeout", m))?;
    let flag = |name: &str| flag(h, name).map_err(|m| err(name, m));
    let fail_closed =
        fails_closed(h, out, &format!("{file}: {path}")).map_err(|m| err("failClosed", m))?;
    let persistent = flag("persistent")?;
    let rewake = flag("asyncRewake")?;
    // `asyncRewake` implies `async`.
    let background = flag("async")? || rewake;
    if kind != "command" {
        if persistent {
            return Err(err(
                "persistent",
                "only `command` handlers can be persistent",
            ));
        }
        if background {
            out.warn(format!(
                "{file}: {path}: `async` / `asyncRewake` apply to `command` handlers only; ignored for this `{kind}` handler"
            ));
        }
        let exec = match kind {
            "http" => http_handler(event, h, file, path, out, &err)?,
            "mcp_tool" => mcp_handler(h, file, path, out, &err)?,
            "wasm" => super::wasm::wasm_handler(h, file, path, out, &err)?,
            _ => model_handler(event, kind, h, file, path, out, &err)?,
        };
        let Some(exec) = exec else {
            return Ok(None);
        };
        return Ok(Some(Definition {
            exec,
            timeout,
            fail_closed,
            persistent: false,
            background: false,
            rewake: false,
            origin: format!("{file}: {path}"),
            extras,
        }));
    }
    let Some(exec) = command_handler(h, file, path, out, &err)? else {
        return Ok(None);
    };
    if persistent && background {
        return Err(err("persistent", "a persistent handler cannot be `async`"));
    }
    Ok(Some(Definition {
        exec,
        timeout,
        fail_closed,
        persistent,
        background,
        rewake,
        origin: format!("{file}: {path}"),
        extras,
    }))
}

/// A handler's `type`: `command`, `http`, `mcp_tool`, `prompt` or `agent`.
fn handler_type<'h>(
    h: &'h Map<String, Value>,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<&'h str, ConfigError> {
    const TYPES: &str = "\"command\", \"http\", \"mcp_tool\", \"prompt\", \"agent\", \"wasm\"";
    match h.get("type") {
        Some(Value::String(t))
            if matches!(
                t.as_str(),
                "command" | "http" | "mcp_tool" | "prompt" | "agent" | "wasm"
            ) =>
        {
            Ok(t.as_str())
        }
        Some(Value::String(t)) => Err(err(
            "type",
            &format!("unknown handler type `{t}` (supported: {TYPES})"),
        )),
        None => Err(err("", &format!("missing `type` ({TYPES})"))),
        Some(_) => Err(err("type", &format!("must be a string ({TYPES})"))),
    }
}

/// What a `command` handler runs: `command` with `args` and no shell, or `command` in
/// `shell` (`sh` or `bash`). `None` (with a warning) for a shell tower-agent does not support.
fn command_handler(
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Option<Exec>, ConfigError> {
    let command = match h.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        Some(Value::String(_)) => return Err(err("command", "must not be empty")),
        None => return Err(err("", "missing `command`")),
        Some(_) => return Err(err("command", "must be a string")),
    };
    let args = match h.get("args") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut args = Vec::with_capacity(items.len());
            for (i, a) in items.iter().enumerate() {
                match a {
                    Value::String(a) => args.push(a.clone()),
                    _ => return Err(err(&format!("args[{i}]"), "must be a string")),
                }
            }
            Some(args)
        }
        Some(_) => return Err(err("args", "must be an array of strings")),
    };
    let shell = match h.get("shell") {
        None | Some(Value::Null) => "sh",
        Some(Value::String(s)) if s == "bash" => "bash",
        Some(Value::String(s)) if s == "sh" => "sh",
        Some(Value::String(s)) => {
            out.warn(format!(
                "{file}: {path}: shell `{s}` is not supported by tower-agent; this handler is skipped"
            ));
            return Ok(None);
        }
        Some(_) => return Err(err("shell", "must be a string")),
    };
    Ok(Some(match args {
        Some(args) => Exec::Argv {
            program: command,
            args,
        },
        None => Exec::Shell { shell, command },
    }))
}

/// The fields of an `http` handler (`url`, `headers`, `allowedEnvVars`); `None` when it is
/// skipped (SessionStart, or built without the `http-hooks` feature).
#[cfg_attr(not(feature = "http-hooks"), allow(unused_variables))]
fn http_handler(
    event: HookEvent,
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Option<Exec>, ConfigError> {
    if event == HookEvent::SessionStart {
        out.warn(format!(
            "{file}: {path}: `http` hooks do not run on SessionStart (as in Claude Code); this handler is skipped"
        ));
        return Ok(None);
    }
    #[cfg(not(feature = "http-hooks"))]
    {
        out.warn(format!(
            "{file}: {path}: `http` hooks need the `http-hooks` feature of tower-agent; this handler is skipped"
        ));
        Ok(None)
    }
    #[cfg(feature = "http-hooks")]
    {
        let url = match h.get("url") {
            Some(Value::String(u)) => u.trim(),
            None => return Err(err("", "missing `url`")),
            Some(_) => return Err(err("url", "must be a string")),
        };
        match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => {
                return Err(err(
                    "url",
                    &format!("must be an http or https URL, not {}", u.scheme()),
                ));
            }
            Err(e) => return Err(err("url", &format!("not a valid URL: {e}"))),
        }
        let headers = match h.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => {
                let mut headers = Vec::with_capacity(map.len());
                for (name, value) in map {
                    let field = format!("headers.{name}");
                    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        return Err(err(&field, "not a valid header name"));
                    }
                    match value {
                        Value::String(v) => headers.push((name.clone(), v.clone())),
                        _ => return Err(err(&field, "must be a string")),
                    }
                }
                headers
            }
            Some(_) => return Err(err("headers", "must be an object of header values")),
        };
        let allowed_env = match h.get("allowedEnvVars") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) => {
                let mut allowed = Vec::with_capacity(names.len());
                for (i, n) in names.iter().enumerate() {
                    match n {
                        Value::String(n) => allowed.push(n.clone()),
                        _ => {
                            return Err(err(
                                &format!("allowedEnvVars[{i}]"),
                                "must be a variable name",
                            ));
                        }
                    }
                }
                allowed
            }
            Some(_) => {
                return Err(err("allowedEnvVars", "must be an array of variable names"));
            }
        };
        Ok(Some(Exec::Http(Arc::new(HttpHook {
            url: url.to_owned(),
            headers,
            allowed_env,
        }))))
    }
}

/// The fields of an `mcp_tool` handler (`server`, `tool`, `input`); `None` when it is skipped
/// (no MCP servers given, or built without the `mcp` feature).
#[cfg_attr(not(feature = "mcp"), allow(unused_variables))]
fn mcp_handler(
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Option<Exec>, ConfigError> {
    let name = |field: &str| match h.get(field) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err(err(field, "must not be empty")),
        None | Some(Value::Null) => Err(err("", &format!("missing `{field}`"))),
        Some(_) => Err(err(field, "must be a string")),
    };
    let server = name("server")?;
    let tool = name("tool")?;
    let input = match h.get("input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(err("input", "must be an object of the tool's arguments")),
    };
    #[cfg(not(feature = "mcp"))]
    {
        out.warn(format!(
            "{file}: {path}: `mcp_tool` hooks need the `mcp` feature of tower-agent; this handler is skipped"
        ));
        Ok(None)
    }
    #[cfg(feature = "mcp")]
    {
        let Some(servers) = out.mcp.clone() else {
            out.warn(format!(
                "{file}: {path}: `mcp_tool` hooks need MCP servers (CommandHooksBuilder::mcp); this handler is skipped"
            ));
            return Ok(None);
        };
        Ok(Some(Exec::Mcp(Arc::new(McpHook {
            server,
            tool,
            input,
            servers,
        }))))
    }
}

/// The fields of a `prompt` or `agent` handler (`prompt`, `model`, `continueOnBlock`);
/// `None` when it is skipped (an event that does not run them, or no model service).
fn model_handler(
    event: HookEvent,
    kind: &str,
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
    err: &dyn Fn(&str, &str) -> ConfigError,
) -> Result<Option<Exec>, ConfigError> {
    let kind = if kind == "agent" {
        ModelKind::Agent
    } else {
        ModelKind::Prompt
    };
    let name = kind.name();
    let text = match h.get("prompt") {
        Some(Value::String(p)) if !p.trim().is_empty() => p.clone(),
        Some(Value::String(_)) => return Err(err("prompt", "must not be empty")),
        None => return Err(err("", "missing `prompt`")),
        Some(_) => return Err(err("prompt", "must be a string")),
    };
    let model = match h.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if !m.trim().is_empty() => Some(m.clone()),
        Some(_) => return Err(err("model", "must be a model name")),
    };
    let continue_on_block = match kind {
        ModelKind::Prompt => flag(h, "continueOnBlock").map_err(|m| err("continueOnBlock", m))?,
        ModelKind::Agent => false,
    };
    if !prompt::supports(event) {
        out.warn(format!(
            "{file}: {path}: `{name}` hooks do not run on {event} (as in Claude Code); this handler is skipped"
        ));
        return Ok(None);
    }
    let Some(service) = out.model.clone() else {
        out.warn(format!(
            "{file}: {path}: `{name}` hooks need a model service (CommandHooksBuilder::model); this handler is skipped"
        ));
        return Ok(None);
    };
    Ok(Some(Exec::Model(Arc::new(ModelHook::new(
        kind,
        text,
        model,
        continue_on_block,
        service,
    )))))
}

/// The `if` rule and the `sha256` pin of a handler object.
pub(super) fn extras(
    h: &Map<String, Value>,
    file: &str,
    path: &str,
    out: &mut Config,
) -> Result<Extras, ConfigError> {
    let mut extras = Extras::default();
    match h.get("if") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            let (rule, warning) = Rule::parse(text, &out.project_dir)
                .map_err(|m| ConfigError::new(file, format!("{path}.if"), m))?;
            if let Some(w) = warning {
                out.warn(format!("{file}: {path}.if: {w}"));
            }
            extras.condition = Some(Arc::new(rule));
        }
        Some(_) => {
            return Err(ConfigError::new(
                file,
                format!("{path}.if"),
                "must be a permission rule string, such as \"Bash(git *)\"",
            ));
        }
    }
    match h.get("sha256") {
        None | Some(Value::Null) => {}
        Some(Value::String(hex)) => {
            extras.pin =
                Some(Arc::new(Pin::parse(hex).map_err(|m| {
                    ConfigError::new(file, format!("{path}.sha256"), m)
                })?));
        }
        Some(_) => {
            return Err(ConfigError::new(
                file,
                format!("{path}.sha256"),
                "must be a hex SHA-256 string",
            ));
        }
    }
    if let Some(Value::String(c)) = h.get("command") {
        extras.written = Some(c.clone());
    }
    if out.source.dialect == Dialect::Gemini
        && let Some(id) = h.get(SEQUENTIAL_GROUP).and_then(Value::as_u64)
    {
        extras.sequential = u32::try_from(id).ok();
    }
    if let Some(Value::String(n)) = h.get("name") {
        extras.name = Some(n.clone());
    }
    Ok(extras)
}

/// An array of strings (absent: empty).
fn names(h: &Map<String, Value>, key: &str) -> Result<Vec<String>, &'static str> {
    match h.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or("must be an array of strings")
            })
            .collect(),
        Some(_) => Err("must be an array of strings"),
    }
}

/// A `true`/`false` field (absent: `false`).
pub(super) fn flag(h: &Map<String, Value>, name: &str) -> Result<bool, &'static str> {
    match h.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err("must be true or false"),
    }
}

/// Whether a handler fails closed: a hook that cannot start, times out, exits with an
/// unexpected code or answers garbage blocks what it guards instead of letting it through.
/// Claude Code spells it `"onFailure": "block"` (2.1.295, command and http handlers); this
/// crate's older `"failClosed": true` is the same switch. Either one is enough. An `onFailure`
/// value other than `"block"` is read as `"block"` with a warning: a spelling this crate does
/// not know must not turn a guard that meant to block into one that lets everything through.
pub(super) fn fails_closed(
    h: &Map<String, Value>,
    out: &mut Config,
    at: &str,
) -> Result<bool, &'static str> {
    let flag = flag(h, "failClosed")?;
    let on_failure = match h.get("onFailure") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "block" => true,
        Some(other) => {
            out.warn(format!(
                "{at}: `onFailure` {other} is not known (Claude Code's value is \"block\"); the hook fails closed"
            ));
            true
        }
    };
    Ok(flag || on_failure)
}

/// A `timeout` in seconds: a positive, finite number.
pub(super) fn timeout(
    h: &Map<String, Value>,
    name: &str,
) -> Result<Option<Duration>, &'static str> {
    const MESSAGE: &str = "must be a positive number of seconds";
    match h.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(MESSAGE),
        },
        Some(_) => Err(MESSAGE),
    }
}
