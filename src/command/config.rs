//! Configuration: settings files and hooks directories, read into handlers per event.

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Map, Value};

#[cfg(feature = "http-hooks")]
use super::http::HttpHook;
#[cfg(feature = "mcp")]
use super::mcp::McpHook;
use super::{
    persistent::Persistent,
    prompt::{self, ModelHook, ModelKind},
    rule::Rule,
};
use crate::{layers::matcher::ToolMatcher, model::BoxModelService};

/// The events command hooks can handle, by their protocol names.
///
/// [`HookEvent::parse`] also accepts the Gemini CLI names `BeforeModel` / `AfterModel` (which
/// are the names here) and the short aliases `agent-start` (SessionStart),
/// `step-start` (BeforeModel), `tool-call-start` (PreToolUse), `tool-call-end` (PostToolUse)
/// and `agent-stop` (Stop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HookEvent {
    /// Before a tool call: allow, deny, ask, rewrite the input.
    PreToolUse,
    /// After a tool call that succeeded: add context, replace the output.
    PostToolUse,
    /// After a tool call that failed: add context.
    PostToolUseFailure,
    /// Before the prompt enters the thread: block, add context.
    UserPromptSubmit,
    /// When the agent is about to finish: make it go on.
    Stop,
    /// When a subagent is about to finish: send it back to work.
    SubagentStop,
    /// Once per run, before anything else: add context, stop the run.
    SessionStart,
    /// Once per run, after it ended: observe.
    SessionEnd,
    /// Before the summarize layer compacts the history: veto.
    PreCompact,
    /// Each warning of a run: observe.
    Notification,
    /// Before each model call: replace the request, or answer in the model's place.
    BeforeModel,
    /// After each model call: replace the response.
    AfterModel,
    /// A subagent is about to run: add context to its conversation.
    SubagentStart,
    /// `write_todos` adds a todo: block it.
    TaskCreated,
    /// `write_todos` marks a todo done: block it.
    TaskCompleted,
    /// The run ends on a model error: observe.
    StopFailure,
    /// A memory file was loaded: observe.
    InstructionsLoaded,
    /// An assistant message with text is complete: replace what is displayed.
    MessageDisplay,
    /// The history was compacted: observe.
    PostCompact,
    /// When a call needs approval (a PreToolUse `ask`), before the
    /// [`Approval`](crate::layers::hooks::Approval) service: allow or deny in its place.
    PermissionRequest,
    /// When the approval path denies a call on its own (no approval service, or it failed):
    /// observe, or tell the model it may retry.
    PermissionDenied,
    /// After every call of a step resolved, before the next model call: add context, stop the
    /// loop.
    PostToolBatch,
    /// An MCP server asks the user for input during a tool call, before the
    /// [`Elicitation`](crate::mcp::client::Elicitation) service: answer in its place, or
    /// decline. Fired by [`CommandHooks::elicitation_layer`](super::CommandHooks::elicitation_layer)
    /// (feature `mcp`).
    Elicitation,
    /// After the user answered an MCP elicitation: override the answer, or decline. Fired by
    /// [`CommandHooks::elicitation_layer`](super::CommandHooks::elicitation_layer) (feature
    /// `mcp`).
    ElicitationResult,
}

/// Protocol events this crate does not fire: configuring them is not an error (settings
/// files written for Claude Code load unchanged); their handlers are skipped with a warning.
const NOT_FIRED: &[&str] = &[
    "Setup",
    "UserPromptExpansion",
    "TeammateIdle",
    "ConfigChange",
    "CwdChanged",
    "DirectoryAdded",
    "FileChanged",
    "WorktreeCreate",
    "WorktreeRemove",
];

