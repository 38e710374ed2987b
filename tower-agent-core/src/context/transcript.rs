//! The session transcript: one JSONL file per session, written before any hook can read it.
//!
//! ```
//! use serde_json::{Value, json};
//! use tower_agent_core::{
//!     Agent, AgentRequest, BoxError, model::ScriptedModel, store::MemoryStore, tool::tool_fn,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let ls = tool_fn("ls", "Lists files", json!({"type": "object"}), |_args, _ctx| async {
//!     Ok::<_, BoxError>("a.txt".to_owned())
//! });
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new().tool_call("ls", json!({})).text("One file: a.txt."))
//!     .tool(ls)
//!     .store(MemoryStore::new())
//!     .transcripts(dir.path())
//!     .build();
//! agent.run(AgentRequest::new("list the files").thread("t-1")).await?;
//!
//! // `{dir}/{session id}.jsonl`: one line per message, in Claude Code's shape.
//! let text = std::fs::read_to_string(dir.path().join("t-1.jsonl"))?;
//! let lines: Vec<Value> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
//! let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
//! assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
//! assert_eq!(lines[1]["message"]["content"][0]["type"], "tool_use");
//! assert_eq!(lines[2]["message"]["content"][0]["content"], "a.txt");
//! assert_eq!(lines[3]["message"]["content"][0]["text"], "One file: a.txt.");
//! assert!(lines.iter().all(|l| l["sessionId"] == "t-1"));
//! # Ok(())
//! # }
//! ```
//!
//! # When it is written
//!
//! The loop writes each message as soon as it exists, before the hooks that could look at it
//! run, so a hook that reads the file sees every message of the session up to that moment:
//!
//! | Message | Written | So the file holds it when these hooks fire |
//! |---|---|---|
//! | (the file itself) | when the run starts, created empty if it is missing | every hook, SessionStart included |
//! | the user prompt (after UserPromptSubmit hooks accepted or rewrote it) and their contexts | before the first step | PreToolUse, Stop, … (not UserPromptSubmit: a blocked prompt never enters the thread) |
//! | each assistant message | as soon as the model answered | PreToolUse, Stop, SubagentStop, PostToolUse … |
//! | each tool result | by the PostToolUse / PostToolUseFailure command hooks of that call, just before they run; else when the step's calls are done | PostToolUse and PostToolUseFailure of that call, and every later hook |
//! | reminders, Stop-hook feedback | at the end of the step | every later hook |
//!
//! A tool result recorded early by its PostToolUse hooks is not written again by the loop
//! (matched by `tool_use_id`); if the hooks changed what the model sees (a replaced output,
//! added context), the loop adds a `system` line with `subtype: "tool_result_final"`, the
//! `toolUseID` and the final `content`.
//!
//! Lines are written whole: each batch of lines is one `write` on a file opened in append
//! mode, made synchronously under the transcript's lock, so a run cut off at any point
//! (dropped future, cancellation, a crash after the write) leaves only whole lines, and two
//! runs appending to one file never interleave inside a line. A write that fails is logged
//! (`tracing` warning) and the run goes on.
//!
//! # Format
//!
//! One JSON object per line, close to Claude Code's transcripts, so scripts written for them
//! (reading `.message.content[].text` of the `assistant` lines) work unchanged:
//!
//! ```json
//! {"parentUuid": null, "isSidechain": false, "type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "list the files"}]}, "uuid": "…", "timestamp": "2026-01-02T03:04:05.678Z", "sessionId": "t-1", "runId": "run_…", "cwd": "/work"}
//! {"parentUuid": "…", "isSidechain": false, "type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Listing."}, {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"command": "ls"}}]}, …}
//! {"parentUuid": "…", "isSidechain": false, "type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "a.txt", "is_error": false}]}, …}
//! ```
//!
//! - `type` is `user` (prompts, reminders, hook feedback, tool results), `assistant`, or
//!   `system` (the system prompt, and the `tool_result_final` lines above).
//! - `message.content` holds `text` blocks, `image` blocks (`{"type": "image", "source":
//!   {"type": "url", "url": …}}`), `tool_use` blocks (`id`, `name`, `input`) on assistant
//!   lines and `tool_result` blocks (`tool_use_id`, `content` as text, `is_error`).
//! - `uuid` is fresh per line; `parentUuid` is the previous line of the same run (`null` on
//!   a run's first line). `sessionId` is the thread id, `runId` the run's, `cwd` the run's
//!   directory. A subagent's lines have `isSidechain: true` and its `agentId`.
//!
//! # Caps
//!
//! At most 1,024 tool results per run wait to be matched after being recorded early by
//! hooks; beyond that, results are left to the loop (written when the step ends), so a
//! context used outside the loop cannot grow this without bound.

