//! The vector format (`hook-vectors/0.1`): a scenario, and what the reference did with it.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::Error;

/// The version of the format, the `format` field of every vector.
pub const FORMAT: &str = "hook-vectors/0.1";

/// One step of a session.
///
/// In JSON: `{"prompt": "…"}`, `{"set_model": "…"}`, `{"compact": "…"}` or `{"resume": "…"}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// A prompt, in the session as it is.
    Prompt(String),
    /// A switch to another model asked for between prompts (Claude Code: the SDK's
    /// `set_model` control request).
    SetModel(String),
    /// A compaction of the session asked for between prompts, with instructions for the
    /// summary (`""`: none) (Claude Code: the `/compact [instructions]` command; a library:
    /// its manual compaction of the thread).
    Compact(String),
    /// A prompt in a new process that resumes the session (Claude Code: `claude -p --resume
    /// <id>`; a library: the thread's next run).
    Resume(String),
}

/// What a hook answers: its stdout, stderr and exit code, after `sleep` seconds (and lines it
/// appends to `$CLAUDE_ENV_FILE`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Answer {
    /// The exit code.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit: i32,
    /// What it prints on stdout (a JSON decision, or plain text).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    /// What it prints on stderr.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Seconds the hook waits before it answers (a hook past its timeout).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub sleep: u32,
    /// Given this many times, then the hook answers nothing (exit 0); `0`: always.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub times: u32,
    /// Lines the hook appends to `$CLAUDE_ENV_FILE` (when it is set) before it answers
    /// (`export FOO=bar`: what a SessionStart hook exports to the session's later commands).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// A scenario: the session's model and steps, the model's scripted answers, the hooks and
/// their answers, the project's files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Scenario {
    /// What the scenario checks, and the reference section it comes from.
    pub about: String,
    /// The session's model.
    pub model: String,
    /// The session, step by step.
    pub steps: Vec<Step>,
    /// The model's answers, each a list of Anthropic content blocks (`text`, `tool_use`):
    /// answer `i` goes to the request carrying `i` assistant messages; past the last, the
    /// last again.
    pub answers: Vec<Vec<Value>>,
    /// The answers of subagents, by marker: a request whose first user message holds the
    /// marker (a word of the subagent's prompt, `SUBTASK`) is that subagent's, answered from
    /// its own list as [`answers`](Self::answers) are, by its own turn count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, Vec<Vec<Value>>>,
    /// Events observed by a hook answering nothing (matcher `*`), before `hooks`' own.
    #[serde(default)]
    pub observe: Vec<String>,
    /// More hooks: event → settings entries whose handlers name an `answer` instead of a
    /// command (`{"matcher": "Bash", "hooks": [{"answer": "deny", "timeout": 5}]}`).
    #[serde(default)]
    pub hooks: Map<String, Value>,
    /// The hooks' answers by name (`observe` answers nothing).
    #[serde(default)]
    pub hook_answers: BTreeMap<String, Answer>,
    /// Files written into the project before the play (path relative to the project →
    /// content): `CLAUDE.md` (instructions), `.claude/commands/<name>.md` (slash commands).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// The directory the agent runs in, relative to the project (`""`: the project itself).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    /// The session starts with the Setup hooks of an initialisation (Claude Code: `--init`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub init: bool,
    /// The session starts with the Setup hooks of upkeep (Claude Code: `--maintenance`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub maintenance: bool,
    /// The files of a plugin the session loads (Claude Code: `--plugin-dir`), laid out at
    /// `<root>/plugin` ([`Job::plugin`](crate::Job::plugin)): `.claude-plugin/plugin.json`,
    /// `hooks/hooks.json` and its scripts, written as given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugin: BTreeMap<String, String>,
    /// The project is a git repository (`git init`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub git: bool,
    /// The hooks go in `.claude/settings.local.json` rather than `.claude/settings.json`:
    /// Claude Code run in a subdirectory of a git repository reads the root's local settings,
    /// and its project settings from the directory it runs in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local_settings: bool,
    /// Tools the agent may use without asking (Claude Code: `--allowedTools`).
    #[serde(default = "default_tools")]
    pub allowed_tools: Vec<String>,
    /// More of the settings file than its hooks, written as given (`{"permissions":
    /// {"deny": ["Bash(rm *)"]}}`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub more_settings: Map<String, Value>,
    /// MCP servers of the project, as the `mcpServers` entries of Claude Code's `.mcp.json`
    /// (`{"everything": {"command": "node", "args": [...]}}`): written to `<project>/.mcp.json`,
    /// approved in the settings (`enableAllProjectMcpServers`). In their strings,
    /// `<mcp-servers>` is the directory whose `node_modules` holds the MCP reference servers
    /// (`$HOOK_VECTORS_MCP_SERVERS`: tower-agent's `.ci/mcp-servers` installs them, pinned).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub mcp_servers: Map<String, Value>,
    /// Sets of events the reference fires concurrently, whose order among themselves is
    /// chance (`[["PostToolUse", "CwdChanged"]]`): compared without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unordered: Vec<Vec<String>>,
}

fn default_tools() -> Vec<String> {
    vec!["Bash".into()]
}

/// The hook command of an answer: the recorder ([`crate::play`]) named by the answer.
pub(crate) fn command(answer: &str) -> String {
    format!("sh \"$CLAUDE_PROJECT_DIR/.claude/hooks/record.sh\" {answer}")
}