impl HookEvent {
    /// Every event, in the order of this enum.
    pub const ALL: [HookEvent; 24] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
        HookEvent::BeforeModel,
        HookEvent::AfterModel,
        HookEvent::SubagentStart,
        HookEvent::TaskCreated,
        HookEvent::TaskCompleted,
        HookEvent::StopFailure,
        HookEvent::InstructionsLoaded,
        HookEvent::MessageDisplay,
        HookEvent::PostCompact,
        HookEvent::PermissionRequest,
        HookEvent::PermissionDenied,
        HookEvent::PostToolBatch,
        HookEvent::Elicitation,
        HookEvent::ElicitationResult,
    ];

    /// The protocol name (`hook_event_name` in a hook's input).
    pub const fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
            HookEvent::BeforeModel => "BeforeModel",
            HookEvent::AfterModel => "AfterModel",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::TaskCreated => "TaskCreated",
            HookEvent::TaskCompleted => "TaskCompleted",
            HookEvent::StopFailure => "StopFailure",
            HookEvent::InstructionsLoaded => "InstructionsLoaded",
            HookEvent::MessageDisplay => "MessageDisplay",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::PermissionDenied => "PermissionDenied",
            HookEvent::PostToolBatch => "PostToolBatch",
            HookEvent::Elicitation => "Elicitation",
            HookEvent::ElicitationResult => "ElicitationResult",
        }
    }

    /// The event of a protocol name or an alias (see the type docs).
    pub fn parse(name: &str) -> Option<HookEvent> {
        let alias = match name {
            "agent-start" => Some(HookEvent::SessionStart),
            "step-start" => Some(HookEvent::BeforeModel),
            "tool-call-start" => Some(HookEvent::PreToolUse),
            "tool-call-end" => Some(HookEvent::PostToolUse),
            "agent-stop" => Some(HookEvent::Stop),
            _ => None,
        };
        alias.or_else(|| Self::ALL.into_iter().find(|e| e.name() == name))
    }

    /// The timeout of a `command`, `http` or `mcp_tool` handler that sets none, as in the
    /// Claude Code hooks reference: 30 s for UserPromptSubmit, 10 s for MessageDisplay, 1.5 s for SessionEnd
    /// (whose handlers share one budget, see
    /// [`SESSION_END_MAX_BUDGET`](super::SESSION_END_MAX_BUDGET)), else 600 s.
    pub const fn default_timeout(self) -> Duration {
        match self {
            HookEvent::UserPromptSubmit => Duration::from_secs(30),
            HookEvent::MessageDisplay => Duration::from_secs(10),
            HookEvent::SessionEnd => Duration::from_millis(1500),
            _ => Duration::from_secs(600),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The events whose input has `tool_name` / `tool_input`, where `if` rules apply.
    pub(crate) fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::PostToolUseFailure
                | HookEvent::PermissionRequest
                | HookEvent::PermissionDenied
        )
    }

    /// Whether matchers apply (tool events, SubagentStop, SessionStart, SessionEnd,
    /// PreCompact, Notification); others ignore them, as in the protocol.
    pub(crate) fn has_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::BeforeModel
                | HookEvent::AfterModel
                | HookEvent::TaskCreated
                | HookEvent::TaskCompleted
                | HookEvent::MessageDisplay
                | HookEvent::PostToolBatch
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ===== errors =====

/// A configuration that cannot be loaded: names the file (or origin) and the JSON path in it.
///
/// Its `Display` is `file: path: message`, for example
/// `settings.json: hooks.PreToolUse[0].hooks[1].timeout: must be a positive number of seconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    file: String,
    path: String,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            file: file.into(),
            path: path.into(),
            message: message.into(),
        }
    }

    /// The file (or the origin name given to
    /// [`settings_json`](super::CommandHooksBuilder::settings_json)).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The JSON path of the bad value (`hooks.PreToolUse[0].matcher`); empty when the whole
    /// file is at fault.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

// ===== handlers =====

/// How a handler is started.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Exec {
    /// `{shell} -c command`.
    Shell {
        shell: &'static str,
        command: String,
    },
    /// The program with these arguments, no shell.
    Argv { program: String, args: Vec<String> },
    /// POST the input to a URL (`type: "http"`).
    #[cfg(feature = "http-hooks")]
    Http(Arc<HttpHook>),
    /// Ask a model or a subagent (`type: "prompt"` / `"agent"`).
    Model(Arc<ModelHook>),
    /// Call a tool of a connected MCP server (`type: "mcp_tool"`).
    #[cfg(feature = "mcp")]
    Mcp(Arc<McpHook>),
}

