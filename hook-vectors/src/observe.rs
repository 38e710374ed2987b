//! What a play leaves to compare, normalised: each hook's input (session ids, paths, times and
//! durations replaced by placeholders — nothing else), and what the hooks changed in the
//! model's requests (tool results, and every line carrying a hook's `hk-` marker).
//!
//! ```
//! use hook_vectors::{Play, observe::Normaliser, read_dir, shipped_dir};
//! use serde_json::json;
//!
//! let (_, vector) = read_dir(&shipped_dir())?.into_iter().next().unwrap();
//! let play = Play::new(&vector.scenario)?; // its directories, on disk
//! let mut norm = Normaliser::new(&play);
//! let input = json!({
//!     "session_id": "9d3c1f0e-5b7a-4c2e-8f61-2a4b6c8d0e1f",
//!     "cwd": play.project().join("src").display().to_string(),
//!     "prompt_id": "c3e1a2b4",
//!     "duration_ms": 412,
//!     "started_at": "2026-11-29T12:00:00.123Z",
//!     "tool_name": "Bash",
//! });
//! assert_eq!(
//!     norm.input(&input),
//!     json!({
//!         "session_id": "<session>",
//!         "cwd": "<project>/src",
//!         "prompt_id": "<prompt-1>",
//!         "duration_ms": "<number>",
//!         "started_at": "<time>",
//!         "tool_name": "Bash",
//!     })
//! );
//! # Ok::<(), hook_vectors::Error>(())
//! ```

use std::{borrow::Cow, collections::HashMap};

use serde_json::{Map, Value, json};

use crate::{play::Play, server::Request};

/// Ids that are random in each play, numbered by first appearance: the same id twice stays
/// the same placeholder, so "one id per prompt" is still checked.
const NUMBERED: &[&str] = &["prompt_id", "turn_id", "message_id", "agent_id"];

/// Fields holding a subagent's id (`agent_id` of SubagentStart/SubagentStop, `agentId` of the
/// `Agent` tool's `tool_response`): a random id per play, numbered as `agent_id` (`<agent-1>`)
/// wherever it appears, in the texts too (a transcript path, a tool result).
const AGENT_IDS: &[&str] = &["agent_id", "agentId"];

/// Whether a `tool_use_id` is one an agent makes up at random rather than the model's call id:
/// Codex's code mode names a nested call `exec-<uuid>`, Claude Code (2.1.332) a command
/// file's shell command `<uuid>:inner:preamble-<n>`. Such ids are numbered like
/// [`NUMBERED`]'s (`<tool_use-1>`); the model's own ids (`toolu_01`) stay as they are.
fn random_tool_use_id(id: &str) -> bool {
    let uuid = match (id.strip_prefix("exec-"), id.split_once(":inner:")) {
        (Some(uuid), _) => uuid,
        (None, Some((uuid, _))) => uuid,
        (None, None) => return false,
    };
    uuid.len() == 36
        && uuid.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Fields whose value is measured (a time, a count of tokens, a price), at any depth of an
/// input (Glob's `tool_response.durationMs`): only their type is compared.
const MEASURED: &[&str] = &[
    "duration_ms",
    "durationMs",
    "context_tokens",
    "estimated_cache_write_usd",
    "seconds_since_last_response",
    "totalDurationMs",
];

/// Whether `s` is a point in time, whole, as ISO 8601 writes it (`2026-11-28T12:12:47.933Z`,
/// `2026-11-28T12:12:47+01:00`): the time a hook input was made (Gemini CLI's `timestamp`).
fn iso_time(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(digits(0..4) && at(4, b'-') && digits(5..7) && at(7, b'-') && digits(8..10))
        || !(at(10, b'T') && digits(11..13) && at(13, b':') && digits(14..16))
        || !(at(16, b':') && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            b.len() == i + 6 && digits(i + 1..i + 3) && at(i + 3, b':') && digits(i + 4..i + 6)
        }
        _ => false,
    }
}

/// Labels of process ids in a text (a shell tool's `Process Group PGID: 24317`, `Background
/// PIDs: 12, 13`): the ids after them are the system's, different each play.
const PROCESS_IDS: &[&str] = &["PGID: ", "PGIDs: ", "PID: ", "PIDs: "];