impl Scenario {
    /// The settings file of the hooks, relative to the project: `.claude/settings.json`, or
    /// `.claude/settings.local.json` for a scenario with [`Scenario::local_settings`].
    pub fn settings_file(&self) -> &'static str {
        if self.local_settings {
            ".claude/settings.local.json"
        } else {
            ".claude/settings.json"
        }
    }

    /// The settings both agents read ([`settings_file`](Self::settings_file)): its `hooks`
    /// section, every handler the recorder named by its answer, and
    /// [`more_settings`](Self::more_settings).
    pub fn settings(&self) -> Value {
        let mut hooks = Map::new();
        for event in &self.observe {
            let entry = json!({"matcher": "*", "hooks": [{"type": "command", "command": command("observe")}]});
            hooks.insert(event.clone(), json!([entry]));
        }
        for (event, entries) in &self.hooks {
            let list = hooks.entry(event.clone()).or_insert_with(|| json!([]));
            let Some(list) = list.as_array_mut() else {
                continue;
            };
            for entry in entries.as_array().into_iter().flatten() {
                let mut entry = entry.clone();
                for h in entry["hooks"].as_array_mut().into_iter().flatten() {
                    let Some(h) = h.as_object_mut() else { continue };
                    let answer = h
                        .remove("answer")
                        .and_then(|a| a.as_str().map(str::to_owned));
                    h.insert("type".into(), "command".into());
                    h.insert(
                        "command".into(),
                        command(answer.as_deref().unwrap_or("observe")).into(),
                    );
                }
                list.push(entry);
            }
        }
        let mut settings = self.more_settings.clone();
        if !self.mcp_servers.is_empty() {
            settings.insert("enableAllProjectMcpServers".into(), true.into());
        }
        settings.insert("hooks".into(), Value::Object(hooks));
        Value::Object(settings)
    }

    /// Checks what a play relies on: at least one step and one answer, answers named by the
    /// hooks exist, paths stay inside the project.
    pub fn validate(&self) -> Result<(), Error> {
        if self.steps.is_empty() || self.answers.is_empty() {
            return Err(Error::new("a scenario needs a step and a model answer"));
        }
        if let Some((marker, _)) = self
            .agents
            .iter()
            .find(|(marker, answers)| marker.is_empty() || answers.is_empty())
        {
            return Err(Error::new(format!(
                "subagent {marker:?}: a marker and an answer are needed"
            )));
        }
        let named = self.hooks.values().flat_map(|entries| {
            entries
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| e["hooks"].as_array().into_iter().flatten())
                .filter_map(|h| h["answer"].as_str())
        });
        let names = self.hook_answers.keys().map(String::as_str);
        for answer in named.chain(names) {
            let safe = !answer.is_empty()
                && answer
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !safe {
                return Err(Error::new(format!(
                    "answer name {answer:?}: letters, digits, `_` and `-` only"
                )));
            }
            if answer != "observe" && !self.hook_answers.contains_key(answer) {
                return Err(Error::new(format!("no hook answer named {answer:?}")));
            }
        }
        for path in self
            .files
            .keys()
            .chain([&self.cwd])
            .chain(self.plugin.keys())
        {
            let p = Path::new(path);
            if p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
                return Err(Error::new(format!("{path:?}: not inside its folder")));
            }
        }
        Ok(())
    }
}

/// What a play of a scenario gave to compare, normalised ([`crate::observe`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Observed {
    /// Each hook run, in the order they started: `event`, the `answer` it gave, the working
    /// directory (`cwd`), `$CLAUDE_PROJECT_DIR` (`project_dir`), whether `$CLAUDE_ENV_FILE`
    /// was set (`env_file`), and its `input`.
    pub hooks: Vec<Value>,
    /// Per model request, what the hooks put in it: tool results whole, and each line that
    /// carries a hook's `hk-` marker, with the role of its message.
    pub requests: Vec<Value>,
    /// `ran.log` in the project (the scenarios' commands append to it): what the tools ran,
    /// with paths under the play's directories as placeholders (`<root>/plugin`).
    pub ran: String,
}

/// A vector file: a scenario, and what the reference did with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vector {
    /// [`FORMAT`].
    pub format: String,
    /// The scenario.
    pub scenario: Scenario,
    /// The program and version the expectations were recorded from
    /// (`{"program": "Claude Code", "version": "2.1.328"}`); absent before recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_from: Option<Value>,
    /// What the reference did; absent before recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Observed>,
}

/// The largest vector file read, in bytes (16 MiB).
pub const MAX_VECTOR: u64 = 16 << 20;

impl Vector {
    /// Reads and checks one vector file.
    pub fn read(path: &Path) -> Result<Vector, Error> {
        let at = |e: &dyn std::fmt::Display| Error::new(format!("{}: {e}", path.display()));
        let size = std::fs::metadata(path).map_err(|e| at(&e))?.len();
        if size > MAX_VECTOR {
            return Err(at(&format!("{size} bytes, over {MAX_VECTOR}")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| at(&e))?;
        let v: Vector = serde_json::from_str(&text).map_err(|e| at(&e))?;
        if v.format != FORMAT {
            return Err(at(&format!("format {:?}, not {FORMAT:?}", v.format)));
        }
        v.scenario.validate().map_err(|e| at(&e))?;
        Ok(v)
    }

    /// Writes the vector as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self).map_err(Error::new)? + "\n";
        std::fs::write(path, text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
    }
}

/// Every vector of `dir` (`*.json`), by file stem, in name order.
pub fn read_dir(dir: &Path) -> Result<Vec<(String, Vector)>, Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap_or_default().to_string_lossy();
            Ok((name.into_owned(), Vector::read(&p)?))
        })
        .collect()
}

/// The vectors this crate ships (recorded from Claude Code), in its source tree.
pub fn shipped_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
}