impl Exec {
    /// How logs and warnings name the handler.
    pub(crate) fn label(&self) -> String {
        match self {
            Exec::Shell { command, .. } => command.clone(),
            Exec::Argv { program, args } if args.is_empty() => program.clone(),
            Exec::Argv { program, args } => format!("{program} {}", args.join(" ")),
            #[cfg(feature = "http-hooks")]
            Exec::Http(hook) => hook.url.clone(),
            Exec::Model(hook) => hook.label(),
            #[cfg(feature = "mcp")]
            Exec::Mcp(hook) => hook.label(),
        }
    }
}

/// One command handler.
#[derive(Debug)]
pub(crate) struct Handler {
    pub(crate) exec: Exec,
    pub(crate) timeout: Option<Duration>,
    pub(crate) fail_closed: bool,
    /// Runs in the background: never blocks, its answer is only logged.
    pub(crate) background: bool,
    /// `asyncRewake`: in the background, and an exit 2 reminds the model of its stderr.
    pub(crate) rewake: bool,
    /// The long-lived process of a persistent handler.
    pub(crate) persistent: Option<Arc<Persistent>>,
    /// Where it was defined (`settings.json: hooks.PreToolUse[0].hooks[1]`).
    pub(crate) origin: String,
    pub(crate) label: String,
    /// What else a handler carries: its `if` rule, plugin, environment, trust pin, format.
    pub(crate) extras: Extras,
}

/// The parts of a handler this crate adds to the base command handler: its `if` rule
/// ([`Rule`]), the plugin it came from, the environment it gets, its trust pin and the
/// configuration format it was written for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Extras {
    /// The `if` rule: the handler runs only for tool calls it matches.
    pub(crate) condition: Option<Arc<Rule>>,
    /// The plugin (its plugin.json name) the handler came from; `None`: settings.
    pub(crate) plugin: Option<Arc<str>>,
    /// Extra environment variables (`CLAUDE_PLUGIN_ROOT`, `CLAUDE_PLUGIN_DATA`).
    pub(crate) env: Arc<[(String, String)]>,
    /// The trusted hash of the script the handler runs.
    pub(crate) pin: Option<Arc<Pin>>,
    /// The command as written, before any substitution (a name for `disabledHooks`).
    pub(crate) written: Option<String>,
    /// The handler's `name` field (Gemini CLI names its hooks), also a name for
    /// `disabledHooks`.
    pub(crate) name: Option<String>,
    /// The format the handler's configuration was written in.
    pub(crate) dialect: Dialect,
}

/// The configuration format of a handler: see [`super::formats`].
pub(crate) use super::formats::Dialect;
/// A trusted-hash pin: see [`super::trust`].
pub(crate) use super::trust::Pin;

/// A handler of one event and the matchers under which it was configured (`None`: all).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) handler: Arc<Handler>,
    pub(crate) matchers: Vec<Option<Matcher>>,
}

/// A compiled matcher and its pattern (for `Debug`).
#[derive(Clone)]
pub(crate) struct Matcher {
    pub(crate) pattern: String,
    pub(crate) matcher: ToolMatcher,
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.pattern, f)
    }
}

impl Entry {
    /// Whether the handler runs for `subject` (the tool name, source, trigger …).
    pub(crate) fn matches(&self, subject: &str) -> bool {
        self.matchers.iter().any(|m| match m {
            None => true,
            Some(m) => m.matcher.matches_name(subject),
        })
    }
}

impl Handler {
    /// Whether the handler's `if` rule (if any) lets it run for this input (the tool
    /// events' `tool_name` and `tool_input`). No rule: it runs.
    pub(crate) fn allows(&self, input: &Map<String, Value>) -> bool {
        let Some(rule) = &self.extras.condition else {
            return true;
        };
        let tool = input.get("tool_name").and_then(Value::as_str).unwrap_or("");
        rule.matches(tool, input.get("tool_input").unwrap_or(&Value::Null))
    }
}

/// The dedup key of a handler: what makes two definitions the same handler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    exec: Exec,
    timeout_ms: Option<u128>,
    persistent: bool,
    background: bool,
    rewake: bool,
    /// The `if` rule as written.
    condition: Option<String>,
    /// A plugin's copy of a handler stays separate from the settings' copy.
    plugin: Option<Arc<str>>,
    sha256: Option<String>,
    dialect: Dialect,
}

