//! The whole parsed [`Config`]: every event's handlers in configuration order, deduplicated;
//! and the [`SourceContext`] of the source being loaded.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use super::{ConfigError, HookEvent};
use crate::{
    dialect::Dialect,
    exec::Exec,
    handler::{Entry, Extras, Handler, Matcher},
    permissions::Rules,
    persistent::Persistent,
    trust,
};
use tower_agent_core::model::BoxModelService;

/// Where the source being loaded puts its handlers: its plugin, the variables substituted
/// in its commands and set in their environment, its format.
#[derive(Debug, Default, Clone)]
pub(crate) struct SourceContext {
    pub(crate) plugin: Option<Arc<str>>,
    /// `(NAME, value)`: `${NAME}` is replaced in commands and arguments, and `NAME` is set in
    /// the handler's environment.
    pub(crate) env: Arc<[(String, String)]>,
    pub(crate) dialect: Dialect,
}

impl SourceContext {
    /// Marks a handler as coming from this source and substitutes its variables.
    pub(crate) fn apply(&self, exec: &mut Exec, extras: &mut Extras) {
        extras.plugin = self.plugin.clone();
        extras.env = Arc::clone(&self.env);
        extras.dialect = self.dialect;
        if self.env.is_empty() {
            return;
        }
        let sub = |s: &mut String| {
            if s.contains("${") {
                for (name, value) in self.env.iter() {
                    *s = s.replace(&format!("${{{name}}}"), value);
                }
            }
        };
        match exec {
            Exec::Shell { command, .. } => sub(command),
            Exec::Argv { program, args } => {
                sub(program);
                args.iter_mut().for_each(sub);
            }
            // Nothing to substitute: the variables reach commands only.
            #[cfg(feature = "http-hooks")]
            Exec::Http(_) => {}
            Exec::Model(_) => {}
            #[cfg(feature = "mcp")]
            Exec::Mcp(_) => {}
            #[cfg(feature = "wasm")]
            Exec::Wasm(_) => {}
        }
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
    pub(crate) source: SourceContext,
    /// Names from `disabledHooks` (commands) and `disabledPlugins` (plugin names).
    pub(crate) disabled_hooks: Vec<String>,
    pub(crate) disabled_plugins: Vec<String>,
    /// The next id of a Gemini CLI sequential group.
    pub(crate) next_sequential: u32,
    /// The permission rules of every source.
    pub(crate) rules: Rules,
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
        if let Err(why) =
            trust::resolve(&def.exec, project_dir, &mut def.extras.pin, &def.extras.env)
        {
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
                    let pinned = trust::pin_if_script(
                        &entry.handler.exec,
                        &self.project_dir,
                        &mut extras.pin,
                        &extras.env,
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