use std::{
    collections::HashMap,
    fs::File,
    hash::{BuildHasher, DefaultHasher, Hash, Hasher},
    io::Write,
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use serde_json::{Map, Value, json};

use crate::{
    context::{timestamp, transcript_file_name},
    message::{Content, Message, Role, ToolOutput},
};

/// How many early-recorded tool results may wait for the loop (see the module docs).
const MAX_EARLY: usize = 1024;

/// Where a run's transcript goes when its caller chose (a subagent's, nested under its
/// parent's).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The file.
    pub(crate) path: PathBuf,
    /// The subagent's id (`agentId` of each line; the lines are `isSidechain`).
    pub(crate) agent_id: String,
}

/// The transcript file of a subagent of the session whose transcript is `parent`:
/// `{parent without .jsonl}/subagents/agent-{id}.jsonl`, `id` escaped as thread ids are. (A
/// parent named `.jsonl`, `..jsonl` or `...jsonl` gets `%`, `.%`, `..%`, never a directory
/// above; a parent not ending in `.jsonl` gets `{its name}.d`.)
pub(crate) fn subagent_path(parent: &Path, agent_id: &str) -> PathBuf {
    let name = parent
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = match name.strip_suffix(".jsonl") {
        Some(stem) => stem.to_owned(),
        None => format!("{name}.d"),
    };
    if matches!(stem.as_str(), "" | "." | "..") {
        stem.push('%');
    }
    parent
        .with_file_name(stem)
        .join("subagents")
        .join(format!("agent-{}.jsonl", transcript_file_name(agent_id)))
}

/// The default transcripts directory for a project: `$XDG_STATE_HOME` (if set to an absolute
/// path), else `$HOME/.local/state`, then `tower-agent/projects/{project}` where `{project}`
/// is the project directory escaped as thread ids are (`/home/me/app` is
/// `%2Fhome%2Fme%2Fapp`). `None` without either variable.
///
/// Where tower-agent's command hooks keep their transcripts unless told otherwise; give it
/// to [`AgentBuilder::transcripts`](crate::agent::AgentBuilder::transcripts) to keep an
/// agent's in the same place. Nothing is created: the directory is made when a transcript is
/// first written.
///
/// # Example
///
/// ```
/// use std::path::Path;
/// use tower_agent_core::agent::transcript;
///
/// if let Some(dir) = transcript::default_dir(Path::new("/home/me/app")) {
///     assert!(dir.ends_with("tower-agent/projects/%2Fhome%2Fme%2Fapp"));
/// }
/// ```
pub fn default_dir(project_dir: &Path) -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let state = var("XDG_STATE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| home.join(".local").join("state")))?;
    let project = transcript_file_name(&project_dir.to_string_lossy());
    Some(state.join("tower-agent").join("projects").join(project))
}

/// A session's JSONL transcript, shared by everything in one run (see the module docs):
/// [`RunContext::transcript`](super::RunContext::transcript).
pub struct Transcript {
    path: PathBuf,
    session_id: String,
    run_id: String,
    cwd: String,
    agent_id: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The file, open for appending (opened on first use, dropped after a failed write).
    file: Option<File>,
    /// The `uuid` of the last line this run wrote.
    parent: Option<String>,
    /// Tool results written ahead of the loop: `tool_use_id` → hash of what was written.
    early: HashMap<String, u64>,
}