/// What a handler definition says, before dedup.
struct Definition {
    exec: Exec,
    timeout: Option<Duration>,
    fail_closed: bool,
    persistent: bool,
    background: bool,
    rewake: bool,
    origin: String,
    extras: Extras,
}

/// The handlers of every event, in configuration order, deduplicated.
#[derive(Debug, Default)]
pub(crate) struct Config {
    pub(crate) events: [Vec<Entry>; HookEvent::ALL.len()],
    pub(crate) warnings: Vec<String>,
    pub(crate) disabled: bool,
    /// Dedup: (event, key) → index in `events[event]`.
    seen: HashMap<(HookEvent, Key), usize>,
    /// Persistent processes, shared by every event a command handles.
    processes: HashMap<Exec, Arc<Persistent>>,
    /// The model service of `prompt` and `agent` handlers.
    pub(crate) model: Option<BoxModelService>,
    /// The MCP servers of `mcp_tool` handlers.
    #[cfg(feature = "mcp")]
    pub(crate) mcp: Option<crate::mcp::client::McpServers>,
    /// Where handlers run: `if` path rules anchor here.
    pub(crate) project_dir: PathBuf,
    /// The source being loaded (a plugin, another tool's format).
    pub(crate) source: super::plugin::SourceContext,
    /// Names from `disabledHooks` (commands) and `disabledPlugins` (plugin names).
    pub(crate) disabled_hooks: Vec<String>,
    pub(crate) disabled_plugins: Vec<String>,
}

impl Config {
    pub(crate) fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    fn add(
        &mut self,
        event: HookEvent,
        matcher: Option<Matcher>,
        mut def: Definition,
        project_dir: &Path,
    ) {
        if def.extras.condition.is_some() && !event.is_tool_event() {
            // hooks.md § "Common fields": on other events, a hook with `if` never runs.
            self.warn(format!(
                "{}: `if` is only evaluated on tool events; this {event} handler never runs",
                def.origin
            ));
            return;
        }
        self.source.apply(&mut def.exec, &mut def.extras);
        if let Err(why) = super::trust::resolve(&def.exec, project_dir, &mut def.extras) {
            self.warn(format!("{}: {why}; this handler is skipped", def.origin));
            return;
        }
        let key = Key {
            exec: def.exec.clone(),
            timeout_ms: def.timeout.map(|t| t.as_millis()),
            persistent: def.persistent,
            background: def.background,
            rewake: def.rewake,
            condition: def.extras.condition.as_ref().map(|r| r.text().to_owned()),
            plugin: def.extras.plugin.clone(),
            sha256: def.extras.pin.as_ref().map(|p| p.hex().to_owned()),
            dialect: def.extras.dialect,
        };
        let matcher = matcher.filter(|_| event.has_matcher());
        if let Some(&i) = self.seen.get(&(event, key.clone())) {
            // The same handler again: it runs once, under either matcher; fail-closed if
            // either definition is.
            let entry = &mut self.events[event.index()][i];
            if def.fail_closed && !entry.handler.fail_closed {
                let mut handler = clone_handler(&entry.handler);
                handler.fail_closed = true;
                entry.handler = Arc::new(handler);
            }
            if !entry.matchers.iter().any(Option::is_none) {
                match matcher {
                    None => entry.matchers = vec![None],
                    Some(m) => entry.matchers.push(Some(m)),
                }
            }
            return;
        }
        let env = Arc::clone(&def.extras.env);
        let persistent = def.persistent.then(|| {
            Arc::clone(self.processes.entry(def.exec.clone()).or_insert_with(|| {
                Arc::new(Persistent::new(def.exec.clone(), project_dir).with_env(env))
            }))
        });
        let label = def.exec.label();
        let handler = Handler {
            exec: def.exec,
            timeout: def.timeout,
            fail_closed: def.fail_closed,
            background: def.background,
            rewake: def.rewake,
            persistent,
            origin: def.origin,
            label,
            extras: def.extras,
        };
        let list = &mut self.events[event.index()];
        self.seen.insert((event, key), list.len());
        list.push(Entry {
            handler: Arc::new(handler),
            matchers: vec![matcher],
        });
    }
}

