//! Claude Code's permission rules: the `permissions` (`allow`, `deny`, `ask`) of every
//! settings source, the builder's allowed and disallowed tools (`--allowedTools`,
//! `--disallowedTools`) and the opt-in to ask about calls no rule allows, checked for the tool
//! hook layer ([`Hooks::permission_rules`](tower_agent_layers::hooks::Hooks::permission_rules)).
//! See the [module docs](crate#permission-rules).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::rule::Rule;
use tower_agent_core::message::ToolCall;
use tower_agent_layers::hooks::Permission;

/// The permission rules of a [`CommandHooks`](crate::CommandHooks), merged from every source.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    ask: Vec<Rule>,
    /// Claude Code's default mode: a call no rule allows is asked about.
    pub(crate) ask_unless_allowed: bool,
}

/// The kinds of rules, as the settings name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Allow,
    Deny,
    Ask,
}

impl Kind {
    /// Every kind, with its key in the settings' `permissions`.
    pub(crate) const ALL: [(Kind, &'static str); 3] = [
        (Kind::Allow, "allow"),
        (Kind::Deny, "deny"),
        (Kind::Ask, "ask"),
    ];
}

impl Rules {
    /// Whether nothing is to be checked.
    pub(crate) fn is_empty(&self) -> bool {
        self.allow.is_empty()
            && self.deny.is_empty()
            && self.ask.is_empty()
            && !self.ask_unless_allowed
    }

    /// Adds one parsed rule of `kind`.
    pub(crate) fn push(&mut self, kind: Kind, rule: Rule) {
        match kind {
            Kind::Allow => self.allow.push(rule),
            Kind::Deny => self.deny.push(rule),
            Kind::Ask => self.ask.push(rule),
        }
    }

    /// What the rules say of `call`, in Claude Code's order: a deny rule, then an ask rule,
    /// then an allow rule, then (asking unless allowed) not allowed. `cwd` is the run's
    /// directory and `project` the project's, for the texts of a redirection.
    pub(crate) fn check(&self, call: &ToolCall, cwd: &Path, project: &Path) -> Permission {
        let (tool, input) = (call.name.as_str(), &call.arguments);
        if self.deny.iter().any(|r| r.matches(tool, input)) {
            return Permission::Deny(denied(call));
        }
        if self.ask.iter().any(|r| r.matches(tool, input)) {
            return Permission::Ask(not_granted(tool));
        }
        if self.allow.iter().any(|r| r.allows(tool, input)) {
            return Permission::Allow;
        }
        if self.ask_unless_allowed {
            return Permission::NotAllowed(not_allowed(call, cwd, project).0);
        }
        Permission::NoRule
    }

    /// The `permission_suggestions` of a PermissionRequest about `call`: Claude Code's, for a
    /// call no rule allows (none for a call an ask rule asks about, or one the rules allow).
    pub(crate) fn suggestions(&self, call: &ToolCall, cwd: &Path, project: &Path) -> Option<Value> {
        match self.check(call, cwd, project) {
            Permission::NotAllowed(_) => not_allowed(call, cwd, project).1,
            _ => None,
        }
    }
}

/// Whether a tool is a shell tool whose `command` Claude Code's texts name.
fn is_shell(tool: &str) -> bool {
    matches!(tool, "Bash" | "bash" | "execute")
}

/// Claude Code's refusal of a call a deny rule matches.
fn denied(call: &ToolCall) -> String {
    match call.arguments.get("command").and_then(Value::as_str) {
        Some(command) if is_shell(&call.name) => {
            format!(
                "Permission to use {} with command {command} has been denied.",
                call.name
            )
        }
        _ => format!("Permission to use {} has been denied.", call.name),
    }
}

/// Claude Code's refusal of a call an ask rule asks about, when nobody answers.
fn not_granted(tool: &str) -> String {
    format!("Claude requested permissions to use {tool}, but you haven't granted it yet.")
}

/// Claude Code's refusal of a call no rule allows, and the `permission_suggestions` of its
/// PermissionRequest: for a shell command that redirects its output into a file of the
/// project, the redirection's text and an `addDirectories` suggestion; for another shell
/// command, `This command requires approval` and an `addRules` suggestion of the command.
fn not_allowed(call: &ToolCall, cwd: &Path, project: &Path) -> (String, Option<Value>) {
    let command = call.arguments.get("command").and_then(Value::as_str);
    let Some(command) = command.filter(|_| is_shell(&call.name)) else {
        return (not_granted(&call.name), None);
    };
    if let Some(target) = redirected_into(command, cwd, project) {
        let project = project.display();
        let text = format!(
            "Output redirection to '{}' needs approval. The path is inside the working \
             directories for this session ('{project}'), and Claude Code asks before a shell \
             command creates, changes or removes files there.",
            target.display()
        );
        let suggestion = json!([{"type": "addDirectories", "directories": [project.to_string()],
            "destination": "session"}]);
        return (text, Some(suggestion));
    }
    let suggestion = json!([{"type": "addRules", "rules": [{"toolName": call.name,
        "ruleContent": command}], "behavior": "allow", "destination": "localSettings"}]);
    (
        "This command requires approval".to_owned(),
        Some(suggestion),
    )
}

/// The first file of the project `command` redirects its output into (a literal path).
fn redirected_into(command: &str, cwd: &Path, project: &Path) -> Option<PathBuf> {
    let parsed = super::rule::parse_command(command).ok()?;
    parsed.outputs.iter().find_map(|&(a, b)| {
        let word = &command[a..b];
        if word == "/dev/null" || word.contains(['$', '`', '"', '\'', '\\', '*', '?']) {
            return None;
        }
        let path = lexical(&cwd.join(word));
        path.starts_with(lexical(project)).then_some(path)
    })
}

/// `.` and `..` resolved lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}