impl std::fmt::Debug for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transcript")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Transcript {
    pub(crate) fn new(
        path: PathBuf,
        session_id: &str,
        run_id: &str,
        cwd: &Path,
        agent_id: Option<String>,
    ) -> Self {
        Transcript {
            path,
            session_id: session_id.to_owned(),
            run_id: run_id.to_owned(),
            cwd: cwd.to_string_lossy().into_owned(),
            agent_id,
            state: Mutex::new(State::default()),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the file (and its directories) if it is missing.
    pub fn touch(&self) {
        let mut state = self.lock();
        self.write(&mut state, "");
    }

    /// Appends `messages` (the loop's, in history order), skipping tool results recorded
    /// early (see [`record_tool_result`](Self::record_tool_result)).
    pub fn append<'a>(&self, messages: impl Iterator<Item = &'a Message>) {
        let mut state = self.lock();
        let mut lines = String::new();
        for message in messages {
            if let (Role::Tool, Some(id)) = (message.role, &message.tool_call_id)
                && let Some(hash) = state.early.remove(id)
            {
                let content = message.text();
                if hash == content_hash(&content, message.is_error) {
                    continue;
                }
                let mut extra = Map::new();
                extra.insert("subtype".into(), "tool_result_final".into());
                extra.insert("toolUseID".into(), id.clone().into());
                extra.insert("content".into(), content.into_owned().into());
                extra.insert("isMeta".into(), true.into());
                self.line(&mut state, &mut lines, "system", None, extra);
                continue;
            }
            let (kind, body) = entry(message);
            self.line(&mut state, &mut lines, kind, Some(body), Map::new());
        }
        if !lines.is_empty() {
            self.write(&mut state, &lines);
        }
    }

    /// Writes a tool result now, ahead of the loop (for the hooks that run on it); the loop
    /// then does not write it again.
    pub fn record_tool_result(&self, output: &ToolOutput) {
        let mut state = self.lock();
        if state.early.contains_key(&output.call_id) || state.early.len() >= MAX_EARLY {
            return;
        }
        let hash = content_hash(&output.content, output.is_error);
        let message = Message::tool_result(output);
        let (kind, body) = entry(&message);
        let mut lines = String::new();
        self.line(&mut state, &mut lines, kind, Some(body), Map::new());
        if self.write(&mut state, &lines) {
            state.early.insert(output.call_id.clone(), hash);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds one line to `lines`.
    fn line(
        &self,
        state: &mut State,
        lines: &mut String,
        kind: &str,
        message: Option<Value>,
        extra: Map<String, Value>,
    ) {
        let uuid = uuid();
        let mut line = Map::new();
        line.insert(
            "parentUuid".into(),
            state
                .parent
                .replace(uuid.clone())
                .map_or(Value::Null, Value::String),
        );
        line.insert("isSidechain".into(), self.agent_id.is_some().into());
        if let Some(agent) = &self.agent_id {
            line.insert("agentId".into(), agent.clone().into());
        }
        line.insert("type".into(), kind.into());
        if let Some(message) = message {
            line.insert("message".into(), message);
        }
        line.extend(extra);
        line.insert("uuid".into(), uuid.into());
        line.insert("timestamp".into(), timestamp().into());
        line.insert("sessionId".into(), self.session_id.clone().into());
        line.insert("runId".into(), self.run_id.clone().into());
        line.insert("cwd".into(), self.cwd.clone().into());
        lines.push_str(&Value::Object(line).to_string());
        lines.push('\n');
    }

    /// Appends `text` in one write (opening the file first if needed); whether it worked.
    fn write(&self, state: &mut State, text: &str) -> bool {
        let result = (|| {
            if state.file.is_none() {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?;
                state.file = Some(file);
            }
            if text.is_empty() {
                return Ok(());
            }
            let file = state.file.as_mut().expect("opened above");
            file.write_all(text.as_bytes())
        })();
        match result {
            Ok(()) => true,
            Err(err) => {
                state.file = None;
                tracing::warn!(
                    path = %self.path.display(),
                    error = %err,
                    "could not write the transcript"
                );
                false
            }
        }
    }
}

/// The `type` and `message` of a message's line.
fn entry(message: &Message) -> (&'static str, Value) {
    let mut content: Vec<Value> = Vec::new();
    if message.role == Role::Tool {
        content.push(json!({
            "type": "tool_result",
            "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
            "content": message.text(),
            "is_error": message.is_error,
        }));
        return ("user", json!({ "role": "user", "content": content }));
    }
    content.extend(message.content.iter().filter_map(|part| {
        Some(match part {
            Content::Text { text } => json!({ "type": "text", "text": text }),
            Content::Image { url } => {
                json!({ "type": "image", "source": { "type": "url", "url": url } })
            }
            Content::Reasoning(r) => match &r.redacted {
                Some(data) => json!({ "type": "redacted_thinking", "data": data }),
                None => json!({
                    "type": "thinking",
                    "thinking": r.text,
                    "signature": r.signature.as_deref().unwrap_or_default(),
                }),
            },
            Content::Document { url, .. } => {
                json!({ "type": "document", "source": { "type": "url", "url": url } })
            }
            // Anthropic's own blocks (server tools) are Claude Code's as they are.
            Content::Provider(_) => return part.provider_item("anthropic").cloned(),
        })
    }));
    content.extend(message.tool_calls.iter().map(|call| {
        json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments })
    }));
    let kind = match message.role {
        Role::Assistant => "assistant",
        Role::System => "system",
        Role::User | Role::Tool => "user",
    };
    (kind, json!({ "role": kind, "content": content }))
}

