//! The handlers read from the configuration ([`Handler`], [`Entry`]) and the whole
//! [`Config`]: every event's handlers in configuration order, deduplicated.

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde_json::{Map, Value};

use super::{ConfigError, HookEvent};
#[cfg(feature = "http-hooks")]
use crate::http::HttpHook;
#[cfg(feature = "mcp")]
use crate::mcp::McpHook;
use crate::{persistent::Persistent, prompt::ModelHook, rule::Rule};
use tower_agent_core::model::BoxModelService;
use tower_agent_layers::matcher::ToolMatcher;

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
    /// Call a WebAssembly component's `handle` (`type: "wasm"`, a `.wasm` file of a hooks
    /// directory).
    #[cfg(feature = "wasm")]
    Wasm(tower_agent_wasm::WasmHook),
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
            #[cfg(feature = "wasm")]
            Exec::Wasm(hook) => hook.name().to_owned(),
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
    /// The Gemini CLI group (`"sequential": true`) whose handlers run one after another, in
    /// order; `None`: the handler runs in parallel with the others.
    pub(crate) sequential: Option<u32>,
    /// A Codex Stop handler's run id (`stop:<n>:<file>`), which wraps its block's reason.
    pub(crate) run_id: Option<Arc<str>>,
}

/// The configuration format of a handler: see [`crate::formats`].
pub(crate) use crate::formats::Dialect;
/// A trusted-hash pin: see [`crate::trust`].
pub(crate) use crate::trust::Pin;

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
        // A Gemini CLI handler names Gemini's tools (`run_shell_command`, not `Bash`).
        let subject = match self.handler.extras.dialect {
            Dialect::Gemini => crate::formats::gemini_tool(subject),
            _ => subject,
        };
        self.matchers.iter().any(|m| match m {
            None => true,
            Some(m) => m.matcher.matches_name(subject),
        })
    }
}

impl Handler {
    /// A handler running `command` with `sh` and nothing else set, for tests.
    #[cfg(test)]
    pub(crate) fn shell_for_test(command: &str) -> Handler {
        Handler {
            exec: Exec::Shell {
                shell: "sh",
                command: command.into(),
            },
            timeout: None,
            fail_closed: false,
            background: false,
            rewake: false,
            persistent: None,
            origin: "test".into(),
            label: command.into(),
            extras: Extras::default(),
        }
    }

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
    /// A handler of a sequential group stays in its group.
    sequential: Option<u32>,
    /// A plugin's copy of a handler stays separate from the settings' copy.
    plugin: Option<Arc<str>>,
    sha256: Option<String>,
    dialect: Dialect,
}

/// What a handler definition says, before dedup.
pub(super) struct Definition {
    pub(super) exec: Exec,
    pub(super) timeout: Option<Duration>,
    pub(super) fail_closed: bool,
    pub(super) persistent: bool,
    pub(super) background: bool,
    pub(super) rewake: bool,
    pub(super) origin: String,
    pub(super) extras: Extras,
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
    pub(crate) mcp: Option<tower_agent_mcp::client::McpServers>,
    /// Where handlers run: `if` path rules anchor here.
    pub(crate) project_dir: PathBuf,
    /// The source being loaded (a plugin, another tool's format).
    pub(crate) source: crate::plugin::SourceContext,
    /// Names from `disabledHooks` (commands) and `disabledPlugins` (plugin names).
    pub(crate) disabled_hooks: Vec<String>,
    pub(crate) disabled_plugins: Vec<String>,
    /// The next id of a Gemini CLI sequential group.
    pub(crate) next_sequential: u32,
    /// The permission rules of every source.
    pub(crate) rules: crate::permissions::Rules,
}

impl Config {
    pub(crate) fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    pub(super) fn add(
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
        if let Err(why) = crate::trust::resolve(&def.exec, project_dir, &mut def.extras) {
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
            sequential: def.extras.sequential,
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
            // Every matcher is kept (a `None`, matching every subject, once): a matcher is
            // also what it names — a FileChanged matcher's names are the files to watch, kept
            // beside a `*` entry of the same command (measured against Claude Code 2.1.328,
            // vector `file_changed`).
            match matcher {
                None if entry.matchers.iter().any(Option::is_none) => {}
                m => entry.matchers.push(m),
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
                    let pinned = crate::trust::pin_if_script(
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
