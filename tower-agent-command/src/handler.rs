//! The handlers read from the configuration ([`Handler`], [`Entry`]): how each is started
//! ([`Exec`]), what it carries ([`Extras`]) and the matchers it was configured under.

use std::{fmt, sync::Arc, time::Duration};

use serde_json::{Map, Value};

use crate::{
    dialect::{Dialect, gemini_tool},
    exec::Exec,
    persistent::Persistent,
    rule::Rule,
    trust::Pin,
};
use tower_agent_layers::matcher::ToolMatcher;

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
            Dialect::Gemini => gemini_tool(subject),
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
