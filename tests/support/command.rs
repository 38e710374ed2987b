//! Command hooks with real processes: scripts written into a temp dir, and an agent whose
//! `bash` tool records what it gets.

use std::{
    os::unix::fs::PermissionsExt,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use serde_json::{Value, json};
use tower_agent::{
    Agent, AgentResponse, BoxError,
    agent::AgentBuilder,
    command::CommandHooks,
    layers::hooks::Hooks,
    message::Role,
    model::{BoxModelService, ScriptedModel},
    tool::{Tool, tool_fn},
};

/// A temp dir holding the scripts of one test; also the hooks' project dir.
#[derive(Debug)]
pub struct Scripts {
    pub dir: tempfile::TempDir,
}

impl Scripts {
    pub fn new() -> Self {
        Scripts {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes an executable script; returns its path as a string.
    pub fn script(&self, name: &str, body: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_string_lossy().into_owned()
    }

    pub fn bash(&self, name: &str, body: &str) -> String {
        self.script(name, &format!("#!/usr/bin/env bash\n{body}\n"))
    }

    pub fn python(&self, name: &str, body: &str) -> String {
        self.script(name, &format!("#!/usr/bin/env python3\n{body}\n"))
    }

    /// Command hooks from a `hooks` section (transcripts in `transcripts/` here, never in
    /// the user's state directory).
    pub fn hooks(&self, hooks: Value) -> CommandHooks {
        CommandHooks::builder()
            .settings_json(json!({ "hooks": hooks }), "settings.json")
            .project_dir(self.dir.path())
            .transcripts_dir(self.path("transcripts"))
            .build()
            .unwrap()
    }

    /// Command hooks with one PreToolUse handler for `bash`.
    pub fn pre_tool_use(&self, command: &str, extra: Value) -> CommandHooks {
        self.hooks(on("PreToolUse", "bash", command, extra))
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }
}

/// `{event: [{matcher, hooks: [{type: command, command, ...extra}]}]}`.
pub fn on(event: &str, matcher: &str, command: &str, extra: Value) -> Value {
    let mut handler = json!({ "type": "command", "command": command });
    if let Value::Object(extra) = extra {
        handler.as_object_mut().unwrap().extend(extra);
    }
    json!({ event: [{ "matcher": matcher, "hooks": [handler] }] })
}

/// A `bash` tool that records the arguments it gets and answers `ran: <command>`.
pub fn bash_tool(seen: &Arc<Mutex<Vec<Value>>>) -> impl Tool {
    let seen = Arc::clone(seen);
    tool_fn(
        "bash",
        "Runs a command",
        json!({"type": "object"}),
        move |args: Value, _| {
            let seen = Arc::clone(&seen);
            async move {
                let command = args["command"].as_str().unwrap_or_default().to_owned();
                seen.lock().unwrap().push(args);
                Ok::<_, BoxError>(format!("ran: {command}"))
            }
        },
    )
}

/// An agent of `model`, `hooks` and the [`bash_tool`]; and what the tool got.
pub fn agent(
    model: &ScriptedModel,
    hooks: Hooks,
) -> (AgentBuilder<BoxModelService>, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::default();
    let builder = Agent::builder()
        .model(model.clone())
        .tool(bash_tool(&seen))
        .hooks(hooks.compile().unwrap());
    (builder, seen)
}

/// Collects the run's warnings (Notification callbacks).
pub fn warnings(hooks: Hooks) -> (Hooks, Arc<Mutex<Vec<String>>>) {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = Arc::clone(&log);
    let hooks = hooks
        .on_notification(move |m, _| l.lock().unwrap().push(m.to_owned()))
        .into();
    (hooks, log)
}

/// The text of the run's first tool message, or "" if there is none.
pub fn tool_text(resp: &AgentResponse) -> String {
    tool_texts(resp).into_iter().next().unwrap_or_default()
}

/// The hook contexts that follow the run's tool results: the text of each system message
/// right after a tool message, in order.
pub fn contexts_after_tools(resp: &AgentResponse) -> Vec<String> {
    let next = resp.messages.iter().skip(1);
    resp.messages
        .iter()
        .zip(next)
        .filter(|(a, b)| a.role == Role::Tool && b.role == Role::System)
        .map(|(_, b)| b.text().into_owned())
        .collect()
}

/// The texts of the run's tool messages, in order.
pub fn tool_texts(resp: &AgentResponse) -> Vec<String> {
    resp.messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.text().into_owned())
        .collect()
}