impl Config {
    /// After every source: drops the handlers disabled by name (`disabledHooks`,
    /// `disabledPlugins`, and the builder's lists), pins the builder's trusted scripts, and
    /// reports pinned handlers whose script changed (they stay, and are skipped when they
    /// would run).
    pub(crate) fn finish(&mut self, trusted: &[(PathBuf, String)]) -> Result<(), ConfigError> {
        let hooks = std::mem::take(&mut self.disabled_hooks);
        let plugins = std::mem::take(&mut self.disabled_plugins);
        let mut warnings = Vec::new();
        for list in &mut self.events {
            list.retain(|e| {
                let x = &e.handler.extras;
                let by_plugin = x
                    .plugin
                    .as_deref()
                    .is_some_and(|p| plugins.iter().any(|n| n == p));
                let by_name = hooks.iter().any(|n| {
                    *n == e.handler.label
                        || x.written.as_deref() == Some(n.as_str())
                        || x.name.as_deref() == Some(n.as_str())
                });
                !(by_plugin || by_name)
            });
            for entry in list.iter_mut() {
                for (script, hex) in trusted {
                    let mut extras = entry.handler.extras.clone();
                    let pinned = super::trust::pin_if_script(
                        &entry.handler.exec,
                        &self.project_dir,
                        &mut extras,
                        script,
                        hex,
                    )
                    .map_err(|m| ConfigError::new("trust", script.display().to_string(), m))?;
                    if pinned {
                        let mut handler = clone_handler(&entry.handler);
                        handler.extras = extras;
                        entry.handler = Arc::new(handler);
                    }
                }
                if let Some(pin) = &entry.handler.extras.pin
                    && let Err(why) = pin.verify(&self.project_dir)
                {
                    warnings.push(format!(
                        "{}: hook `{}` is skipped: {why}",
                        entry.handler.origin, entry.handler.label
                    ));
                }
            }
        }
        self.disabled_hooks = hooks;
        self.disabled_plugins = plugins;
        for w in warnings {
            self.warn(w);
        }
        Ok(())
    }
}

fn clone_handler(h: &Handler) -> Handler {
    Handler {
        exec: h.exec.clone(),
        timeout: h.timeout,
        fail_closed: h.fail_closed,
        background: h.background,
        rewake: h.rewake,
        persistent: h.persistent.clone(),
        origin: h.origin.clone(),
        label: h.label.clone(),
        extras: h.extras.clone(),
    }
}

// ===== settings =====

/// The largest settings file read: 4 MiB.
pub(crate) const MAX_SETTINGS: usize = 4 << 20;

/// Reads a settings file: a regular file of at most [`MAX_SETTINGS`] bytes of UTF-8 JSON.
pub(crate) fn load_file(
    path: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let value = read_json(path)?;
    load_settings(&value, &path.display().to_string(), project_dir, out)
}