fn content_hash(content: &str, is_error: bool) -> u64 {
    let mut h = DefaultHasher::new();
    content.hash(&mut h);
    is_error.hash(&mut h);
    h.finish()
}

/// A fresh UUID-shaped id (version 4 layout): unique in practice, not cryptographic.
fn uuid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = std::hash::RandomState::new();
    let mut h = state.build_hasher();
    h.write_u64(n);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    let a = h.finish();
    h.write_u64(a);
    let b = h.finish();
    let hi = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
    let lo = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn uuids_look_like_uuids_and_differ() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| uuid()).collect();
        assert_eq!(ids.len(), 1000);
        for id in ids.iter().take(5) {
            assert_eq!(id.len(), 36, "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert!("89ab".contains(&id[19..20]), "{id}");
        }
    }

    #[test]
    fn lines_chain_and_early_results_are_not_written_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/t.jsonl");
        let t = Transcript::new(path.clone(), "t", "r", Path::new("/w"), None);
        t.touch();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        let call = ToolCall::new("c1", "bash", json!({"command": "ls"}));
        let assistant = Message::assistant("Listing.").with_tool_calls(vec![call]);
        t.append([Message::user("go"), assistant].iter());
        t.record_tool_result(&ToolOutput::text("c1", "a.txt"));
        t.record_tool_result(&ToolOutput::text("c2", "b.txt"));
        // c1 as recorded: skipped; c2 changed by a hook: a final line.
        t.append(
            [
                Message::from(ToolOutput::text("c1", "a.txt")),
                Message::from(ToolOutput::text("c2", "b.txt + context")),
            ]
            .iter(),
        );
        let l = lines(&path);
        let kinds: Vec<&str> = l.iter().map(|l| l["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "assistant", "user", "user", "system"]);
        assert_eq!(l[0]["parentUuid"], Value::Null);
        for i in 1..l.len() {
            assert_eq!(l[i]["parentUuid"], l[i - 1]["uuid"]);
        }
        assert_eq!(l[1]["message"]["content"][0]["text"], "Listing.");
        assert_eq!(l[1]["message"]["content"][1]["type"], "tool_use");
        assert_eq!(l[1]["message"]["content"][1]["input"]["command"], "ls");
        assert_eq!(l[2]["message"]["content"][0]["tool_use_id"], "c1");
        assert_eq!(l[3]["message"]["content"][0]["content"], "b.txt");
        assert_eq!(l[4]["toolUseID"], "c2");
        assert_eq!(l[4]["content"], "b.txt + context");
        assert!(l.iter().all(|l| l["sessionId"] == "t" && l["cwd"] == "/w"));
    }

    #[test]
    fn early_records_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let t = Transcript::new(path.clone(), "t", "r", Path::new("/w"), None);
        for i in 0..MAX_EARLY + 10 {
            t.record_tool_result(&ToolOutput::text(format!("c{i}"), "x"));
        }
        assert_eq!(t.lock().early.len(), MAX_EARLY);
        assert_eq!(lines(&path).len(), MAX_EARLY);
    }

    #[test]
    fn subagent_transcripts_nest_under_the_parent() {
        assert_eq!(
            subagent_path(Path::new("/d/t-1.jsonl"), "call/1"),
            Path::new("/d/t-1/subagents/agent-call%2F1.jsonl")
        );
        assert_eq!(
            subagent_path(Path::new("/d/...jsonl"), "a"),
            Path::new("/d/..%/subagents/agent-a.jsonl")
        );
        assert_eq!(
            subagent_path(Path::new("/d/.jsonl"), "a"),
            Path::new("/d/%/subagents/agent-a.jsonl")
        );
        assert_eq!(
            subagent_path(Path::new("/d/log"), "a"),
            Path::new("/d/log.d/subagents/agent-a.jsonl")
        );
    }
}