/// `s` with each process id after a [`PROCESS_IDS`] label as `<pid>`.
fn process_ids(s: &str) -> Cow<'_, str> {
    if !PROCESS_IDS.iter().any(|l| s.contains(l)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some((at, label)) = PROCESS_IDS
        .iter()
        .filter_map(|l| rest.find(l).map(|at| (at, *l)))
        .min_by_key(|(at, l)| (*at, std::cmp::Reverse(l.len())))
    {
        out.push_str(&rest[..at + label.len()]);
        rest = &rest[at + label.len()..];
        // The ids: digits, a list of them separated by `, `.
        loop {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                break;
            }
            out.push_str("<pid>");
            rest = &rest[n..];
            match rest.strip_prefix(", ") {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => {
                    out.push_str(", ");
                    rest = r;
                }
                _ => break,
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Replaces what differs by play and by agent without meaning anything: session ids, subagent
/// ids (`agent_id`, `agentId`: everywhere they show), the
/// play's paths, numbered ids (`prompt_id`, `turn_id`, `message_id`, and a `tool_use_id` made
/// up at random: Codex's `exec-<uuid>`), measured numbers, points in time (an ISO 8601 string,
/// whole: `<time>`) and process ids in a text (after `PID: ` or `PGID: `: `<pid>`).
#[derive(Debug)]
pub struct Normaliser {
    paths: Vec<(String, &'static str)>,
    ids: HashMap<String, String>,
    counts: HashMap<&'static str, usize>,
    /// Subagent ids seen, and their placeholders: replaced in every text.
    agents: Vec<(String, String)>,
}

impl Normaliser {
    /// A normaliser of `play`'s paths.
    pub fn new(play: &Play) -> Self {
        let real = |p: std::path::PathBuf| {
            std::fs::canonicalize(&p)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        };
        let mut paths = vec![
            (real(play.project()), "<project>"),
            (real(play.home()), "<home>"),
            (real(play.root().to_path_buf()), "<root>"),
        ];
        // An agent may print a path as given or canonical: both map.
        paths.push((play.project().to_string_lossy().into_owned(), "<project>"));
        paths.push((play.home().to_string_lossy().into_owned(), "<home>"));
        paths.push((play.root().to_string_lossy().into_owned(), "<root>"));
        Normaliser {
            paths,
            ids: HashMap::new(),
            counts: HashMap::new(),
            agents: Vec::new(),
        }
    }

    /// Numbers the subagent ids of `v` ([`AGENT_IDS`], at any depth) not seen yet.
    fn learn_agents(&mut self, v: &Value) {
        match v {
            Value::Array(a) => a.iter().for_each(|v| self.learn_agents(v)),
            Value::Object(m) => {
                for (k, v) in m {
                    match v.as_str() {
                        Some(id) if AGENT_IDS.contains(&k.as_str()) && !id.is_empty() => {
                            let placeholder = self.numbered("agent_id", id);
                            if !self.agents.iter().any(|(a, _)| a == id) {
                                self.agents.push((id.to_owned(), placeholder));
                            }
                        }
                        _ => self.learn_agents(v),
                    }
                }
            }
            _ => {}
        }
    }

    /// A hook input, normalised.
    pub fn input(&mut self, input: &Value) -> Value {
        let Value::Object(map) = input else {
            return input.clone();
        };
        self.learn_agents(input);
        // A subagent's transcript lies in a folder named after its session's transcript.
        let session_dir = map
            .get("transcript_path")
            .and_then(Value::as_str)
            .and_then(|p| p.strip_suffix(".jsonl"))
            .map(|p| format!("{p}/"));
        let mut out = Map::new();
        for (k, v) in map {
            let v = match k.as_str() {
                "agent_transcript_path" => match (v.as_str(), &session_dir) {
                    (Some(p), Some(dir)) if p.starts_with(dir.as_str()) => {
                        json!(self.text(&format!("<transcript>/{}", &p[dir.len()..])))
                    }
                    _ => self.value(v),
                },
                "session_id" => json!("<session>"),
                "transcript_path" => match v.as_str() {
                    Some(p) if p.ends_with(".jsonl") => json!("<transcript>"),
                    _ => v.clone(),
                },
                k if NUMBERED.contains(&k) => match v.as_str() {
                    Some(id) => json!(self.numbered(k, id)),
                    None => v.clone(),
                },
                "tool_use_id" if v.as_str().is_some_and(random_tool_use_id) => {
                    json!(self.numbered(k, v.as_str().unwrap_or_default()))
                }
                k if MEASURED.contains(&k) && v.is_number() => json!("<number>"),
                _ => self.value(v),
            };
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }

    fn numbered(&mut self, field: &str, id: &str) -> String {
        let key = format!("{field}:{id}");
        if let Some(p) = self.ids.get(&key) {
            return p.clone();
        }
        let kind = NUMBERED
            .iter()
            .chain(&["tool_use_id"])
            .find(|f| **f == field)
            .copied()
            .unwrap_or("id");
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        let p = format!("<{}-{n}>", field.trim_end_matches("_id"));
        self.ids.insert(key, p.clone());
        p
    }

    /// A value with paths under the play's directories, points in time and process ids as
    /// placeholders.
    pub fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) if iso_time(s) => json!("<time>"),
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.value(v)).collect()),
            // A measured field nested in a value (a tool's `tool_response`) too.
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| match v {
                        Value::Number(_) if MEASURED.contains(&k.as_str()) => {
                            (k.clone(), json!("<number>"))
                        }
                        v => (k.clone(), self.value(v)),
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// A text with paths under the play's directories, subagent ids seen and process ids as
    /// placeholders; a `duration_ms: <digits>` in it (the usage line of a subagent's result)
    /// is measured, `duration_ms: <number>`.
    pub fn text(&self, s: &str) -> String {
        let mut s = process_ids(s).into_owned();
        for (path, placeholder) in self.paths.iter().map(|(p, h)| (p.as_str(), *h)) {
            if s.contains(path) {
                s = s.replace(path, placeholder);
            }
        }
        for (id, placeholder) in &self.agents {
            if s.contains(id.as_str()) {
                s = s.replace(id.as_str(), placeholder);
            }
        }
        measured_durations(&s)
    }
}

/// `s` with the digits after each `duration_ms: ` as `<number>`.
fn measured_durations(s: &str) -> String {
    const KEY: &str = "duration_ms: ";
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(KEY) {
        let (head, tail) = rest.split_at(at + KEY.len());
        out.push_str(head);
        let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push_str("<number>");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The hooks' part of each model request: what came after the model's last answer (the whole
/// first request) — tool results whole, and the lines that carry a hook's `hk-` marker, with
/// the role of the message they are in (`system-prompt` for the request's `system`).
pub fn effects(requests: &[Request], norm: &Normaliser) -> Vec<Value> {
    requests
        .iter()
        .map(|r| {
            let mut items = Vec::new();
            for line in texts(&r.body["system"]) {
                marked(&mut items, "system-prompt", &line, norm);
            }
            let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
            let from = messages
                .iter()
                .rposition(|m| m["role"] == "assistant")
                .map_or(0, |i| i + 1);
            for m in &messages[from..] {
                let role = m["role"].as_str().unwrap_or("?");
                let blocks = match &m["content"] {
                    Value::String(s) => vec![json!({"type": "text", "text": s})],
                    Value::Array(a) => a.clone(),
                    _ => Vec::new(),
                };
                for b in blocks {
                    if b["type"] == "tool_result" {
                        items.push(json!({
                            "role": role,
                            "tool_result": b["tool_use_id"],
                            "is_error": b["is_error"].as_bool().unwrap_or(false),
                            "content": norm.text(&texts(&b["content"]).join("\n")),
                        }));
                    } else {
                        for line in texts(&b) {
                            marked(&mut items, role, &line, norm);
                        }
                    }
                }
            }
            Value::Array(items)
        })
        .collect()
}

fn marked(items: &mut Vec<Value>, role: &str, text: &str, norm: &Normaliser) {
    for line in text.lines().filter(|l| l.contains("hk-")) {
        items.push(json!({ "role": role, "text": norm.text(line) }));
    }
}

/// The text of a content value: a string, a text block, or a list of them.
fn texts(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(texts).collect(),
        Value::Object(o) => o
            .get("text")
            .and_then(Value::as_str)
            .map(|t| vec![t.to_owned()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Each hook run as compared (event, answer, what it saw, its input normalised), with each
/// run of one event (hooks that run in parallel, whose start order is chance) sorted by
/// answer and tool call, so a vector recorded again differs only where something did.
pub fn hooks(play: &Play, norm: &mut Normaliser) -> Vec<Value> {
    let hooks = play
        .hooks()
        .into_iter()
        .map(|h| {
            json!({
                "event": h.input["hook_event_name"],
                "answer": h.answer,
                "cwd": norm.text(&h.cwd),
                "project_dir": norm.text(&h.project_dir),
                "env_file": h.env_file,
                "input": norm.input(&h.input),
            })
        })
        .collect();
    in_start_order(hooks)
}

fn in_start_order(mut hooks: Vec<Value>) -> Vec<Value> {
    let key = |h: &Value| {
        format!(
            "{} {}",
            h["answer"].as_str().unwrap_or(""),
            h["input"]["tool_use_id"].as_str().unwrap_or("")
        )
    };
    let mut start = 0;
    while start < hooks.len() {
        let event = hooks[start]["event"].clone();
        let end = hooks[start..]
            .iter()
            .position(|h| h["event"] != event)
            .map_or(hooks.len(), |n| start + n);
        hooks[start..end].sort_by_key(key);
        start = end;
    }
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normaliser() -> Normaliser {
        Normaliser {
            paths: Vec::new(),
            ids: HashMap::new(),
            counts: HashMap::new(),
            agents: Vec::new(),
        }
    }

    /// A subagent's id is numbered wherever it shows: its hooks' `agent_id`, the `Agent`
    /// tool's `agentId`, its transcript path (under the session's, `<transcript>/…`) and
    /// texts; a duration in a text is measured.
    #[test]
    fn subagent_ids_are_numbered_everywhere() {
        let mut norm = normaliser();
        let start = norm.input(&json!({"agent_id": "ac19b0c11f435edc1", "session_id": "s"}));
        assert_eq!(start["agent_id"], "<agent-1>");
        let stop = norm.input(&json!({
            "agent_id": "ac19b0c11f435edc1",
            "transcript_path": "/h/p/abc.jsonl",
            "agent_transcript_path": "/h/p/abc/subagents/agent-ac19b0c11f435edc1.jsonl",
            "tool_response": {"agentId": "a2", "totalDurationMs": 12},
        }));
        assert_eq!(stop["agent_id"], "<agent-1>");
        assert_eq!(
            stop["agent_transcript_path"],
            "<transcript>/subagents/agent-<agent-1>.jsonl"
        );
        assert_eq!(stop["tool_response"]["agentId"], "<agent-2>");
        assert_eq!(stop["tool_response"]["totalDurationMs"], "<number>");
        assert_eq!(
            norm.text("agentId: a2 (x)\nduration_ms: 152</usage> duration_ms: x"),
            "agentId: <agent-2> (x)\nduration_ms: <number></usage> duration_ms: x"
        );
    }

    /// Codex's `exec-<uuid>` tool call ids are numbered by first appearance (the same id twice
    /// is the same placeholder, another id the next one); the model's own ids and ids that
    /// only look alike stay.
    #[test]
    fn random_tool_use_ids_are_numbered() {
        let mut norm = normaliser();
        let a = "exec-6fa5cf99-6c73-4711-aee4-d5663a8f30ce";
        let b = "exec-c5048e3f-8a56-402d-aca4-5f2614eca180";
        let id = |norm: &mut Normaliser, id: &str| {
            norm.input(&json!({"tool_use_id": id}))["tool_use_id"].clone()
        };
        assert_eq!(id(&mut norm, a), "<tool_use-1>");
        assert_eq!(id(&mut norm, a), "<tool_use-1>");
        assert_eq!(id(&mut norm, b), "<tool_use-2>");
        assert_eq!(id(&mut norm, "toolu_01"), "toolu_01");
        assert_eq!(id(&mut norm, "exec-not-a-uuid"), "exec-not-a-uuid");
        assert_eq!(
            id(&mut norm, "exec-6fa5cf99x6c73-4711-aee4-d5663a8f30ce"),
            "exec-6fa5cf99x6c73-4711-aee4-d5663a8f30ce"
        );
        // Claude Code's id for a command file's shell command.
        let shell = "a52590ca-1a70-4a53-9d86-0690f3be4047:inner:preamble-0";
        assert_eq!(id(&mut norm, shell), "<tool_use-3>");
        assert_eq!(id(&mut norm, "toolu_01:inner:x"), "toolu_01:inner:x");
    }

    /// Points in time (Gemini CLI's `timestamp`) are `<time>` at any depth, ISO 8601 whole
    /// only; process ids after their label are `<pid>`, in tool results too; nothing else
    /// changes.
    #[test]
    fn times_and_process_ids_are_placeholders() {
        let mut norm = normaliser();
        let input = json!({
            "timestamp": "2026-11-28T12:12:47.933Z",
            "nested": {"at": "2026-11-28T12:12:47+01:00", "plain": "2026-11-28T12:12:47"},
            "prompt": "at 2026-11-28T12:12:47Z we ran",
            "date": "2026-11-28",
            "odd": ["2026-11-28T12:12:47.Z", "2026-11-28T12:12:47Zx", "2026-11-28T12:1:47Z"],
            "tool_response": {"llmContent": "Output: hi\nProcess Group PGID: 24317\nBackground PIDs: 12, 13, x"},
        });
        assert_eq!(
            norm.input(&input),
            json!({
                "timestamp": "<time>",
                "nested": {"at": "<time>", "plain": "2026-11-28T12:12:47"},
                "prompt": "at 2026-11-28T12:12:47Z we ran",
                "date": "2026-11-28",
                "odd": ["2026-11-28T12:12:47.Z", "2026-11-28T12:12:47Zx", "2026-11-28T12:1:47Z"],
                "tool_response": {"llmContent": "Output: hi\nProcess Group PGID: <pid>\nBackground PIDs: <pid>, <pid>, x"},
            })
        );
        assert_eq!(norm.text("PID: none, PGID:7"), "PID: none, PGID:7");
        assert_eq!(norm.text("pgid PGID: 1"), "pgid PGID: <pid>");
    }
}