/// Whether `name` is a protocol event this crate does not fire (loaded with a warning).
pub(crate) fn is_not_fired(name: &str) -> bool {
    NOT_FIRED.contains(&name)
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
    let bytes = crate::bounded::read_regular(path, MAX_SETTINGS as u64).map_err(|e| match e {
        crate::bounded::ReadError::TooLarge(_) => {
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
            if NOT_FIRED.contains(&name.as_str()) {
                out.warn(format!(
                    "{file}: {path}: the {name} event is not fired by tower-agent; its hooks are skipped"
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
                Some(Value::String(p)) => {
                    compile_matcher(p).map_err(|m| err(&format!("{path}.matcher"), m))?
                }
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
fn compile_matcher(pattern: &str) -> Result<Option<Matcher>, String> {
    if pattern.trim().is_empty() || pattern.trim() == "*" {
        return Ok(None);
    }
    let matcher = ToolMatcher::protocol(pattern).map_err(|e| e.to_string())?;
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
    let fail_closed = flag("failClosed")?;
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
    const TYPES: &str = "\"command\", \"http\", \"mcp_tool\", \"prompt\", \"agent\"";
    match h.get("type") {
        Some(Value::String(t))
            if matches!(
                t.as_str(),
                "command" | "http" | "mcp_tool" | "prompt" | "agent"
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
fn extras(
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
fn flag(h: &Map<String, Value>, name: &str) -> Result<bool, &'static str> {
    match h.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err("must be true or false"),
    }
}

/// A `timeout` in seconds: a positive, finite number.
fn timeout(h: &Map<String, Value>, name: &str) -> Result<Option<Duration>, &'static str> {
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

// ===== hooks directory =====

/// How long a hooks-directory executable may take to describe itself.
pub(crate) const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks each executable of `dir` (sorted by name; hidden and non-executable files skipped)
/// what it handles.
pub(crate) fn load_dir(
    dir: &Path,
    project_dir: &Path,
    out: &mut Config,
) -> Result<(), ConfigError> {
    let dir_name = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        ConfigError::new(
            &dir_name,
            "",
            format!("cannot read the hooks directory: {e}"),
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            !hidden && is_executable(p)
        })
        .collect();
    files.sort();
    for file in files {
        describe(&file, project_dir, out)?;
    }
    Ok(())
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Runs `file` with `TOWER_AGENT_HOOK_ACTION=describe` and adds what it handles.
fn describe(file: &Path, project_dir: &Path, out: &mut Config) -> Result<(), ConfigError> {
    let name = file.display().to_string();
    let err = |path: &str, message: String| ConfigError::new(&name, path, message);
    let program = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let program = program.to_string_lossy().into_owned();
    let exec = Exec::Argv {
        program,
        args: Vec::new(),
    };
    let output = super::process::run_sync(
        &exec,
        super::process::Dirs::project(project_dir),
        "describe",
        DESCRIBE_TIMEOUT,
    )
    .map_err(|e| err("describe", e))?;
    if output.code != Some(0) {
        let status = match output.code {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_owned(),
        };
        let detail = output.stderr.lines().next().unwrap_or("").trim().to_owned();
        return Err(err(
            "describe",
            if detail.is_empty() {
                status
            } else {
                format!("{status}: {detail}")
            },
        ));
    }
    let value: Value = serde_json::from_str(output.stdout.trim()).map_err(|e| {
        err(
            "describe",
            format!("expected `{{\"events\": [...], \"matcher\": \"...\"}}` on stdout: {e}"),
        )
    })?;
    let Value::Object(d) = value else {
        return Err(err("describe", "must print a JSON object".into()));
    };
    let events = match d.get("events") {
        Some(Value::Array(events)) if !events.is_empty() => events,
        Some(Value::String(one)) => &vec![Value::String(one.clone())],
        None => return Err(err("describe", "missing `events`".into())),
        Some(_) => {
            return Err(err(
                "describe.events",
                "must be a non-empty array of event names".into(),
            ));
        }
    };
    let matcher = match d.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => compile_matcher(p).map_err(|m| err("describe.matcher", m))?,
        Some(_) => return Err(err("describe.matcher", "must be a string".into())),
    };
    let timeout = timeout(&d, "timeout").map_err(|m| err("describe.timeout", m.into()))?;
    let flag = |key: &str| flag(&d, key).map_err(|m| err(&format!("describe.{key}"), m.into()));
    let fail_closed = flag("failClosed")?;
    let persistent = flag("persistent")?;
    for (i, e) in events.iter().enumerate() {
        let path = format!("describe.events[{i}]");
        let Value::String(e) = e else {
            return Err(err(&path, "must be an event name".into()));
        };
        let Some(event) = HookEvent::parse(e) else {
            if NOT_FIRED.contains(&e.as_str()) {
                out.warn(format!(
                    "{name}: {path}: the {e} event is not fired by tower-agent; skipped"
                ));
                continue;
            }
            return Err(err(&path, format!("unknown hook event `{e}`")));
        };
        let def = Definition {
            exec: exec.clone(),
            timeout,
            fail_closed,
            persistent,
            background: false,
            rewake: false,
            origin: name.clone(),
            extras: Extras::default(),
        };
        out.add(event, matcher.clone(), def, project_dir);
    }
    Ok(())
}
